"""Rerank: a weighted sum of named features, each kept so ``--explain`` can show it.

Every feature is scaled to about [0, 1] across the candidates of one request, so weights are
comparable. Weights live in ``RerankWeights`` (config), with defaults tuned on the SWE-bench
dev set (``eval/swebench.py``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.core import Contribution, RerankWeights
from engine.retrieval._fusion import Candidate, file_scores
from engine.retrieval._query import Intent, phrase_match
from indexers import Chunk, DocType

__all__ = ["Scored", "rerank"]

# How much a section's kind of document is worth as evidence for a code task.
# Raised when a short question asks for that kind of evidence (``request_intents``): "where
# is the retry tested" wants the test, "what do the docs say" the documentation.
_INTENT_PRIOR: dict[Intent, dict[DocType, float]] = {
    Intent.TESTS: {DocType.TEST: 1.0},
    Intent.DOCS: {DocType.REFERENCE: 1.0, DocType.TUTORIAL: 1.0},
    Intent.EXAMPLES: {DocType.EXAMPLE: 1.0, DocType.TUTORIAL: 0.8},
    Intent.CONFIG: {DocType.REFERENCE: 0.8},
    Intent.USAGE: {DocType.REFERENCE: 0.8, DocType.TUTORIAL: 0.8, DocType.EXAMPLE: 0.6},
}
_SOURCE_PRIOR = {
    DocType.IMPLEMENTATION: 1.0,
    DocType.DEFINITION: 1.0,
    DocType.EXAMPLE: 0.3,
    DocType.REFERENCE: 0.3,
    DocType.TUTORIAL: 0.2,
    DocType.TEST: 0.0,
}
# Declaration-only files (TypeScript's ``.d.ts``, Python's ``.pyi`` stubs) restate an
# implementation that lives elsewhere: worth this share of their doc type's prior. On the
# multilingual dev split's 12 dayjs instances (``types/*.d.ts`` beside ``src/``), file
# Acc@1/5 and MRR went 0.0/33.3/0.292 (1.0) -> 8.3/41.7/0.324 (0.5); 0.25 lost hit@4k.
DECLARATION_PRIOR = 0.5
_DECLARATION_SUFFIXES = (".d.ts", ".d.mts", ".d.cts", ".pyi")
_COMMENT = re.compile(r"^\s*(#|//|/\*|\*|--|;|\"\"\"|''')")
_IDEAL_ENTROPY = 4.4  # bits per character of ordinary source code
_ENTROPY_SPAN = 1.5  # ... and how far from it a section may stray before scoring 0
_FULL_SIZE = 120  # tokens: sections smaller than this carry proportionally less evidence


@dataclass(frozen=True, slots=True)
class Scored:
    """A candidate with its final score and the features behind it."""

    chunk: Chunk
    score: float
    reason: str
    contributions: tuple[Contribution, ...]
    vector: np.ndarray | None
    ranks: Mapping[str, int] = field(default_factory=dict)  # rank in each recall list
    scores: Mapping[str, float] = field(default_factory=dict)  # score in each recall list


# A section's text features by chunk id (ids name content): a request's candidates are
# scored twice when co-change adds files, and a session asks about the same code again.
_TEXT_FEATURES: dict[str, tuple[float, float]] = {}
_TEXT_FEATURES_MAX = 1 << 16


def _text_features(chunk: Chunk) -> tuple[float, float]:
    """(code ratio, entropy score) of ``chunk``'s text, remembered by its id."""
    found = _TEXT_FEATURES.get(chunk.id)
    if found is None:
        if len(_TEXT_FEATURES) >= _TEXT_FEATURES_MAX:
            _TEXT_FEATURES.clear()
        found = _TEXT_FEATURES[chunk.id] = (_code_ratio(chunk.text), _entropy_score(chunk.text))
    return found


def _code_ratio(text: str) -> float:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return 0.0
    return sum(1 for ln in lines if not _COMMENT.match(ln)) / len(lines)


def _entropy_score(text: str) -> float:
    if not text:
        return 0.0
    counts = Counter(text)
    n = len(text)
    bits = -sum(c / n * math.log2(c / n) for c in counts.values())
    return max(0.0, 1.0 - abs(bits - _IDEAL_ENTROPY) / _ENTROPY_SPAN)


