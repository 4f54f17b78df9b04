"""The outcomes tier: earlier intents in this workspace that ended with an outcome, ranked
by how like the request they are, each with what it cited and how it ended.

Similarity is BM25 over the earlier intents' words (scaled to [0, 1] by the best one) plus
how high the files each one cited rank for the request now (``top_files``, from the
workspace's own ranking): two issues worded differently that lead to the same code are
alike. ``OutcomeIndex`` reads the journal's attest records once and then only the new ones.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.core import PastOutcome, uri_path
from engine.memory._journal import Inputs, Journal
from ledger import RecordKind

__all__ = ["FILE_WEIGHT", "OutcomeIndex"]

# A cited file ranking first for the request now counts as much as the best wording match:
# the code an earlier intent needed is the stronger sign of a like task.
FILE_WEIGHT = 1.0
_K1, _B = 1.2, 0.75  # BM25's usual constants
_MAX_INTENT_CHARS = 4000  # words past this add little to the match and cost every call


@dataclass(frozen=True, slots=True)
class _Past:
    turn_id: str
    time: str
    intent: str
    outcome: str
    reason: str | None
    cited: tuple[str, ...]
    terms: Counter[str]
    length: int
    at: int  # the order it was (last) attested in: ties go to the newest
    files: frozenset[str]  # the files of what it cited


class OutcomeIndex:
    """Earlier attested intents of one ledger (this user's), kept in memory and advanced by
    the journal's seq; safe to share between threads."""

    def __init__(self, terms: Callable[[str], str]) -> None:
        self._terms = terms
        self._lock = threading.Lock()
        self._seq = 0
        self._past: dict[str, _Past] = {}  # by intent text: the latest outcome of each
        self._postings: dict[str, set[str]] = {}  # term -> intents that use it
        self._by_file: dict[str, set[str]] = {}  # cited file -> intents that cited it
        self._words = 0  # terms over every intent, for BM25's average length
        self._count = 0

    def update(self, journal: Journal) -> None:
        """Read the attest records appended since the last update."""
        with self._lock:
            for record in journal.learning_records(self._seq):
                self._seq = max(self._seq, record.seq)
                if record.kind is not RecordKind.SALIENCE or not record.turn_id:
                    continue
                payload = record.payload
                if not isinstance(payload, dict) or payload.get("user", "") not in (
                    "",
                    journal.user,
                ):
                    continue
                turn = journal.turn(record.turn_id)
                if turn is None:
                    continue
                inputs = Inputs.from_json(journal.text(turn.inputs_sha256))
                intent = (inputs.query or inputs.goal).strip()
                by_id = {s.local_id: s.source_uri for s in turn.snippets}
                cited = payload.get("cited", [])
                uris = tuple(by_id[n] for n in cited if isinstance(n, int) and n in by_id)  # type: ignore[union-attr]
                reason = journal.free_text(payload, "reason")
                self._forget(intent)
                terms = Counter(self._terms(intent[:_MAX_INTENT_CHARS]).split())
                self._count += 1
                self._past[intent] = past = _Past(
                    record.turn_id, record.time, intent, str(payload.get("outcome", "")),
                    reason, uris, terms,
                    sum(terms.values()), self._count,
                    frozenset(uri_path(u) for u in uris),
                )  # fmt: skip
                self._words += past.length
                for t in terms:
                    self._postings.setdefault(t, set()).add(intent)
                for f in past.files:
                    self._by_file.setdefault(f, set()).add(intent)

    def _forget(self, intent: str) -> None:
        """Drop an intent's earlier entry (a later outcome of it replaces it)."""
        old = self._past.pop(intent, None)
        if old is None:
            return
        self._words -= old.length
        for t in old.terms:
            self._postings[t].discard(intent)
        for f in old.files:
            self._by_file[f].discard(intent)

    def rank(self, text: str, top_files: Sequence[str], k: int, *, exclude: str = ""
             ) -> list[PastOutcome]:  # fmt: skip
        """The ``k`` earlier intents most like ``text``, best first (ties: newest first);
        ``exclude``: an intent text to leave out (the request's own, when it was attested)."""
        query = set(self._terms(text[:_MAX_INTENT_CHARS]).split())
        place = {f: i for i, f in enumerate(top_files)}
        skip = exclude.strip()
        with self._lock:
            n = len(self._past)
            if not n or k < 1:
                return []
            avg = self._words / n or 1.0
            # Term at a time over the postings: each intent's sum takes its terms in the
            # query's order, as an intent-at-a-time loop would, so the scores are the same.
            lexical: dict[str, float] = {}
            norms: dict[str, float] = {}
            for t in query:
                users = self._postings.get(t, ())
                if not users:
                    continue
                df = len(users)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                for i in users:
                    if i == skip:
                        continue
                    p = self._past[i]
                    norm = norms.get(i)
                    if norm is None:
                        norm = norms[i] = _K1 * (1 - _B + _B * p.length / avg)
                    tf = p.terms[t]
                    lexical[i] = lexical.get(i, 0.0) + idf * tf * (_K1 + 1) / (tf + norm)
            # A cited file's best place among the request's files, through the files' index.
            near: dict[str, float] = {}
            for f, at in place.items():
                share = 1.0 / (1 + at)
                for i in self._by_file.get(f, ()):
                    if i != skip and share > near.get(i, 0.0):
                        near[i] = share
            past = [self._past[i] for i in lexical.keys() | near.keys()]
        best = max(lexical.values(), default=0.0) or 1.0
        scored = []
        for p in past:
            score = lexical.get(p.intent, 0.0) / best + FILE_WEIGHT * near.get(p.intent, 0.0)
            if score > 0:
                scored.append((score, p.at, p))
        scored = heapq.nsmallest(k, scored, key=lambda x: (-x[0], -x[1]))
        return [PastOutcome(p.turn_id, p.time, p.intent, p.outcome, p.reason, p.cited,
                            round(s, 6)) for s, _, p in scored]  # fmt: skip
