"""Ledger integration: every turn recorded, replay byte-identical, feedback recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import engine.core._chunks as chunks_module
from engine import (
    Config,
    ContextSettings,
    PackSettings,
    ToolResult,
    UnknownReplayKeyError,
    Workspace,
)
from engine.memory import Inputs
from ledger import FeedbackRecord, Ledger, RecordKind, TurnRecord
from tests.engine.test_workspace import make_repo

CONFIG = Config(dense_model="hash")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """An indexed repository."""
    workspace = Workspace.open(make_repo(tmp_path / "repo"), CONFIG)
    workspace.index()
    return workspace


def test_turn_recorded_and_replayed_after_changes(ws: Workspace) -> None:
    """replay(key) gives the recorded prompt byte for byte after the files changed."""
    pack = ws.build_context("Fix the hook registry", "register_hook event", budget_tokens=1500)
    (ws.root / "hooks.py").write_text("def unrelated():\n    return 0\n")
    ws.index()
    replay = ws.replay(pack.replay_key)
    assert replay.text == pack.render() and replay.tokens_used == pack.tokens_used
    with Ledger.open(ws.state_dir / "ledger.sqlite") as ledger:
        turn = ledger.turn_by_replay_key(pack.replay_key)
        assert isinstance(turn, TurnRecord)
        assert [s.sha256 for s in turn.snippets] == [s.sha256 for s in pack.citations]
        assert ledger.verify(blobs=True).ok


def test_rebuild_shows_the_difference(ws: Workspace) -> None:
    """--rebuild is empty when nothing changed and shows a diff after an edit."""
    pack = ws.build_context("Fix the hook registry", "register_hook event", budget_tokens=1500)
    assert ws.replay(pack.replay_key, rebuild=True).diff == ""
    (ws.root / "hooks.py").write_text(
        "class Session:\n    def register_hook(self, event, hook):\n        return None\n"
    )
    ws.index()
    diff = ws.replay(pack.replay_key, rebuild=True).diff
    assert diff.startswith("--- recorded") and "return None" in diff


def test_rebuild_runs_with_the_settings_the_turn_ran_with(tmp_path: Path) -> None:
    """A turn made under other settings (the call's own, or the process's config) rebuilds
    under those, not today's: nothing changed, nothing differs (it used to show a diff)."""
    root = make_repo(tmp_path / "repo")
    loose = ContextSettings(pack=PackSettings(min_relevance=0.0, mmr_lambda=0.1))
    with Workspace.open(root, CONFIG) as first:
        first.index()
        args = ("Fix the hook registry", "register_hook event")
        plain = first.build_context(*args, budget_tokens=1500, record=False)
        pack = first.build_context(*args, budget_tokens=1500, settings=loose)
        assert pack.render() != plain.render()  # the settings matter to this request
    with Workspace.open(root, CONFIG) as later:  # another process, default settings
        assert later.replay(pack.replay_key, rebuild=True).diff == ""
    config = Config(dense_model="hash", mmr_lambda=0.1, file_ranking="sections")
    with Workspace.open(root, config) as tuned:
        made = tuned.build_context(*args, budget_tokens=1500)
    with Workspace.open(root, CONFIG) as later:
        assert later.replay(made.replay_key, rebuild=True).diff == ""


def test_inputs_recorded_before_settings_still_read() -> None:
    """Inputs in the old encoding (no settings) read back with none, and rebuild with
    today's; settings a newer cortex wrote that this one cannot read are left out."""
    old = '{"budget":1500,"constraints":[],"goal":"g","query":"q","recent_turns":[],' \
        '"subgoals":[],"tool_signals":[]}'
    assert Inputs.from_json(old).settings is None
    assert Inputs.from_json(old).to_json() == old
    newer = old[:-1] + ',"settings":{"a_later_knob":1}}'
    assert Inputs.from_json(newer).settings is None
    kept = Inputs.from_json(old[:-1] + ',"settings":{"pack":{"mmr_lambda":0.1}}}')
    assert kept.settings == ContextSettings(pack=PackSettings(mmr_lambda=0.1))


def test_feedback_is_recorded_in_the_chain(ws: Workspace) -> None:
    """feedback appends a record with valid, dropped and stale citations and tool results."""
    pack = ws.build_context("Fix the hook registry", "register_hook event", budget_tokens=1500)
    result = ws.feedback(
        pack.replay_key, [1, 77, "[bad"], [ToolResult("pytest", False, "1 failed")], "failure"
    )
    assert result.valid == (1,) and result.dropped == ("77", "[bad")
    with Ledger.open(ws.state_dir / "ledger.sqlite") as ledger:
        records = list(ledger.records())
        kinds = [r.kind for r in records]
        assert kinds == [RecordKind.TURN, RecordKind.FEEDBACK, RecordKind.SALIENCE,
                         RecordKind.WEIGHTS]  # fmt: skip
        feedback = records[1]
        assert isinstance(feedback, FeedbackRecord)
        assert feedback.cited == (1,) and feedback.dropped == ("77", "[bad")
        assert feedback.outcome == "failure" and feedback.tool_results[0].name == "pytest"
        assert ledger.verify().ok


