"""SWE-bench data for the harness: instances, the repositories' git directories, trees
materialised from them, and the order an overlay run visits one repository's commits."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import threading
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_DATA",
    "TREE_FORMAT",
    "Instance",
    "check_workdir",
    "commit_time",
    "find_git_dir",
    "git_dir_of",
    "language_of",
    "load_instances",
    "materialise",
    "plan_repository",
]


# The dev split, where the workplace keeps it beside this repository (found from this file,
# not from the folder a command runs in).
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "eval" / "swebench_dev.jsonl"


@dataclass(frozen=True, slots=True)
class Instance:
    """One SWE-bench task, reduced to what the harness uses."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    gold_files: tuple[str, ...]
    gold_functions: tuple[str, ...]
    agentless_class: dict[str, str] | None
    language: str = "python"  # the repository's main language (the multilingual splits)
    splits: tuple[str, ...] = ()  # the SWE-bench sets it is in (lite, verified), if known
    # Where the gold files came from: "gold_source_files", "gold_files" or "patch" (the
    # official SWE-bench formats carry only the fix's patch).
    gold_from: str = "gold_files"


_REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement")
# The files a unified diff edits that existed before it (``--- a/path``; a new file's
# old side is /dev/null): what the data's ``gold_files`` lists.
_EDITED = re.compile(r"^--- a/(.+?)\t?$", re.MULTILINE)


def load_instances(
    path: Path, select: Sequence[str] = (), limit: int | None = None
) -> list[Instance]:
    """Instances from a JSONL file, filtered by ids or globs, in (repo, id) order.

    Gold files are ``gold_source_files`` where a row has that field (the multilingual
    splits: an empty list there means the fix edits no source file), else ``gold_files``,
    else the files the row's ``patch`` edits (the official SWE-bench formats); an instance
    may end with none, which the harness reports and does not score. A row without
    ``language`` gets the language of its gold files' extensions. Refused, with the line
    or the id: a row that is not JSON or lacks a field, an id given twice, and a selection
    (an id or glob in ``select``) that matches no row."""
    rows = []
    matched: set[str] = set()
    for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise SystemExit(f"{path}:{number}: not a JSON object ({exc})") from None
        missing = [f for f in _REQUIRED if not isinstance(raw, dict) or f not in raw]
        if missing:
            raise SystemExit(f"{path}:{number}: no {', '.join(missing)} in the row")
        hits = [s for s in select if fnmatch.fnmatchcase(raw["instance_id"], s)]
        if select and not hits:
            continue
        matched.update(hits)
        gold, source = _gold(raw)
        rows.append(
            Instance(
                instance_id=raw["instance_id"],
                repo=raw["repo"],
                base_commit=raw["base_commit"],
                problem_statement=raw["problem_statement"],
                # Judged on the source files the fix edits where the data says which they
                # are (the multilingual splits: a changelog line is not retrievable code).
                gold_files=gold,
                gold_functions=tuple(raw.get("gold_functions") or ()),
                agentless_class=raw.get("agentless_class"),
                language=str(raw.get("language") or language_of(gold)),
                splits=tuple(str(s) for s in raw.get("splits") or ()),
                gold_from=source,
            )
        )
    if unmatched := [s for s in select if s not in matched]:
        raise SystemExit(f"--instances: nothing in {path} matches {', '.join(unmatched)}")
    twice = sorted(i for i, n in Counter(r.instance_id for r in rows).items() if n > 1)
    if twice:
        raise SystemExit(f"{path}: instance ids given more than once: {', '.join(twice)}")
    rows.sort(key=lambda r: (r.repo, r.instance_id))
    return rows[:limit] if limit else rows


def _gold(raw: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """A row's gold files and the field they came from (see ``load_instances``)."""
    for field in ("gold_source_files", "gold_files"):
        if field in raw and raw[field] is not None:
            return tuple(dict.fromkeys(str(f) for f in raw[field])), field
    patch = str(raw.get("patch") or "")
    return tuple(dict.fromkeys(_EDITED.findall(patch))), "patch"


def language_of(files: Sequence[str]) -> str:
    """The language most of ``files`` are written in, by extension (cortex's language
    table); "" when none is code (the baseline then reads every code extension)."""
    from indexers import Family, languages

    by_suffix = {e: lang.name for lang in languages() if lang.family is Family.CODE
                 for e in lang.extensions}  # fmt: skip
    found = Counter(by_suffix[s] for f in files if (s := Path(f).suffix.lower()) in by_suffix)
    return found.most_common(1)[0][0] if found else ""


def find_git_dir(repos: Path, repo: str) -> Path:
    """The git directory for ``owner/name`` under ``repos`` (naming rule in the module doc)."""
    owner, _, name = repo.partition("/")
    candidates = [
        repos / f"{owner}+{name}" / "repo",
        repos / f"{owner}+{name}",
        repos / f"{owner}__{name}.git",
        repos / f"{owner}__{name}",
        repos / f"{name}.git",
        repos / name,
    ]
    for candidate in candidates:
        if (candidate / "HEAD").exists() or (candidate / ".git").exists():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"no git directory for {repo} under {repos} (tried {tried})")


