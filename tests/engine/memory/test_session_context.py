"""A session-aware build_context: the history lane between goal and evidence within the
budget, the request journaled, replay byte for byte, the lane rebuilt from the ledger, and
each compacted step resolvable by its owner only."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import (
    BudgetUnreachableError,
    Config,
    Lane,
    NotFoundError,
    SessionState,
    StepRole,
    TiktokenCounter,
    Workspace,
)
from tests.engine.memory.test_observe import PYTEST
from tests.engine.test_workspace import make_repo


def _config(tmp: Path, user: str = "alice") -> Config:
    return Config(dense_model="hash", state_dir=str(tmp / "state"), user=user)


def test_session_lane_in_context(tmp_path: Path) -> None:
    """Steps added through ws.session show in the pack's history lane, which sits between
    the goal and the evidence; the whole prompt is within budget; older steps are listed
    as compacted pointers that resolve; the request itself is journaled."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, _config(tmp_path)) as ws:
        ws.index()
        s = ws.session("fix-1")
        s.add("user", "make register_hook reject empty events")
        for i in range(12):
            s.add("assistant", f"THOUGHT: try {i}\n```bash\npytest tests/test_a.py\n```")
            s.add("tool", PYTEST, tool="bash")
        s.decide("validate in register_hook", rationale="callers pass ''", evidence=["1"])
        state = SessionState(session="fix-1")
        pack = ws.build_context("reject empty events", "register_hook", state=state,
                                budget_tokens=3000)  # fmt: skip
        lanes = [b.lane for b in pack.prompt_blocks]
        assert lanes.index(Lane.GOAL) < lanes.index(Lane.HISTORY) < lanes.index(Lane.EVIDENCE)
        text = pack.render()
        assert TiktokenCounter().count(text) <= 3000
        assert "validate in register_hook" in text
        assert pack.compacted and pack.compacted[0].source_uri == "session:fix-1#1"
        resolved = ws.resolve("session:fix-1#3")
        assert resolved.text == PYTEST
        last = s.items()[-1]
        assert last.role is StepRole.REQUEST and "register_hook" in last.text
        assert ws.replay(pack.replay_key).text == text
        again = ws.replay(pack.replay_key, rebuild=True)
        assert again.diff == ""


def test_session_packs_never_exceed_the_budget(tmp_path: Path) -> None:
    """From a tight budget to a roomy one: the whole prompt, history lane included, fits,
    or the call refuses (it never cuts)."""
    repo = make_repo(tmp_path / "repo")
    counter = TiktokenCounter()
    with Workspace.open(repo, _config(tmp_path)) as ws:
        ws.index()
        s = ws.session("b")
        for i in range(20):
            s.add("tool", PYTEST if i % 2 else f"step {i}: " + "output line\n" * 50)
        state = SessionState(constraints=("keep the API",), subgoals=("find hooks",),
                             session="b")  # fmt: skip
        for budget in (150, 200, 300, 500, 800, 1500, 3000):
            try:
                pack = ws.build_context("register_hook", state=state, budget_tokens=budget,
                                        record=False)  # fmt: skip
            except BudgetUnreachableError:
                assert budget <= 200
                continue
            assert counter.count(pack.render()) <= budget


def test_sessions_are_per_user(tmp_path: Path) -> None:
    """Bob cannot resolve Alice's session steps, and his session of the same id is empty."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, _config(tmp_path)) as alice:
        alice.session("s").add("user", "alice's plan")
    with Workspace.open(repo, _config(tmp_path, "bob")) as bob:
        with pytest.raises(NotFoundError):
            bob.resolve("session:s#1")
        assert bob.session("s").items() == ()


def test_history_that_cannot_fit_refuses(tmp_path: Path) -> None:
    """A goal that leaves no room for the history lane raises BudgetUnreachableError."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, _config(tmp_path)) as ws:
        ws.index()
        ws.session("s").add("user", "x")
        with pytest.raises(BudgetUnreachableError):
            ws.build_context("word " * 400, "q", state=SessionState(session="s"),
                             budget_tokens=300)  # fmt: skip