def test_unknown_replay_key(ws: Workspace) -> None:
    """An unknown key is a clear error."""
    with pytest.raises(UnknownReplayKeyError, match="unknown replay key"):
        ws.replay("0" * 32)


def test_unwritable_ledger_does_not_stop_build_context(tmp_path: Path) -> None:
    """A ledger that cannot be written is reported in the advisory; the pack still comes."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    config = CONFIG.with_(ledger_path=str(blocker / "ledger.sqlite"))
    with Workspace.open(make_repo(tmp_path / "repo"), config) as ws:
        ws.index()
        pack = ws.build_context("Fix the hook registry", "register_hook", budget_tokens=1000)
        assert pack.citations
        assert any(note.startswith("ledger: this turn was not recorded") for note in pack.advisory)


def test_library_call_can_skip_recording(ws: Workspace) -> None:
    """record=False builds without touching the ledger."""
    ws.build_context("Fix the hook registry", "register_hook", budget_tokens=1000, record=False)
    assert not (ws.state_dir / "ledger.sqlite").exists()


def _big_repo(root: Path) -> Path:
    """make_repo plus one long function, which other chunk settings split otherwise."""
    make_repo(root)
    body = "\n".join(f"    step_{i} = value.replace('header{i}', 'strict{i}')" for i in range(40))
    (root / "big.py").write_text(f"def parse_big_header(value):\n{body}\n    return value\n")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "big"], check=True)
    return root


QUESTION = "how does parse_big_header replace header values, and how are hooks registered?"


def test_a_base_rebuilt_under_other_chunk_settings_gets_new_keys(tmp_path: Path) -> None:
    """The same request after a re-index of the same commit under other chunk settings
    gets another key, and each key replays its own prompt."""
    repo = _big_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        first = ws.build_context(QUESTION, budget_tokens=400)
    with Workspace.open(repo, CONFIG.with_(max_section_tokens=64)) as ws:
        ws.index()
        second = ws.build_context(QUESTION, budget_tokens=400)
        assert first.render() != second.render()
        assert first.replay_key != second.replay_key
        assert ws.replay(first.replay_key).text == first.render()
        assert ws.replay(second.replay_key).text == second.render()


def test_a_chunker_upgrade_changes_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new chunker version rebuilds the base at the same commit, and the key changes."""
    repo = _big_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        before = ws.build_context(QUESTION, budget_tokens=400).replay_key
    monkeypatch.setattr(chunks_module, "CHUNKER_VERSION", f"{chunks_module.CHUNKER_VERSION}+next")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        assert ws.build_context(QUESTION, budget_tokens=400).replay_key != before


def test_a_forget_gives_the_same_request_a_new_key(tmp_path: Path) -> None:
    """After ``forget`` of a file in the prompt, the same request gets another key: the
    old key replays the old (purged) turn, and feedback on it is checked against it."""
    repo = _big_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        first = ws.build_context(QUESTION, budget_tokens=400)
        assert any(c.source_uri.startswith("big.py") for c in first.citations)
        ws.forget(["big.py"])
        second = ws.build_context(QUESTION, budget_tokens=400)
        assert first.replay_key != second.replay_key
        old = ws.replay(first.replay_key)
        assert old.purged and old.text != second.render()
        assert ws.replay(second.replay_key).text == second.render()
        cited = list(range(1, len(first.citations) + 1))
        assert ws.feedback(first.replay_key, cited).valid == tuple(cited)
        feedback = [r for r in ws.journal.log(5) if isinstance(r, FeedbackRecord)][-1]
        turn = ws.journal.find(first.replay_key)
        assert turn is not None and feedback.turn_id == turn.turn_id


def test_the_library_makes_the_state_and_the_ledger_private(tmp_path: Path) -> None:
    """Through the library under umask 022 (the CLI sets its own), the state folder is
    0700 and the ledger's files 0600: they hold the prompts a model saw."""
    script = (
        "import sys\nfrom engine import Config, Workspace\n"
        "with Workspace.open(sys.argv[1], Config(dense_model='hash')) as ws:\n"
        "    ws.index()\n    ws.build_context('how are hooks registered')\n"
        "    ws.session('s').add('tool', 'psql: password authentication failed', tool='psql')\n"
    )
    repo = make_repo(tmp_path / "repo")
    subprocess.run([sys.executable, "-c", script, str(repo)], check=True,
                   preexec_fn=lambda: os.umask(0o022))  # fmt: skip
    state = repo / ".cortex"
    assert state.stat().st_mode & 0o777 == 0o700
    ledger = sorted(state.glob("ledger.sqlite*"))
    assert ledger and {p.name: p.stat().st_mode & 0o077 for p in ledger} == dict.fromkeys(
        (p.name for p in ledger), 0
    )
