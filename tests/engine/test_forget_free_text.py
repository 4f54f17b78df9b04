"""``forget`` reaches the free text of journal entries (a decision's rationale, a failure's
reason): stored as texts the records name by sha256, cut with ``[PURGED]`` where the
string stood while the chain still verifies; records written before, which hold such text
inline, still read as they did and are still named as out of reach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Config, SessionState, Tier, Workspace
from engine.cli import main
from indexers import sha256_text
from ledger import PURGED_MARK, JournalEntry, Ledger, RecordKind
from tests.engine.test_forget import _config, _holders, _repo

NEEDLE = "okapiwafer5512"  # a host name said only in a reason and a rationale
REASON = f"host {NEEDLE} was wrong"
RATIONALE = f"the {NEEDLE} host needs it"
ASK = "region shipping cost"  # like the attested intent ("shipping cost"), not the same


def _taught(ws: Workspace) -> str:
    """A failure with a reason holding the string, and a session decision whose rationale
    holds it; the replay key of the attested turn (whose prompt does not hold it)."""
    ws.index()
    pack = ws.build_context("delivery cost by region", "shipping cost")
    assert NEEDLE not in pack.render()
    ws.feedback(pack.replay_key, [1], outcome="failure", reason=REASON)
    session = ws.session("s1")
    session.add("user", "fix the shipping tariff")
    session.decide("keep the flat tariff", rationale=RATIONALE, evidence=["1"])
    return pack.replay_key


def _payloads(path: Path) -> list[tuple[int, str]]:
    """(seq, payload as JSON) of every journal entry of the ledger at ``path``."""
    with Ledger.open(path) as ledger:
        return [(r.seq, json.dumps(r.payload)) for r in ledger.records()
                if isinstance(r, JournalEntry)]  # fmt: skip


def test_forget_cuts_a_rationale_and_a_failure_reason(tmp_path: Path) -> None:
    """New records name the reason and the rationale by sha256 (no hashed payload holds
    them); the lane, the outcomes tier and the bundle show them as before; forget cuts
    both (none named as out of reach), they show [PURGED] where the string stood, no
    byte is left, the chain verifies, and replays are the prompts as recorded, marked
    only where the string stood."""
    root, state = _repo(tmp_path), tmp_path / "state"
    with Workspace.open(root, _config(tmp_path)) as ws:
        key = _taught(ws)
        with_lane = ws.build_context("shipping cost", "tariff", state=SessionState(session="s1"))
        assert f"because {RATIONALE}" in with_lane.render()
        assert all(NEEDLE not in p for _, p in _payloads(ws.ledger_path))
        assert ws.session("s1").step(2).rationale == RATIONALE
        assert f"because {RATIONALE}" in ws.session("s1").lane(2000).text
        (past,) = ws.outcomes("x", ASK, k=3)
        assert past.outcome == "failure" and past.reason == REASON
        bundle = ws.bundle(ASK, budget=4000)
        (outcome,) = [i for i in bundle.items if i.tier is Tier.OUTCOMES]
        assert outcome.title.startswith(f"failure ({REASON})")

        report = ws.forget(text=NEEDLE)

        assert report.ledger_chained == 0 and report.chained_seqs == []
        assert report.ledger_texts >= 3  # the reason, the rationale, the prompt with the lane
        cut = RATIONALE.replace(NEEDLE, PURGED_MARK)
        assert ws.session("s1").step(2).rationale == cut
        assert f"because {cut}" in ws.session("s1").lane(2000).text
        (past,) = ws.outcomes("x", ASK, k=3)
        assert past.reason == REASON.replace(NEEDLE, PURGED_MARK)
        bundle = ws.bundle(ASK, budget=4000)
        assert NEEDLE not in bundle.text and f"failure (host {PURGED_MARK} was wrong)" in (
            bundle.text
        )
        verify = ws.journal.verify(blobs=True)
        assert verify.ok and verify.purged == report.ledger_texts
        replay = ws.replay(key)
        assert not replay.purged and replay.text == ws.replay(key).text
        again = ws.replay(with_lane.replay_key)
        assert again.purged and again.text == with_lane.render().replace(NEEDLE, PURGED_MARK)
    assert _holders(state, NEEDLE) == []


def test_cli_forget_cuts_them_and_ledger_show_shows_what_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cortex forget --text-from FILE` names no record it could not cut; `ledger show`
    shows the attest's reason under ``reason`` (beside its sha256), then with [PURGED];
    `session show --lane` shows the cut rationale; `ledger verify` passes."""
    root, state = _repo(tmp_path), tmp_path / "state"
    monkeypatch.setenv("CORTEX_STATE_DIR", str(state))
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    secret = tmp_path / "secret.txt"
    secret.write_text(NEEDLE)
    where = ["--path", str(root)]
    with Workspace.open(root, Config.from_env()) as ws:
        key = _taught(ws)

    def attest() -> dict[str, object]:
        assert main(["ledger", "show", key, *where]) == 0
        later = json.loads(capsys.readouterr().out)["later"]
        (found,) = [r["payload"] for r in later if r.get("kind") == "salience"]
        assert isinstance(found, dict)
        return found

    capsys.readouterr()
    shown = attest()
    assert shown["reason"] == REASON and shown["reason_sha256"] == sha256_text(REASON)
    assert main(["forget", "--text-from", str(secret), *where]) == 0
    out = capsys.readouterr().out
    assert "removed" in out and "hashed record" not in out and NEEDLE not in out
    assert attest()["reason"] == REASON.replace(NEEDLE, PURGED_MARK)
    assert main(["session", "show", "--session", "s1", "--lane", "2000", *where]) == 0
    lane = capsys.readouterr().out
    assert f"because {RATIONALE.replace(NEEDLE, PURGED_MARK)}" in lane and NEEDLE not in lane
    assert main(["ledger", "verify", *where]) == 0
    assert _holders(state, NEEDLE) == []


