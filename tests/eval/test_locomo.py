"""The LoCoMo harness: a session's date, its columns for a --k, and data with nothing to
score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.locomo import main, session_time


def test_a_session_date_reads_as_utc() -> None:
    """LoCoMo's session dates parse to epoch seconds (UTC); another form is no time."""
    assert session_time("1:56 pm on 8 May, 2023") == 1_683_554_160.0
    assert session_time("sometime in May") is None


SESSIONS = {
    "session_1": ["I adopted a puppy named Biscuit last week.", "A puppy! What breed is she?",
                  "A beagle, she loves the beach."],
    "session_2": ["We painted the kitchen yellow on Sunday.", "Yellow brightens a kitchen."],
}  # fmt: skip
DATES = {"session_1": "1:56 pm on 8 May, 2023", "session_2": "9:00 am on 20 June, 2023"}


def _conversation(qa: list[dict[str, object]]) -> dict[str, object]:
    conversation: dict[str, object] = {}
    for n, (session, texts) in enumerate(SESSIONS.items(), start=1):
        conversation[f"{session}_date_time"] = DATES[session]
        conversation[session] = [{"speaker": "AB"[i % 2], "dia_id": f"D{n}:{i + 1}", "text": t}
                                 for i, t in enumerate(texts)]  # fmt: skip
    return {"conversation": conversation, "qa": qa}


def test_k_below_ten_labels_its_columns_and_an_empty_category_shows_a_dash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--k 2 reports any@1, any@2, all@2 and session@2 (not @10 of two results); a
    category with no question shows "-" (null in --json), not 0.0."""
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_conversation([
        {"question": "What breed is Biscuit?", "category": 4, "evidence": ["D1:3"]},
        {"question": "What colour is the kitchen?", "category": 4, "evidence": ["D2:1"]},
    ])]))  # fmt: skip
    figures = tmp_path / "figures.json"
    argv = ["--data", str(data), "--dense", "none", "--k", "2", "--json", str(figures)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "| system | category | n | any@1 | any@2 | all@2 | session@2 |" in table
    assert "| memory | 1 multi-hop | 0 | - | - | - | - |" in table
    row = next(ln for ln in table.splitlines() if ln.startswith("| bm25 | 4 single-hop | 2 |"))
    cells = row.strip("|").split("|")[3:]
    assert len(cells) == 4 and all(float(c) >= 0 for c in cells)
    assert json.loads(figures.read_text())["memory"]["any@2"]["1"] is None


@pytest.mark.parametrize("qa", [[], [{"question": "Is it?", "category": 5, "answer": "no"}]])
def test_no_question_to_score_is_said_not_a_traceback(
    qa: list[dict[str, object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Data whose only questions are adversarial (no evidence), or none, exits 1 with a
    message instead of failing on an empty latency list."""
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_conversation(qa)]))
    assert main(["--data", str(data), "--dense", "none"]) == 1
    assert "no question to score" in capsys.readouterr().err
