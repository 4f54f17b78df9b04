"""The cold-start bundle: tiers, deduplication, one trim by salience, overflow, purity."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Config, ConfigError, SessionState, Workspace, WorkspaceClosedError
from engine.core import BundleItem, MemoryStateError, Tier
from engine.memory import SalienceTables
from engine.packing import fit_bundle
from indexers import TiktokenCounter
from tests.engine.test_workspace import make_repo

CONFIG = Config(dense_model="hash")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """An indexed repository with an AGENTS.md and a CONTRIBUTING guide."""
    root = make_repo(tmp_path / "repo")
    (root / "AGENTS.md").write_text("# Rules\n\nRun the tests with `make test` before a commit.\n")
    (root / "CONTRIBUTING.md").write_text(
        "# Contributing\n\n## Hooks\n\nEvery hook needs a test.\n\n## Releases\n\nTag them.\n"
    )
    workspace = Workspace.open(root, CONFIG)
    workspace.index()
    return workspace


def test_bundle_has_each_tier_and_fits(ws: Workspace) -> None:
    """Pinned rules and state, an earlier outcome, and code for the goal, under budget."""
    pack = ws.build_context("Fix the hook registry", "register_hook event", budget_tokens=1500)
    hooks = next(s.id for s in pack.citations if s.source_uri.startswith("hooks.py"))
    ws.feedback(pack.replay_key, [hooks], outcome="success")
    state = SessionState(constraints=("never touch mod0.py",), subgoals=("add a hook test",))
    bundle = ws.bundle("register a new hook type", ["hooks.py"], 3000, state=state)
    tiers = {i.tier for i in bundle.items}
    assert tiers == {Tier.PINNED, Tier.OUTCOMES, Tier.FRAME}
    uris = [i.uri for i in bundle.items]
    assert "AGENTS.md" in uris and "CONTRIBUTING.md#section-2" in uris
    assert "CONTRIBUTING.md#section-3" not in uris  # releases: nothing to do with the goal
    assert any(u.startswith("hooks.py#") for u in uris)
    assert TiktokenCounter(CONFIG.encoding).count(bundle.render()) <= 3000
    assert bundle.tokens_used <= 3000 and bundle.latency_ms > 0
    assert "never touch mod0.py" in bundle.render()


def test_a_small_budget_keeps_pinned_first_and_names_the_rest(ws: Workspace) -> None:
    """Under pressure the pinned items survive, the rest become overflow uris."""
    bundle = ws.bundle("register a new hook type", budget=120)
    kept = {i.uri for i in bundle.items}
    assert {"AGENTS.md", "CONTRIBUTING.md#section-2"} <= kept
    assert bundle.overflow and len(bundle.overflow) <= 64
    assert not {"AGENTS.md", "CONTRIBUTING.md#section-2"} & set(bundle.overflow)
    assert bundle.tokens_used <= 120


def test_fit_keeps_one_item_and_dedupes_by_tier() -> None:
    """A duplicate uri keeps its pinned copy; one item larger than the budget is shortened
    and says where the whole is."""
    counter = TiktokenCounter(CONFIG.encoding)
    items = [BundleItem(Tier.FRAME, "a.py#L1-L2", "a", "x = 1", 0.5),
             BundleItem(Tier.PINNED, "a.py#L1-L2", "a", "x = 1", 0.9)]  # fmt: skip
    kept, _, _, _ = fit_bundle("g", items, 200, counter)
    assert [i.tier for i in kept] == [Tier.PINNED]
    big = [BundleItem(Tier.FRAME, "big.py", "big", "\n".join(f"line {n}" for n in range(500)), 0.4)]
    kept, overflow, text, tokens = fit_bundle("g", big, 100, counter)
    assert len(kept) == 1 and "shortened to fit" in text and tokens <= 100 and not overflow


def test_bundle_is_a_pure_read_with_the_same_bytes(ws: Workspace) -> None:
    """Repeated bundles give the same bytes and change neither ledger nor salience."""
    pack = ws.build_context("Fix the hook registry", "register_hook event", budget_tokens=1500)
    ws.feedback(pack.replay_key, [1], outcome="success")
    tables = SalienceTables(ws.ledger_path.with_suffix(".salience.sqlite"))
    head, dump = ws.journal.head(), tables.dump()
    first = ws.bundle("hook registry", ["Session.register_hook"])
    for _ in range(5):
        assert ws.bundle("hook registry", ["Session.register_hook"]).render() == first.render()
    assert ws.journal.head() == head and tables.dump() == dump


def test_bundle_errors_are_clear(ws: Workspace) -> None:
    """An empty goal, a budget over 4,000 and too many objects are refused."""
    with pytest.raises(ConfigError, match="goal"):
        ws.bundle("  ")
    with pytest.raises(ConfigError, match="4,000"):
        ws.bundle("x", budget=4001)
    with pytest.raises(ConfigError, match="objects"):
        ws.bundle("x", [f"o{n}" for n in range(65)])


def test_bundle_notes_are_the_two_searches_of_the_goal(ws: Workspace) -> None:
    """Saved notes reach the bundle as the goal's two note searches rank them: identity,
    constraint and goal notes pinned, the best notes of any type as frame-relevant."""
    ws.memory.save("You maintain the hook registry.", "identity")
    ws.memory.save("Never rename a hook event once released.", "constraint")
    ws.memory.save("Hooks run in registration order", "pattern",
                   what="the hook registry keeps order")  # fmt: skip
    goal = "register a new hook type"
    bundle = ws.bundle(goal, ["hooks.py"], 4000)
    kinds = ["identity", "constraint", "goal"]
    pinned = {h.uri for h in ws.memory.search(goal, 8, types=kinds)}
    frame = {h.uri for h in ws.memory.search(goal, 4)} - pinned
    shown = {i.uri: i.tier for i in bundle.items if i.uri.startswith("memory:")}
    assert pinned and frame
    assert {u for u, t in shown.items() if t is Tier.PINNED} == pinned
    assert {u for u, t in shown.items() if t is Tier.FRAME} == frame


def test_a_notes_error_reaches_the_caller(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """A note store that fails while the code is ranked fails the bundle with its error."""
    ws.memory.save("You maintain the hook registry.", "identity")

    def broken(self: object, query: str) -> None:
        raise MemoryStateError("the memory store is damaged")

    monkeypatch.setattr("engine.memory.Memory.pool", broken)
    with pytest.raises(MemoryStateError, match="damaged"):
        ws.bundle("register a new hook type")


def test_closing_stops_the_note_readers_and_a_reopened_workspace_bundles_alike(
    ws: Workspace,
) -> None:
    """Closing stops the bundle's note reader threads; the closed workspace refuses a
    bundle, and the folder opened again bundles the same bytes."""
    ws.memory.save("You maintain the hook registry.", "identity")
    first = ws.bundle("register a new hook type").render()
    readers = ws._learning._readers
    assert readers is not None
    threads = list(readers._threads)
    ws.close()
    assert threads and not any(t.is_alive() for t in threads)
    with pytest.raises(WorkspaceClosedError):
        ws.bundle("register a new hook type")
    with Workspace.open(ws.root, CONFIG) as again:
        assert again.bundle("register a new hook type").render() == first
