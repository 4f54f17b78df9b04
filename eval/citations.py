"""Citation validity over the SWE-bench dev set: does feedback accept exactly the valid ids?

    python -m eval.citations --repos DIR --out DIR [--instances ...] [--limit N]
        [--workdir DIR] [--budget 8000] [--endpoint URL --model NAME]

For each instance a context is built (and recorded), then answered by:

(a) an oracle that cites the snippets covering gold functions (else gold files);
(b) an adversary that mixes valid ids with out-of-set ids, malformed markers and an id
    whose source was edited after the turn; then, as a planner holding a stale replay key
    would, cites a newer turn's ids against the older turn's key;
(c) with ``--endpoint``, an OpenAI-compatible chat endpoint (never in CI). Every bracketed
    marker in its answer (``[3]``, ``[ 5 ]``, ``[x]``; ``[3, 4]`` as one per item; not an
    index like ``a[0]`` nor a Markdown link) goes to feedback as written: what is a number
    is the engine's parser's to say (``citation_number``), what is in the turn its check's.

Counted per distinct id (an id cited three times is one citation; a malformed marker is
one by its text), at most the engine's per-feedback maximum (``MAX_ATTEST_CITATIONS``; the
rest are counted as not sent). Reported: validity (accepted / cited) of each answerer,
invalid citations caught (must be 100%; the endpoint's are its malformed and out-of-range
ones), valid ones wrongly rejected (must be 0), the endpoint's precision against gold (the
oracle's is 100% by construction), the cross-turn ids accepted (feedback tells turns apart
by replay key only: an id valid in both turns is read as the older turn's), and whether
every recorded turn replays byte-identically.

Each instance's tree is ``WORK/<instance_id>/tree`` (``WORK`` is ``--workdir``, else
``OUT/work``), kept for later runs; the source file the adversary edits is named in
``editing.json`` beside it until it is restored, so a tree left edited by a killed run is
materialised again. Rows go to ``OUT/citations.jsonl`` as each instance finishes and
``OUT/citations.md`` is written from them at the end. An instance that fails (no such
repository or commit, an engine or endpoint error) is a row with its ``error``, listed in
the report; the exit code is then 1, as it is when no instance is selected.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from engine import Config, ContextPack, FeedbackResult, Snippet, Workspace, uri_path
from engine.core import MAX_ATTEST_CITATIONS
from engine.memory import citation_number
from eval.swebench_data import (
    DEFAULT_DATA,
    Instance,
    check_workdir,
    find_git_dir,
    load_instances,
    materialise,
)

__all__ = ["main", "report"]

# A bracketed marker in a model's answer: one line, short, not an index (``a[0]``,
# ``list[int]``) nor a Markdown link's text (``[docs](url)``).
_BRACKETS = re.compile(r"(?<![\w\]])\[([^\[\]\n]{0,40})\](?!\()")
ANSWERERS = ("oracle", "adversary", "endpoint")
EDITING = "editing.json"  # beside a tree whose source the adversary has edited


@dataclass(slots=True)
class Tally:
    """Counts for one answerer."""

    cited: int = 0
    accepted: int = 0
    invalid_injected: int = 0
    invalid_caught: int = 0
    valid_injected: int = 0
    valid_rejected: int = 0
    gold_hits: int = 0
    instances: int = 0
    mentions: int = 0  # markers in the answers, repeats included
    malformed: int = 0  # cited markers that are no number
    out_of_range: int = 0  # cited numbers the turn has not
    not_sent: int = 0  # distinct markers past the engine's per-feedback maximum
    cross_turn: int = 0  # a newer turn's ids the older turn also has, cited against it
    cross_turn_accepted: int = 0
    cross_turn_elsewhere: int = 0  # of those, ids naming other evidence in the two turns
    notes: list[str] = field(default_factory=list)

    def add(self, other: dict[str, Any]) -> None:
        """Add a row's counts (a ``Tally`` as ``asdict`` wrote it) to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + other[f.name])


def _covers_gold(s: Snippet, inst: Instance) -> bool:
    path = uri_path(s.source_uri)
    names = {g.partition(":")[2] for g in inst.gold_functions if g.partition(":")[0] == path}
    return s.symbol in names if names else path in inst.gold_files


def _oracle(pack: ContextPack, inst: Instance) -> list[int]:
    return [s.id for s in pack.citations if _covers_gold(s, inst)]


