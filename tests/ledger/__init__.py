"""Ledger tests, and the few builders they share (also imported by their subprocesses)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from pathlib import Path

from ledger import Ledger, SnippetRef, TurnDraft, TurnRecord


def sha(text: str) -> str:
    """The hex sha256 of ``text`` as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def add_turn(
    ledger: Ledger,
    turn_id: str,
    *,
    texts: list[str] | None = None,
    replay_key: str | None = None,
    time: str | None = None,
) -> TurnRecord:
    """Store a turn's texts and append the turn (three snippets unless ``texts`` is given)."""
    texts = (
        [f"def f_{turn_id}_{i}():\n    return {i}\n" for i in range(3)] if texts is None else texts
    )
    snippets = tuple(
        SnippetRef(i + 1, f"file://src/mod_{i}.py", 10 * i + 1, 10 * i + 2, ledger.put_text(t),
                   "MIT", "bm25")
        for i, t in enumerate(texts)
    )  # fmt: skip
    render = ledger.put_text(f"# goal {turn_id}\n" + "".join(texts))
    inputs = ledger.put_text(json.dumps({"goal": turn_id, "budget": 8000}, sort_keys=True))
    draft = TurnDraft(
        turn_id=turn_id,
        goal_ref=sha(f"goal {turn_id}"),
        tokens_used=100 + len(texts),
        budget=8000,
        snippets=snippets,
        replay_key=replay_key or f"rk-{turn_id}",
        render_sha256=render,
        inputs_sha256=inputs,
        time=time,
    )
    return ledger.append_turn(draft)


def build(path: Path, n: int) -> list[TurnRecord]:
    """A closed ledger at ``path`` with turns ``t01`` … ``t{n}``."""
    with Ledger.open(path) as ledger:
        return [add_turn(ledger, f"t{i:02d}") for i in range(1, n + 1)]


def raw(path: Path) -> sqlite3.Connection:
    """A plain autocommit sqlite3 connection to the file, for editing it behind the ledger."""
    return sqlite3.connect(path, isolation_level=None)


def zlib_holds(path: Path, needle: bytes) -> bool:
    """Whether a zlib stream anywhere in the file's bytes (a stored text, live or in a
    freed page) unpacks to bytes holding ``needle``."""
    data = path.read_bytes()
    for at in range(len(data) - 1):
        if data[at] == 0x78 and data[at + 1] in (0x01, 0x5E, 0x9C, 0xDA):
            try:
                if needle in zlib.decompressobj().decompress(data[at : at + 65536]):
                    return True
            except zlib.error:
                continue
    return False