def test_changed_files_are_journaled_only_by_a_recorded_call_that_has_room(
    tmp_path: Path,
) -> None:
    """The files the working tree changed join the session as a ``changes`` step when a
    recorded call builds its lane, with a space in a path kept whole; a call with
    ``record=False`` or one refused for its budget journals nothing."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, _config(tmp_path)) as ws:
        ws.index()
        s = ws.session("s")
        s.add("user", "make register_hook reject empty events")
        (repo / "hooks.py").write_text((repo / "hooks.py").read_text() + "\n# edited\n")
        (repo / "my notes.md").write_text("# notes\n")
        import subprocess

        from tests.engine.test_workspace import GIT_ENV

        subprocess.run(["git", "add", "my notes.md"], cwd=repo, check=True, env=GIT_ENV)
        state = SessionState(session="s")
        ws.build_context("reject empty events", "register_hook", state=state,
                         budget_tokens=3000, record=False)  # fmt: skip
        with pytest.raises(BudgetUnreachableError):
            ws.build_context("word " * 400, "q", state=state, budget_tokens=300)
        assert [i.role for i in s.items()] == [StepRole.USER]
        ws.build_context("reject empty events", "register_hook", state=state,
                         budget_tokens=3000)  # fmt: skip
        changes = [i for i in s.items() if i.role is StepRole.CHANGES]
        assert len(changes) == 1 and changes[0].text == "hooks.py 'my notes.md'"
    from engine.memory._history import changed_paths

    assert changed_paths(changes[0].text) == ("hooks.py", "my notes.md")
    assert changed_paths("app.py tests/test_app.py") == ("app.py", "tests/test_app.py")  # older


def test_a_new_sessions_first_calls_show_no_step_and_then_no_old_numbers(
    tmp_path: Path,
) -> None:
    """A session id with no step yet on a clean tree: the first call's lane says there is
    no step (it raised IndexError from the recall ranking). The request it journals names
    the evidence by source: the next prompt's lane holds it, and a bare ``[3]`` there
    would clash with that prompt's own [3]."""
    import re

    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, _config(tmp_path)) as ws:
        ws.index()
        state = SessionState(session="s")
        first = ws.build_context("reject empty events", "register_hook", state=state,
                                 budget_tokens=2000)  # fmt: skip
        history = next(b.text for b in first.prompt_blocks if b.lane is Lane.HISTORY)
        assert "steps none yet" in history and first.tokens_used <= 2000
        request = ws.session("s").items()[-1]
        assert request.role is StepRole.REQUEST
        assert f"- {first.citations[0].source_uri}" in request.text
        second = ws.build_context("reject empty events", "register_hook", state=state,
                                  budget_tokens=3000)  # fmt: skip
        history = next(b.text for b in second.prompt_blocks if b.lane is Lane.HISTORY)
        assert first.citations[0].source_uri in history
        assert not re.search(r"^\[\d+\] ", history, re.MULTILINE)


def test_a_history_upto_that_is_no_step_number_is_refused(tmp_path: Path) -> None:
    """``history_upto=-3`` read as a slice and built the lane without the newest steps."""
    from engine import ConfigError

    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, _config(tmp_path)) as ws:
        ws.index()
        ws.session("fix-1").add("user", "make register_hook reject empty events")
        state = SessionState(session="fix-1")
        for upto in (-3, "1", 1.0):
            with pytest.raises(ConfigError, match="history_upto"):
                ws.build_context("g", "register hook", state=state, history_upto=upto,  # type: ignore[arg-type]
                                 record=False)  # fmt: skip
        assert ws.build_context("g", "register hook", state=state, history_upto=0, record=False)


def test_new_files_a_second_edit_and_a_clean_tree_are_journaled(tmp_path: Path) -> None:
    """A file the agent creates (untracked, not ignored) is a change, journaled (its text
    reaches a prompt through the index, not the diff lane); an ignored one or a secret is
    neither; a second edit to the files
    already changed is journaled again, and a tree back to clean as a ``changes`` step
    with no path (each was missed: only tracked files counted, and only a new set)."""
    import subprocess

    from tests.engine.test_workspace import GIT_ENV

    repo = make_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("*.log\n")
    subprocess.run(["git", "add", ".gitignore"], cwd=repo, check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-qm", "ignore logs"], cwd=repo, check=True, env=GIT_ENV)
    with Workspace.open(repo, _config(tmp_path)) as ws:
        ws.index()
        s = ws.session("s")
        s.add("user", "add a frobnicate helper")
        state = SessionState(session="s")

        def turn() -> tuple[list[str], str]:
            pack = ws.build_context("add a frobnicate helper", "frobnicate", state=state,
                                    budget_tokens=3000)  # fmt: skip
            diff = next((b.text for b in pack.prompt_blocks if b.lane is Lane.DIFF), "")
            return [i.text for i in s.items() if i.role is StepRole.CHANGES], diff

        (repo / "helper.py").write_text("def frobnicate(x):\n    return x * 2\n")
        (repo / "run.log").write_text("frobnicate ran\n")
        (repo / ".env").write_text("FROBNICATE_TOKEN=hunter2\n")  # secret by name
        changes, diff = turn()
        assert changes == ["helper.py"]
        assert diff == ""  # nothing tracked changed
        assert ws.search("frobnicate", mode="bm25")[0].chunk.path == "helper.py"
        hooks = (repo / "hooks.py").read_text()
        (repo / "hooks.py").write_text(hooks + "\n# one\n")
        assert turn()[0] == ["helper.py", "helper.py hooks.py"]
        (repo / "hooks.py").write_text(hooks + "\n# two\n")
        assert turn()[0] == ["helper.py", "helper.py hooks.py", "helper.py hooks.py"]
        assert turn()[0] == ["helper.py", "helper.py hooks.py", "helper.py hooks.py"]
        (repo / "hooks.py").write_text(hooks)
        (repo / "helper.py").unlink()
        (repo / ".env").unlink()
        changes, diff = turn()
        assert changes == ["helper.py", "helper.py hooks.py", "helper.py hooks.py", ""]
        assert diff == ""
