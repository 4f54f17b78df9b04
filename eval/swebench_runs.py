"""A harness run's rows on disk: what ``results.jsonl`` holds and what a resumed run may
reuse of it, the settings a run is made with, the rows it appends and the failures it keeps,
and the budgets it is asked at. (``eval.swebench`` runs instances; this keeps their rows.)"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from engine.core import MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS
from eval.swebench_data import Instance

__all__ = [
    "RESULTS",
    "Results",
    "check_run",
    "done_rows",
    "drop_changed",
    "input_digest",
    "parse_budgets",
]

RESULTS = "results.jsonl"


def input_digest(inst: Instance) -> str:
    """What a row was scored from (repository, commit, problem, gold): a resumed run
    scores a row again when its data changed."""
    body = [inst.repo, inst.base_commit, inst.problem_statement, list(inst.gold_files),
            list(inst.gold_functions)]  # fmt: skip
    return hashlib.sha256(json.dumps(body).encode("utf-8")).hexdigest()[:16]


def done_rows(out: Path) -> dict[str, dict[str, Any]]:
    """The rows a run in ``out`` finished. A last line cut short (a kill or a full disk
    during its write) is dropped from the file, with a message: its instance runs again."""
    path = out / RESULTS
    if not path.exists():
        return {}
    rows = {}
    data = path.read_bytes()
    lines = data.split(b"\n")
    kept = len(data)
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if any(rest.strip() for rest in lines[number + 1 :]):
                raise SystemExit(
                    f"{path}: line {number + 1} is not JSON; fix or remove it"
                ) from None
            kept = sum(len(x) + 1 for x in lines[:number])
            print(f"{path}: its last line was cut short (an interrupted write); dropped, "
                  "and that instance runs again", flush=True)  # fmt: skip
            break
        rows[row["instance_id"]] = row
    if kept < len(data):
        with path.open("r+b") as file:
            file.truncate(kept)
    return rows


def check_run(out: Path, settings: dict[str, Any]) -> None:
    """Refuse to resume a run made with other settings (its rows would not compare)."""
    path = out / "run.json"
    if path.exists():
        previous = json.loads(path.read_text("utf-8"))
        if previous != settings:
            raise SystemExit(
                f"{out} holds a run with other settings ({previous}); use another --out"
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n", "utf-8")


def drop_changed(done: dict[str, dict[str, Any]], instances: Sequence[Instance]) -> None:
    """Drop from ``done`` the rows scored from other data than ``instances`` hold now (a
    changed gold file, commit or problem statement): they are scored again."""
    stale = [i.instance_id for i in instances if i.instance_id in done
             and done[i.instance_id].get("input", input_digest(i)) != input_digest(i)]  # fmt: skip
    for instance_id in stale:
        del done[instance_id]
    if stale:
        print(f"{len(stale)} rows were scored from other data (gold, commit or problem "
              f"statement changed since): scored again: {', '.join(stale)}",
              flush=True)  # fmt: skip


class Results:
    """Appends rows to ``results.jsonl`` as they finish, keeps the failures, and says how
    each went."""

    def __init__(
        self, file: TextIO, done: dict[str, dict[str, Any]], total: int, budget: int
    ) -> None:
        self.file = file
        self.done = done
        self.total = total
        self.budget = budget
        self.n = 0
        self.failed: dict[str, str] = {}  # instance id -> what went wrong

    def add(self, row: dict[str, Any]) -> None:
        self.n += 1
        self.file.write(json.dumps(row, sort_keys=True) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())
        self.done[row["instance_id"]] = row
        ours = row["ours"]
        layers = ""
        if "overlay_files" in row:
            layers = (", base" if row["base_build"] else "") + (
                f", overlay {row['overlay_files']} files {row['tombstones']} tombstones"
            )
        missing = (f"; gold not in the tree: {', '.join(row['gold_missing'])}"
                   if row.get("gold_missing") else "")  # fmt: skip
        print(
            f"[{self.n}/{self.total}] {row['instance_id']}: acc@1 {int(ours['acc@1'])} "
            f"acc@5 {int(ours['acc@5'])} hit@{self.budget} {int(ours[f'hit@{self.budget}'])} "
            f"({row['wall_s']:.0f} s, index {row['index_s']:.1f} s{layers}){missing}",
            flush=True,
        )

    def error(self, inst: Instance, exc: BaseException) -> None:
        self.n += 1
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        self.failed[inst.instance_id] = message
        print(f"[{self.n}/{self.total}] {inst.instance_id}: FAILED {message}", flush=True)


def parse_budgets(text: str, *, packed: bool = True) -> list[int]:
    """``4000,8000`` or ``4k,8k`` as token budgets; with ``packed`` (build_context packs
    them), each within what it takes, refused here before any tree is indexed."""
    budgets = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        try:
            value = int(float(part[:-1]) * 1000) if part.endswith("k") else int(part)
        except ValueError:
            raise SystemExit(f"--budgets: {part!r} is not a number of tokens") from None
        if value < 1 or (packed and not MIN_BUDGET_TOKENS <= value <= MAX_BUDGET_TOKENS):
            raise SystemExit(f"--budgets: {value} is outside {MIN_BUDGET_TOKENS}.."
                             f"{MAX_BUDGET_TOKENS} tokens")  # fmt: skip
        budgets.append(value)
    if not budgets:
        raise SystemExit("--budgets: give at least one")
    return budgets
