"""Every settings record of retrieval and packing: what ``build_context`` and ``search`` can
be tuned with. Each number has a name and a one-line reason; the records are frozen, and
``ContextSettings`` as a whole is part of a turn's replay key (``canonical`` encodes it).
"""

from __future__ import annotations

import json
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import Enum, StrEnum
from typing import Any

from engine.core._errors import ConfigError

__all__ = [
    "DEFAULT_WORD_FORMS",
    "ContextSettings",
    "Fusion",
    "PackSettings",
    "RecallSettings",
    "RerankWeights",
    "SearchMode",
    "canonical",
    "from_canonical",
]


class SearchMode(StrEnum):
    """Which retriever answers ``search``."""

    BM25 = "bm25"
    DENSE = "dense"
    HYBRID = "hybrid"


class Fusion(StrEnum):
    """How ranked lists are combined."""

    RRF = "rrf"
    SCORE = "score"


class FileRanking(StrEnum):
    """How files are ranked from their reranked sections (``search_files``)."""

    LEARNED = "learned"  # a logistic regression over per-file aggregates (engine.retrieval)
    SECTIONS = "sections"  # the sum of each file's three best section scores


DEFAULT_WORD_FORMS = 3  # forms searched per word of a short request (see RecallSettings)


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """How wide recall casts its net (named so tuning can move them)."""

    bm25_sections: int = 150  # direct BM25 section hits
    dense_sections: int = 100  # direct dense section hits
    pages: int = 25  # BM25 pages whose best sections are pulled in
    sections_per_page: int = 3  # ... this many per page
    # A long report (more than MAX_INTENT_WORDS words) reads its BM25 section and page
    # lists, and its goal's, this many times deeper: it names many things, and the fix is
    # often in a file only a few of them point at. Against 1, on the training split (198
    # instances): file Acc@1 / 5 57.1 / 82.3 -> 58.6 / 83.8, every gold file in the pool
    # 94.4 -> 94.9, gold-file hit at 4k 89.9 -> 90.9; on the dev set (115): pool 94.8 ->
    # 97.4, Acc@5 79.1 -> 80.9, hit at 4k / 8k 89.6 / 93.9 -> 90.4 / 97.4, Acc@1 53.0 ->
    # 52.2. Short questions keep their depth: deeper, the question set's primary answer in
    # the 4k / 8k context fell 66.7 / 83.3 -> 64.3 / 76.2.
    report_depth: int = 2
    symbol_hits: int = 8  # definitions per named identifier
    # One hop along the call/import graph: definitions of names that the best candidates
    # use (the fix often sits one call away from what the request names). Off by default:
    # measured adding only definitions recall had not found,
    # on the dev set it moved nothing beyond noise (from 20 candidates: Acc@1 46.1 either
    # way, Acc@5 69.6 vs 70.4 off, gold-file hit at 8k 80.9 vs 81.7 off).
    expand_from: int = 0  # best fused candidates whose references are followed (0: off)
    expand_names: int = 40  # most-used names followed
    expand_defs: int = 2  # definitions taken per name (a name defined everywhere is noise)
    # Other forms of a short request's words that the repository uses ("minifying" also
    # searches "minify", "suggest" also "suggestion"): at most this many per word, the most
    # common first (0: off). Long reports are left as written: they already say a lot.
    word_forms: int = DEFAULT_WORD_FORMS
    # The files that most often changed together with the best few reranked files (in the
    # git history up to HEAD, Jaccard share at least ``cochange_share``) are searched too,
    # restricted to them: a fix's second file is often far down the report's lists (a
    # header beside its implementation, a type declaration beside its code). Their best
    # BM25 sections (a partner sharing no word with the report adds nothing) join as the
    # ``cochange`` list and every candidate is reranked. Not fitted (the training split's
    # pool is 94%: one instance moved); measured on the multilingual dev split (204): every
    # gold file among the candidates 78.9 -> 84.3%, hit at 8k 75.5 -> 78.9, Acc@1/5
    # unchanged; Python dev (115): pool unchanged, Acc@1 51.3 -> 53.0, hit at 4k 91.3 ->
    # 90.4. Seeded from the fused (not reranked) files it moved the pool by one instance.
    # 0: off.
    cochange_from: int = 3
    cochange_share: float = 0.1
    cochange_files: int = 10  # partner files searched at most
    cochange_sections: int = 2  # sections taken per partner file
    fusion: Fusion = Fusion.RRF
    rrf_k: int = 60  # Cormack et al.'s constant: flattens the head of each list
    # Per-list weights: a definition the request names, or a place a tool points at, is
    # stronger evidence than a bag-of-words hit.
    weights: tuple[tuple[str, float], ...] = (
        ("bm25", 1.0),
        ("dense", 0.5),
        ("page", 1.0),
        ("symbol", 1.0),
        ("signal", 2.0),
        ("place", 1.0),
        ("expand", 0.5),
        ("cochange", 0.5),
        # The goal's own lists, weighted like the request's. Measured on the dev set (115
        # SWE-bench instances, goal = issue title): file Acc@1/5 46.1/70.4 -> 53.0/80.0.
        ("goal_bm25", 1.0),
        ("goal_dense", 0.5),
        ("goal_page", 1.0),
    )

    def __post_init__(self) -> None:
        if self.report_depth < 1:
            raise ConfigError(f"report_depth must be >= 1, got {self.report_depth}")


