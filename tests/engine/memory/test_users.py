"""Each user's turns stay theirs: with one state folder shared by several users, replay,
ledger log|show and feedback serve only the caller's own turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Config, UnknownReplayKeyError, Workspace
from ledger import TurnRecord
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
