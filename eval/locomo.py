"""Recall of the memory store on LoCoMo, beside a BM25-over-turns baseline in the same run.

    python -m eval.locomo [--data PATH] [--dense MODEL] [--k 10] [--undated] [--json OUT]

Data: ``../shared/eval/locomo/locomo_dev.json`` (5 of LoCoMo's 10 long conversations;
Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024;
CC BY-NC 4.0: evaluation only, never committed here, nor anything derived from it).

Each conversation gets a fresh workspace; every turn is saved as a note (title: the
speaker and the session's date; what: the turn, with the caption of a shared photo) made
at its session's date (``created``, as an importer of a dated history saves it; all the
turns of a session at that one time, in order; ``--undated``: at the wall clock, as they
are saved) that ``follows`` the turn before it, as an agent saving what it learns in order
would link its notes; every question with evidence is a ``memory.search``. A note that
dedupe merged stands for every turn it holds. Reported per question category (1
multi-hop, 2 temporal, 3 open-domain, 4 single-hop; 5, adversarial, has no evidence and
is left out):

- any-evidence recall@1/5/10: some evidence turn is in the top k;
- all-evidence recall@10: every evidence turn is in the top 10;
- session recall@5: a top-5 note is from a session that holds evidence;
- search latency p50/p95 (ms), per question, the whole ``search`` call.

With ``--k`` below 10 no cut-off passes k, and the columns say so (``--k 5``: any@1,
any@5, all@5, session@5). A category without questions shows "-"; data without any
question to score is an error (exit 1).

The baseline is plain BM25 (k1 1.2, b 0.75) over the turns' words, lowercased, as the
issue measured it; it sees the same texts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine import Config, Workspace

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo" / "locomo_dev.json"
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_WORD = re.compile(r"\w+")
_DIA = re.compile(r"D\d+:\d+")


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn: its id (``D3:7``), session number, speaker, date and text."""

    dia: str
    session: int
    speaker: str
    date: str
    text: str


ANY_AT = (1, 5, 10)  # any-evidence recall cut-offs
ALL_AT = 10  # all-evidence recall's
SESSION_AT = 5  # session recall's


def metric_names(k: int) -> tuple[str, ...]:
    """The metrics reported when ``k`` results are retrieved: no cut-off past ``k``
    (``--k 5`` reports any@5 and all@5, not an any@10 of 5 results)."""
    anys = sorted({min(c, k) for c in ANY_AT})
    return (*(f"any@{c}" for c in anys), f"all@{min(ALL_AT, k)}", f"session@{min(SESSION_AT, k)}")


@dataclass
class Scores:
    """Hit counts per category for one system retrieving ``k`` results a question."""

    k: int = 10
    hits: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    count: Counter[int] = field(default_factory=Counter)
    latency: list[float] = field(default_factory=list)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics this system is scored on (see ``metric_names``)."""
        return metric_names(self.k)

    def add(self, category: int, ranked: Sequence[set[str]], evidence: set[str]) -> None:
        """Score one question: ``ranked`` is the turn ids each result stands for."""
        self.count[category] += 1
        sessions = {e.split(":")[0] for e in evidence}
        for metric in self.metrics:
            kind, _, at = metric.partition("@")
            top = ranked[: int(at)]
            if kind == "any":
                hit = any(r & evidence for r in top)
            elif kind == "all":
                hit = evidence <= set().union(*top)
            else:
                hit = any({t.split(":")[0] for t in r} & sessions for r in top)
            if hit:
                self.hits[metric][category] += 1

    def rate(self, metric: str, category: int | None = None) -> float | None:
        """Percent of questions (in ``category``, or all) that hit; None when there are
        none to score."""
        if category is None:
            n = sum(self.count.values())
            return 100.0 * sum(self.hits[metric].values()) / n if n else None
        n = self.count[category]
        return 100.0 * self.hits[metric][category] / n if n else None


def turns_of(conversation: dict[str, object]) -> list[Turn]:
    """Every turn of a conversation, in order, with its session's date."""
    out = []
    n = 1
    while f"session_{n}" in conversation:
        date = str(conversation.get(f"session_{n}_date_time", ""))
        raw = conversation[f"session_{n}"]
        assert isinstance(raw, list)
        for t in raw:
            text = t["text"]
            if t.get("blip_caption"):
                text += f" [shares a photo: {t['blip_caption']}]"
            out.append(Turn(t["dia_id"], n, t["speaker"], date, text))
        n += 1
    return out


def evidence_of(qa: dict[str, object]) -> set[str]:
    """The evidence turn ids of a question (some are written ``D8:6; D9:17``)."""
    raw = qa.get("evidence") or []
    assert isinstance(raw, list)
    return {m for e in raw for m in _DIA.findall(str(e))}