@dataclass(frozen=True, slots=True)
class RerankWeights:
    """Weights of the rerank features, each scaled to about [0, 1] per request (defaults
    chosen on the SWE-bench dev set with ``eval/swebench.py``, before a training split
    existed; ``engine.retrieval``'s rerank computes the features).

    A refit on the training split (``eval.fit_weights`` over 60 instances of django,
    matplotlib and scikit-learn: file=0, cosine=0, defines=0, depth=0, source=8) gained
    on held-out halves of that split (Acc@1 53.3 -> 56.7; Acc@5 90.0 -> 96.7) but not on
    dev: pytest's 34 instances went Acc@1 52.9 -> 47.1, MRR 0.701 -> 0.670, and the
    developer questions' primary answer at 4k 59.5 -> 45.2. These defaults stay."""

    recall: float = 1.0  # fused rank from recall
    file: float = 1.0  # the file's strength: its best three sections together
    # Query-section cosine, dense model. With the tuned static model, over the training
    # split's 198 dumped instances: file Acc@1 / MRR 56.6 / 0.722 at 0, 57.1 / 0.726 at 0.3,
    # 57.6 / 0.731 at 0.6, 58.1 / 0.731 at 1.2, Acc@5 82.3 throughout: one or two
    # instances, so it stays.
    cosine: float = 0.3
    defines: float = 0.8  # defines a name the request mentions
    mentions: float = 0.2  # uses names the request mentions
    signal: float = 2.0  # a tool signal points here
    # The request's own text points here (a pasted traceback, a failing test id): the
    # agent's or reporter's words, weaker than a tool's. Fitted on the training split (64
    # instances that point somewhere, eval.swebench --dump then a sweep): file MRR 0.668
    # at 0, 0.680 at 0.5, 0.658 at 2.0 (the tool signal's weight).
    place: float = 0.5
    # Holds a phrase the request quotes (an error message): as specific as a tool signal.
    phrase: float = 2.0
    # Implementation over tests and docs. Tuned on the dev set: 0.6 -> 4.0 took file Acc@1
    # 34.8 -> 46.1 and gold-file hit at 8k 71.3 -> 81.7 (sphinx's docs crowded its code out).
    source: float = 4.0
    depth: float = 0.05  # top-level over deeply nested
    code_ratio: float = 0.05  # code over comment blocks
    entropy: float = 0.05  # readable text over tables and blobs
    # Recently modified files (the mtime recorded when a file's content was indexed; a base
    # records its commit's time). Off by default: it moved no dev-set figure, and a View
    # over an old base and a full index at HEAD record different (equally right) times, so
    # with it on the two may order near-ties differently. Turn it on per workspace.
    recency: float = 0.0
    size: float = 0.1  # substantial sections over one-liners
    # Changed together with the request's strong files in the history up to HEAD (git log
    # of up to 10,000 commits; per pair the Jaccard share, times the other file's strength).
    # Fitted on the training split (198 dumped instances, eval.swebench --dump then a sweep;
    # 0 / 0.3 / 0.5 / 0.8 / 1.5: file Acc@1 57.1 / 60.1 / 60.1 / 60.1 / 57.6, Acc@5 82.3 /
    # 83.3 / 84.3 / 84.3 / 84.3, both halves gaining up to 0.8); the variant (Jaccard, 10,000
    # commits, commits of at most 20 files) chosen on dev among eight: "how often b changed
    # when a did" lost pytest and sphinx Acc@1 there (see the README).
    cochange: float = 0.5

    def items(self) -> list[tuple[str, float]]:
        """(feature, weight) pairs in declaration order."""
        return [(f.name, float(getattr(self, f.name))) for f in fields(self)]


