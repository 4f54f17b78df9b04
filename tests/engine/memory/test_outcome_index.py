"""The outcomes tier's index against a plain reference: BM25 over every earlier intent, one
intent at a time, plus the rank of the files it cited."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest

from engine.memory import Journal, OutcomeIndex
from engine.segment import code_terms
from indexers import sha256_text
from ledger import Ledger, RecordKind, SnippetRef, TurnDraft

_WORDS = ("parser", "release", "hook", "register", "event", "json", "decode", "error",
          "cache", "token", "offset", "value", "stream", "header", "mail")  # fmt: skip
_FILES = ("json/decoder.py", "json/encoder.py", "email/parser.py", "http/client.py",
          "logging/config.py", "urllib/parse.py")  # fmt: skip
_K1, _B = 1.2, 0.75


def _intents(n: int) -> list[tuple[str, str]]:
    """``n`` intents (text, cited file) drawn from a fixed rule: overlapping words, repeats."""
    out = []
    for i in range(n):
        words = [_WORDS[(i * j + i // 3) % len(_WORDS)] for j in range(1, 2 + i % 5)]
        out.append((" ".join(words) + f" step{i % 7}", _FILES[(i * 5) % len(_FILES)]))
    return out


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[str, str]]]:
    path = tmp_path_factory.mktemp("outcomes") / "ledger.sqlite"
    intents = _intents(60)
    with Ledger.open(path) as ledger:
        for n, (intent, cited) in enumerate(intents):
            body = {"budget": 3000, "constraints": [], "goal": intent, "query": intent,
                    "recent_turns": [], "subgoals": [], "tool_signals": []}  # fmt: skip
            inputs = ledger.put_text(json.dumps(body, sort_keys=True, separators=(",", ":")))
            snippet = ledger.put_text(f"snippet {n}")
            turn = ledger.append_turn(TurnDraft(
                turn_id=uuid.uuid4().hex, goal_ref=sha256_text(intent), tokens_used=10,
                budget=3000, replay_key=f"k{n:04d}", render_sha256=ledger.put_text(f"r{n}"),
                inputs_sha256=inputs,
                snippets=(SnippetRef(1, f"{cited}#L1-L2", 1, 2, snippet, "", "bm25"),),
            ))  # fmt: skip
            ledger.append_entries([
                (RecordKind.SALIENCE, turn.turn_id,
                 {"user": "", "intent": sha256_text(intent), "outcome": "success",
                  "reason": None, "cited": [1], "dropped": 0, "stale": [], "items": []}),
                (RecordKind.WEIGHTS, turn.turn_id,
                 {"before": {}, "after": {}, "rate": 0.1, "skipped": False}),
            ])  # fmt: skip
    return path, intents


def _reference(intents: list[tuple[str, str]], text: str, top: list[str], exclude: str
               ) -> list[tuple[str, float]]:  # fmt: skip
    """(intent, score) best first: the latest of each intent, scored one at a time."""
    latest = {intent: (at, cited) for at, (intent, cited) in enumerate(intents)}
    terms = {i: code_terms(i).split() for i in latest}
    n = len(latest)
    avg = sum(len(t) for t in terms.values()) / n
    query = set(code_terms(text).split())
    df = {t: sum(1 for ws in terms.values() if t in ws) for t in query}
    lexical = {}
    for intent, words in terms.items():
        score = 0.0
        for t in query:
            tf = words.count(t)
            if tf:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * len(words) / avg))
        lexical[intent] = score
    lexical.pop(exclude, None)
    best = max(lexical.values(), default=0.0) or 1.0
    scored = []
    for intent, lex in lexical.items():
        at, cited = latest[intent]
        near = 1.0 / (1 + top.index(cited)) if cited in top else 0.0
        score = lex / best + near
        if score > 0:
            scored.append((-score, -at, intent))
    return [(intent, -s) for s, _, intent in sorted(scored)]


@pytest.mark.parametrize(
    ("text", "top"),
    [("register a hook for the parser", []), ("json decode error", ["json/decoder.py"]),
     ("mail header stream step3", ["email/parser.py", "http/client.py"]),
     ("nothing matches here", ["urllib/parse.py"]), ("cache token offset value", _FILES)],
)  # fmt: skip
def test_rank_matches_the_reference(
    filled: tuple[Path, list[tuple[str, str]]], text: str, top: list[str]
) -> None:
    """The index ranks (and scores) the earlier intents as the plain reference does, with
    the request's own intent left out."""
    path, intents = filled
    index = OutcomeIndex(code_terms)
    journal = Journal(path)
    try:
        index.update(journal)
        exclude = intents[3][0]
        got = index.rank(text, top, 10, exclude=exclude)
    finally:
        journal.close()
    want = _reference(intents, text, list(top), exclude)[:10]
    assert [p.intent for p in got] == [i for i, _ in want]
    assert [p.score for p in got] == [round(s, 6) for _, s in want]
