"""A workspace's ledger rotated while another Workspace (a server) has it open: the
server's next turn lands in the new chain, and what it learned starts over."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Config, UnknownReplayKeyError, Workspace
from ledger import Ledger, RecordKind, TurnRecord
from tests.engine.test_workspace import make_repo

CONFIG = Config(dense_model="hash")
ASK = ("Fix the hook registry", "register_hook event")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An indexed repository."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
    return repo


def test_a_workspace_open_before_the_rotation_records_in_the_new_ledger(root: Path) -> None:
    """A turn the server records after another Workspace rotated the ledger lands in the
    new chain (seq 2, after its continues record) and replays; the old file keeps its head."""
    with Workspace.open(root, CONFIG) as server:
        first = server.build_context(*ASK, budget_tokens=1500)
        with Workspace.open(root, CONFIG) as cli:
            head = cli.recorded_journal().head()
            rotation = cli.recorded_journal().rotate()
        assert (rotation.previous.seq, rotation.previous.hash) == head
        second = server.build_context("Where are hooks registered", "hooks", budget_tokens=1500)
        assert server.replay(second.replay_key).text == second.render()
        with pytest.raises(UnknownReplayKeyError):  # its turn is in the closed chain
            server.feedback(first.replay_key, [1])
    path = root / ".cortex" / "ledger.sqlite"
    with Ledger.open(path) as ledger:
        records = list(ledger.records())
        assert [r.kind for r in records] == [RecordKind.CONTINUES, RecordKind.TURN]
        assert isinstance(records[1], TurnRecord) and records[1].replay_key == second.replay_key
        assert ledger.verify(blobs=True, previous=True).ok
    with Ledger.open(path.with_name(rotation.previous.file), read_only=True) as old:
        assert old.head() == head and old.verify(blobs=True).ok


def test_what_outcomes_taught_starts_over_after_a_rotation(root: Path) -> None:
    """After another Workspace rotated the ledger and recorded past the seq the server had
    learned at, the server's learned state is empty: a fold of the old chain is not kept
    (seqs of two chains are not comparable), and the salience tables moved aside with it."""
    with Workspace.open(root, CONFIG) as server:
        pack = server.build_context(*ASK, budget_tokens=1500)
        server.feedback(pack.replay_key, [1], outcome="success")
        assert server.learned()
        learned_at = server.recorded_journal().head()[0]
        with Workspace.open(root, CONFIG) as cli:
            cli.recorded_journal().rotate()
            while cli.recorded_journal().head()[0] <= learned_at:
                cli.build_context(*ASK, budget_tokens=1500)
        assert not (root / ".cortex" / "ledger.salience.sqlite").exists()
        assert not server.learned()
