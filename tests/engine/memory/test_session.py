"""Sessions in the real ledger: steps journaled in the chain, per user, checkpoints that
reload as written, and bad input answered clearly."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from engine.core import BudgetUnreachableError, ConfigError, NotFoundError, StepRole
from engine.memory import Journal, Session
from indexers import TiktokenCounter
from tests.engine.memory.test_observe import PYTEST

COUNTER = TiktokenCounter()
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _open(tmp: Path, user: str = "alice", sid: str = "s1") -> tuple[Journal, Session]:
    journal = Journal(tmp / "ledger.sqlite", user)
    return journal, Session(journal, sid, COUNTER)


def test_steps_are_journaled_in_the_chain(tmp_path: Path) -> None:
    """add and decide append session entries; the chain verifies; a new Session reads them
    back in order; the lane shows the decision."""
    journal, s = _open(tmp_path)
    s.add("user", "Fix the empty-header bug")
    s.add("assistant", "THOUGHT: run tests\n```bash\npytest\n```")
    s.add("tool", PYTEST, tool="bash")
    d = s.decide("keep parse_strict", rationale="plugins call it", evidence=[3])
    assert d.step == 4 and d.evidence == ("3",)
    assert journal.verify().ok
    again = Session(Journal(tmp_path / "ledger.sqlite", "alice"), "s1", COUNTER)
    roles = [StepRole.USER, StepRole.ASSISTANT, StepRole.TOOL, StepRole.DECISION]
    assert [i.role for i in again.items()] == roles
    assert "keep parse_strict" in again.lane(2000).text
    assert again.show(3)[0].text == PYTEST and len(again.show()) == 4


def test_users_never_read_each_others_sessions(tmp_path: Path) -> None:
    """Bob's session of the same id is his own and empty; Alice's steps stay hers."""
    _, alice = _open(tmp_path, "alice")
    alice.add("user", "secret plan")
    bob_journal, bob = _open(tmp_path, "bob")
    assert bob.items() == ()
    with pytest.raises(NotFoundError):
        bob.step(1)
    assert not [r for r in bob_journal.log(50) if "alice" in str(getattr(r, "payload", ""))]


def test_secrets_are_redacted_before_storing(tmp_path: Path) -> None:
    """A token in a tool output never reaches the ledger."""
    journal, s = _open(tmp_path)
    s.add("tool", f"export GITHUB_TOKEN={TOKEN}")
    assert TOKEN not in s.step(1).text and "[REDACTED:" in s.step(1).text
    assert TOKEN.encode() not in (tmp_path / "ledger.sqlite").read_bytes()
    journal.close()


def test_bad_input_is_answered_clearly(tmp_path: Path) -> None:
    """Bad ids, roles and steps raise ConfigError / NotFoundError; binary and non-UTF-8
    output is stored readable; a huge output is stored once and masked."""
    journal, s = _open(tmp_path)
    with pytest.raises(ConfigError):
        Session(journal, "../etc", COUNTER)
    with pytest.raises(ConfigError):
        s.add("wizard", "x")
    with pytest.raises(NotFoundError):
        s.compact()
    s.add("tool", b"\xff\xfe bytes \x00 here")
    assert "bytes" in s.step(1).text and "\x00" not in s.step(1).text
    big = "noise line that repeats\n" * 100_000 + "RuntimeError: at the end\n"
    s.add("tool", big, tool="bash", exit_status=1)
    lane = s.lane(1000)
    assert lane.tokens <= 1000 and "RuntimeError" in lane.text
    with pytest.raises(NotFoundError):
        s.checkpoint(99)


def test_checkpoints_reload_as_written(tmp_path: Path) -> None:
    """compact journals a checkpoint; load_checkpoint returns it without recomputing; an
    impossible budget raises and writes nothing."""
    journal, s = _open(tmp_path)
    for i in range(6):
        s.add("assistant", f"THOUGHT: step {i}\n```bash\nls\n```")
        s.add("tool", PYTEST, tool="bash")
    made = s.compact([2], budget=1500)
    assert s.load_checkpoint(made.step) == made
    part = s.compact([4], budget=1500, in_context=[3, 4, 5])
    assert set(part.kept) | {int(x.ref.rsplit("#", 1)[1]) for x in part.stubs} == {3, 4, 5}
    assert s.checkpoint(4).step == 4 and s.load_checkpoint(4).step == 4
    with pytest.raises(BudgetUnreachableError):
        s.compact([2, 3, 4], budget=64)
    for budget in (30, 10**20, 1500.0):  # the range and type every surface takes
        with pytest.raises(ConfigError, match="budget_tokens"):
            s.compact([2], budget=budget)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        s.load_checkpoint(5)
    assert journal.verify().ok


def _append_many(path: str, n: int) -> None:
    s = Session(Journal(Path(path), "alice"), "s1", TiktokenCounter())
    for i in range(n):
        s.add("tool", f"output {i}")


def test_two_processes_append_to_one_session(tmp_path: Path) -> None:
    """Two writers at once: one order, every step kept, the chain intact."""
    path = str(tmp_path / "ledger.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(path, 15)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    journal, s = _open(tmp_path)
    steps = s.items()
    assert len(steps) == 30 and [i.step for i in steps] == list(range(1, 31))
    assert journal.verify().ok


def test_a_lane_of_no_room_is_a_bad_argument(tmp_path: Path) -> None:
    """``session show --lane -5`` answered with a budget message; a room below one token
    (or not a number of tokens) is a ConfigError, as a bad argument is."""
    journal, s = _open(tmp_path)
    s.add("user", "fix the parser")
    for room in (0, -5, 1.5):
        with pytest.raises(ConfigError, match="number of tokens"):
            s.lane(room)  # type: ignore[arg-type]
    assert s.lane(200).tokens <= 200
    journal.close()


def test_step_numbers_and_lists_of_the_wrong_kind_are_refused(tmp_path: Path) -> None:
    """Each was a bare TypeError deep inside, or (a negative ``upto``, Python's slice)
    silently dropped the newest steps; ``evidence=[None]`` was journaled as "None"."""
    journal, s = _open(tmp_path)
    for text in ("fix the parser", "out", "more"):
        s.add("user" if text.startswith("fix") else "tool", text)
    bad = [
        (lambda: s.compact(in_context=["2"], budget=1000), "in_context"),  # type: ignore[list-item]
        (lambda: s.compact(load_bearing=2, budget=1000), "load_bearing"),  # type: ignore[arg-type]
        (lambda: s.compact(load_bearing=[True], budget=1000), "load_bearing"),
        (lambda: s.lane(200, upto="2"), "upto"),  # type: ignore[arg-type]
        (lambda: s.lane(200, upto=-1), "upto"),
        (lambda: s.items(-1), "upto"),
        (lambda: s.search(None), "query"),  # type: ignore[arg-type]
        (lambda: s.search("out", k=0), "k "),
        (lambda: s.decide("d", evidence=[None]), "evidence"),  # type: ignore[list-item]
        (lambda: s.decide("d", evidence=[1.5]), "evidence"),  # type: ignore[list-item]
    ]
    for call, name in bad:
        with pytest.raises(ConfigError, match=name):
            call()
    assert len(s.items()) == 3  # nothing was journaled
    assert "steps #1-#2;" in s.lane(200, upto=2).text
    assert journal.verify().ok
