"""Measure the history lane on real agent trajectories, beside the peers' strategies.

    python -m eval.trajectories [--data GLOB] [--budgets 2000,4000,8000] [--limit N]
                                [--timing-steps 100] [--lane FIELD=VALUE ...]

Each trajectory (mini-swe-agent runs, ``../shared/eval/trajectories/*.jsonl.gz``) is
replayed into a session step by step: the issue text is pinned (counted against the
budget, never compacted), each agent turn and each tool output is one item. At every agent
step t the history lane of the items before t is built for each budget, and checked:

- verbatim: each line of >= 25 characters that step t's action copies from an earlier tool
  output is in the lane ("kept"), or, when not, the item it came from is among the top 3
  that ``search_items`` ranks for the step's own reasoning (its THOUGHT, without the
  command, so the copied line itself is never the query) ("kept or stub in top 3");
  reported overall and for lines >= 10 steps back;
- newest: the agent's previous command is in the lane whole, and its output (the newest
  tool output) is;
- names: file paths, test ids, exception names and symbols (names a ``def``/``class``
  line in an earlier output defined) that step t uses and the history mentioned before;
- the final patch's files and the FAIL_TO_PASS test names, at every step after the
  trajectory first mentioned them;
- tokens: the lane against the raw history it stands for (summed over steps);
- determinism: each lane built twice gives the same bytes; compact checkpoints the same;
- ``BudgetUnreachableError``: raised in every constructed impossible case, never otherwise.

Peers, on the same items in the same room: keep-most-recent truncation; masking every tool
output but the last 10 (JetBrains, NeurIPS 2025); clearing all tool results but the last 3
(Anthropic context editing). Each also drops its oldest items when still over budget.

Nothing was tuned on anything but this data; the figures are for this data.
Finally the cost of adding a step and building its lane through a real session (ledger
and all) is timed on a 100-step session (p50, p95).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from engine.core import BudgetUnreachableError, Step, StepRole
from engine.memory import (
    LaneSettings,
    Memo,
    build_lane,
    command_of,
    compact,
    names_in,
    search_items,
    verbatim_lines,
)
from indexers import TiktokenCounter

_DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "eval" / "trajectories"
_MIN_LINE = 25
_FAR = 10  # steps back that count as far
_TOP = 3
_PR = re.compile(r"<pr_description>(.*?)</pr_description>", re.DOTALL)
_PATCH_FILE = re.compile(r"^diff --git a/(\S+) b/", re.MULTILINE)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass(slots=True)
class Tally:
    """Hits over trials for one measure."""

    hits: int = 0
    trials: int = 0

    def add(self, hit: bool) -> None:
        """Count one trial."""
        self.trials += 1
        self.hits += int(hit)

    def pct(self) -> str:
        """The hit rate as a percentage, or n/a."""
        return f"{100 * self.hits / self.trials:5.1f}%" if self.trials else "  n/a"


@dataclass(slots=True)
class Scores:
    """One strategy at one budget."""

    verbatim: Tally = field(default_factory=Tally)
    verbatim_far: Tally = field(default_factory=Tally)
    stub: Tally = field(default_factory=Tally)
    stub_far: Tally = field(default_factory=Tally)
    names: Tally = field(default_factory=Tally)
    gold: Tally = field(default_factory=Tally)
    command: Tally = field(default_factory=Tally)
    output: Tally = field(default_factory=Tally)
    lane_tokens: int = 0
    raw_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One run: the pinned issue, the items, and what the fix needed."""

    instance_id: str
    issue: str
    items: tuple[Step, ...]
    patch_files: tuple[str, ...]
    tests: tuple[str, ...]