class BM25:
    """Plain BM25 over documents' lowercased words."""

    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.tfs = [Counter(_WORD.findall(d.lower())) for d in docs]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lengths) / max(1, len(docs))
        df: Counter[str] = Counter(w for tf in self.tfs for w in tf)
        n = len(docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best documents (ties: earlier first)."""
        words = set(_WORD.findall(query.lower()))
        scores = []
        for i, (tf, length) in enumerate(zip(self.tfs, self.lengths, strict=True)):
            s = 0.0
            for w in words:
                f = tf.get(w, 0)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * length / self.avg)
                    s += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            if s > 0:
                scores.append((-s, i))
        return [i for _, i in sorted(scores)[:k]]


def session_time(date: str) -> float | None:
    """A session's date (``1:56 pm on 8 May, 2023``) in seconds since the epoch, read as
    UTC; None when it is not in that form."""
    try:
        when = dt.datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return when.replace(tzinfo=dt.UTC).timestamp()


def note_text(turn: Turn) -> tuple[str, str]:
    """(title, what) a turn is saved as."""
    return f"{turn.speaker} ({turn.date})", turn.text


def run(
    data: Path, dense: str, k: int, log: Callable[[str], None], *, dated: bool = True
) -> dict[str, Scores]:
    """Both systems over every conversation in ``data`` (``dated``: each turn saved at
    its session's date)."""
    convs = json.loads(data.read_text("utf-8"))
    systems = {"memory": Scores(k), "bm25": Scores(k)}
    for ci, conv in enumerate(convs):
        questions = [q for q in conv["qa"] if q.get("category") in CATEGORIES and evidence_of(q)]
        if not questions:  # its turns would be saved for nothing
            log(f"conversation {ci + 1}/{len(convs)}: no question with evidence, skipped")
            continue
        turns = turns_of(conv["conversation"])
        with tempfile.TemporaryDirectory() as tmp:
            config = Config(dense_model=dense, ledger=False)
            ws = Workspace.open(tmp, config)
            stands_for: dict[int, set[str]] = defaultdict(set)
            started = time.perf_counter()
            previous = 0
            for turn in turns:
                title, what = note_text(turn)
                created = session_time(turn.date) if dated else None
                saved = ws.memory.save(title, "note", what=what, created=created)
                stands_for[saved.id].add(turn.dia)
                if previous and previous != saved.id:
                    ws.memory.relate(saved.id, previous, "follows")
                previous = saved.id
            save_s = time.perf_counter() - started
            ws.memory.search("warm up", k)  # first call loads the vectors
            for q in questions:
                t0 = time.perf_counter()
                hits = ws.memory.search(str(q["question"]), k)
                systems["memory"].latency.append(time.perf_counter() - t0)
                ranked = [stands_for[h.id] for h in hits]
                systems["memory"].add(int(q["category"]), ranked, evidence_of(q))
            ws.close()
        bm25 = BM25([" ".join(note_text(t)) for t in turns])
        for q in questions:
            t0 = time.perf_counter()
            top = bm25.top(str(q["question"]), k)
            systems["bm25"].latency.append(time.perf_counter() - t0)
            systems["bm25"].add(int(q["category"]), [{turns[i].dia} for i in top], evidence_of(q))
        log(f"conversation {ci + 1}/{len(convs)}: {len(turns)} turns saved in {save_s:.1f} s "
            f"({len(stands_for)} notes), {len(questions)} questions")  # fmt: skip
    return systems


def report(systems: dict[str, Scores]) -> str:
    """The side-by-side table, per category and overall, with latencies."""
    lines = []
    names = next(iter(systems.values())).metrics
    header = "| system | category | n | " + " | ".join(names) + " |"
    lines += [header, "|" + "---|" * (3 + len(names))]
    for name, s in systems.items():
        for cat in (*CATEGORIES, None):
            label = "all" if cat is None else f"{cat} {CATEGORIES[cat]}"
            n = sum(s.count.values()) if cat is None else s.count[cat]
            rates = (s.rate(m, cat) for m in names)
            cells = " | ".join("-" if r is None else f"{r:.1f}" for r in rates)
            lines.append(f"| {name} | {label} | {n} | {cells} |")
    lines.append("")
    for name, s in systems.items():
        ms = sorted(x * 1000 for x in s.latency)
        if not ms:
            lines.append(f"{name}: no search timed")
            continue
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        lines.append(f"{name}: search p50 {statistics.median(ms):.2f} ms, p95 {p95:.2f} ms")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--dense", default="static", help="embedding model (none: lexical)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--undated", action="store_true", help="save each turn at the wall clock, not its date"
    )
    parser.add_argument("--json", type=Path, help="write the figures here (outside the repo)")
    args = parser.parse_args(argv)
    if args.k < 1:
        parser.error(f"--k must be 1 or more, got {args.k}")
    if not args.data.exists():
        print(f"no LoCoMo data at {args.data}", file=sys.stderr)
        return 1
    systems = run(args.data, args.dense, args.k, lambda s: print(s, file=sys.stderr),
                  dated=not args.undated)  # fmt: skip
    if not sum(systems["memory"].count.values()):
        print(f"no question to score in {args.data} (categories 1-4 with evidence)",
              file=sys.stderr)  # fmt: skip
        return 1
    print(report(systems))
    if args.json:
        figures = {n: {m: {str(c): s.rate(m, c) for c in (*CATEGORIES, None)} for m in s.metrics}
                   for n, s in systems.items()}  # fmt: skip
        args.json.write_text(json.dumps(figures, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