def _edit_source(home: Path, root: Path, s: Snippet) -> tuple[Path, bytes]:
    """Append a comment to the snippet's first line, ``home/editing.json`` naming the file
    first (removed once ``_restore`` has put the bytes back)."""
    rel = uri_path(s.source_uri)
    path = root / rel
    original = path.read_bytes()
    (home / EDITING).write_text(json.dumps({"path": rel}), "utf-8")
    lines = original.split(b"\n")
    i = s.span.start_line - 1
    lines[i] = lines[i] + b"  # edited after the turn"
    path.write_bytes(b"\n".join(lines))
    return path, original


def _restore(home: Path, path: Path, original: bytes) -> None:
    path.write_bytes(original)
    (home / EDITING).unlink()


def _tree(home: Path, git_dir: Path, commit: str) -> int:
    """Make ``home/tree`` hold ``commit``'s tree, kept for later runs; returns the blobs
    missing from the git directory. A tree whose materialisation or edit a killed run
    left unfinished is written again."""
    tree, done = home / "tree", home / "materialised.json"
    if (home / EDITING).exists():  # the adversary's edit was never restored
        done.unlink(missing_ok=True)
        (home / EDITING).unlink()
    if done.exists():
        return int(json.loads(done.read_text("utf-8"))["missing_blobs"])
    if tree.exists():
        shutil.rmtree(tree)
    missing = materialise(git_dir, commit, tree)
    done.write_text(json.dumps({"missing_blobs": missing}), "utf-8")
    return missing


def _adversary(ws: Workspace, home: Path, pack: ContextPack, newer: ContextPack, t: Tally) -> None:
    """Inject known-valid and known-invalid citations and check each verdict; then cite
    ``newer``'s ids against ``pack``'s (older) replay key."""
    n = len(pack.citations)
    if n < 2:
        t.notes.append(f"{pack.replay_key}: fewer than 2 snippets, adversary skipped")
        return
    valid = [1, n]
    out_of_set = [n + 1, n + 7, 0]
    malformed = ["[x]", "1.5", "", "[[2]]", "two"]
    edited = pack.citations[1]
    path, original = _edit_source(home, ws.root, edited)
    try:
        result = ws.feedback(pack.replay_key, [*valid, *out_of_set, *malformed])
        stale_check = ws.feedback(pack.replay_key, [edited.id])
    finally:
        _restore(home, path, original)
    invalid = len(out_of_set) + len(malformed)
    t.invalid_injected += invalid + 1  # + the edited source
    t.invalid_caught += len(result.dropped) + (edited.id in stale_check.stale)
    t.valid_injected += len(valid)
    # A valid id is wrongly rejected if dropped, or flagged stale when its source is intact.
    intact = [v for v in valid if v != edited.id]
    t.valid_rejected += sum(1 for v in valid if str(v) in result.dropped)
    t.valid_rejected += sum(1 for v in intact if v in result.stale)
    t.cited += len(valid) + invalid
    t.accepted += len(result.valid)
    # A planner holding the older turn's key cites what the newer turn showed: an id past
    # the older turn's last is caught; one it also has cannot be told apart by number.
    ids = [s.id for s in newer.citations][:MAX_ATTEST_CITATIONS]
    crossed = ws.feedback(pack.replay_key, ids)
    beyond = [i for i in ids if i > n]
    t.invalid_injected += len(beyond)
    t.invalid_caught += sum(1 for i in beyond if str(i) in crossed.dropped)
    older = {s.id: (s.source_uri, s.sha256) for s in pack.citations}
    within = [s for s in newer.citations[: len(ids)] if s.id <= n]
    t.cross_turn += len(within)
    t.cross_turn_accepted += sum(1 for s in within if s.id in crossed.valid)
    t.cross_turn_elsewhere += sum(1 for s in within if older[s.id] != (s.source_uri, s.sha256))


def markers(answer: str) -> list[str]:
    """The citation markers of a model's answer, in order, each as feedback takes it: a
    bracket as written (``[ 5 ]``, ``[x]``), a list (``[3, 4]``) as one marker per item.

    >>> markers("in [1] and [ 5 ], see [3, 4], a[0], [x] and [docs](u)")
    ['[1]', '[ 5 ]', '[3]', '[4]', '[x]']
    """
    out: list[str] = []
    for match in _BRACKETS.finditer(answer):
        items = match.group(1).split(",")
        out += [match.group(0)] if len(items) == 1 else [f"[{i.strip()}]" for i in items]
    return out


