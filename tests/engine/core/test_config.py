"""Config: frozen, validated, environment read in one place."""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path

import pytest

from engine import Config, ConfigError, ConfigWarning, CortexError, FileRanking
from engine.cli import main
from engine.core import _config as config_module
from engine.core._config import unknown_env


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


def test_a_misspelt_variable_is_named_with_the_nearest_setting() -> None:
    """`CORTEX_BUDGETTOKENS=2000` was ignored without a word; it now warns, once, with the
    setting meant. Variables read elsewhere (the HTTP token, the backend) are no warning."""
    env = {"CORTEX_BUDGETTOKENS": "2000", "CORTEX_TOKEN": "t", "CORTEX_BACKEND": "embedded",
           "CORTEX_QDRANT_URL": "", "CORTEX_ZZZ": "1", "OTHER": "x"}  # fmt: skip
    with pytest.warns(ConfigWarning) as seen:
        config = Config.from_env(env)
    assert config.budget_tokens == Config().budget_tokens
    said = sorted(str(w.message) for w in seen)
    assert said == [
        "CORTEX_BUDGETTOKENS is not a cortex setting and is ignored "
        "(did you mean CORTEX_BUDGET_TOKENS?)",
        "CORTEX_ZZZ is not a cortex setting and is ignored",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Config.from_env(env)  # said once a process
        Config.from_env({"CORTEX_LEDGER": "0", "CORTEX_LEARN_RATE": "0.1"})


def test_every_cortex_variable_the_code_reads_is_known() -> None:
    """The list of variables that are not settings keeps up with the code that reads them."""
    root = Path(__file__).resolve().parents[3]
    named = set()
    for package in ("engine", "indexers", "overlays", "ledger"):
        for path in (root / package).rglob("*.py"):
            named |= set(re.findall(r"\bCORTEX_([A-Z][A-Z_]*[A-Z])\b", path.read_text("utf-8")))
    assert unknown_env({f"CORTEX_{n}": "" for n in named if n != "QDRANT"}) == []


def test_a_yes_no_variable_refuses_other_words() -> None:
    """`CORTEX_LEDGER=maybe` turned the ledger off; only the usual words are taken."""
    assert Config.from_env({"CORTEX_LEDGER": "off"}).ledger is False
    assert Config.from_env({"CORTEX_LEDGER": "Yes"}).ledger is True
    with pytest.raises(ConfigError, match=r"^CORTEX_LEDGER must be one of .* got 'maybe'"):
        Config.from_env({"CORTEX_LEDGER": "maybe"})


def test_the_cli_says_a_misspelt_variable_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the command line the warning is one `cortex: warning:` line on stderr."""
    monkeypatch.setenv("CORTEX_BUDGET_TOKEN", "2000")
    monkeypatch.setattr(config_module, "_warned", set())
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    assert main(["chunks", str(tmp_path / "a.py")]) == 0
    err = capsys.readouterr().err
    assert err == ("cortex: warning: CORTEX_BUDGET_TOKEN is not a cortex setting and is "
                   "ignored (did you mean CORTEX_BUDGET_TOKENS?)\n")  # fmt: skip


def test_settings_given_in_code_are_of_their_type() -> None:
    """``Config(ledger="false")`` left the ledger on and ``include="src/**"`` failed later
    (stop 45's review): each setting must be of its default's type; globs may be a list."""
    for bad, message in ((dict(ledger="false"), "ledger must be True or False"),
                         (dict(include="src/**"), "include must be a tuple of strings"),
                         (dict(budget_tokens="4000"), "budget_tokens must be an integer"),
                         (dict(mmr_lambda=True), "mmr_lambda must be a number"),
                         (dict(state_dir=None), "state_dir must be a string")):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            Config(**bad)  # type: ignore[arg-type]
    assert Config(include=["src/**", "lib/**"]).include == ("src/**", "lib/**")  # type: ignore[arg-type]
    assert Config(mmr_lambda=1).mmr_lambda == 1


@pytest.mark.parametrize("raw", ["²", "٣", "\uff11\uff12", "1²", "+1", "1_000", "", "9" * 31])
def test_a_number_is_ascii_digits(raw: str) -> None:
    """``whole_number`` takes ASCII digits only: ``str.isdigit()`` passes "²" (which
    ``int()`` refuses) and ``int()`` reads "٣" and fullwidth "12" as numbers; and so do settings."""
    from engine.core import whole_number

    with pytest.raises(ConfigError, match="whole number"):
        whole_number("k", raw)
    with pytest.raises(ConfigError, match="integer"):
        Config.from_env({"CORTEX_MAX_SECTION_TOKENS": raw})
    assert whole_number("k", "0012") == 12 and whole_number("n", "-3", signed=True) == -3
    with pytest.raises(ConfigError, match="must be a number"):
        Config.from_env({"CORTEX_MMR_LAMBDA": "\u0660\u066b\u0665"})
