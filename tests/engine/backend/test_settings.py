"""Choosing and reaching a backend: environment, addresses, the server version check."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.backend import (
    BackendSettings,
    EdgeStore,
    Where,
    check_version,
    connect,
    open_store,
    release,
)
from engine.core import ConfigError


def test_the_embedded_backend_is_the_default() -> None:
    """No CORTEX_BACKEND: embedded, and connect gives no Qdrant backend."""
    settings = BackendSettings.from_env({})
    assert settings.kind == "embedded"
    assert connect(settings, Path("/nonexistent")) is None


def test_qdrant_settings_come_from_the_environment() -> None:
    """CORTEX_BACKEND, CORTEX_QDRANT_URL/_COLLECTION/_API_KEY; the key is never in the repr."""
    env = {"CORTEX_BACKEND": "Qdrant", "CORTEX_QDRANT_URL": "https://q.example:6333",
           "CORTEX_QDRANT_COLLECTION": "org", "CORTEX_QDRANT_API_KEY": "s3cret"}  # fmt: skip
    settings = BackendSettings.from_env(env)
    assert (settings.kind, settings.url, settings.collection) == ("qdrant", env[
        "CORTEX_QDRANT_URL"], "org")  # fmt: skip
    assert settings.api_key == "s3cret" and "s3cret" not in repr(settings)


def test_an_unknown_backend_is_a_config_error() -> None:
    """A typo in CORTEX_BACKEND says which values exist."""
    with pytest.raises(ConfigError, match="embedded"):
        BackendSettings.from_env({"CORTEX_BACKEND": "elastic"})


def test_an_unknown_address_is_a_config_error() -> None:
    """CORTEX_QDRANT_URL must name a server, an edge folder or local mode."""
    with pytest.raises(ConfigError, match="edge:<folder>"):
        open_store("qdrant.example:6333", "cortex")


@pytest.mark.parametrize("version", ["1.19.2", "1.9.0", "v1.19.0-rc1", "0.11.3"])
def test_an_old_server_is_refused_with_what_to_do(version: str) -> None:
    """Servers before 1.20 (no IDF over a filter) fail at connect, saying so."""
    with pytest.raises(ConfigError, match=r"1\.20 or newer"):
        check_version(version, "http://q:6333")


@pytest.mark.parametrize("version", ["1.20.0", "1.20.1-dev", "v1.21.0", "2.0.0"])
def test_a_new_enough_server_is_accepted(version: str) -> None:
    """1.20 and later pass the check."""
    check_version(version, "http://q:6333")


def test_without_a_url_the_edge_engine_lives_in_the_state_folder(tmp_path: Path) -> None:
    """CORTEX_BACKEND=qdrant alone: an edge shard under the workspace's state folder."""
    backend = connect(BackendSettings("qdrant"), tmp_path)
    assert backend is not None and isinstance(backend.store, EdgeStore)
    assert backend.store.directory.is_relative_to(tmp_path)
    again = connect(BackendSettings("qdrant"), tmp_path)
    assert again is backend  # one shard, opened once per process
    release(again)
    backend.store.count(Where())  # still open for the first user
    release(backend)


def test_a_collection_name_is_no_path() -> None:
    """`CORTEX_QDRANT_COLLECTION=../../escape` made the edge shard a folder in the working
    tree; a name holding a path is refused."""
    for bad in ("../../escape", "a/b", "..", "x" * 129, "sp ace"):
        with pytest.raises(ConfigError, match="CORTEX_QDRANT_COLLECTION"):
            BackendSettings.from_env({"CORTEX_BACKEND": "qdrant",
                                      "CORTEX_QDRANT_COLLECTION": bad})  # fmt: skip
    ok = BackendSettings.from_env({"CORTEX_QDRANT_COLLECTION": "team-a.code_v2"})
    assert ok.collection == "team-a.code_v2"


def test_an_edge_shard_held_by_another_process_says_so(tmp_path: Path) -> None:
    """A server holding the edge shard made every other command fail with the engine's
    "Can't init WAL: Kind(WouldBlock)"; it now says another cortex process holds it."""
    from engine.core import IndexBusyError

    held = EdgeStore(tmp_path / "shard")
    with pytest.raises(IndexBusyError, match="held by another cortex process"):
        EdgeStore(tmp_path / "shard")
    del held


def test_status_names_the_backend_without_a_urls_password(tmp_path: Path) -> None:
    """``status`` did not say which backend served (stop 44's review)."""
    assert BackendSettings().describe(tmp_path).startswith("embedded")
    server = BackendSettings("qdrant", "https://ops:hunter2@q.example:6333", "team")
    assert server.describe(tmp_path) == "qdrant https://q.example:6333 (collection team)"
    edge = BackendSettings("qdrant").describe(tmp_path)
    assert edge == f"qdrant edge:{tmp_path / 'qdrant-edge'} (collection cortex)"