def _endpoint(
    ws: Workspace, pack: ContextPack, inst: Instance, answer: str, t: Tally
) -> FeedbackResult | None:
    """Hand the answer's markers to feedback (each distinct id once, at most the engine's
    per-feedback maximum) and count the verdicts against the turn's ids."""
    said = markers(answer)
    first: dict[int | str, str] = {}  # a number by its value, anything else by its text
    for raw in said:
        number = citation_number(raw)
        first.setdefault(raw if number is None else number, raw)
    cited = list(first.items())
    t.instances += 1
    t.mentions += len(said)
    t.not_sent += max(0, len(cited) - MAX_ATTEST_CITATIONS)
    cited = cited[:MAX_ATTEST_CITATIONS]
    t.cited += len(cited)
    if not cited:
        return None
    result = ws.feedback(pack.replay_key, [raw for _, raw in cited])
    by_id = {s.id: s for s in pack.citations}
    t.accepted += len(result.valid)
    t.gold_hits += sum(1 for i in result.valid if _covers_gold(by_id[i], inst))
    for key, raw in cited:
        if isinstance(key, int) and key in by_id:
            t.valid_injected += 1
            t.valid_rejected += key not in result.valid or key in result.stale
        else:
            t.invalid_injected += 1
            t.malformed += isinstance(key, str)
            t.out_of_range += isinstance(key, int)
            t.invalid_caught += raw in result.dropped
    return result