def load(pattern: str) -> Iterator[Trajectory]:
    """Trajectories from the gzipped JSON-lines files matching ``pattern``."""
    base = Path(pattern)
    if base.is_dir():
        paths = sorted(base.glob("*.jsonl.gz"))
    else:  # a glob, relative or absolute (Path.glob takes only relative patterns)
        anchor = Path(base.anchor or ".")
        paths = sorted(anchor.glob(str(base.relative_to(anchor)) if base.anchor else pattern))
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                yield _trajectory(json.loads(line))


def _trajectory(row: dict[str, object]) -> Trajectory:
    messages = row["messages"]
    assert isinstance(messages, list)
    first = str(messages[1]["content"])
    found = _PR.search(first)
    issue = (found.group(1) if found else first).strip()
    items: list[Step] = []
    for msg in messages[2:]:
        role = StepRole.ASSISTANT if msg["role"] == "assistant" else StepRole.TOOL
        items.append(Step(len(items) + 1, role, str(msg["content"]),
                          tool="bash" if role is StepRole.TOOL else ""))  # fmt: skip
    tests = []
    for test in row.get("fail_to_pass") or []:  # type: ignore[attr-defined]
        name = str(test).split("::")[-1].split("[")[0].strip()
        if name:
            tests.append(name)
    return Trajectory(str(row["instance_id"]), issue, tuple(items),
                      tuple(_PATCH_FILE.findall(str(row.get("submission") or ""))),
                      tuple(dict.fromkeys(tests)))  # fmt: skip


def _strip(line: str) -> str:
    return line.strip()


def _thought(text: str) -> str:
    return re.sub(r"```.*?(```|$)", " ", text, flags=re.DOTALL)


# -- peers -----------------------------------------------------------------------------


def _newest_fit(blocks: Sequence[list[str]], room: int, memo: Memo, header: str) -> str:
    """The newest blocks that fit ``room`` whole (each peer's last resort)."""
    kept: list[list[str]] = []
    used = memo.cost([header])
    for block in reversed(blocks):
        cost = memo.cost(block)
        if used + cost > room:
            break
        kept.append(block)
        used += cost
    lines = [header] + [ln for b in reversed(kept) for ln in b]
    text = "\n".join(lines)
    while memo.counter.count(text) > room and kept:
        kept.pop()
        text = "\n".join([header] + [ln for b in reversed(kept) for ln in b])
    return text


def peer_truncate(items: Sequence[Step], room: int, memo: Memo) -> str:
    """Keep the most recent items that fit; everything older is gone."""
    return _newest_fit([verbatim_lines(i) for i in items], room, memo, "## History")


def _peer_clear(items: Sequence[Step], room: int, memo: Memo, keep: int, stub: str) -> str:
    tools = [i.step for i in items if i.role is StepRole.TOOL]
    recent = set(tools[-keep:])
    blocks = [verbatim_lines(i) if i.role is not StepRole.TOOL or i.step in recent
              else [f"[#{i.step}] {stub}"] for i in items]  # fmt: skip
    return _newest_fit(blocks, room, memo, "## History")


def peer_mask10(items: Sequence[Step], room: int, memo: Memo) -> str:
    """Observation masking: every tool output but the last 10 becomes a placeholder."""
    return _peer_clear(items, room, memo, 10, "tool output omitted")


def peer_keep3(items: Sequence[Step], room: int, memo: Memo) -> str:
    """Context editing: every tool result but the last 3 is cleared."""
    return _peer_clear(items, room, memo, 3, "tool result cleared")


# -- probes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probes:
    """What step t reuses from the history before it."""

    lines: tuple[tuple[str, int, tuple[int, ...]], ...]  # (line, steps back, source steps)
    names: tuple[str, ...]
    gold: tuple[str, ...]
    command: str = ""  # the agent's previous command ("" when none)
    output: str = ""  # the newest tool output after it ("" when none)


