"""Learning from outcomes: attest rules, the journaled pair, replay from empty, the rate
limit, clear errors, salience and learned weights in ranking, and pure read paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Config, ConfigError, FailureReason, RateLimitedError, Workspace
from engine.core import FAULT_REASONS, LearnSettings, Outcome
from engine.memory import (
    FeatureRow,
    SalienceState,
    SalienceTables,
    TokenBucket,
    check_attest,
    ema_step,
    item_changes,
)
from ledger import JournalEntry, Ledger, RecordKind
from tests.engine.test_workspace import make_repo

CONFIG = Config(dense_model="hash")
GOAL, QUERY = "Fix the hook registry", "register_hook event"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """An indexed repository."""
    workspace = Workspace.open(make_repo(tmp_path / "repo"), CONFIG)
    workspace.index()
    return workspace


def _hooks_id(ws: Workspace, query: str = QUERY, budget: int = 1500) -> tuple[str, int]:
    """A turn citing hooks.py (another ``budget``: another turn of the same intent)."""
    pack = ws.build_context(GOAL, query, budget_tokens=budget)
    cited = next(s.id for s in pack.citations if s.source_uri.startswith("hooks.py"))
    return pack.replay_key, cited


def _taught(ws: Workspace) -> tuple[str, list[int]]:
    """A success worth learning from: hooks.py's snippet and the pack's last one cited, so
    uncited candidates ranked above a cited one (weights only move on such pairs)."""
    pack = ws.build_context(GOAL, QUERY, budget_tokens=1500)
    cited = next(s.id for s in pack.citations if s.source_uri.startswith("hooks.py"))
    return pack.replay_key, sorted({cited, pack.citations[-1].id})


def _items(ws: Workspace) -> dict[str, tuple[int, int, str]]:
    state = SalienceTables(ws.ledger_path.with_suffix(".salience.sqlite")).load()
    return {k: (i.citations, i.accesses, i.last_used) for k, i in state.items.items()}


def test_success_attests_file_folder_and_symbol_as_a_pair(ws: Workspace) -> None:
    """success: +1 citation and access for the file, folder and symbol; attest at N,
    weights at N+1, and the chain verifies."""
    key, cited = _hooks_id(ws)
    ws.feedback(key, [cited], outcome="success")
    items = _items(ws)
    assert items["file:hooks.py"][:2] == (1, 1) and items["dir:."][:2] == (1, 1)
    assert any(k.startswith("symbol:hooks.py#") for k in items)
    with Ledger.open(ws.ledger_path) as ledger:
        records = list(ledger.records())
        assert ledger.verify(blobs=True).ok
    attest, weights = records[-2:]
    assert attest.kind is RecordKind.SALIENCE and weights.kind is RecordKind.WEIGHTS
    assert weights.seq == attest.seq + 1
    assert isinstance(weights, JournalEntry) and isinstance(weights.payload, dict)
    assert set(weights.payload) == {"before", "after", "rate", "skipped"}
    assert ws.learned().salience["file:hooks.py"] > 0


def test_faulted_failure_takes_a_citation_back_to_a_floor_of_zero(ws: Workspace) -> None:
    """factual_error / wrong_assumption: -1 citation, never below 0; accesses stay."""
    for budget, outcome, reason in ((1500, "success", None), (1501, "failure", "factual_error"),
                                    (1502, "failure", "wrong_assumption")):  # fmt: skip
        key, cited = _hooks_id(ws, budget=budget)
        ws.feedback(key, [cited], outcome=outcome, reason=reason)
    assert _items(ws)["file:hooks.py"][:2] == (0, 1)
    assert "file:hooks.py" not in ws.learned().salience


def test_a_known_reason_is_known_however_it_is_written_and_success_takes_none(
    ws: Workspace,
) -> None:
    """"Wrong_Assumption", " wrong-assumption " and FailureReason.FACTUAL_ERROR take the
    citation back as the canonical words do (a typo of case silently did not), and are
    journaled canonical; a reason given with success is refused, nothing recorded."""
    for budget, reason in ((1500, None), (1501, "Wrong_Assumption"), (1502, " factual-error "),
                           (1503, None), (1504, FailureReason.WRONG_ASSUMPTION)):  # fmt: skip
        key, cited = _hooks_id(ws, budget=budget)
        ws.feedback(key, [cited], outcome="failure" if reason else "success", reason=reason)
        if reason:
            assert _items(ws)["file:hooks.py"][0] == 0, reason
    reasons = [ws.journal.free_text(r.payload, "reason") for r in ws.journal.learning_records(0)
               if r.kind is RecordKind.SALIENCE]  # fmt: skip
    assert reasons == [None, "wrong_assumption", "factual_error", None, "wrong_assumption"]
    key, cited = _hooks_id(ws, budget=1505)
    head = ws.journal.head()
    with pytest.raises(ConfigError, match="success takes no reason"):
        ws.feedback(key, [cited], outcome="success", reason="factual_error")
    assert ws.journal.head() == head
    assert {r.value for r in FailureReason} == FAULT_REASONS


def test_other_failure_changes_no_count_but_touches_and_journals(ws: Workspace) -> None:
    """A failure for another reason keeps counts, touches last-used, and still writes the
    pair, with the weight update marked skipped."""
    key, cited = _hooks_id(ws)
    head = ws.journal.head()[0]
    ws.feedback(key, [cited], outcome="failure", reason="flaky_test")
    assert _items(ws)["file:hooks.py"][:2] == (0, 0) and _items(ws)["file:hooks.py"][2]
    records = ws.journal.learning_records(head)
    assert [r.kind for r in records] == [RecordKind.SALIENCE, RecordKind.WEIGHTS]
    assert isinstance(records[1].payload, dict) and records[1].payload["skipped"] is True


def test_replay_from_empty_rebuilds_the_tables_bit_for_bit(ws: Workspace) -> None:
    """Folding every pair from an empty state gives exactly the tables feedback wrote."""
    for query, outcome, reason in [(QUERY, "success", None), ("hook event", "success", None),
                                   (QUERY, "failure", "wrong_assumption"),
                                   ("compute value", "success", None)]:  # fmt: skip
        key, cited = _hooks_id(ws, query)
        ws.feedback(key, [cited, 2], outcome=outcome, reason=reason)
    live = SalienceTables(ws.ledger_path.with_suffix(".salience.sqlite")).dump()
    again = SalienceTables(ws.state_dir / "again.sqlite")
    again.catch_up(ws.journal.learning_records(0))
    state = SalienceState()
    for record in ws.journal.learning_records(0):
        state.apply(record)
    assert again.dump() == live == state.dump()
    assert '"weights":{}' not in live  # the weights did move


def test_errors_are_clear_and_leave_no_trace(ws: Workspace) -> None:
    """No citations, over 256, an unknown outcome, a reason without an outcome: a
    ConfigError naming it, and the ledger untouched."""
    key, cited = _hooks_id(ws)
    head = ws.journal.head()
    with pytest.raises(ConfigError, match="at least one citation"):
        ws.feedback(key, [], outcome="success")
    with pytest.raises(ConfigError, match=r"at least one citation .*none of \['x', '999'\]"):
        ws.feedback(key, ["x", 999], outcome="success")  # none of them the turn's
    with pytest.raises(ConfigError, match="model_citations has over 256 items"):
        ws.feedback(key, [1] * 257, outcome="success")
    with pytest.raises(ConfigError, match="unknown outcome 'meh'"):
        ws.feedback(key, [cited], outcome="meh")
    with pytest.raises(ConfigError, match="reason goes with an outcome"):
        ws.feedback(key, [cited], reason="factual_error")
    with pytest.raises(ConfigError, match="intent"):
        check_attest("success", None, "  ", 1)
    assert ws.journal.head() == head


def test_rate_limit_per_actor_and_intent_rejects_without_side_effect(ws: Workspace) -> None:
    """Five attests at once pass, the sixth is refused with nothing recorded; another
    intent has its own bucket."""
    turns = [_hooks_id(ws, budget=1500 + i) for i in range(6)]  # one intent, six turns
    for key, cited in turns[:5]:
        ws.feedback(key, [cited], outcome="success")
    head, tables = ws.journal.head(), _items(ws)
    with pytest.raises(RateLimitedError) as err:
        ws.feedback(turns[5][0], [turns[5][1]], outcome="success")
    assert err.value.retry_after > 0
    assert ws.journal.head() == head and _items(ws) == tables
    other, cited2 = _hooks_id(ws, "hook event registry")
    ws.feedback(other, [cited2], outcome="success")


def test_token_bucket_refills_at_its_rate() -> None:
    """1 a second, burst 5: the sixth waits a second; a refused take spends nothing."""
    now = [0.0]
    bucket = TokenBucket(clock=lambda: now[0])
    for _ in range(5):
        bucket.take(("u", "i"))
    with pytest.raises(RateLimitedError) as err:
        bucket.take(("u", "i"))
    assert err.value.retry_after == pytest.approx(1.0)
    now[0] = 1.0
    bucket.take(("u", "i"))
    with pytest.raises(RateLimitedError):
        bucket.take(("u", "i"))
    now[0] = 1.5
    with pytest.raises(RateLimitedError) as err:
        bucket.take(("u", "i"))
    assert err.value.retry_after == pytest.approx(0.5)


def test_concurrent_attests_past_the_burst_write_nothing(ws: Workspace) -> None:
    """Forty attests of one intent at once: as many pass as the burst allows, and every
    refused one left no feedback, attest or weights record behind."""
    import threading

    turns = [_hooks_id(ws, budget=1500 + i) for i in range(40)]  # one intent, forty turns
    head = ws.journal.head()[0]
    barrier = threading.Barrier(40)
    passed: list[int] = []
    refused: list[int] = []

    def attest(key: str, cited: int) -> None:
        barrier.wait()
        try:
            ws.feedback(key, [cited], outcome="success")
            passed.append(1)
        except RateLimitedError:
            refused.append(1)

    threads = [threading.Thread(target=attest, args=turn) for turn in turns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(passed) == 5 and len(refused) == 35  # burst 5, none refilled in the test
    with Ledger.open(ws.ledger_path) as ledger:
        kinds = [r.kind for r in ledger.records() if r.seq > head]
    assert kinds.count(RecordKind.FEEDBACK) == 5 and kinds.count(RecordKind.SALIENCE) == 5
    assert kinds.count(RecordKind.WEIGHTS) == 5


def test_ema_moves_toward_the_cited_features_within_bounds() -> None:
    """Success moves an offset toward cited minus uncited when an uncited candidate was
    ranked above a cited one; a failure, faulted or not, or a turn with nothing uncited is
    skipped; the bound holds."""
    cited = [FeatureRow("a.py", 1, 2, "", (("source", 1.0), ("size", 0.2)), rank=1)]
    uncited = [FeatureRow("b.md", 1, 2, "", (("source", 0.0), ("size", 0.8)), rank=0)]
    settings = LearnSettings(rate=0.5, bound=0.6, gain=2.0)
    after, skipped = ema_step({}, cited, uncited, Outcome.SUCCESS, None, settings)
    assert not skipped and after["source"] == 0.6 and after["size"] == pytest.approx(-0.6)
    above = [FeatureRow("a.py", 1, 2, "", (("source", 1.0), ("size", 0.2)), rank=0)]
    below = [FeatureRow("b.md", 1, 2, "", (("source", 0.0), ("size", 0.8)), rank=1)]
    for reason in ("factual_error", "wrong_assumption"):  # counts move, weights do not
        assert ema_step({"x": 0.1}, above, below, Outcome.FAILURE, reason, settings) == (
            {"x": 0.1}, True)
    same, skipped = ema_step({"x": 0.1}, cited, uncited, Outcome.FAILURE, "timeout", settings)
    assert skipped and same == {"x": 0.1}
    assert ema_step({}, cited, [], Outcome.SUCCESS, None, settings)[1]


def test_a_turn_ranked_right_teaches_the_weights_nothing() -> None:
    """Success with every cited candidate above every uncited one leaves the offsets as
    they were (skipped)."""
    settings = LearnSettings(rate=0.5, bound=0.6, gain=2.0)
    top = [FeatureRow("a.py", 1, 2, "", (("source", 1.0),), rank=0)]
    rest = [FeatureRow("b.md", 1, 2, "", (("source", 0.0),), rank=1),
            FeatureRow("c.md", 1, 2, "", (("source", 0.2),), rank=2)]  # fmt: skip
    assert ema_step({"x": 0.1}, top, rest, Outcome.SUCCESS, None, settings) == ({"x": 0.1}, True)
    low = [FeatureRow("a.py", 1, 2, "", (("source", 1.0),), rank=3)]
    assert ema_step({}, low, rest, Outcome.FAILURE, "wrong_assumption", settings) == ({}, True)
    assert item_changes(Outcome.FAILURE, "timeout", ["k"]) == [("k", 0, 0)]


def test_salience_and_learned_weights_are_named_features(ws: Workspace) -> None:
    """After a success the cited file's sections carry a salience contribution (what
    --explain shows), and the learned offsets a learned one."""
    key, cited = _taught(ws)
    ws.feedback(key, cited, outcome="success")
    hits = ws.search("hook", k=5)
    features = {c.feature for h in hits if h.chunk.path == "hooks.py" for c in h.contributions}
    assert "salience" in features
    assert ws.learned().weights  # cited hooks.py differs from the uncited candidates
    assert any(c.feature == "learned" for h in hits for c in h.contributions)


def test_read_paths_never_change_the_ledger_or_salience(ws: Workspace) -> None:
    """build_context (unrecorded), search and search_files leave the ledger head and the
    tables as they were; a recorded build_context adds a turn, never an attest."""
    key, cited = _hooks_id(ws)
    ws.feedback(key, [cited], outcome="success")
    tables = SalienceTables(ws.ledger_path.with_suffix(".salience.sqlite"))
    head, dump = ws.journal.head(), tables.dump()
    ws.build_context(GOAL, QUERY, budget_tokens=1500, record=False)
    ws.search(QUERY, k=5)
    ws.search_files(QUERY, k=3)
    assert ws.journal.head() == head and tables.dump() == dump
    ws.build_context(GOAL, "compute value", budget_tokens=1500)
    assert ws.journal.learning_records(head[0]) == [] and tables.dump() == dump


def test_a_fresh_process_learns_from_a_recorded_turn(ws: Workspace) -> None:
    """Feedback from another Workspace (no features in memory) ranks the turn again and
    learns the same way."""
    key, cited = _taught(ws)
    with Workspace.open(ws.root, CONFIG) as other:
        other.feedback(key, cited, outcome="success")
        assert other.learned().weights
    assert ws.learned().salience["file:hooks.py"] > 0


def test_outcomes_tier_lists_similar_earlier_intents_with_their_end(ws: Workspace) -> None:
    """outcomes ranks earlier attested intents by likeness, with their citations and
    outcome; the request's own intent is left out; a pure read."""
    key, cited = _hooks_id(ws)
    ws.feedback(key, [cited], outcome="success")
    pack = ws.build_context("Compute", "compute_3 value offset", budget_tokens=1500)
    ws.feedback(pack.replay_key, [1], outcome="failure", reason="factual_error")
    head = ws.journal.head()
    found = ws.outcomes("Fix hooks", "register a hook for an event", k=3)
    assert found[0].intent == QUERY and found[0].outcome == "success"
    assert found[0].cited and found[0].cited[0].startswith("hooks.py")
    other = ws.outcomes("x", "compute_3 offset value", k=1)
    assert other[0].outcome == "failure" and other[0].reason == "factual_error"
    assert all(p.intent != QUERY for p in ws.outcomes("x", QUERY, k=3))
    assert ws.journal.head() == head
    with pytest.raises(ConfigError):
        ws.outcomes("x", "y", k=11)


