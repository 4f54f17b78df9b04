"""SWE-bench data for the harness: instances, the repositories' git directories, trees
materialised from them, and the order an overlay run visits one repository's commits."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Instance",
    "check_workdir",
    "commit_time",
    "find_git_dir",
    "git_dir_of",
    "load_instances",
    "materialise",
    "plan_repository",
]


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


def load_instances(
    path: Path, select: Sequence[str] = (), limit: int | None = None
) -> list[Instance]:
    """Instances from a JSONL file, filtered by ids or globs, in (repo, id) order.

    Gold files are ``gold_source_files`` where a row has them (the multilingual splits),
    else ``gold_files``."""
    rows = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        if select and not any(fnmatch.fnmatchcase(raw["instance_id"], s) for s in select):
            continue
        rows.append(
            Instance(
                instance_id=raw["instance_id"],
                repo=raw["repo"],
                base_commit=raw["base_commit"],
                problem_statement=raw["problem_statement"],
                # Judged on the source files the fix edits where the data says which they
                # are (the multilingual splits: a changelog line is not retrievable code).
                gold_files=tuple(raw.get("gold_source_files") or raw.get("gold_files") or ()),
                gold_functions=tuple(raw.get("gold_functions") or ()),
                agentless_class=raw.get("agentless_class"),
                language=str(raw.get("language") or "python"),
                splits=tuple(str(s) for s in raw.get("splits") or ()),
            )
        )
    rows.sort(key=lambda r: (r.repo, r.instance_id))
    return rows[:limit] if limit else rows


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


def materialise(git_dir: Path, commit: str, dest: Path) -> int:
    """Write the tree of ``commit`` into ``dest`` without touching ``git_dir``.

    Returns how many blobs were missing from the git directory (a partial mirror may lack
    its largest files): ``git archive`` refuses such a tree, so it is then written blob by
    blob with ``git cat-file --batch``, leaving the missing ones out.
    """
    dest.mkdir(parents=True, exist_ok=True)
    gd = f"--git-dir={git_dir_of(git_dir)}"
    archive = subprocess.Popen(
        ["git", gd, "archive", "--format=tar", commit],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert archive.stdout is not None
    extract = subprocess.run(
        ["tar", "-x", "-C", str(dest)],
        stdin=archive.stdout,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    archive.stdout.close()
    if archive.wait() == 0 and extract.returncode == 0:
        return 0
    listing = subprocess.run(
        ["git", gd, "ls-tree", "-r", "-z", commit], capture_output=True, check=True
    ).stdout
    entries = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        info, _, raw_path = record.partition(b"\t")
        mode, kind, sha = info.split()
        if kind == b"blob" and mode != b"120000":
            entries.append((sha.decode(), os.fsdecode(raw_path)))
    batch = subprocess.run(
        ["git", gd, "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha, _ in entries).encode(),
        capture_output=True,
        check=True,
    ).stdout
    missing, pos = 0, 0
    for _sha, rel in entries:
        end = batch.index(b"\n", pos)
        header = batch[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] == b"missing":
            missing += 1
            continue
        size = int(header[2])
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[pos : pos + size])
        pos += size + 1  # the blob, then a newline
    return missing


def git_dir_of(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def commit_time(git_dir: Path, commit: str) -> int:
    """The committer date of ``commit`` (seconds since the epoch)."""
    out = subprocess.run(
        ["git", f"--git-dir={git_dir_of(git_dir)}", "show", "-s", "--format=%ct", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])


def plan_repository(git_dir: Path, instances: Sequence[Instance]) -> list[Instance]:
    """One repository's instances in the order an overlay run takes them.

    First the instance whose base commit is the median by commit date (the lower median
    for an even count; ties broken by instance id): its tree becomes the base. Then the
    later ones in date order, then the earlier ones from the base backwards, so that each
    tree is close to the one before it (the one jump, from the newest back to just before
    the base, lands on an overlay that is small anyway).
    """
    dates = {c: commit_time(git_dir, c) for c in {i.base_commit for i in instances}}
    by_date = sorted(instances, key=lambda i: (dates[i.base_commit], i.instance_id))
    if not by_date:
        return []
    mid = (len(by_date) - 1) // 2
    return [by_date[mid], *by_date[mid + 1 :], *reversed(by_date[:mid])]


def check_workdir(path: Path) -> None:
    """Refuse a work folder inside a git working tree: the engine would take the trees
    there for part of that repository (its commits, its diff) instead of plain folders."""
    full = path.resolve()
    probe = next(p for p in (full, *full.parents) if p.is_dir())  # it may not exist yet
    inside = subprocess.run(
        ["git", "-C", str(probe), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
        check=False,
    )
    if inside.returncode == 0 and inside.stdout.strip() == "true":
        raise SystemExit(f"--workdir {path} is inside a git working tree; use a folder outside")