def probes(traj: Trajectory, t: int, line_index: dict[str, list[int]],
           seen_text: str, defined: set[str]) -> Probes:  # fmt: skip
    """The probes of the action at item index ``t`` (0-based) against earlier items."""
    action = traj.items[t]
    step = action.step
    lines = []
    for raw in dict.fromkeys(_strip(ln) for ln in action.text.splitlines()):
        if len(raw) >= _MIN_LINE and raw in line_index:
            sources = tuple(line_index[raw])
            lines.append((raw, step - sources[-1], sources))
    paths, tests, errors, _ = names_in(action.text)
    symbols = [w for w in dict.fromkeys(_IDENT.findall(command_of(action.text)))
               if w in defined]  # fmt: skip
    names = tuple(n for n in dict.fromkeys((*paths, *tests, *errors, *symbols)) if n in seen_text)
    gold = tuple(g for g in (*traj.patch_files, *traj.tests) if g in seen_text)
    before = traj.items[:t]
    last = next((i for i in reversed(before) if i.role is StepRole.ASSISTANT), None)
    command = command_of(last.text) if last is not None else ""
    output = next((i.text.strip() for i in reversed(before)
                   if i.role is StepRole.TOOL and last is not None and i.step > last.step), "")
    return Probes(tuple(lines), names, gold, command, output)


Strategy = Callable[[Sequence[Step], int, Memo, str], tuple[str, int, set[int]]]


Results = dict[str, dict[int, Scores]]


def run(trajs: Sequence[Trajectory], budgets: Sequence[int], settings: LaneSettings,
        counter: TiktokenCounter) -> tuple[Results, dict[str, int]]:  # fmt: skip
    """Every strategy at every budget over every step; and the determinism/refusal counts."""
    names = ["cortex", "truncate", "mask10", "keep3"]
    scores = {n: {b: Scores() for b in budgets} for n in names}
    checks = {"lanes": 0, "same_bytes": 0, "refused": 0, "over_budget": 0}
    for traj in trajs:
        memo = Memo(counter)
        pinned = counter.count("## Goal\n" + traj.issue)
        line_index: dict[str, list[int]] = {}
        defined: set[str] = set()
        seen = traj.issue
        raw = 0
        for t, item in enumerate(traj.items):
            if item.role is StepRole.ASSISTANT and t > 0:
                history = traj.items[:t]
                probe = probes(traj, t, line_index, seen, defined)
                query = _thought(item.text)
                for budget in budgets:
                    room = budget - pinned
                    if room <= 0:
                        continue
                    _score_cortex(scores["cortex"][budget], history, room, memo, traj, query,
                                  probe, settings, checks, raw)  # fmt: skip
                    for name, peer in (("truncate", peer_truncate), ("mask10", peer_mask10),
                                       ("keep3", peer_keep3)):  # fmt: skip
                        text = peer(history, room, memo)
                        _score(scores[name][budget], text, traj.issue, probe, set(), [], "",
                               counter.count(text), raw)  # fmt: skip
            raw += memo.item_tokens(item)
            seen += "\n" + item.text
            if item.role is StepRole.TOOL:
                for ln in item.text.splitlines():
                    s = _strip(ln)
                    if len(s) >= _MIN_LINE:
                        line_index.setdefault(s, [])
                        if not line_index[s] or line_index[s][-1] != item.step:
                            line_index[s].append(item.step)
                defined.update(names_in(item.text)[3])
    return scores, checks


def _score_cortex(sc: Scores, history: Sequence[Step], room: int, memo: Memo,
                  traj: Trajectory, query: str, probe: Probes, settings: LaneSettings,
                  checks: dict[str, int], raw: int) -> None:  # fmt: skip
    lane = build_lane(history, room, memo, session=traj.instance_id, query=query,
                      settings=settings)  # fmt: skip
    fresh = Memo(memo.counter, memo.observations)
    again = build_lane(history, room, fresh, session=traj.instance_id,
                       query=query, settings=settings)  # fmt: skip
    checks["lanes"] += 1
    checks["same_bytes"] += int(again.text == lane.text)
    checks["over_budget"] += int(lane.tokens > room)
    compacted = {int(p.source_uri.rsplit("#", 1)[1]) for p in lane.compacted}
    hidden = [i for i in history if i.step in compacted]
    _score(sc, lane.text, traj.issue, probe, compacted, hidden, query, lane.tokens, raw)