def test_a_turn_teaches_once_however_often_its_outcome_is_sent(ws: Workspace) -> None:
    """A retried call (HTTP, a looping agent) counted again each time: eight successes of
    one turn stepped the weights eight times. The same outcome again now records nothing
    and says `repeated`; another outcome for the turn is refused; a new turn teaches."""
    key, cited = _taught(ws)
    first = ws.feedback(key, cited, outcome="success")
    head, tables, learned = ws.journal.head(), _items(ws), ws.learned()
    for _ in range(3):
        again = ws.feedback(key, list(reversed(cited)), outcome="success")
        assert again.repeated and sorted(again.valid) == sorted(first.valid)
        assert not first.repeated
    assert ws.journal.head() == head and _items(ws) == tables and ws.learned() == learned
    with pytest.raises(ConfigError, match="outcome was given already"):
        ws.feedback(key, cited, outcome="failure")
    with pytest.raises(ConfigError, match="outcome was given already"):
        ws.feedback(key, cited[:1], outcome="success")
    assert ws.journal.head() == head
    ws.feedback(key, cited)  # citations without an outcome are still recorded
    assert ws.journal.head() != head
    later, cited2 = _taught(ws)
    assert not ws.feedback(later, cited2, outcome="success").repeated


def test_a_cited_note_in_a_success_counts_an_access(ws: Workspace) -> None:
    """Citing a memory note in a turn that succeeded changed nothing a user could see."""
    saved = ws.memory.save("register_hook keeps hooks in a registry", "pattern",
                           what="register_hook event registry")  # fmt: skip
    before = ws.memory.store.rows([saved.id])[saved.id][15]
    pack = ws.build_context(GOAL, QUERY, budget_tokens=1500)
    note = next(s.id for s in pack.citations if s.source_uri == f"memory:{saved.id}")
    ws.feedback(pack.replay_key, [note], outcome="success")
    assert ws.memory.store.rows([saved.id])[saved.id][15] == before + 1


