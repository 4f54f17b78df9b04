"""Files ranked from their sections: what ``search_files``, ``rank_files`` and the file-level
evals read.

A file's sections, reranked, say more together than their best three scores summed: how far
its best one stands above the rest, how many it has among the candidates, which features lift
it (defines a name the request mentions, changes with the strong files, is code rather than a
test). ``FileModel`` is a logistic regression over those per-file aggregates, fitted on the
training split's dumped candidates (``eval.fit_files``; never on dev) and shipped in
``data/file_model.json``. A file's score is its probability of being a file the request is
about, among the request's candidate files.

Fitted on 198 training instances (django, matplotlib, scikit-learn) with C = 10, file
Acc@1 / Acc@5 / MRR on the training halves (each scored by the other half's fit): summed
58.6 / 82.8 / 0.735 and 62.6 / 86.9 / 0.766; C = 1 57.6 / 84.8 / 0.748 and 62.6 / 86.9 /
0.780; C = 3 58.6 / 84.8 / 0.746 and 62.6 / 88.9 / 0.783; C = 10 59.6 / 84.8 / 0.752 and
65.7 / 86.9 / 0.796; C = 30 58.6 / 83.8 / 0.746 and 65.7 / 86.9 / 0.798. Of 3 and 10 (tied
there) the dev dumps chose 10, re-scored: Python dev Acc@1 / 5 / 10 55.7 / 82.6 / 89.6 ->
54.8 / 84.3 / 93.0 (C = 3: 54.8 / 83.5 / 91.3), multilingual 37.3 / 59.8 / 66.7 -> 37.3 /
64.2 / 72.1 (``eval.fit_files --check``). ``FileRanking.SECTIONS`` keeps the sum.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from engine.core import ConfigError, FileRanking
from engine.retrieval._fusion import FILE_TOP, Candidate, file_scores
from engine.retrieval._rerank import Scored

__all__ = [
    "FILE_MODEL",
    "FileModel",
    "default_file_model",
    "file_columns",
    "file_table",
    "file_totals",
    "learned_file_scores",
    "rank_files",
    "section_file_scores",
    "section_totals",
]

FILE_MODEL = "file_model.json"  # in engine/retrieval/data; eval.fit_files writes it
_AGGREGATES = ("top", "best", "count", "rank")  # per file, from its section scores
_PER_FEATURE = ("max", "best")  # per rerank feature: its file-wide max, its best section's

# One section of a request: (path, score, rerank feature values).
Row = tuple[str, float, Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class FileModel:
    """A logistic regression over per-file aggregates (``file_columns(features)``)."""

    features: tuple[str, ...]  # the rerank features it reads
    coef: tuple[float, ...]  # one per column of ``file_columns(features)``
    intercept: float
    fitted: str = ""  # how and on what it was fitted (for the record)

    def __post_init__(self) -> None:
        want = len(file_columns(self.features))
        if len(self.coef) != want:
            raise ConfigError(f"file model has {len(self.coef)} coefficients for {want} "
                              f"columns of {len(self.features)} features")  # fmt: skip
        if not all(math.isfinite(c) for c in (*self.coef, self.intercept)):
            raise ConfigError("file model has a coefficient that is not a finite number")

    def to_json(self) -> str:
        return json.dumps({"features": list(self.features), "columns": file_columns(self.features),
                           "coef": list(self.coef), "intercept": self.intercept,
                           "fitted": self.fitted}, indent=1) + "\n"  # fmt: skip

    @classmethod
    def from_json(cls, text: str, where: str = "file model") -> FileModel:
        try:
            raw = json.loads(text)
            model = cls(tuple(str(f) for f in raw["features"]),
                        tuple(float(c) for c in raw["coef"]), float(raw["intercept"]),
                        str(raw.get("fitted", "")))  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{where} is not a valid file model: {exc}") from exc
        if raw.get("columns", file_columns(model.features)) != file_columns(model.features):
            raise ConfigError(f"{where} was fitted on other columns than this version reads")
        return model

    def logits(self, table: np.ndarray) -> np.ndarray:
        """Each row of ``file_table(…, self.features)``'s log-odds (higher: more likely)."""
        return np.asarray(table @ np.asarray(self.coef) + self.intercept, dtype=float)


@cache
def default_file_model() -> FileModel:
    """The shipped model (read once per process)."""
    ref = resources.files("engine.retrieval").joinpath("data", FILE_MODEL)
    try:
        text = ref.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"the shipped file model {ref} cannot be read: {exc}") from exc
    return FileModel.from_json(text, str(ref))