def _score(sc: Scores, text: str, issue: str, probe: Probes, compacted: set[int],
           hidden: Sequence[Step], query: str, tokens: int, raw: int) -> None:  # fmt: skip
    context = issue + "\n" + text
    top: set[int] | None = None
    for line, back, sources in probe.lines:
        kept = line in context
        far = back >= _FAR
        sc.verbatim.add(kept)
        if far:
            sc.verbatim_far.add(kept)
        found = kept
        if not kept and compacted and any(s in compacted for s in sources):
            if top is None:
                top = {i.step for i in search_items(hidden, query, _TOP, StepRole.TOOL)}
            found = any(s in top for s in sources)
        sc.stub.add(found)
        if far:
            sc.stub_far.add(found)
    for name in probe.names:
        sc.names.add(name in context)
    for gold in probe.gold:
        sc.gold.add(gold in context)
    if probe.command:
        sc.command.add(all(ln.strip() in context for ln in probe.command.splitlines()))
    if probe.output:
        sc.output.add(all(ln.strip() in context for ln in probe.output.splitlines()))
    sc.lane_tokens += tokens
    sc.raw_tokens += raw


def refusals(counter: TiktokenCounter, trajs: Sequence[Trajectory]) -> tuple[int, int, int, int]:
    """(impossible cases, refused) and (possible cases, refused) for build_lane and
    compact: rooms below the one-line form, and load-bearing items over the budget."""
    impossible = refused_bad = possible = refused_ok = 0
    for traj in trajs[:20]:
        memo = Memo(counter)
        items = traj.items
        for room in (1, 5, 10):
            impossible += 1
            try:
                build_lane(items, room, memo, session=traj.instance_id)
            except BudgetUnreachableError:
                refused_bad += 1
        heavy = max(items, key=memo.item_tokens)
        for budget in (memo.item_tokens(heavy) // 2, 10):
            impossible += 1
            try:
                compact(items, [heavy.step], budget, items[-1].step, memo,
                        session=traj.instance_id)  # fmt: skip
            except BudgetUnreachableError:
                refused_bad += 1
        for budget in (4000, 8000):
            possible += 1
            try:
                compact(items, [], budget, items[-1].step, memo, session=traj.instance_id)
            except BudgetUnreachableError:
                refused_ok += 1
    return impossible, refused_bad, possible, refused_ok


def checkpoints_stable(counter: TiktokenCounter, trajs: Sequence[Trajectory]) -> bool:
    """Compacting the same items twice (fresh memos) gives the same checkpoint bytes."""
    for traj in trajs[:20]:
        items = traj.items
        a = compact(items, [], 4000, items[-1].step, Memo(counter), session=traj.instance_id)
        b = compact(items, [], 4000, items[-1].step, Memo(counter), session=traj.instance_id)
        if a.checkpoint.encoded != b.checkpoint.encoded:
            return False
    return True


def session_timing(steps: int, trajs: Sequence[Trajectory]) -> tuple[float, float]:
    """p50 and p95 milliseconds of adding one step and building its lane (4k) through a
    real session in a real ledger, over a session of ``steps`` steps."""
    from engine.memory import Journal, Session

    items = [i for t in trajs for i in t.items][:steps]
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(Path(tmp) / "ledger.sqlite", "bench")
        session = Session(journal, "timing", TiktokenCounter())
        for item in items:
            started = time.perf_counter()
            session.add(item.role.value, item.text, tool=item.tool or None)
            session.lane(4000, query=item.text[:200])
            times.append(1000 * (time.perf_counter() - started))
        journal.close()
    return statistics.median(times), sorted(times)[int(0.95 * (len(times) - 1))]


def lane_settings(pairs: Sequence[str]) -> LaneSettings:
    """``LaneSettings`` with each ``FIELD=VALUE`` of ``pairs`` set (typed as the field's
    default); ValueError names an unknown field or a value of the wrong type."""
    base = LaneSettings()
    changes: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not hasattr(base, name.strip()):
            known = ", ".join(f.name for f in fields(LaneSettings))
            raise ValueError(f"{pair!r} is not FIELD=VALUE with a field of: {known}")
        kind = type(getattr(base, name.strip()))
        try:
            changes[name.strip()] = kind(value.strip())
        except ValueError:
            article = "an" if kind.__name__[0] in "aeiou" else "a"
            raise ValueError(f"{name.strip()} takes {article} {kind.__name__}, "
                             f"not {value!r}") from None  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measure and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(_DEFAULT_DATA))
    ap.add_argument("--budgets", default="2000,4000,8000")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--timing-steps", type=int, default=100)
    ap.add_argument("--lane", action="append", default=[], metavar="FIELD=VALUE",
                    help="a LaneSettings field for cortex's lane (a variant to measure)")
    args = ap.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    try:
        settings = lane_settings(args.lane)
    except ValueError as exc:
        print(f"--lane: {exc}", file=sys.stderr)
        return 2
    trajs = list(load(args.data))
    if args.limit:
        trajs = trajs[: args.limit]
    if not trajs:
        print(f"no trajectories under {args.data}", file=sys.stderr)
        return 1
    counter = TiktokenCounter()
    started = time.perf_counter()
    scores, checks = run(trajs, budgets, settings, counter)
    if args.lane:
        print("cortex lane: " + ", ".join(args.lane))
    print(f"{len(trajs)} trajectories, {checks['lanes']} lanes per budget set "
          f"in {time.perf_counter() - started:.0f} s")  # fmt: skip
    head = (f"{'budget':>6} {'strategy':<9} {'verbatim':>8} {'>=10back':>8} {'kept|top3':>9} "
            f"{'>=10back':>8} {'names':>6} {'gold':>6} {'last cmd':>8} {'last out':>8} "
            f"{'tokens saved':>12}")  # fmt: skip
    print(head)
    for budget in budgets:
        for name, per in scores.items():
            sc = per[budget]
            saved = 1 - sc.lane_tokens / sc.raw_tokens if sc.raw_tokens else 0.0
            print(f"{budget:>6} {name:<9} {sc.verbatim.pct():>8} {sc.verbatim_far.pct():>8} "
                  f"{sc.stub.pct():>9} {sc.stub_far.pct():>8} {sc.names.pct():>6} "
                  f"{sc.gold.pct():>6} {sc.command.pct():>8} {sc.output.pct():>8} "
                  f"{100 * saved:11.1f}%")  # fmt: skip
    sc = scores["cortex"][budgets[0]]
    print(f"verbatim probes per budget: {sc.verbatim.trials} ({sc.verbatim_far.trials} >= "
          f"{_FAR} back); names {sc.names.trials}; gold {sc.gold.trials}")  # fmt: skip
    print(f"same bytes on a second build: {checks['same_bytes']}/{checks['lanes']}; "
          f"lanes over their room: {checks['over_budget']}")  # fmt: skip
    print(f"same checkpoint bytes on a second compact: {checkpoints_stable(counter, trajs)}")
    bad, refused_bad, ok, refused_ok = refusals(counter, trajs)
    print(f"BudgetUnreachableError: {refused_bad}/{bad} impossible cases refused, "
          f"{refused_ok}/{ok} possible cases refused")  # fmt: skip
    if args.timing_steps:
        p50, p95 = session_timing(args.timing_steps, trajs)
        print(f"add a step + build its lane (4k), {args.timing_steps}-step session: "
              f"p50 {p50:.1f} ms, p95 {p95:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