def test_concurrent_retries_of_one_turn_record_one_attest(ws: Workspace) -> None:
    """Forty threads sending one turn's outcome at once (a client's retries): one attest
    and one weights record, the other thirty-nine answered as repeats."""
    import threading

    key, cited = _hooks_id(ws)
    head = ws.journal.head()[0]
    barrier = threading.Barrier(40)
    repeated: list[bool] = []

    def attest() -> None:
        barrier.wait()
        repeated.append(ws.feedback(key, [cited], outcome="success").repeated)

    threads = [threading.Thread(target=attest) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(repeated) == [False] + [True] * 39
    with Ledger.open(ws.ledger_path) as ledger:
        kinds = [r.kind for r in ledger.records() if r.seq > head]
    assert kinds.count(RecordKind.SALIENCE) == 1 and kinds.count(RecordKind.WEIGHTS) == 1


def test_reset_forgets_what_was_learned_and_keeps_the_trail(ws: Workspace) -> None:
    """No command undid learning (stop 44's review): ``reset_learned`` folds salience and
    offsets to none as one journaled pair (with its reason, scrubbed), rebuilds the same
    from empty, keeps the outcomes tier and earlier turns' replays, and learning starts
    again from zero; a second reset, with nothing learned, records nothing."""
    key, cited = _taught(ws)
    ws.feedback(key, cited, outcome="success")
    learned = ws.learned()
    assert learned.weights and learned.salience
    head = ws.journal.head()[0]
    secret = "DB_PASSWORD=Xk29vQ7pLm2sRt"
    gone = ws.reset_learned(f"bad habit {secret}")
    assert gone == learned and not ws.learned() and ws.learned().digest == ""
    records = ws.journal.learning_records(head)
    assert [r.kind for r in records] == [RecordKind.SALIENCE, RecordKind.WEIGHTS]
    assert all(r.turn_id is None for r in records)
    assert isinstance(records[0].payload, dict) and records[0].payload["reset"] is True
    said = ws.journal.free_text(records[0].payload, "reason")
    assert said is not None and "bad habit" in said and "Xk29vQ7pLm2sRt" not in said
    assert "bad habit" not in str(records[0].payload)  # a stored text: forget can cut it
    assert all(c == 0 for c, _, _ in _items(ws).values())  # accesses stay: they happened
    state = SalienceState()
    for record in ws.journal.learning_records(0):
        state.apply(record)
    assert state.learned() == ws.learned()
    with Ledger.open(ws.ledger_path) as ledger:
        assert ledger.verify(blobs=True).ok
    assert ws.replay(key).text  # an earlier turn still replays
    assert ws.outcomes("Fix hooks", "register a hook for an event")  # history stays
    assert ws.reset_learned() == type(learned)() and ws.journal.head()[0] == head + 2
    key, cited = _hooks_id(ws, budget=1501)
    ws.feedback(key, [cited], outcome="success")
    assert ws.learned().salience["file:hooks.py"] == pytest.approx(1 / 3)  # one citation


def test_reset_refuses_a_bad_reason_before_recording(ws: Workspace) -> None:
    key, cited = _hooks_id(ws)
    ws.feedback(key, [cited], outcome="success")
    head = ws.journal.head()
    for reason in (7, "x" * (200 << 10)):
        with pytest.raises(ConfigError, match="reason"):
            ws.reset_learned(reason)  # type: ignore[arg-type]
    assert ws.journal.head() == head and ws.learned()


_ATTEST = """
import sys, time
from pathlib import Path
from engine import Config, Workspace
root, key, cited, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
with Workspace.open(Path(root), Config(dense_model="hash")) as ws:
    while not go.exists():
        time.sleep(0.001)
    print(ws.feedback(key, [cited], outcome="success").repeated)
"""


def test_processes_sending_one_turns_outcome_at_once_record_one_attest(
    ws: Workspace, tmp_path: Path
) -> None:
    """Three processes (no features in memory: each ranks the turn again, a wide window)
    released at once on one turn: one attest and one weights record, two repeats."""
    import subprocess
    import sys
    import time

    key, cited = _hooks_id(ws)
    head = ws.journal.head()[0]
    go = tmp_path / "go"
    argv = [sys.executable, "-c", _ATTEST, str(ws.root), key, str(cited), str(go)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    time.sleep(3)  # each has opened its workspace and waits
    go.touch()
    said = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert [p.returncode for p in procs] == [0, 0, 0] and said == ["False", "True", "True"]
    with Ledger.open(ws.ledger_path) as ledger:
        kinds = [r.kind for r in ledger.records() if r.seq > head]
    assert kinds.count(RecordKind.SALIENCE) == kinds.count(RecordKind.WEIGHTS) == 1
    assert kinds.count(RecordKind.FEEDBACK) == 1
