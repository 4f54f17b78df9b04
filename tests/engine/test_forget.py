"""``forget``: a file's or a string's text leaves every index, the vector cache and the
ledger's texts, down to the bytes under the state dir, while the chain still verifies."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import zlib
from pathlib import Path

import pytest

from engine import Config, ConfigError, Workspace
from engine.cli import main
from engine.index import segment_dirs
from engine.segment import Segment
from ledger import PURGED_MARK, Ledger, RecordKind
from tests.engine.test_workspace import GIT_ENV
from tests.ledger import zlib_holds

NEEDLE = "zebraquartz7781"  # an internal name nobody should see again (no detector knows it)

BASE_FILES = {
    "shipping.py": (
        '"""Shipping costs."""\n\nTARIFF = "' + NEEDLE + '"\n\n\n'
        "def compute_shipping_cost(region, weight):\n"
        '    """Delivery cost for a region under the ' + NEEDLE + ' tariff."""\n'
        "    if region == 'eu':\n        return 5 + weight * 2\n    return 10 + weight * 3\n\n\n"
        "def format_price(value):\n    return f'{value:.2f} EUR'\n"
    ),
    "billing/invoice.py": (
        "def render_invoice(lines):\n"
        '    """Render invoice lines as text with a total row."""\n'
        "    total = sum(price for _, price in lines)\n"
        "    return '\\n'.join(f'{name}: {price}' for name, price in lines) + f'\\ntotal {total}'\n"
    ),
    "other.py": 'def unrelated_helper(x):\n    """Double it."""\n    return x * 2\n',
}


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for path, text in BASE_FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=T", *args], cwd=root,
                       check=True, capture_output=True, env=GIT_ENV)  # fmt: skip
    # Untracked: lands in the branch's overlay, not the base.
    (root / "notes.md").write_text(f"# Notes\n\nThe {NEEDLE} tariff applies to parcels.\n")
    return root


def _holders(state: Path, needle: str) -> list[str]:
    """Every file under ``state`` whose bytes hold ``needle`` (any case), and every SQLite
    value that does once zlib-unpacked (metadata and ledger store texts compressed)."""
    raw, low = needle.encode(), needle.lower().encode()
    found = []
    for path in sorted(p for p in state.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if raw in data or low in data.lower():
            found.append(str(path.relative_to(state)))
        if data.startswith(b"SQLite format 3"):
            found += [f"{path.relative_to(state)}: {w}" for w in _sqlite_holders(path, low)]
    return found


def _sqlite_holders(path: Path, low: bytes) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        hits = []
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):
                for value in row:
                    if isinstance(value, bytes):
                        with contextlib.suppress(zlib.error):
                            value = zlib.decompress(value)
                        if low in value.lower():
                            hits.append(table)
                    elif isinstance(value, str) and low.decode() in value.lower():
                        hits.append(table)
        return hits
    finally:
        conn.close()


def _config(tmp_path: Path) -> Config:
    return Config(dense_model="hash", state_dir=str(tmp_path / "state"))


def test_forgetting_a_string_leaves_no_byte_and_a_verifiable_chain(tmp_path: Path) -> None:
    """A string in a base file, an overlay file, a goal, a prompt and a tool result: after
    forget it is in
    no file under the state dir (raw or unpacked), no search finds it, verify passes and
    counts the purged texts, replay shows [PURGED] where it stood, and the feedback reads
    back with the mark."""
    root, state = _repo(tmp_path), tmp_path / "state"
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        pack = ws.build_context(f"delivery cost under the {NEEDLE} tariff", "shipping cost")
        assert NEEDLE in pack.render()
        ws.feedback(pack.replay_key, [1], [f"grep {NEEDLE}: 2 matches"])
        assert _holders(state, NEEDLE)
        dry = ws.forget(text=NEEDLE, dry_run=True)
        assert dry.dry_run and dry.chunks >= 3 and dry.ledger_texts >= 2
        assert _holders(state, NEEDLE), "a dry run removed something"

        report = ws.forget(text=NEEDLE)

        assert report.chunks == dry.chunks and report.ledger_texts == dry.ledger_texts
        assert report.vectors == dry.vectors  # the dry run said 0 where vectors went
        assert report.touched == ["notes.md", "shipping.py"]
        assert report.still_present == ["notes.md", "shipping.py"]
        assert report.ledger_chained == 0
        assert _holders(state, NEEDLE) == []
        assert not ws.search(NEEDLE, mode="bm25", k=5)
        assert all(NEEDLE not in h.chunk.text for h in ws.search("shipping tariff", k=10))
        assert [h.chunk.path for h in ws.search("render invoice", k=1)] == ["billing/invoice.py"]
        replay = ws.replay(pack.replay_key)
        assert replay.purged and PURGED_MARK in replay.text and NEEDLE not in replay.text
        turn = ws.journal.find(pack.replay_key)
        assert turn is not None
        with Ledger.open(ws.ledger_path) as ledger:
            (fb,) = ledger.feedback_for(turn.turn_id)
        assert fb.tool_results[0].summary == f"grep {PURGED_MARK}: 2 matches"
        verify = ws.journal.verify(blobs=True)
        assert verify.ok and verify.purged == report.ledger_texts
        for directory in segment_dirs(state):  # every derived index agrees with its metadata
            segment = Segment(directory)
            try:
                lexical = directory / "lexical"
                if lexical.is_dir():
                    assert segment.lexical.doc_freqs("sections", "body", [NEEDLE]) == {NEEDLE: 0}
                    assert segment.lexical.num_sections == segment.meta.counts()[1]
            finally:
                segment.close()
        # A later context is built from what is left, and records normally.
        again = ws.build_context("delivery cost by region", "shipping cost")
        assert NEEDLE not in again.render()
        assert ws.journal.verify(blobs=True).ok


def test_forgetting_a_file_removes_it_from_index_and_ledger(tmp_path: Path) -> None:
    """A forgotten file's sections leave search and every recorded snippet; the prompts
    that showed them keep the rest, with [PURGED] in their place."""
    root, state = _repo(tmp_path), tmp_path / "state"
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        pack = ws.build_context("how is an invoice rendered with its total", "render invoice")
        cited = [s for s in pack.citations if s.source_uri.startswith("billing/invoice.py")]
        assert cited
        secret_line = "total = sum(price for _, price in lines)"
        assert secret_line in pack.render()

        report = ws.forget(["billing"])

        assert report.files == ["billing/invoice.py"]
        assert report.still_present == ["billing/invoice.py"]
        assert not [h for h in ws.search("render invoice total", k=10)
                    if h.chunk.path.startswith("billing/")]  # fmt: skip
        replay = ws.replay(pack.replay_key)
        assert replay.purged and secret_line not in replay.text
        assert "How is an invoice rendered" in replay.text or "invoice" in replay.text
        assert ws.journal.verify(blobs=True).ok
    assert _holders(state, secret_line) == []


def test_bad_forget_requests_are_clear_errors(tmp_path: Path) -> None:
    """Nothing named, a too-short text, a path outside the workspace: ConfigError, and
    nothing changed."""
    root = _repo(tmp_path)
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        for kwargs, words in (
            ({}, "name the files"),
            ({"text": "ab  "}, "at least"),
            ({"paths": ["../elsewhere.py"]}, "outside the workspace"),
            ({"paths": ["."]}, "whole workspace"),
            ({"paths": ["a\0b"]}, "not a path"),
        ):
            with pytest.raises(ConfigError, match=words):
                ws.forget(**kwargs)  # type: ignore[arg-type]
        assert ws.search("compute shipping cost", mode="bm25", k=1)


def test_cli_forget_reads_the_text_from_a_file_never_argv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cortex forget --text-from FILE` forgets; a missing file is one line and exit 2."""
    root = _repo(tmp_path)
    env_state = ["--path", str(root)]
    secret = tmp_path / "secret.txt"
    secret.write_text(NEEDLE + "\n")
    import os

    os.environ["CORTEX_STATE_DIR"] = str(tmp_path / "state")
    os.environ["CORTEX_DENSE_MODEL"] = "hash"
    try:
        assert main(["index", *env_state]) == 0
        capsys.readouterr()
        assert main(["forget", "--text-from", str(secret), *env_state]) == 0
        out = capsys.readouterr().out
        assert "removed" in out and "still in the working tree" in out and NEEDLE not in out
        assert main(["forget", "--text-from", str(tmp_path / "absent"), *env_state]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cannot read the text to forget" in err[0]
    finally:
        del os.environ["CORTEX_STATE_DIR"], os.environ["CORTEX_DENSE_MODEL"]
    assert _holders(tmp_path / "state", NEEDLE) == []


def test_forgetting_reaches_session_steps_and_they_read_back_marked(tmp_path: Path) -> None:
    """A session step (a tool output) holding the string: after forget the step reads back
    with [PURGED], its history lane still builds, and no byte is left."""
    root, state = _repo(tmp_path), tmp_path / "state"
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        session = ws.session("s1")
        session.add("user", "fix the shipping tariff")
        session.add("tool", f"$ grep -r {NEEDLE}\nshipping.py:3: TARIFF", tool="bash")
        report = ws.forget(text=NEEDLE)
        assert report.ledger_texts >= 1 and report.ledger_chained == 0
        step = ws.session("s1").step(2)
        assert NEEDLE not in step.text and PURGED_MARK in step.text
        assert ws.session("s1").lane(2000).text
        assert ws.journal.verify(blobs=True).ok
    assert _holders(state, NEEDLE) == []


def test_a_second_forget_reaches_texts_an_earlier_forget_purged(tmp_path: Path) -> None:
    """Two leaks found one after the other: the second forget cuts its string out of
    what the first left (prompt and inputs), so neither is in the replay or on disk."""
    root, state = _repo(tmp_path), tmp_path / "state"
    second = "kiwipassword9932"
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        pack = ws.build_context(f"the {NEEDLE} tariff; we log in with {second}", "shipping")
        assert NEEDLE in pack.render() and second in pack.render()
        assert ws.forget(text=NEEDLE).ledger_texts >= 2
        report = ws.forget(text=second)
        assert report.ledger_texts >= 2 and report.ledger_turns == 1
        replay = ws.replay(pack.replay_key)
        assert NEEDLE not in replay.text and second not in replay.text
        assert replay.text.count(PURGED_MARK) >= 2
        assert ws.journal.verify(blobs=True).ok
    assert _holders(state, second) == [] and _holders(state, NEEDLE) == []


def test_forgetting_a_file_cuts_its_hunks_from_the_diff_lane(tmp_path: Path) -> None:
    """A file with an uncommitted change is shown in a prompt's working-tree diff lane:
    forget --file cuts its hunks there too (its path line stays), other files' hunks stay."""
    root = _repo(tmp_path)
    secret = "kiwi_private_endpoint_9137"
    with (root / "billing/invoice.py").open("a") as f:
        f.write(f"\n\ndef {secret}():\n    return 'https://{secret}.internal/api'\n")
    with (root / "other.py").open("a") as f:
        f.write("\n\ndef unrelated_invoice_total():\n    return 3\n")
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        pack = ws.build_context("invoice total endpoint", "render invoice total")
        lane = pack.render().split("## Working-tree diff", 1)[1].split("\n## ", 1)[0]
        assert secret in lane and "unrelated_invoice_total" in lane
        report = ws.forget(["billing/invoice.py"])
        assert report.ledger_turns == 1
        text = ws.replay(pack.replay_key).text
        lane = text.split("## Working-tree diff", 1)[1].split("\n## ", 1)[0]
        assert secret not in lane and f"'https://{secret}.internal/api'" not in text
        assert f"--- billing/invoice.py\n{PURGED_MARK}\n" in lane
        assert "unrelated_invoice_total" in lane
        assert ws.journal.verify(blobs=True).ok
    assert _holders(tmp_path / "state", f"'https://{secret}.internal/api'") == []


def test_forgetting_a_file_forgets_the_links_to_it(tmp_path: Path) -> None:
    """A symlink in the workspace to a forgotten file is the same bytes under another
    name: it leaves the index and the ledger too, and the report names it."""
    root = _repo(tmp_path)
    (root / "billing/invoice_link.py").symlink_to("invoice.py")
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        pack = ws.build_context("how is an invoice rendered with its total", "render invoice")
        report = ws.forget(["billing/invoice.py"])
        assert report.files == ["billing/invoice.py", "billing/invoice_link.py"]
        assert "billing/invoice_link.py" in report.still_present
        assert not [h for h in ws.search("render invoice total", k=10)
                    if h.chunk.path.startswith("billing/")]  # fmt: skip
        assert "sum(price for _, price in lines)" not in ws.replay(pack.replay_key).text
    assert _holders(tmp_path / "state", "sum(price for _, price in lines)") == []


def test_forgetting_a_string_reaches_a_notes_topic_key_and_entities(tmp_path: Path) -> None:
    """A memory note whose topic key, entities and text hold the string: every column is
    cut, a second forget finds nothing left, and no byte stays in the memory file."""
    root = _repo(tmp_path)
    host = "zebrahost4471.corp.example"
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        ws.memory.save(f"fallback host {host}", what=f"retries go to {host}",
                       topic_key=f"host/{host}")  # fmt: skip
        ws.memory.save("other host", what="retries go elsewhere", topic_key="host/other")
        assert ws.forget(text=host).notes == 1
        assert ws.forget(text=host).notes == 0
        (hit,) = [n for n in ws.memory.search("fallback host", k=5) if "fallback" in n.title]
        assert host not in repr(hit) and PURGED_MARK in hit.title
    assert _holders(tmp_path / "state", host) == []


def test_forget_says_when_a_reader_keeps_the_bytes_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another process inside a read of the ledger keeps the old pages: forget waits,
    then reports the file as still holding the bytes (CLI: exit 1); once the read ends,
    the same forget again clears them."""
    import ledger._store

    monkeypatch.setattr(ledger._store, "COMPACT_WAIT_S", 0.5)
    root, state = _repo(tmp_path), tmp_path / "state"
    monkeypatch.setenv("CORTEX_STATE_DIR", str(state))
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    secret = tmp_path / "secret.txt"
    secret.write_text(NEEDLE)
    with Workspace.open(root, Config.from_env()) as ws:
        ws.index()
        ws.build_context(f"delivery cost under the {NEEDLE} tariff", "shipping cost")
    reader = sqlite3.connect(state / "ledger.sqlite", isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM blobs").fetchone()
        assert main(["forget", "--text-from", str(secret), "--path", str(root)]) == 1
        assert "old pages of the file still hold" in capsys.readouterr().out
        assert zlib_holds(state / "ledger.sqlite", NEEDLE.encode())
        reader.execute("COMMIT")
    finally:
        reader.close()
    assert main(["forget", "--text-from", str(secret), "--path", str(root)]) == 0
    assert not zlib_holds(state / "ledger.sqlite", NEEDLE.encode())
    assert _holders(state, NEEDLE) == []


def test_forget_says_when_a_reader_keeps_a_segments_or_the_caches_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A read held on an index segment or on the vector cache keeps their old pages (the
    dropped text, the dropped vectors) in the file: forget names both files (CLI: exit 1)
    instead of saying it is done; once the reads end, the same forget again clears them."""
    import ledger._sqlite

    monkeypatch.setattr(ledger._sqlite, "FOLD_WAIT_S", 0.5)
    root, state = _repo(tmp_path), tmp_path / "state"
    monkeypatch.setenv("CORTEX_STATE_DIR", str(state))
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    secret = tmp_path / "secret.txt"
    secret.write_text(NEEDLE)
    with Workspace.open(root, Config.from_env()) as ws:
        ws.index()
    (base,) = [m for m in state.rglob("meta.sqlite") if zlib_holds(m, NEEDLE.encode())
               and "shipping.py" in _sqlite_text(m)]  # fmt: skip
    cache = state / "embeddings.sqlite"
    readers = [sqlite3.connect(p, isolation_level=None) for p in (base, cache)]
    try:
        for reader in readers:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
        assert main(["forget", "--text-from", str(secret), "--path", str(root)]) == 1
        out = capsys.readouterr().out
        assert "old pages of the file still hold" in out
        assert str(base) in out and str(cache) in out
        assert zlib_holds(base, NEEDLE.encode())
    finally:
        for reader in readers:
            reader.close()
    assert main(["forget", "--text-from", str(secret), "--path", str(root)]) == 0
    assert _holders(state, NEEDLE) == []


def _sqlite_text(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return " ".join(str(r[0]) for r in conn.execute("SELECT path FROM files"))
    finally:
        conn.close()


def test_forget_names_the_hashed_records_that_keep_the_string(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure's free-text reason inside a hashed record (as attests were written before
    reasons were stored as texts): forget cannot cut it, and says so by seq, calling it a
    failure reason (not only older tool results)."""
    root, state = _repo(tmp_path), tmp_path / "state"
    monkeypatch.setenv("CORTEX_STATE_DIR", str(state))
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    secret = tmp_path / "secret.txt"
    secret.write_text(NEEDLE)
    with Workspace.open(root, Config.from_env()) as ws:
        ws.index()
        pack = ws.build_context("delivery cost by region", "shipping cost")
        turn = ws.journal.find(pack.replay_key)
        assert turn is not None
        ledger_path = ws.ledger_path
    with Ledger.open(ledger_path) as ledger:
        ledger.append_entries([
            (RecordKind.SALIENCE, turn.turn_id,
             {"user": turn.user, "intent": "0" * 64, "outcome": "failure",
              "reason": f"host {NEEDLE} was wrong", "cited": [1], "dropped": 0, "stale": [],
              "items": []}),
            (RecordKind.WEIGHTS, turn.turn_id, {"before": {}, "after": {}, "rate": 0.1,
                                                "skipped": True}),
        ])  # fmt: skip
        seqs = [r.seq for r in ledger.records() if NEEDLE in str(getattr(r, "payload", ""))]
    assert seqs
    assert main(["forget", "--text-from", str(secret), "--path", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"(seq {', '.join(map(str, seqs))})" in out and "a failure reason" in out
