"""Rankings kept for asks that come again: the same answer, and never one the working tree
has moved past."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engine import Config, Workspace
from engine.packing import retrieve
from tests.engine.test_workspace import GIT_ENV, make_repo

CONFIG = Config(dense_model="hash")
GOAL = "register a hook for an event"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """An indexed repository."""
    workspace = Workspace.open(make_repo(tmp_path / "repo"), CONFIG)
    workspace.index()
    return workspace


def _count_retrievals(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the rankings the workspace computes (recall and rerank)."""
    calls = [0]

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return retrieve(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("engine._workspace._search.retrieve", counted)
    return calls


def test_an_ask_again_answers_the_same_without_ranking_again(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second bundle and search of one ask render the same bytes from the kept ranking."""
    calls = _count_retrievals(monkeypatch)
    first = ws.bundle(GOAL, ["hooks.py"])
    hits = ws.search(GOAL, k=5)
    assert calls[0] == 2  # a bundle's ranking and a search's differ in their settings
    assert ws.bundle(GOAL, ["hooks.py"]).render() == first.render()
    assert ws.search(GOAL, k=5) == hits
    assert calls[0] == 2


def test_a_changed_file_is_seen_by_the_same_ask(ws: Workspace) -> None:
    """After a file changes, the same ask shows its new text (as a fresh workspace does)."""
    before = ws.bundle(GOAL, ["hooks.py"])
    assert "unregister_hook" not in before.render()
    hooks = ws.root / "hooks.py"
    hooks.write_text(
        hooks.read_text()
        + "\n    def unregister_hook(self, event, hook):\n"
        + '        """Unregister a hook for an event."""\n'
        + "        self.hooks[event].remove(hook)\n"
    )
    after = ws.bundle(GOAL, ["hooks.py"])
    assert "unregister_hook" in after.render()
    assert any("unregister_hook" in h.chunk.text for h in ws.search(GOAL, k=5))
    with Workspace.open(ws.root, CONFIG) as fresh:
        assert [i.uri for i in fresh.bundle(GOAL, ["hooks.py"]).items] == [
            i.uri for i in after.items
        ]


def test_a_commit_is_seen_by_the_same_ask(ws: Workspace) -> None:
    """A file committed after the first ask (the tree clean again) is found by the same ask."""
    ws.search("drain the event queue", k=3)
    (ws.root / "queue.py").write_text(
        "def drain_queue(events):\n    return [e for e in events if e]\n"
    )
    for args in (["add", "-A"], ["commit", "-q", "-m", "queue"]):
        subprocess.run(["git", "-C", str(ws.root), *args], check=True, env=GIT_ENV)
    assert any(h.chunk.path == "queue.py" for h in ws.search("drain the event queue", k=3))


def test_a_forgotten_file_is_not_answered_from_a_kept_ranking(ws: Workspace) -> None:
    """After ``forget``, the same ask no longer shows the forgotten file's text."""
    assert any(h.chunk.path == "hooks.py" for h in ws.search(GOAL, k=5))
    ws.forget(["hooks.py"])
    assert not any(h.chunk.path == "hooks.py" for h in ws.search(GOAL, k=5))