# What ``materialise`` writes, for the markers that let a later run reuse a tree: 2 is
# every tracked file byte for byte (1 was ``git archive``'s export, which drops
# ``export-ignore`` paths: 2,057 of 2,595 files of a PhpSpreadsheet commit).
TREE_FORMAT = 2


def materialise(git_dir: Path, commit: str, dest: Path) -> int:
    """Write the tree of ``commit`` into ``dest`` as a checkout holds it, without touching
    ``git_dir``: every file git tracks there, byte for byte (``git archive`` would apply
    the tree's ``export-ignore`` and ``export-subst`` attributes, leaving out the tests
    and docs a developer has), symlinks as symlinks, submodules left out.

    Returns how many blobs were missing from the git directory (a partial mirror may lack
    its largest files; those are left out). A commit the git directory does not hold is a
    ``RuntimeError`` naming it."""
    gd = f"--git-dir={git_dir_of(git_dir)}"
    listed = subprocess.run(["git", gd, "ls-tree", "-r", "-z", commit], capture_output=True,
                            check=False)  # fmt: skip
    if listed.returncode != 0:
        raise RuntimeError(f"commit {commit} is not in {git_dir}: "
                           f"{listed.stderr.decode(errors='replace').strip()}")  # fmt: skip
    entries = []
    for record in listed.stdout.split(b"\0"):
        if not record:
            continue
        info, _, raw_path = record.partition(b"\t")
        mode, kind, sha = info.split()
        if kind == b"blob":
            entries.append((mode, sha.decode(), os.fsdecode(raw_path)))
    dest.mkdir(parents=True, exist_ok=True)
    batch = subprocess.Popen(["git", gd, "cat-file", "--batch"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)  # fmt: skip
    assert batch.stdin is not None and batch.stdout is not None
    feed = batch.stdin

    def ask() -> None:  # asked from a thread: a large tree fills the pipe both ways
        with feed:
            for _mode, sha, _rel in entries:
                feed.write(f"{sha}\n".encode())

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    missing = 0
    for mode, _sha, rel in entries:
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            missing += 1
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)  # the newline after each object
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == b"120000":
            target.symlink_to(os.fsdecode(data))
            continue
        target.write_bytes(data)
        if mode == b"100755":
            target.chmod(0o755)
    asker.join()
    if batch.wait() != 0:
        raise RuntimeError(f"git cat-file failed on {git_dir} at {commit}")
    return missing


def git_dir_of(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def commit_time(git_dir: Path, commit: str) -> int:
    """The committer date of ``commit`` (seconds since the epoch); a commit the git
    directory does not hold is a ``RuntimeError`` naming it."""
    shown = subprocess.run(
        ["git", f"--git-dir={git_dir_of(git_dir)}", "show", "-s", "--format=%ct",
         f"{commit}^{{commit}}", "--"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if shown.returncode != 0 or not shown.stdout.split():
        raise RuntimeError(f"commit {commit} is not in {git_dir}")
    return int(shown.stdout.split()[0])


def plan_repository(git_dir: Path, instances: Sequence[Instance]) -> list[Instance]:
    """One repository's instances in the order an overlay run takes them.

    First the instance whose base commit is the median by commit date (the lower median
    for an even count; ties broken by instance id): its tree becomes the base. Then the
    later ones in date order, then the earlier ones from the base backwards, so that each
    tree is close to the one before it (the one jump, from the newest back to just before
    the base, lands on an overlay that is small anyway). An instance whose commit the git
    directory lacks is left out (each caller reports it when it gets there).
    """
    dates: dict[str, int] = {}
    for commit in {i.base_commit for i in instances}:
        with suppress(RuntimeError):
            dates[commit] = commit_time(git_dir, commit)
    known = [i for i in instances if i.base_commit in dates]
    by_date = sorted(known, key=lambda i: (dates[i.base_commit], i.instance_id))
    if not by_date:
        return []
    mid = (len(by_date) - 1) // 2
    return [by_date[mid], *by_date[mid + 1 :], *reversed(by_date[:mid])]


def check_workdir(path: Path) -> None:
    """Refuse a work folder inside a git working tree: the engine would take the trees
    there for part of that repository (its commits, its diff) instead of plain folders.
    (``--out``'s ``work`` folder, where no ``--workdir`` is given, is checked too.)"""
    full = path.resolve()
    probe = next(p for p in (full, *full.parents) if p.is_dir())  # it may not exist yet
    inside = subprocess.run(
        ["git", "-C", str(probe), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
        check=False,
    )
    if inside.returncode == 0 and inside.stdout.strip() == "true":
        raise SystemExit(f"the work folder {path} is inside a git working tree (trees there "
                         "would be taken for part of it); use a --workdir or --out outside")