def _ask_endpoint(url: str, model: str, pack: ContextPack, question: str) -> str:
    body = {
        "model": model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": pack.render()},
            {"role": "user", "content": question + "\nAnswer briefly, citing evidence as [n]."},
        ],
    }
    request = urllib.request.Request(
        url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return str(json.load(response)["choices"][0]["message"]["content"])


def _evaluate(
    inst: Instance, git_dir: Path, home: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """One instance: its tree, a recorded context, each answerer's counts, replays and the
    ledger's verification, as a row."""
    missing = _tree(home, git_dir, inst.base_commit)
    tallies = {name: Tally() for name in ANSWERERS}
    replays_ok = replays = 0
    cfg = Config.from_env(state_dir=str(home / "state"))
    with Workspace.open(home / "tree", cfg) as ws:
        ws.index()
        title = next((ln for ln in inst.problem_statement.splitlines() if ln.strip()), "")
        pack = ws.build_context(title[:500], inst.problem_statement, budget_tokens=args.budget)
        newer = ws.build_context("Explain the package layout", "package layout modules",
                                 budget_tokens=args.budget // 2)  # fmt: skip
        oracle_ids = _oracle(pack, inst)
        t = tallies["oracle"]
        t.instances += 1
        if oracle_ids:
            result = ws.feedback(pack.replay_key, oracle_ids)
            t.cited += len(oracle_ids)
            t.accepted += len(result.valid)
            t.valid_injected += len(oracle_ids)
            t.valid_rejected += len(oracle_ids) - len(result.valid) + len(result.stale)
        tallies["adversary"].instances += 1
        _adversary(ws, home, pack, newer, tallies["adversary"])
        if args.endpoint:
            answer = _ask_endpoint(args.endpoint, args.model, pack, inst.problem_statement)
            _endpoint(ws, pack, inst, answer, tallies["endpoint"])
        for p in (pack, newer):
            replays += 1
            replays_ok += ws.replay(p.replay_key).text == p.render()
        verify = ws.journal.verify(blobs=True)
    return {"instance_id": inst.instance_id, "snippets": len(pack.citations),
            "missing_blobs": missing, "oracle_ids": oracle_ids, "replays": replays,
            "replays_ok": replays_ok, "ledger_ok": verify.ok,
            **{name: asdict(t) for name, t in tallies.items()}}  # fmt: skip


def _rate(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def report(rows: Sequence[dict[str, Any]], budget: int) -> str:
    """The markdown report of ``citations.jsonl``'s rows (failed instances listed)."""
    done = [r for r in rows if "error" not in r]
    failed = [r for r in rows if "error" in r]
    tallies = {name: Tally() for name in ANSWERERS}
    for r in done:
        for name, t in tallies.items():
            t.add(r[name])
    lost = f" {len(failed)} failed (listed below, not in the figures)." if failed else ""
    lines = ["# Citation validity", "", f"Instances: {len(done)}, budget {budget}.{lost} "
             "Counted per distinct id.", "",
             "| answerer | cited | accepted (validity) | invalid caught | valid wrongly rejected "
             "| precision vs gold |", "|---|---|---|---|---|---|"]  # fmt: skip
    for name, t in tallies.items():
        if not t.instances:
            continue
        caught = _rate(t.invalid_caught, t.invalid_injected) if t.invalid_injected else "-"
        rejected = f"{t.valid_rejected} of {t.valid_injected}" if t.valid_injected else "-"
        # Only the endpoint's: the oracle cites gold by construction, the adversary at will.
        precision = _rate(t.gold_hits, t.accepted) if name == "endpoint" else "-"
        lines.append(f"| {name} | {t.cited} | {t.accepted} ({_rate(t.accepted, t.cited)}) | "
                     f"{caught} | {rejected} | {precision} |")  # fmt: skip
    a, e = tallies["adversary"], tallies["endpoint"]
    if a.valid_injected:  # the adversary ran (it skips a context of one snippet)
        lines += [
            "",
            f"Cross-turn: of a newer turn's ids cited against the older turn's "
            f"replay key, those past the older turn's last are in invalid caught; "
            f"{a.cross_turn_accepted} of the {a.cross_turn} the older turn also has "
            f"were accepted as its snippets ({a.cross_turn_elsewhere} of them name "
            f"other evidence there): feedback tells turns apart by replay key only.",
        ]
    if e.instances:
        lines += [
            "",
            f"Endpoint: {e.mentions} markers in its answers, {e.cited} distinct "
            f"cited: {e.malformed} malformed, {e.out_of_range} out of range, "
            f"{e.not_sent} past the {MAX_ATTEST_CITATIONS} per feedback not sent.",
        ]
    replays = sum(r["replays"] for r in done)
    replays_ok = sum(r["replays_ok"] for r in done)
    lines += ["", f"Replays byte-identical: {replays_ok} of {replays}.",
              f"Ledgers verified: {sum(r['ledger_ok'] for r in done)} of {len(done)}."]  # fmt: skip
    missing = [f"{r['instance_id']} ({r['missing_blobs']})" for r in done if r["missing_blobs"]]
    if missing:
        lines.append(f"Trees missing blobs (a partial mirror): {', '.join(missing)}.")
    for t in tallies.values():
        lines += [f"- {n}" for n in t.notes]
    if failed:
        lines += ["", "## Failed", ""] + [f"- {r['instance_id']}: {r['error']}" for r in failed]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the answerers and print the report; 1 when an instance failed or none was
    selected."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--instances", default="")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL")
    parser.add_argument("--model", default="default")
    args = parser.parse_args(argv)
    select = [s.strip() for s in args.instances.split(",") if s.strip()]
    instances = load_instances(args.data, select, args.limit)
    if not instances:
        print(f"no instances selected in {args.data}", file=sys.stderr)
        return 1
    work = args.workdir or args.out / "work"
    check_workdir(work)  # the trees must not be taken for part of a checkout around them
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    # Each row is written as it is made: a run that stops keeps what it did.
    with (args.out / "citations.jsonl").open("w", encoding="utf-8") as out:
        for inst in instances:
            try:
                git_dir = find_git_dir(args.repos, inst.repo)
                row = _evaluate(inst, git_dir, work / inst.instance_id, args)
            except Exception as exc:  # the tree's, the engine's or the endpoint's
                error = " ".join(f"{type(exc).__name__}: {exc}".split())
                row = {"instance_id": inst.instance_id, "error": error}
                print(f"{inst.instance_id}: ERROR {error}", flush=True)
            else:
                state = "ok" if row["ledger_ok"] else "BROKEN"
                print(f"{inst.instance_id}: {row['snippets']} snippets, oracle cites "
                      f"{len(row['oracle_ids'])}, ledger {state}", flush=True)  # fmt: skip
            out.write(json.dumps(row) + "\n")
            out.flush()
            rows.append(row)
    text = report(rows, args.budget)
    (args.out / "citations.md").write_text(text, "utf-8")
    print(text)
    failed = sum(1 for r in rows if "error" in r)
    if failed:
        print(f"{failed} of {len(rows)} instances failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
