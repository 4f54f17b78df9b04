"""The question-set runner's scoring: primary answer in the context, coverage, relevance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.questions import DEFAULT_QUESTIONS, Answer, Question, load_questions, score_pack

Q = Question(
    "x-01", "o/r", "0" * 40, "python", "where", "where is the thing done?",
    (Answer("a.py", 10, 29, True), Answer("b.py", 1, 10, False)),
)  # fmt: skip


def test_primary_needs_half_of_its_lines_or_fifteen() -> None:
    """Half of a short primary range, or 15 lines of a long one, count as in the context."""
    assert score_pack(Q, [("a.py", 10, 19)])["primary_in"]
    assert not score_pack(Q, [("a.py", 10, 18)])["primary_in"]
    long = Question("x-02", "o/r", "0" * 40, "c", "how", "q", (Answer("a.py", 1, 200, True),))
    assert score_pack(long, [("a.py", 50, 64)])["primary_in"]


def test_coverage_relevance_and_file() -> None:
    """Coverage counts answer lines held once; relevance is the share of snippets touching
    an answer; the primary's file counts when any of its lines is cited."""
    got = score_pack(Q, [("a.py", 25, 40), ("a.py", 28, 35), ("c.py", 1, 5), ("b.py", 1, 2)])
    assert got["coverage"] == pytest.approx((5 + 2) / 30)
    assert got["relevant"] == pytest.approx(3 / 4)
    assert got["file_cited"] and got["snippets"] == 4
    assert score_pack(Q, [])["relevant"] is None


def test_the_shipped_questions_are_well_formed() -> None:
    """The shipped set: >= 30 questions, >= 5 repositories and languages, every kind, one
    primary answer each, pinned commits and sane line ranges."""
    questions = load_questions(DEFAULT_QUESTIONS)
    assert len(questions) >= 30
    assert len({q.repo for q in questions}) >= 5 and len({q.language for q in questions}) >= 5
    assert {q.kind for q in questions} == {"where", "why", "how", "config", "docs", "tests"}
    assert len({q.id for q in questions}) == len(questions)
    for q in questions:
        assert len(q.commit) == 40 and q.primary in q.answers
        assert all(1 <= a.start_line <= a.end_line for a in q.answers)


def test_load_refuses_two_primaries(tmp_path: Path) -> None:
    """A question must mark exactly one answer primary."""
    row = {"id": "y", "repo": "o/r", "commit": "0" * 40, "language": "go", "kind": "where",
           "question": "q", "answers": [{"path": "a", "start_line": 1, "end_line": 2,
                                         "primary": True}] * 2}  # fmt: skip
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="exactly one"):
        load_questions(path)