def _scaled(values: Sequence[float]) -> list[float]:
    """Min-max to [0, 1]; all-equal values scale to 1 if positive, else 0."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def rerank(
    cands: Sequence[Candidate],
    identifiers: Sequence[str],
    query_vector: np.ndarray | None,
    vectors: Mapping[str, np.ndarray],
    mtimes: Mapping[str, int],
    weights: RerankWeights,
    intents: frozenset[Intent] = frozenset(),
    phrases: Sequence[tuple[str, ...]] = (),
    related: Mapping[str, Mapping[str, float]] | None = None,
    question: bool = False,
) -> list[Scored]:
    """Score candidates; best first, ties by chunk id. ``vectors`` maps chunk id to its
    dense vector (missing ones score 0 on cosine); ``mtimes`` maps path to mtime_ns;
    ``intents`` (what a short question asks for) raise the prior of tests, docs, examples
    or configuration; ``phrases`` (quoted in the request: an error message) score the
    sections that hold them verbatim; ``related`` (path -> path -> how strongly the two
    changed together, ``View.related``) scores the files that usually change with the
    request's strong files. ``question``: the request is short (``is_question``): a name it
    asks about that no code candidate names brings the docs, tests or text that do."""
    if not cands:
        return []
    wanted = set(identifiers)
    defines = [1.0 if wanted & set(c.chunk.defines) else 0.0 for c in cands]
    mentions = [min(1.0, len(wanted & set(c.chunk.references)) / max(1, min(len(wanted), 5)))
                for c in cands]  # fmt: skip
    prior = dict(_SOURCE_PRIOR)
    for intent in sorted(intents):
        for doc_type, value in _INTENT_PRIOR[intent].items():
            prior[doc_type] = max(prior.get(doc_type, 0.0), value)
    named = [c for c, d, m in zip(cands, defines, mentions, strict=True) if d or m]
    for doc_type in _only_outside_code(named) if question else ():
        prior[doc_type] = max(prior.get(doc_type, 0.0), _SOURCE_PRIOR[DocType.IMPLEMENTATION])
    per_file = file_scores(cands)
    cosines = [
        float(np.dot(vectors[c.chunk.id], query_vector))
        if query_vector is not None and c.chunk.id in vectors
        else 0.0
        for c in cands
    ]
    newest = _scaled([float(mtimes.get(c.chunk.path, 0)) for c in cands])
    strength = _scaled([per_file[c.chunk.path] for c in cands])
    columns: dict[str, list[float]] = {
        "recall": _scaled([c.fused for c in cands]),
        "file": strength,
        "cosine": _scaled(cosines),
        "defines": defines,
        "mentions": mentions,
        "signal": [1.0 if "signal" in c.ranks else 0.0 for c in cands],
        "place": [1.0 if "place" in c.ranks else 0.0 for c in cands],
        "phrase": [phrase_match(phrases, c.chunk.text) if phrases else 0.0 for c in cands],
        "source": [_source_prior(prior, c.chunk) for c in cands],
        "depth": [1.0 / (1 + c.chunk.depth) for c in cands],
        "code_ratio": [_text_features(c.chunk)[0] for c in cands],
        "entropy": [_text_features(c.chunk)[1] for c in cands],
        "recency": newest,
        "size": [min(1.0, c.chunk.tokens / _FULL_SIZE) for c in cands],
        "cochange": _cochange(cands, strength, related or {}),
    }
    scored = []
    used = [(name, weight) for name, weight in weights.items() if weight]  # once, not per row
    for i, cand in enumerate(cands):
        parts = tuple(
            Contribution(name, columns[name][i], weight, weight * columns[name][i])
            for name, weight in used
        )
        scored.append(
            Scored(
                cand.chunk,
                sum(p.points for p in parts),
                cand.sources,
                parts,
                vectors.get(cand.chunk.id),
                cand.ranks,
                cand.scores,
            )
        )
    return sorted(scored, key=lambda s: (-s.score, s.chunk.id))


def _cochange(
    cands: Sequence[Candidate], strength: Sequence[float],
    related: Mapping[str, Mapping[str, float]],
) -> list[float]:  # fmt: skip
    """Per candidate: the other candidate files' strength (their ``file`` feature), each
    times how strongly it changed together with this one, summed; scaled by the largest
    (0 everywhere without history). A file the request's strong files usually change with
    is likely part of the same fix."""
    if not related:
        return [0.0] * len(cands)
    files: dict[str, float] = {}
    for cand, value in zip(cands, strength, strict=True):
        files[cand.chunk.path] = max(files.get(cand.chunk.path, 0.0), value)
    # Summed in path order: the same float however the history was read.
    sums = {p: sum(files.get(q, 0.0) * share for q, share in sorted(related.get(p, {}).items()))
            for p in files}  # fmt: skip
    top = max(sums.values(), default=0.0)
    return [sums[c.chunk.path] / top if top > 0 else 0.0 for c in cands]


def _only_outside_code(named: Sequence[Candidate]) -> set[DocType]:
    """The doc types of the candidates ``named`` (those defining or mentioning a name the
    request asks about), when none of them is code: such a name lives in the docs, a test
    or a text file, and the code prior would bury the only sections that hold it under
    code that shares not a word with the request (`ZEBRA_RETRY_LIMIT`, set in two docs,
    gave forty unrelated helpers and left both docs out as weak). Only for a short
    request: a long report names test and doc names beside the code's, and there the rule
    cost three of five dev instances their place (sphinx-9367 Acc@1, jq-2654 the 4k
    context, preact-2927 Acc@5)."""
    types = {c.chunk.doc_type for c in named}
    return set() if types & {DocType.IMPLEMENTATION, DocType.DEFINITION} else types


def _source_prior(prior: dict[DocType, float], chunk: Chunk) -> float:
    """The prior of ``chunk``'s doc type (0.5 when unknown), scaled down in a
    declaration-only file."""
    value = prior.get(chunk.doc_type, 0.5)
    if chunk.path.endswith(_DECLARATION_SUFFIXES):
        value *= DECLARATION_PRIOR
    return value