def test_records_written_inline_still_read_and_are_named_as_out_of_reach(
    tmp_path: Path,
) -> None:
    """A decision and an attest written the way cortex wrote them before (the rationale
    and the reason inline in the hashed payload) read back as a new decision and attest
    of the same text do; forget cuts the new ones and names exactly the old ones by seq,
    which keep their text; the chain verifies."""
    root = _repo(tmp_path)
    with Workspace.open(root, _config(tmp_path)) as ws:
        ws.index()
        pack = ws.build_context("delivery cost by region", "shipping cost")
        turn = ws.journal.find(pack.replay_key)
        assert turn is not None
        session = ws.session("s1")
        session.add("user", "fix the shipping tariff")
        user, text = ws.journal.user, "keep the flat tariff"
        with Ledger.open(ws.ledger_path) as ledger:
            old_decision = ledger.append(RecordKind.SESSION, session.key, {
                "session": "s1", "user": user, "role": "decision",
                "text_sha256": ledger.put_text(text), "chars": len(text),
                "rationale": RATIONALE, "evidence": ["1"]})  # fmt: skip
            old_attest, _ = ledger.append_entries([
                (RecordKind.SALIENCE, turn.turn_id,
                 {"user": user, "intent": sha256_text("shipping cost"), "outcome": "failure",
                  "reason": REASON, "cited": [1], "dropped": 0, "stale": [], "items": []}),
                (RecordKind.WEIGHTS, turn.turn_id,
                 {"before": {}, "after": {}, "rate": 0.1, "skipped": True}),
            ])  # fmt: skip
        new = session.decide(text, rationale=RATIONALE, evidence=["1"])
        old = session.step(2)
        assert (old.role, old.text, old.rationale, old.evidence) == (
            new.role, new.text, new.rationale, new.evidence)  # fmt: skip
        lane = session.lane(2000).text
        assert lane.count(f"decision: {text} — because {RATIONALE} (evidence: 1)") == 2
        (past,) = ws.outcomes("x", ASK, k=3)
        assert past.reason == REASON

        report = ws.forget(text=NEEDLE)

        assert report.chained_seqs == [old_decision.seq, old_attest.seq]
        assert report.ledger_chained == 2
        steps = ws.session("s1").items()
        assert steps[1].rationale == RATIONALE  # the old record: as it was
        assert steps[2].rationale == RATIONALE.replace(NEEDLE, PURGED_MARK)
        (past,) = ws.outcomes("x", ASK, k=3)
        assert past.reason == REASON
        assert ws.journal.verify(blobs=True).ok


def test_a_forget_by_another_workspace_reaches_this_ones_warm_sessions_and_outcomes(
    tmp_path: Path,
) -> None:
    """A server keeps sessions and the outcomes tier warm; a forget made by another
    Workspace on the same state (as another process's `cortex forget` is) cut the string:
    the server's lane, step, outcomes and bundle no longer show it, without a restart."""
    root = _repo(tmp_path)
    with Workspace.open(root, _config(tmp_path)) as server:
        _taught(server)
        assert f"because {RATIONALE}" in server.session("s1").lane(2000).text
        (past,) = server.outcomes("x", ASK, k=3)
        assert past.reason == REASON  # both warm now
        with Workspace.open(root, _config(tmp_path)) as other:
            assert other.forget(text=NEEDLE).ledger_texts >= 2
        assert NEEDLE not in server.session("s1").lane(2000).text
        assert server.session("s1").step(2).rationale == RATIONALE.replace(NEEDLE, PURGED_MARK)
        (past,) = server.outcomes("x", ASK, k=3)
        assert past.reason == REASON.replace(NEEDLE, PURGED_MARK)
        assert NEEDLE not in server.bundle(ASK, budget=4000).text