@dataclass(frozen=True, slots=True)
class PackSettings:
    """Knobs of evidence selection (relevance: the rerank score scaled between the weakest
    and the strongest candidate of the request)."""

    mmr_lambda: float = 0.75  # relevance vs novelty
    pool: int = 80  # best-scored candidates considered for packing
    # Sections of one file before the other files' turn: breadth first, then depth; the
    # file of the best candidate (the answer is most often there, often in its second or
    # third section) may give one section per ``lead_file_tokens`` of evidence room first
    # (2 at 4k, 4 at 8k, 8 at 16k). Chosen on the training split through eval.swebench (74
    # instances of django, matplotlib, scikit-learn): against one section (lead 1), gold-
    # function coverage at 4k / 8k / 16k rose from 31.1 / 48.0 / 69.0 to 35.8 / 56.0 / 71.7
    # with every gold-file hit rate unchanged (89.2 / 91.9 / 91.9); a fixed lead of 3 lost
    # 1.4 points of hit@4k, a lead of 5 4.1. The relevance floor was chosen from an
    # offline replay of 151 training instances' candidates.
    per_source_cap: int = 1
    lead_file_tokens: int = 2000
    # A file's turn lifted by the file model's belief in it: while a file is under its cap
    # (its first section; the lead file's first ones), its sections compete at this much
    # times the file model's probability that the file is what the request is about
    # (``search_files``' score) more relevance, so a file the model ranks high gets its turn
    # before a slightly more relevant section of a file it does not. 0: off; so is
    # ``CORTEX_FILE_RANKING=sections``, which has no probabilities. Chosen on the developer
    # questions (primary answer in the 4k context, of 42: 33 at 0, 35 at 0.5 and 1.0, 36 at
    # 1.5, 2.0 and 3.0); at 1.5 the multilingual dev split's gold-file hit at 4k went 79.4
    # -> 80.4 (3 gained, 1 lost), and on the training split (117 django, 81 matplotlib and
    # scikit-learn instances) and the Python dev set no hit or gold-function figure moved.
    # Lifting only a file's first section (not the lead file's next ones) lost gold
    # functions on the training split (4k: django 62.2 -> 61.3, the others 42.2 -> 40.3).
    file_turn_bonus: float = 1.5
    # How a file's turn is counted, for a long report and (``question_*``) for a short
    # question, at most ``MAX_INTENT_WORDS`` words, which asks about one behaviour whose
    # code is often the next function of the same file.
    # ``turn_tokens``: a section counts toward its file's cap as its share of this many
    # tokens, up to one (None: every section counts whole), so a seven-line method does not
    # use up the turn of the file whose next function answers. ``depth_penalty``: None, a
    # file's sections past its cap wait for every other file's turn; a number, they compete
    # at that much less relevance (0..1 scale) for each section of the file already chosen
    # past the first ``cap - 1``.
    # Developer questions, primary answer in the 4k context, of 42: whole sections and
    # strict 25; shares of 300 tokens 26 (27 with the usage intent's fix); with a penalty
    # of 0.05 26, 0.1 28, 0.15 / 0.2 / 0.3 27 (one question apart: a choice on those
    # questions, not a fit). Long reports keep whole sections and strict breadth: shares of
    # 300 tokens raised gold-function coverage at 4k on the dev set 37.0 -> 48.0 but lost the
    # gold file from the 4k context for 4 of 115 instances (87.8 -> 84.3; on 30 training
    # instances 31.9 -> 44.7 and 90.0 -> 86.7), and the penalty lost one more at 8k there.
    turn_tokens: int | None = None
    depth_penalty: float | None = None
    question_turn_tokens: int | None = 300
    question_depth_penalty: float | None = 0.1
    # A long report's breadth: a file's first section (the lead file's aside) costs at most
    # the evidence room over ``breadth_files`` (and leaves ``narrow_min_tokens`` of text at
    # least), cut to its lines holding the request's words when it is larger, so more files
    # reach a small context while the lead file keeps whole sections. None: whole sections.
    # Chosen on the training split through eval.swebench (4k: gold-file hit / gold-function
    # coverage / share of evidence tokens from gold files): django's 117 instances 88.9 /
    # 49.8 / 17.0 before, 90.6 / 53.7 / 20.4 at 16, 92.3 / 60.3 / 28.0 at 32; matplotlib's
    # and scikit-learn's 81 91.4 / 33.4 / 22.2, 93.8 / 34.0 / 25.0, 96.3 / 37.9 / 32.5 (8k:
    # 95.1 / 47.1 -> 96.3 / 58.2). Short questions keep whole sections: on the developer
    # questions 16 found one more primary answer at 4k but showed 48.0% -> 42.9% of the
    # answer lines.
    breadth_files: int | None = 32
    question_breadth_files: int | None = None
    narrow_min_relevance: float = 0.5  # only strong sections are worth narrowing
    # Below this much room for text, narrowing leaves too little; it is also a first look's
    # least text. 80 -> 64 once snippet headers stopped repeating the path and lines (a 4k
    # look is then its room over ``breadth_files``, ~112 tokens, not 80 of text plus the
    # header): chosen on the training split (4k gold-file hit / gold-function coverage /
    # gold share) django's 117 92.3 / 62.1 / 28.6 -> 92.3 / 62.2 / 30.0, matplotlib's and
    # scikit-learn's 81 96.3 / 41.6 / 32.4 -> 96.3 / 42.2 / 35.5; 8k unchanged.
    narrow_min_tokens: int = 64
    duplicate_similarity: float = 0.8  # word-set Jaccard at or above: a near-copy, left out
    # Below this relevance a section is weak: selection stops and the budget is returned.
    min_relevance: float = 0.4
    fragment_tokens: int = 24  # smaller sections are fragments: shown with neighbours
    fragment_context_tokens: int = 160  # how much of its neighbourhood a fragment brings


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """Everything ``build_context`` can be tuned with (part of the replay key)."""

    recall: RecallSettings = field(default_factory=RecallSettings)
    weights: RerankWeights = field(default_factory=RerankWeights)
    pack: PackSettings = field(default_factory=PackSettings)
    rerank_depth: int = 150  # candidates reranked (by fused recall); the pool packs from these
    file_ranking: FileRanking = FileRanking.LEARNED
    recent_turns: int = 4  # the last N turns, verbatim
    goal_share: float = 0.3  # lane caps as shares of the budget; unused room goes to evidence
    recent_share: float = 0.2
    diff_share: float = 0.2
    min_candidates: int = 3


