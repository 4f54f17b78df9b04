"""Localisation instances from a repository's own history: a fix's commit message is the
request, the source files it edited are the gold, its parent is the tree to index.

    python -m eval.mine_commits --repos DIR --repo owner/name[=language] [--repo ...] \\
        --out FILE.jsonl [--per-repo 14] [--depth 2000] [--seed 0]
    python -m eval.swebench --data FILE.jsonl --repos DIR --out OUT [--dump]

No labels are needed, so any repository can be measured: the harness reads the rows as it
reads the SWE-bench splits (``gold_source_files`` judges, ``language`` picks the baseline's
files). A commit is kept when it looks like a fix or a change of behaviour that a report
could have asked for:

- a non-merge commit on the first-parent line, among the newest ``--depth``;
- its message, without trailers (``Signed-off-by:`` ...), has at least ``MIN_MESSAGE``
  characters, names a fix or a behaviour (fix, crash, error, support, handle, ...), and its
  subject is not a merge, revert, release, version bump, chore, docs, CI or test change;
- it edits (modifies, not adds) one to ``MAX_GOLD`` source files, which are code by
  ``indexers``' own doc types (not tests, examples or docs), adds or deletes no source file
  and touches at most ``MAX_FILES`` files in all;
- the message does not name a gold file (``parser.c`` in the message gives the answer away).

A row's ``language`` is its gold files' (by extension, and a ``.h`` by its head, as the
indexers read it: C++ when it holds C++), or the one given after ``=``.

Then ``--per-repo`` of them are drawn at random (``--seed``). A credential in a message is
redacted (``indexers.redact``) before the row is written. A commit message is shorter
and names the code more often than an issue does, so these rows check that a ranking
carries to other repositories and languages; they do not replace the splits. Rows of
repositories fetched for measuring are for measuring only: never commit them.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.swebench_data import find_git_dir, git_dir_of
from indexers import Family, doc_type_for, language_for_file, redact

__all__ = ["Mined", "main", "mine"]

MIN_MESSAGE = 90  # characters of message, trailers removed
MAX_GOLD = 3  # source files a kept commit edits
MAX_FILES = 12  # files a kept commit touches in all
_BEHAVIOUR = re.compile(
    r"\b(fix|fixes|fixed|bug|crash|error|wrong|incorrect|fail|fails|broken|handle|support|"
    r"allow|missing|should|when|issue|panic|regression)\b",
    re.I,
)
_NOT_A_FIX = re.compile(
    r"^(merge|revert|release|bump|chore|docs?|ci|build|style|tests?|deps|prepare|version)\b",
    re.I,
)
_TRAILER = re.compile(
    r"^(signed-off-by|co-authored-by|reviewed-by|acked-by|cc|change-id|pr-url|reviewed-on):.*$",
    re.I | re.M,
)


# One row in the splits' format (instance_id, repo, base_commit, problem_statement,
# gold_files, gold_source_files, language ...).
Mined = dict[str, Any]


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


def _source(git_dir: Path, sha: str, path: str) -> str | None:
    """The language of a source file (code, not a test, example or doc), else None; a
    ``.h``'s head at commit ``sha`` says whether it is C or C++, as when it is indexed."""
    head = _git(git_dir, "show", f"{sha}:{path}")[:8192] if path.endswith(".h") else ""
    lang = language_for_file(path, head.encode())
    if lang.family is not Family.CODE or doc_type_for(path, lang) is not None:
        return None
    return lang.name


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()


def _row(repo: str, git_dir: Path, sha: str, parent: str, message: str) -> Mined | None:
    """The commit as a row, or None when it is not kept (the rules in the module doc)."""
    message = _TRAILER.sub("", message).strip()
    subject = message.splitlines()[0] if message else ""
    if len(message) < MIN_MESSAGE or _NOT_A_FIX.match(subject) or not _BEHAVIOUR.search(message):
        return None
    status = _git(git_dir, "diff", "--name-status", "--no-renames", parent, sha)
    changes = [line.split("\t") for line in status.splitlines() if line]
    if not changes or len(changes) > MAX_FILES:
        return None
    gold, languages = [], Counter[str]()
    for kind, *paths in changes:
        path = paths[-1]
        lang = _source(git_dir, parent if kind == "D" else sha, path)
        if lang is None:
            continue
        if kind != "M":  # an added source file cannot be found; a deleted one is not a fix
            return None
        gold.append(path)
        languages[lang] += 1
    if not 1 <= len(gold) <= MAX_GOLD:
        return None
    lowered = message.lower()
    if any(len(_stem(p)) >= 4 and re.search(rf"\b{re.escape(_stem(p))}\b", lowered)
           for p in gold):  # fmt: skip
        return None
    return {"instance_id": f"{repo.replace('/', '__')}-{sha[:10]}", "repo": repo,
            "base_commit": parent, "problem_statement": redact(message).text,
            "gold_files": [paths[-1] for _, *paths in changes], "gold_source_files": gold,
            "new_files": [], "gold_functions": [], "language": languages.most_common(1)[0][0],
            "commit": sha}  # fmt: skip


def mine(
    repos: Path, repo: str, per_repo: int, depth: int, seed: int, language: str | None = None
) -> tuple[list[Mined], int]:
    """Up to ``per_repo`` rows of ``repo`` (and how many commits were kept before drawing);
    ``language``, when given, is every row's."""
    git_dir = git_dir_of(find_git_dir(repos, repo))
    log = _git(git_dir, "log", "--first-parent", "--no-merges", "-n", str(depth),
               "--format=%H%x00%P%x00%B%x01")  # fmt: skip
    kept = []
    for record in log.split("\x01"):
        fields = record.strip("\n").split("\x00", 2)
        if len(fields) != 3 or len(fields[1].split()) != 1:
            continue
        if (row := _row(repo, git_dir, fields[0], fields[1], fields[2])) is not None:
            kept.append(row if language is None else {**row, "language": language})
    random.Random(f"{seed}:{repo}").shuffle(kept)
    return kept[:per_repo], len(kept)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repos", type=Path, required=True,
                        help="where the git dirs are (eval.swebench's naming rule)")
    parser.add_argument("--repo", action="append", required=True,
                        help="owner/name, or owner/name=language (repeat for several)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON Lines file to write")
    parser.add_argument("--per-repo", type=int, default=14, help="rows drawn per repository")
    parser.add_argument("--depth", type=int, default=2000,
                        help="newest first-parent commits read per repository")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed")
    args = parser.parse_args(argv)
    if args.per_repo < 1 or args.depth < 1:
        parser.error("--per-repo and --depth must be at least 1")
    rows: list[Mined] = []
    for spec in args.repo:
        repo, _, language = spec.partition("=")
        try:
            drawn, kept = mine(args.repos, repo, args.per_repo, args.depth, args.seed,
                               language or None)  # fmt: skip
        except (FileNotFoundError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            print(f"{repo}: cannot be read: {detail.strip()}", file=sys.stderr)
            return 2
        print(f"{repo}: {kept} commits kept, {len(drawn)} drawn", file=sys.stderr)
        rows.extend(drawn)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), "utf-8")
    print(f"wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