def file_columns(features: Sequence[str]) -> list[str]:
    """The names of ``file_table``'s columns for ``features``."""
    return [*_AGGREGATES, *(f"{f}:{how}" for f in features for how in _PER_FEATURE)]


def file_table(rows: Sequence[Row], features: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Files (in order of first appearance) and their aggregates, one row each:

    - ``top``: the sum of the file's best ``FILE_TOP`` section scores above the request's
      weakest candidate, ``best``: its best one's, ``count``: its sections; each divided by
      the request's largest, so a request's scale does not matter;
    - ``rank``: ``1 / (1 + r)``, ``r`` the file's place (from 0) by ``top``, ties by path;
    - per feature: its largest value over the file's sections, and its best section's.
    """
    if not rows:
        return [], np.zeros((0, len(file_columns(features))))
    floor = min(score for _, score, _ in rows)
    per: dict[str, list[tuple[float, Mapping[str, float]]]] = {}
    for path, score, values in rows:
        per.setdefault(path, []).append((score - floor, values))
    totals = section_totals((path, score) for path, score, _ in rows)
    paths = list(per)
    table = np.zeros((len(paths), len(file_columns(features))))
    for i, path in enumerate(paths):
        secs = sorted(per[path], key=lambda t: -t[0])
        best = secs[0][1]
        table[i, :3] = (totals[path], secs[0][0], len(secs))
        for j, f in enumerate(features):
            at = len(_AGGREGATES) + len(_PER_FEATURE) * j
            table[i, at] = max(v.get(f, 0.0) for _, v in secs)
            table[i, at + 1] = best.get(f, 0.0)
    for j in range(3):
        top = table[:, j].max()
        table[:, j] = table[:, j] / top if top > 0 else 0.0
    order = sorted(range(len(paths)), key=lambda i: (-table[i, 0], paths[i]))
    for place, i in enumerate(order):
        table[i, 3] = 1.0 / (1 + place)
    return paths, table


def _rows(scored: Sequence[Scored]) -> list[Row]:
    return [(s.chunk.path, s.score, {c.feature: c.value for c in s.contributions})
            for s in scored]  # fmt: skip


def learned_file_scores(
    scored: Sequence[Scored], model: FileModel | None = None
) -> dict[str, float]:
    """Each candidate file's probability under ``model`` (the shipped one when None)."""
    model = model or default_file_model()
    paths, table = file_table(_rows(scored), model.features)
    if not paths:
        return {}
    probs = 1.0 / (1.0 + np.exp(-np.clip(model.logits(table), -60.0, 60.0)))
    return {p: float(v) for p, v in zip(paths, probs, strict=True)}


def section_totals(sections: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Per path, its best ``FILE_TOP`` section scores above the weakest of ``sections``
    (path, score) summed: what every candidate shares (the source prior lifts all code
    alike) would otherwise make a file of three weak sections outrank one strong one."""
    pairs = list(sections)
    if not pairs:
        return {}
    floor = min(score for _, score in pairs)
    per: dict[str, list[float]] = {}
    for path, score in pairs:
        per.setdefault(path, []).append(score - floor)
    return {p: sum(sorted(v, reverse=True)[:FILE_TOP]) for p, v in per.items()}


def section_file_scores(scored: Sequence[Scored]) -> dict[str, float]:
    """Each file's best ``FILE_TOP`` section scores above the weakest candidate, summed."""
    return section_totals((s.chunk.path, s.score) for s in scored)


def file_totals(scored: Sequence[Scored], ranking: FileRanking) -> dict[str, float]:
    """Each candidate file's score under ``ranking``."""
    if ranking is FileRanking.SECTIONS:
        return section_file_scores(scored)
    return learned_file_scores(scored)


def rank_files(
    cands: Sequence[Candidate] | Sequence[Scored], ranking: FileRanking = FileRanking.LEARNED
) -> list[str]:
    """Files best first, ties by path: reranked sections (``Scored``) as ``search_files``
    ranks them under ``ranking``; recall candidates by their best three fused scores."""
    if cands and isinstance(cands[0], Scored):
        totals = file_totals([s for s in cands if isinstance(s, Scored)], ranking)
    else:
        totals = file_scores([c for c in cands if isinstance(c, Candidate)])
    return sorted(totals, key=lambda p: (-totals[p], p))