def canonical(settings: ContextSettings | RecallSettings | RerankWeights | PackSettings) -> str:
    """A settings record as canonical JSON (sorted keys, no spaces): equal settings give
    equal text on every Python version and machine, unlike ``repr``."""
    return json.dumps(asdict(settings), sort_keys=True, separators=(",", ":"))


def from_canonical(raw: Any) -> ContextSettings:
    """``ContextSettings`` from ``canonical``'s JSON, decoded (a recorded turn's): a field a
    later version added takes its default; a field this version does not know, or a value of
    the wrong kind, is a ``ConfigError`` (the record is of a newer cortex)."""
    built = _from_plain(ContextSettings, raw, "settings")
    assert isinstance(built, ContextSettings)
    return built


def _from_plain(cls: type, raw: Any, where: str) -> object:
    if not isinstance(raw, dict):
        raise ConfigError(f"recorded {where} is not an object")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"recorded {where} has fields this cortex does not know: {unknown}")
    kwargs: dict[str, object] = {}
    for name, value in raw.items():
        hint = hints[name]
        if is_dataclass(hint) and isinstance(hint, type):
            kwargs[name] = _from_plain(hint, value, f"{where}.{name}")
        elif isinstance(hint, type) and issubclass(hint, Enum):
            try:
                kwargs[name] = hint(value)
            except ValueError as exc:
                raise ConfigError(f"recorded {where}.{name}: {exc}") from None
        else:
            kwargs[name] = _tuples(value)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"recorded {where} cannot be read: {exc}") from None


def _tuples(value: Any) -> Any:
    """JSON's lists back to the tuples a frozen record holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
