"""Which files change together: a repository's commit history as co-change counts.

A fix rarely touches one file alone, and the files a change touches have usually changed
together before (a module and its tests, a header and its implementation, a function and
its callers). ``read_history`` reads the file lists of the newest ``HISTORY_COMMITS``
non-merge commits up to a commit (``git log --name-only``, paths relative to the working
tree's folder); ``ChangeHistory.related`` gives, for a set of paths, how strongly each
pair has changed together: the Jaccard share of the commits that touched either one,
``both / (a + b - both)``. Jaccard rather than "how often b changed when a did": a file
that changes with everything (a changelog, a registry, a package's ``__init__``) is near
every file by that measure and near none by this one.

Commits touching more than ``HISTORY_MAX_FILES`` files (renames, reformatting, vendored
updates) say nothing about which files belong together and are skipped. Both limits were
chosen with ``eval.swebench --dump`` offline: 10,000 commits against 1,000 and 3,000, and
20 files against 50 (see the README's rerank figures).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from indexers import git_overrides

__all__ = ["HISTORY_COMMITS", "HISTORY_MAX_FILES", "ChangeHistory", "read_history"]

HISTORY_COMMITS = 10_000  # newest non-merge commits read (git log -n)
HISTORY_MAX_FILES = 20  # commits touching more files than this are skipped
_FORMAT = 1  # of the JSON form; another one is read as no history
# A file changed once (just added) is near whatever it was added with by chance: it lends
# no weight to others until it has changed at least this often.
MIN_CHANGES = 2
_TIMEOUT_S = 60  # a history that takes longer to list is not read (the feature stays 0)


@dataclass(slots=True)
class ChangeHistory:
    """Per path, the commits that touched it, and per pair the commits that touched both."""

    commit: str = ""  # the newest commit read
    commits: int = 0  # commits counted (not skipped)
    changes: dict[str, int] = field(default_factory=dict)
    together: dict[str, dict[str, int]] = field(default_factory=dict)  # both directions

    @classmethod
    def of(cls, change_sets: Iterable[Collection[str]], commit: str = "",
           max_files: int = HISTORY_MAX_FILES) -> ChangeHistory:  # fmt: skip
        """Counts over ``change_sets`` (each commit's paths); sets larger than
        ``max_files`` are skipped."""
        changes: Counter[str] = Counter()
        together: dict[str, Counter[str]] = {}
        commits = 0
        for paths in change_sets:
            unique = sorted(set(paths))
            if not unique or len(unique) > max_files:
                continue
            commits += 1
            changes.update(unique)
            for a in unique:
                row = together.setdefault(a, Counter())
                row.update(b for b in unique if b != a)
        return cls(commit, commits, dict(changes),
                   {a: dict(row) for a, row in together.items() if row})  # fmt: skip

    def related(self, paths: Collection[str]) -> dict[str, dict[str, float]]:
        """For each of ``paths`` that changed with another of them (one changed at least
        ``MIN_CHANGES`` times): that other path -> their Jaccard share, in (0, 1]."""
        wanted = set(paths)
        out: dict[str, dict[str, float]] = {}
        for a in wanted:
            row = self.together.get(a)
            if not row:
                continue
            na = self.changes[a]
            near = {b: n / (na + self.changes[b] - n) for b, n in row.items()
                    if b in wanted and self.changes[b] >= MIN_CHANGES}  # fmt: skip
            if near:
                out[a] = near
        return out

    def neighbours(
        self, path: str, min_share: float, limit: int, exclude: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        """The paths outside ``exclude`` that changed with ``path`` (changed at least
        ``MIN_CHANGES`` times themselves) whose Jaccard share is at least ``min_share``:
        the ``limit`` strongest, ties by path."""
        row = self.together.get(path)
        if not row:
            return []
        na = self.changes[path]
        near = [(b, n / (na + self.changes[b] - n)) for b, n in row.items()
                if self.changes[b] >= MIN_CHANGES and b not in exclude]  # fmt: skip
        near = [(b, share) for b, share in near if share >= min_share]
        return sorted(near, key=lambda p: (-p[1], p[0]))[:limit]

    def to_json(self) -> str:
        """A compact JSON form (paths numbered once)."""
        names = sorted(self.changes)
        number = {p: i for i, p in enumerate(names)}
        pairs = [[number[a], number[b], n] for a, row in sorted(self.together.items())
                 for b, n in sorted(row.items()) if number[a] < number[b]]  # fmt: skip
        return json.dumps({"format": _FORMAT, "commit": self.commit, "commits": self.commits,
                           "paths": names, "changes": [self.changes[p] for p in names],
                           "pairs": pairs}, separators=(",", ":"))  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> ChangeHistory | None:
        """The history ``to_json`` wrote, or None for another format or a damaged file."""
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict) or raw.get("format") != _FORMAT:
                return None
            names = [str(p) for p in raw["paths"]]
            changes = {p: int(n) for p, n in zip(names, raw["changes"], strict=True)}
            together: dict[str, dict[str, int]] = {}
            for i, j, n in raw["pairs"]:
                a, b = names[int(i)], names[int(j)]
                together.setdefault(a, {})[b] = int(n)
                together.setdefault(b, {})[a] = int(n)
            return cls(str(raw.get("commit", "")), int(raw.get("commits", 0)), changes, together)
        except (ValueError, KeyError, TypeError, IndexError):
            return None


def read_history(
    root: Path, commit: str, *, limit: int = HISTORY_COMMITS, max_files: int = HISTORY_MAX_FILES,
    hidden: Callable[[list[str]], Collection[str]] | None = None,
) -> ChangeHistory | None:
    """The co-change counts of the newest ``limit`` non-merge commits up to ``commit``,
    paths relative to ``root`` (files outside it are not counted); None outside git or for
    an unknown commit.

    Offline and the same on every machine: no rename detection (it reads file contents, and
    a partial clone would fetch them), no lazy fetch of missing objects, and the user's
    log settings overridden; names NUL-separated, so any path reads back. A clone missing
    objects that a file list needs (a broken one) gives the commits listed before it.
    ``hidden``: given every name read, the ones to leave out (names holding a credential)."""
    if not root.is_dir() or shutil.which("git") is None:
        return None
    env = {**os.environ, **git_overrides(), "GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0"}
    try:
        run = subprocess.run(
            ["git", "-c", "log.showRoot=true", "-c", "log.showSignature=false", "log",
             "--no-merges", "--no-renames", "--name-only", "--relative", "-z",
             "--format=format:%x01", f"-n{int(limit)}", commit, "--"],
            cwd=root, env=env, capture_output=True, check=False, timeout=_TIMEOUT_S,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = run.stdout.decode("utf-8", errors="surrogateescape")
    if run.returncode != 0 and not text.strip():
        return None
    # A name git history holds in bytes no UTF-8 reads (an old Latin-1 one) is no file
    # the index can hold: left out (its surrogates would reach tantivy and fail a query).
    sets = [[name for name in block.lstrip("\n").split("\0") if name and _is_text(name)]
            for block in text.split("\x01")]  # fmt: skip
    if hidden is not None:
        gone = set(hidden(sorted({name for names in sets for name in names})))
        if gone:
            sets = [[name for name in names if name not in gone] for names in sets]
    return ChangeHistory.of(sets, commit, max_files)


def _is_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
