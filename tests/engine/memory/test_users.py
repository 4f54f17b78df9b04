"""Each user's turns stay theirs: with one state folder shared by several users, replay,
ledger log|show and feedback serve only the caller's own turns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Config, UnknownReplayKeyError, Workspace
from engine.cli import EXIT_ERROR, EXIT_OK
from ledger import FeedbackRecord, TurnRecord
from tests.engine.test_workspace import make_repo


def test_one_user_never_reads_anothers_turns(tmp_path: Path) -> None:
    """Bob, sharing Alice's state folder and holding her replay key, gets "unknown key"
    from replay and feedback, and her turn is not in his log; Alice gets all of it."""
    repo = make_repo(tmp_path / "repo")
    shared = str(tmp_path / "state")
    alice_cfg = Config(dense_model="hash", state_dir=shared, user="alice")
    bob_cfg = Config(dense_model="hash", state_dir=shared, user="bob")
    with Workspace.open(repo, alice_cfg) as alice:
        alice.index()
        key = alice.build_context("how are hooks registered").replay_key
    with Workspace.open(repo, bob_cfg) as bob:
        with pytest.raises(UnknownReplayKeyError):
            bob.replay(key)
        with pytest.raises(UnknownReplayKeyError):
            bob.feedback(key, [1])
        mine = bob.build_context("what does compute_1 return").replay_key
        turns = [r for r in bob.journal.log(50) if isinstance(r, TurnRecord)]
        assert [t.replay_key for t in turns] == [mine]
        assert bob.journal.find(key) is None
    with Workspace.open(repo, alice_cfg) as alice:
        assert alice.replay(key).text
        assert alice.feedback(key, [1]).valid == (1,)
        turns = [r for r in alice.journal.log(50) if isinstance(r, TurnRecord)]
        assert [t.replay_key for t in turns] == [key] and turns[0].user == "alice"
        assert alice.journal.verify().ok


def test_the_same_request_by_two_users_keeps_each_ones_turn(tmp_path: Path) -> None:
    """Alice and Bob ask the same question on the same tree (one key): each replays and
    gives feedback on their own turn, Bob's later turn does not hide Alice's."""
    repo = make_repo(tmp_path / "repo")
    shared = str(tmp_path / "state")
    alice_cfg = Config(dense_model="hash", state_dir=shared, user="alice")
    bob_cfg = Config(dense_model="hash", state_dir=shared, user="bob")
    with Workspace.open(repo, alice_cfg) as alice:
        alice.index()
        key = alice.build_context("how are hooks registered").replay_key
        hers = alice.journal.find(key)
    with Workspace.open(repo, bob_cfg) as bob:
        assert bob.build_context("how are hooks registered").replay_key == key
        his = bob.journal.find(key)
    assert hers is not None and his is not None and hers.turn_id != his.turn_id
    with Workspace.open(repo, alice_cfg) as alice:
        assert alice.replay(key).text
        assert alice.journal.find(key) == hers
        assert alice.feedback(key, [1]).valid == (1,)
        feedback = [r for r in alice.journal.log(50) if isinstance(r, FeedbackRecord)]
        assert [f.turn_id for f in feedback] == [hers.turn_id]


def test_an_auditor_reads_another_users_turns_when_asking(tmp_path: Path) -> None:
    """An auditor under another login is told the turn is another user's (not that none
    was recorded), and reads it by naming the user or all users: library and CLI."""
    repo = make_repo(tmp_path / "repo")
    shared = str(tmp_path / "state")
    alice_cfg = Config(dense_model="hash", state_dir=shared, user="alice")
    with Workspace.open(repo, alice_cfg) as alice:
        alice.index()
        key = alice.build_context("how are hooks registered").replay_key
        prompt = alice.replay(key).text
    with Workspace.open(repo, alice_cfg.with_(user="auditor")) as auditor:
        with pytest.raises(UnknownReplayKeyError, match="user 'alice' recorded one"):
            auditor.replay(key)
        assert auditor.replay(key, user="alice").text == prompt
        assert auditor.replay(key, all_users=True).text == prompt
        with pytest.raises(UnknownReplayKeyError, match="user 'alice' recorded one"):
            auditor.feedback(key, [1])  # feedback stays the recorder's own
        assert not [r for r in auditor.journal.log(50) if isinstance(r, TurnRecord)]
        assert [r.replay_key for r in auditor.journal.log(50, all_users=True)
                if isinstance(r, TurnRecord)] == [key]  # fmt: skip
    env = {**os.environ, "CORTEX_USER": "auditor", "CORTEX_STATE_DIR": shared,
           "CORTEX_DENSE_MODEL": "hash"}  # fmt: skip

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "engine.cli", *argv, "--path", str(repo)],
                              env=env, capture_output=True, text=True)  # fmt: skip

    refused = cli("replay", key)
    assert refused.returncode == EXIT_ERROR and "user 'alice' recorded one" in refused.stderr
    for argv, says in (
        (("replay", key, "--user", "alice"), prompt),
        (("replay", key, "--all-users"), prompt),
        (("ledger", "show", key, "--user", "alice"), '"user": "alice"'),
        (("ledger", "log", "--all-users"), key),
        (("ledger", "log", "--user", "alice"), key),
    ):
        done = cli(*argv)
        assert done.returncode == EXIT_OK and says in done.stdout, (argv, done.stderr)
    assert key not in cli("ledger", "log").stdout
