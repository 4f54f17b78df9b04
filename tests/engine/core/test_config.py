"""Config: frozen, validated, environment read in one place."""

from __future__ import annotations

import dataclasses

import pytest

from engine import Config, ConfigError, CortexError, FileRanking


def test_defaults_and_options() -> None:
    """Defaults flow into the indexers' options."""
    config = Config()
    assert config.chunk_options().max_section_tokens == 512
    assert config.walk_options().max_file_bytes == 1 << 20


def test_frozen() -> None:
    """A Config cannot be changed in place."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().max_section_tokens = 5  # type: ignore[misc]


def test_from_env_parses_types() -> None:
    """CORTEX_* variables are parsed by the field's type; overrides win."""
    env = {"CORTEX_MAX_SECTION_TOKENS": "256", "CORTEX_EXCLUDE": "docs/**, *.json"}
    config = Config.from_env(env)
    assert config.max_section_tokens == 256
    assert config.exclude == ("docs/**", "*.json")
    assert Config.from_env(env, max_section_tokens=128).max_section_tokens == 128


def test_bad_values_raise_config_error() -> None:
    """Bad values raise ConfigError, which is also a ValueError and a CortexError."""
    with pytest.raises(ConfigError, match="integer"):
        Config.from_env({"CORTEX_MAX_SECTION_TOKENS": "lots"})
    with pytest.raises(ValueError, match=">= 16"):
        Config(max_section_tokens=4)
    with pytest.raises(CortexError):
        Config().with_(no_such_field=1)


def test_file_ranking_is_chosen_by_name_and_reaches_the_context_settings() -> None:
    """CORTEX_FILE_RANKING picks how files rank (learned by default); another name is an
    error that lists the two."""
    assert Config().context_settings().file_ranking is FileRanking.LEARNED
    config = Config.from_env({"CORTEX_FILE_RANKING": "sections"})
    assert config.context_settings().file_ranking is FileRanking.SECTIONS
    with pytest.raises(ConfigError, match=r"'learned' or 'sections'.*'best'"):
        Config(file_ranking="best")


def test_a_refused_value_names_the_variable_that_set_it() -> None:
    """`CORTEX_REFRESH=bogus` said "refresh must be …" without the variable's name."""
    with pytest.raises(ConfigError, match=r"^CORTEX_REFRESH: refresh must be"):
        Config.from_env({"CORTEX_REFRESH": "bogus"})
    with pytest.raises(ConfigError, match=r"^refresh must be"):  # an argument, not a variable
        Config.from_env({"CORTEX_REFRESH": "auto"}, refresh="bogus")
