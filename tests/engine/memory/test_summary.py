"""A session's end: its summary extracted from the steps and saved as one memory note (real
SQLite ledger and memory store), from the library, the CLI and the service alike."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import Config, Workspace
from engine.cli import EXIT_ERROR, EXIT_OK, main
from engine.core import NoteType, NotFoundError, SaveAction, Scope
from engine.memory import Memo, session_summary
from engine.serve import Service, to_json
from indexers import TiktokenCounter

FAILING = """\
$ pytest tests/test_app.py
FAILED tests/test_app.py::test_parse - KeyError: 'type'
Traceback (most recent call last):
  File "app.py", line 2, in parse
KeyError: 'type'
1 failed
"""
PASSING = "$ pytest tests/test_app.py\nPASSED tests/test_app.py::test_parse\n1 passed\n"


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    w = Workspace.open(tmp_path, Config(dense_model="hash"))
    yield w
    w.close()


def _work(ws: Workspace, sid: str = "fix-42") -> None:
    s = ws.session(sid)
    s.add("user", "Fix the parser crash on messages without a type field")
    s.add("assistant", "THOUGHT: run the tests\n```bash\npytest tests/test_app.py\n```")
    s.add("tool", FAILING, tool="bash", exit_status=1)
    s.decide("raise ValueError on a missing type", rationale="callers expect a clear error",
             evidence=["3"])  # fmt: skip
    s.add("assistant", "THOUGHT: patch it\n```bash\nsed -i 's/x/y/' app.py\n```")
    s.add("changes", "app.py tests/test_app.py")
    s.add("assistant", "THOUGHT: again\n```bash\npytest tests/test_app.py\n```")
    s.add("tool", PASSING, tool="bash", exit_status=0)


def test_summary_holds_goal_decisions_failures_and_files(ws: Workspace) -> None:
    """Each part comes from its steps, named by step number; the same steps, the same text."""
    _work(ws)
    items = ws.session("fix-42").items()
    summary = session_summary("fix-42", items, Memo(TiktokenCounter()))
    assert summary.title == "Session fix-42: Fix the parser crash on messages without a type field"
    assert summary.what.startswith("Goal [#1]: Fix the parser crash")
    assert "raise ValueError on a missing type — because callers expect" in summary.why
    assert "[#4]" in summary.why
    assert "failed #3" in summary.learned and "passed #8" in summary.learned
    assert "test tests/test_app.py::test_parse failed #3, passed #8" in summary.learned
    assert "app.py (#5, #6)" in summary.where and "tests/test_app.py (#6)" in summary.where
    assert summary.topic_key == "session/fix-42"
    assert session_summary("fix-42", items, Memo(TiktokenCounter())) == summary


def test_ending_saves_one_note_and_ending_again_updates_it(ws: Workspace) -> None:
    """The first end creates the note, the same end is a no-op, a longer session revises it."""
    _work(ws)
    first = ws.end_session("fix-42")
    assert first.action is SaveAction.CREATED
    note = ws.memory.get(first.id)
    assert note.type is NoteType.NOTE and note.scope is Scope.PERSONAL
    assert note.topic_key == "session/fix-42" and "callers expect" in note.why
    again = ws.end_session("fix-42")
    assert (again.id, again.action) == (first.id, SaveAction.DUPLICATE)
    ws.session("fix-42").add("user", "also cover messages with an empty type")
    later = ws.end_session("fix-42")
    assert (later.id, later.action, later.revision) == (first.id, SaveAction.UPDATED, 2)
    hits = ws.memory.search("parser crash without a type field")
    assert [h.id for h in hits].count(first.id) == 1


def test_summaries_are_found_by_a_later_session(ws: Workspace) -> None:
    """Another session's summary is recalled by what it decided."""
    _work(ws, "a")
    ws.session("b").add("user", "Set up the release workflow")
    ws.end_session("a")
    ws.end_session("b")
    [top, *_] = ws.memory.search("why raise ValueError on a missing type")
    assert top.title.startswith("Session a:")


def test_ending_an_unknown_session_is_not_found(ws: Workspace) -> None:
    """A session with no step has nothing to summarise: NotFoundError, and no note."""
    with pytest.raises(NotFoundError):
        ws.end_session("nobody")
    assert ws.memory.stats().notes == 0


def test_cli_and_service_end_a_session(tmp_path: Path) -> None:
    """`cortex session end` and the service's session_end save the same one note."""
    with Workspace.open(tmp_path, Config(dense_model="hash")) as w:
        _work(w)
    out = io.StringIO()
    code = main(["session", "end", "--session", "fix-42", "--json", "--path", str(tmp_path)],
                out=out)  # fmt: skip
    saved = json.loads(out.getvalue())
    assert code == EXIT_OK and saved["action"] == "created" and saved["revision"] == 1
    err = io.StringIO()
    assert main(["session", "end", "--session", "nobody", "--path", str(tmp_path)],
                out=err) == EXIT_ERROR  # fmt: skip
    with Workspace.open(tmp_path, Config(dense_model="hash")) as w:
        body = to_json(Service(w).session_end("fix-42"))
    assert body["id"] == saved["id"] and body["action"] == "duplicate"
