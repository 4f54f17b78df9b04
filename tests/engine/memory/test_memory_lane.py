"""The memory lane in build_context on a real index: saved notes are shown before the
evidence, cited first, inside the budget, left out when they repeat evidence, recorded in
the ledger turn, and checked by feedback like any citation."""

from __future__ import annotations

from pathlib import Path

from engine import Workspace
from engine.core import Config, Lane
from engine.memory import MAX_QUERY_CHARS

CONFIG = Config(dense_model="hash")
SOURCE = '''def retry_request(url, attempts):
    """Call url, retrying on timeouts."""
    for n in range(attempts):
        try:
            return fetch(url)
        except TimeoutError:
            continue
    raise TimeoutError(url)
'''


def _workspace(root: Path) -> Workspace:
    (root / "client.py").write_text(SOURCE)
    ws = Workspace.open(root, CONFIG)
    ws.index()
    return ws


def test_no_store_no_lane_and_nothing_created(tmp_path: Path) -> None:
    """A workspace where nothing was saved packs as before and creates no memory store."""
    with _workspace(tmp_path) as ws:
        pack = ws.build_context("how are retries done?", record=False)
        assert all(b.lane is not Lane.MEMORY for b in pack.prompt_blocks)
        assert not (ws.state_dir / "memory.sqlite").exists()


def test_notes_are_cited_first_and_recorded(tmp_path: Path) -> None:
    """A relevant note is [1], evidence follows from [2]; the budget holds; the ledger turn
    records the note; feedback validates its citation, and flags it once it is deleted."""
    with _workspace(tmp_path) as ws:
        saved = ws.memory.save("Retries give up after the attempts run out", "decision",
                               why="callers want the timeout error, not a None")  # fmt: skip
        ws.memory.save("Unrelated: the logo is blue", "note", what="design colours")
        pack = ws.build_context("how are retries done?", budget_tokens=2000)
        assert ws.counter.count(pack.render()) <= 2000
        memory = [c for c in pack.citations if c.source_uri.startswith("memory:")]
        assert [c.source_uri for c in memory] == [f"memory:{saved.id}"]
        assert pack.citations[0].id == 1 and pack.citations[0].reason_tag == "memory"
        assert "## Memory\n[1] Retries give up" in pack.render()
        assert any(c.id == 2 and c.source_uri.startswith("client.py") for c in pack.citations)
        turn = ws.journal.find(pack.replay_key)
        assert turn is not None and turn.snippets[0].source_uri == f"memory:{saved.id}"
        assert ws.feedback(pack.replay_key, [1, 2]).valid == (1, 2)
        ws.memory.forget(saved.id)
        assert ws.feedback(pack.replay_key, [1]).stale == (1,)
        assert ws.replay(pack.replay_key).text == pack.render()


def test_a_note_that_repeats_evidence_is_left_out(tmp_path: Path) -> None:
    """A note whose text is the code the evidence already shows is not shown twice."""
    with _workspace(tmp_path) as ws:
        ws.memory.save("retry_request body", "pattern", what=SOURCE)
        pack = ws.build_context("retry_request timeouts", record=False)
        assert not any(c.source_uri.startswith("memory:") for c in pack.citations)
        assert any(c.source_uri.startswith("client.py") for c in pack.citations)


def test_the_lane_stays_in_its_share(tmp_path: Path) -> None:
    """Many long relevant notes: the lane holds what fits its share of a small budget."""
    with _workspace(tmp_path) as ws:
        for i in range(8):
            ws.memory.save(f"Retries note {i}", "discovery", what=f"retries detail {i} " * 60)
        pack = ws.build_context("retries", budget_tokens=1000, record=False)
        lane = next(b for b in pack.prompt_blocks if b.lane is Lane.MEMORY)
        assert lane.tokens <= 150 + 10
        assert ws.counter.count(pack.render()) <= 1000


def test_forget_purges_the_string_from_saved_notes(tmp_path: Path) -> None:
    """Workspace.forget(text=...) replaces the string in every note holding it (deleted
    ones too), search no longer finds it, and the store's file no longer holds its bytes."""
    secret = "internal-hostname-zq93"
    with _workspace(tmp_path) as ws:
        kept = ws.memory.save("Retries hit the cache host", what=f"host {secret} times out")
        gone = ws.memory.save("Old note", what=f"was {secret}")
        ws.memory.forget(gone.id)
        assert ws.forget(text=secret, dry_run=True).notes == 2
        report = ws.forget(text=secret)
        assert report.notes == 2
        assert ws.memory.get(kept.id).what == "host [PURGED] times out"
        assert all(secret not in h.preview + h.title for h in ws.memory.search(secret))
        raw = b"".join(p.read_bytes() for p in ws.state_dir.glob("memory.sqlite*"))
        assert secret.encode() not in raw


def test_a_goal_longer_than_a_memory_query_still_packs_with_its_notes(tmp_path: Path) -> None:
    """A pasted issue past memory search's ``MAX_QUERY_CHARS`` (far under the goal limit)
    packs once notes exist: the lane recalls from the goal's leading part, the bundle too,
    and a blank query falls back to the goal as the code lane's does."""
    goal = "How are retries done? " + "the request keeps timing out. " * 200
    assert len(goal) > MAX_QUERY_CHARS
    with _workspace(tmp_path) as ws:
        saved = ws.memory.save("Retries give up after the attempts run out", "decision")
        pack = ws.build_context(goal, budget_tokens=3000, record=False)
        assert f"memory:{saved.id}" in [c.source_uri for c in pack.citations]
        pack = ws.build_context("how are retries done?", "   ", record=False)
        assert f"memory:{saved.id}" in [c.source_uri for c in pack.citations]
        bundle = ws.bundle(goal, budget=2000)
        assert f"memory:{saved.id}" in [i.uri for i in bundle.items]
