"""``cortex ledger rotate``: what it moves and prints, and what it refuses (nothing moved)."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from engine.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main
from tests.engine.cli.test_cli import _repo


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def _files(state: Path) -> dict[str, bytes]:
    """The state folder's ledger files with their bytes, the log folded in first."""
    ledger = state / "ledger.sqlite"
    if ledger.exists():
        with sqlite3.connect(ledger, isolation_level=None) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {p.name: p.read_bytes() for p in sorted(state.glob("ledger*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}  # fmt: skip


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An indexed repository with one turn recorded and learned from (salience tables)."""
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    root = _repo(tmp_path)
    assert _run("index", str(root))[0] == EXIT_OK
    code, text = _run("context", "what does handler return", "--path", str(root), "--json")
    assert code == EXIT_OK
    key = text.split('"replay_key": "')[1].split('"')[0]
    code, _ = _run("feedback", key, "1", "--outcome", "success", "--path", str(root))
    assert code == EXIT_OK and (root / ".cortex" / "ledger.salience.sqlite").exists()
    return root


def test_rotate_moves_the_ledger_aside_and_the_new_chain_names_its_head(
    recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rotate prints what moved where, the old head and the new first record; verify then
    names what the chain continues, and the old file still verifies against that head."""
    state = recorded / ".cortex"
    code, head = _run("ledger", "head", "--path", str(recorded))
    code, text = _run("ledger", "rotate", "--path", str(recorded))
    assert code == EXIT_OK, text
    aside = next(state.glob("ledger.rotated-*Z.sqlite"))
    assert f"{state / 'ledger.sqlite'} -> {aside}" in text
    assert f"{state / 'ledger.salience.sqlite'} -> " in text
    assert f"old head: {head.strip()} (the chain verified)" in text
    assert "new ledger: record 1 (continues" in text and f"continues {aside.name}" in text
    assert aside.stat().st_mode & 0o777 == 0o400
    assert not (state / "ledger.salience.sqlite").exists()
    code, text = _run("ledger", "verify", "--previous", "--path", str(recorded))
    assert code == EXIT_OK and text.startswith("ok: 1 records")
    seq, digest = head.strip().split(":")
    assert f"continues {aside.name} at seq {seq} hash {digest}; that file matches it" in text
    assert _run("context", "handler", "--path", str(recorded))[0] == EXIT_OK
    code, text = _run("ledger", "verify", "--path", str(recorded))
    assert code == EXIT_OK and text.startswith("ok: 2 records")
    monkeypatch.setenv("CORTEX_LEDGER_PATH", str(aside))
    code, text = _run("ledger", "verify", "--anchor", head.strip(), "--path", str(recorded))
    assert code == EXIT_OK and f"anchor {seq} matches" in text


def test_a_broken_ledger_is_rotated_only_as_broken(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ledger whose last record was deleted: plain rotate refuses (exit 1, nothing moved,
    says --broken); --broken moves it aside naming its last sound record, and the new
    chain verifies."""
    state = recorded / ".cortex"
    with sqlite3.connect(state / "ledger.sqlite", isolation_level=None) as conn:
        last = conn.execute("SELECT max(seq) FROM records").fetchone()[0]
        sound = conn.execute("SELECT record_hash FROM records WHERE seq = ?",
                             (last - 1,)).fetchone()[0]  # fmt: skip
        conn.execute("DELETE FROM records WHERE seq = ?", (last,))
    before = _files(state)
    code, _ = _run("ledger", "rotate", "--path", str(recorded))
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and "does not verify" in err and "--broken" in err, err
    assert err.count("\n") == 1 and _files(state) == before
    code, text = _run("ledger", "rotate", "--broken", "--path", str(recorded))
    assert code == EXIT_OK, text
    assert f"old head: {last - 1}:{sound}, the last record that verifies (BROKEN:" in text
    assert next(state.glob("ledger.broken-*Z.sqlite")).exists()
    code, text = _run("ledger", "verify", "--previous", "--path", str(recorded))
    assert code == EXIT_OK and "moved aside broken" in text


def test_a_healthy_ledger_is_not_rotated_as_broken(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rotate --broken on a ledger that verifies: exit 1, one line, every file in place."""
    state = recorded / ".cortex"
    before = _files(state)
    code, _ = _run("ledger", "rotate", "--broken", "--path", str(recorded))
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and "verifies" in err and err.count("\n") == 1, err
    assert _files(state) == before


def test_rotate_with_no_ledger_moves_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """rotate on a workspace that never recorded a turn: exit 1, one line, nothing made."""
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    root = _repo(tmp_path)
    assert _run("index", str(root))[0] == EXIT_OK
    before = sorted(p.name for p in (root / ".cortex").iterdir())
    code, _ = _run("ledger", "rotate", "--path", str(root))
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and "no ledger" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in (root / ".cortex").iterdir()) == before


@pytest.mark.parametrize("argv", [["ledger", "verify", "--broken"],
                                  ["ledger", "rotate", "--previous"]])  # fmt: skip
def test_an_option_of_another_action_is_a_usage_error(
    recorded: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """--broken is rotate's and --previous verify's: elsewhere, exit 2 and nothing moves."""
    before = _files(recorded / ".cortex")
    code, _ = _run(*argv, "--path", str(recorded))
    assert code == EXIT_USAGE and "is for" in capsys.readouterr().err
    assert _files(recorded / ".cortex") == before


def test_a_key_recorded_before_a_rotation_is_said_to_be_in_the_old_file(
    recorded: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replaying a turn recorded before the rotation: "unknown replay key" names the file
    it is in and how to read it; read there, it replays."""
    code, text = _run("context", "handler", "--path", str(recorded), "--json")
    assert code == EXIT_OK
    key = text.split('"replay_key": "')[1].split('"')[0]
    assert _run("ledger", "rotate", "--path", str(recorded))[0] == EXIT_OK
    aside = next((recorded / ".cortex").glob("ledger.rotated-*Z.sqlite"))
    capsys.readouterr()
    assert _run("replay", key, "--path", str(recorded))[0] == EXIT_ERROR
    said = capsys.readouterr().err
    assert f"this ledger continues {aside.name} since its rotate" in said
    assert f"CORTEX_LEDGER_PATH={aside}" in said
    monkeypatch.setenv("CORTEX_LEDGER_PATH", str(aside))
    assert _run("replay", key, "--path", str(recorded))[0] == EXIT_OK
