"""The SWE-bench paper's retrieval baseline, written plainly: file-level BM25.

Documents are the path plus the contents of every non-test ``.py`` file; the query is the
issue text; files are packed whole, in rank order, into the token budget (a file that does
not fit is passed over and the next one tried). Parameters are Pyserini's defaults
(k1 = 0.9, b = 0.4), which the paper's BM25 retrieval used.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine import TiktokenCounter

__all__ = ["Bm25Files", "PackedFile", "is_test_path", "source_suffixes"]

K1 = 0.9
B = 0.4
_TOKEN = re.compile(r"[a-z0-9]+")
_TEST_PART = re.compile(
    r"(^|/)(tests?|testing|spec|__tests__|testdata)(/|$)|(^|/)test_[^/]*\.py$|_test\.py$"
    r"|conftest\.py$|_test\.(go|c|cc|cpp)$|Tests?\.(java|kt|cs)$|_spec\.rb$|_test\.rb$"
    r"|\.(test|spec)\.[jt]sx?$|Test\.php$"
)


def is_test_path(path: str) -> bool:
    """Test files are left out of the baseline's documents, as in the paper (Python's
    conventions, and those of the other languages the multilingual splits use)."""
    return bool(_TEST_PART.search(path))


def source_suffixes(language: str) -> tuple[str, ...]:
    """The files the baseline reads for a repository in ``language``: ``.py`` for Python,
    as in the paper; for any other language every source extension cortex chunks as code
    (a C++ fix may edit a ``.h``, a JavaScript one a ``.ts``), so the baseline is not
    Python-only and not tuned per language."""
    if language == "python":
        return (".py",)
    from indexers import Family, languages

    return tuple(sorted({e for lang in languages() if lang.family is Family.CODE
                         for e in lang.extensions}))  # fmt: skip


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@dataclass(frozen=True, slots=True)
class PackedFile:
    """A whole file packed into a budget."""

    path: str
    tokens: int


class Bm25Files:
    """BM25 over the non-test Python files of one tree (``suffixes`` and ``tests`` widen
    it: other languages, documentation, the tests themselves)."""

    def __init__(
        self,
        root: Path,
        counter: TiktokenCounter | None = None,
        *,
        suffixes: tuple[str, ...] = (".py",),
        tests: bool = False,
    ) -> None:
        self.root = root
        self._counter = counter or TiktokenCounter()
        self._cost: dict[str, int] = {}
        self.paths: list[str] = []
        self.texts: list[str] = []
        files = (f for f in root.rglob("*") if f.suffix.lower() in suffixes)
        for file in sorted(files):
            rel = file.relative_to(root).as_posix()
            if (not tests and is_test_path(rel)) or not file.is_file():
                continue
            self.paths.append(rel)
            self.texts.append(file.read_text("utf-8", errors="replace"))
        self._tf = [
            Counter(_tokens(f"{p}\n{t}")) for p, t in zip(self.paths, self.texts, strict=True)
        ]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avg = (sum(self._len) / len(self._len)) if self._len else 0.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(self._tf)
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def rank(self, query: str) -> list[str]:
        """Files by BM25 score of ``query`` (ties by path), zero-score files left out."""
        terms = Counter(_tokens(query))
        scores: list[tuple[float, str]] = []
        for path, tf, length in zip(self.paths, self._tf, self._len, strict=True):
            norm = K1 * (1 - B + B * length / self._avg) if self._avg else K1
            score = 0.0
            for term, qtf in terms.items():
                f = tf.get(term)
                if f:
                    score += qtf * self._idf[term] * f * (K1 + 1) / (f + norm)
            if score > 0:
                scores.append((-score, path))
        return [p for _, p in sorted(scores)]

    def pack(self, ranked: Sequence[str], budget: int) -> list[PackedFile]:
        """Whole files in rank order while they fit (each with a one-line path header)."""
        text_of = dict(zip(self.paths, self.texts, strict=True))
        packed: list[PackedFile] = []
        used = 0
        for path in ranked:
            if used >= budget:
                break
            cost = self._cost.get(path)
            if cost is None:
                cost = self._cost[path] = self._counter.count(f"# {path}\n{text_of[path]}\n")
            if used + cost <= budget:
                packed.append(PackedFile(path, cost))
                used += cost
        return packed
