"""Benchmark: per-branch overlays on a real git repository, against full rebuilds.

    python -m eval.bench_overlays [--files N] [--queries 200] [--seed 0] [--keep DIR]

The corpus is a copy of the running interpreter's standard library (*.py, *.rst, *.txt,
*.md; no site-packages) committed to a fresh git repository on ``main``. Timed: the base
build, the refresh after a 1-file edit, switching to a branch 10 files away (``ten``) and
to one 100 files away (``hundred``, from ``ten``: ~110 files move), and a full rebuild of
the ``hundred`` tree into a fresh state dir. Then disk per overlay, and query latency of
the View (base + 100-file overlay) against the single segment, with a check that both
answer the same.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine import Config, ContextPack, IndexReport, SearchHit, Workspace
from eval.bench_context import _pct, _queries

_SUFFIXES = (".py", ".rst", ".txt", ".md")
_SKIP = {"site-packages", "__pycache__"}
_GIT = ("git", "-c", "user.name=cortex bench", "-c", "user.email=bench@cortex.invalid",
        "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null")  # fmt: skip
_REL = 1e-4


@dataclass(frozen=True, slots=True)
class Row:
    stage: str
    seconds: float
    report: IndexReport
    disk: int
    overlay: str  # "files+tombstones" of the branch's overlay


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run([*_GIT, *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _copy_corpus(dest: Path, cap: int, rng: random.Random) -> tuple[int, int]:
    """Copy the stdlib's text files into ``dest``; (files, bytes)."""
    src = Path(sysconfig.get_paths()["stdlib"])
    found: list[Path] = []
    for folder, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)
        found += [Path(folder, n) for n in sorted(names) if n.endswith(_SUFFIXES)]
    found = [p for p in found if p.is_file()]
    if cap and len(found) > cap:
        found = sorted(rng.sample(found, cap))
    for path in found:
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return len(found), sum(p.stat().st_size for p in found)


def _committed_corpus(repo: Path, cap: int, rng: random.Random) -> tuple[int, int]:
    """``_copy_corpus`` into ``repo``, committed to a fresh git repository on ``main``."""
    files, size = _copy_corpus(repo, cap, rng)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "stdlib")
    return files, size


def _append(path: Path, tag: str) -> None:
    with path.open("ab") as f:
        f.write(f'\n\ndef bench_overlay_{tag}(value: int) -> str:\n    """Marker {tag} '
                f'added by the overlay benchmark."""\n    return f"{tag}-{{value}}"\n'
                .encode())  # fmt: skip


def _make_branch(repo: Path, name: str, edit: Sequence[str], gone: str) -> None:
    """Branch ``name`` from main in a scratch worktree: ``edit`` get a new function each,
    one new module, ``gone`` deleted; committed. The main working tree is not touched."""
    tree = repo.parent / f"wt-{name}"
    _git(repo, "worktree", "add", "-q", "-b", name, str(tree), "main")
    for i, rel in enumerate(edit):
        _append(tree / rel, f"{name}_{i}")
    _append(tree / f"bench_overlay_{name}.py", f"{name}_new")
    (tree / gone).unlink()
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", f"{name}: {len(edit)} edited, 1 added, 1 deleted")
    _git(repo, "worktree", "remove", "--force", str(tree))


def _index(ws: Workspace, stage: str) -> Row:
    _say(f"{stage}: indexing ...")
    start = time.perf_counter()
    report = ws.index()
    seconds = time.perf_counter() - start
    st = ws.status(check_files=False)
    disk = st.overlay_bytes if st.overlay_files or st.tombstones else st.base_bytes
    _say(f"{stage}: {seconds:.2f} s, {report.added} added / {report.changed} changed / "
         f"{report.removed} removed, {report.embeddings_computed} embedded, "
         f"overlay {st.overlay_files} files + {st.tombstones} tombstones")  # fmt: skip
    return Row(stage, seconds, report, disk, f"{st.overlay_files}+{st.tombstones}")


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= _REL * max(abs(a), abs(b), 1e-12)


def _same(a: list[SearchHit], b: list[SearchHit]) -> bool:
    """Same ids with the same scores (rel 1e-4), in the same order up to near-ties."""
    if len(a) != len(b):
        return False
    sa = {h.chunk.id: h.score for h in a}
    sb = {h.chunk.id: h.score for h in b}
    return (sa.keys() == sb.keys() and all(_close(sa[i], sb[i]) for i in sa)
            and all(_close(x.score, y.score) for x, y in zip(a, b, strict=True)))  # fmt: skip


def _show(hits: list[SearchHit]) -> str:
    return ", ".join(f"{h.chunk.id[:10]}:{h.score:.5f}" for h in hits[:5])


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--files", type=int, default=0, help="cap the corpus (0: all)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dense", default="static")
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--keep", default=None, help="work in DIR (new; kept) instead of a temp dir"
    )
    args = parser.parse_args(argv)
    command = shlex.join([Path(sys.executable).name, "-m", "eval.bench_overlays", *sys.argv[1:]])
    rng = random.Random(args.seed)
    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=False)
    else:
        work = Path(tempfile.mkdtemp(prefix="cortex-overlays-"))
    try:
        return _run(args, work, rng, command)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path, rng: random.Random, command: str) -> int:
    repo = work / "repo"
    repo.mkdir()
    files, size = _committed_corpus(repo, args.files, rng)
    _say(f"corpus: {files:,} files, {size / 1e6:.1f} MB in {repo} (git, branch main)")
    rows: list[Row] = []
    overlay: dict[str, Row] = {}
    cfg = Config.from_env(state_dir=str(work / "state"), ledger=False, dense_model=args.dense)
    with Workspace.open(repo, cfg) as ws:
        rows.append(_index(ws, "base build (main)"))
        base_bytes = ws.status(check_files=False).base_bytes
        indexed = sorted(p for p in ws.layers.base_segment().files() if p.endswith(".py"))
        picks = rng.sample(indexed, 1 + 11 + 101)
        one, ten, hundred = picks[0], picks[1:12], picks[12:]
        _append(repo / one, "main_edit")
        rows.append(_index(ws, "edit 1 file (main)"))
        overlay["main (1 edit)"] = rows[-1]
        _make_branch(repo, "ten", ten[:10], ten[10])
        _make_branch(repo, "hundred", hundred[:100], hundred[100])
        _git(repo, "checkout", "-q", "--", one)  # drop the edit (its overlay stays on disk)
        _git(repo, "checkout", "-q", "ten")
        rows.append(_index(ws, "switch to ten (12 files)"))
        overlay["ten"] = rows[-1]
        _git(repo, "checkout", "-q", "hundred")
        rows.append(_index(ws, "switch to hundred (102)"))
        overlay["hundred"] = rows[-1]
        rows.append(_index(ws, "unchanged (hundred)"))
        total = ws.status(check_files=False).disk_bytes
        head = _git(repo, "rev-parse", "HEAD")
        full_cfg = Config.from_env(state_dir=str(work / "full"), ledger=False,
                                   dense_model=args.dense, base_ref=head)  # fmt: skip
        with Workspace.open(repo, full_cfg) as single:
            rows.append(_index(single, "full rebuild (hundred)"))
            st = single.status(check_files=False)
            full_total = st.disk_bytes
            assert st.overlay_files == 0 and st.tombstones == 0, "full rebuild has an overlay"
            vectors = f"{st.dense_vectors:,} vectors, {st.dense_kind}"
            latency, matches, mismatches = _latency(args, ws, single)
    print(f"\ncommand: {command}")
    print(f"corpus:  {files:,} files, {size / 1e6:.1f} MB (stdlib copy, git); dense {vectors}")
    print(f"\n{'stage':<26}{'seconds':>9}{'files a/c/r':>14}{'re-done':>9}"
          f"{'emb computed':>14}{'emb reused':>12}{'disk':>12}")  # fmt: skip
    for r in rows:
        rep = r.report
        print(f"{r.stage:<26}{r.seconds:>9.2f}{f'{rep.added}/{rep.changed}/{rep.removed}':>14}"
              f"{rep.added + rep.changed:>9,}{rep.embeddings_computed:>14,}"
              f"{rep.embeddings_reused:>12,}{_mb(r.disk):>12}")  # fmt: skip
    print(
        "  (disk: the base for a base build, the branch's overlay for a refresh, the "
        "single segment for the full rebuild)"
    )
    print(f"\nbase: {_mb(base_bytes)}; overlays: " + ", ".join(
        f"{k} {_mb(v.disk)} = {100 * v.disk / base_bytes:.2f}% ({v.overlay} files+tombstones)"
        for k, v in overlay.items()))  # fmt: skip
    print(f"state dir with base + 3 overlays: {_mb(total)} (vector cache included); "
          f"3 full indexes: 3 x {_mb(full_total)} = {_mb(3 * full_total)} "
          f"({total / (3 * full_total):.2f}x)")  # fmt: skip
    print(
        f"\nlatency on hundred, warm, interleaved: View = base + overlay of "
        f"{overlay['hundred'].overlay} files+tombstones; single = the full rebuild"
    )
    print(f"{'call':<16}{'View p50':>10}{'p95':>9}{'single p50':>12}{'p95':>9}{'ratio p50':>11}")
    for op, (view, one_seg) in latency.items():
        ratio = statistics.median(view) / statistics.median(one_seg)
        flag = "" if ratio <= 1.20 else "  > 1.20"
        print(f"{op:<16}{statistics.median(view):>8.2f}ms{_pct(view, 0.95):>7.2f}ms"
              f"{statistics.median(one_seg):>10.2f}ms{_pct(one_seg, 0.95):>7.2f}ms"
              f"{ratio:>10.2f}x{flag}")  # fmt: skip
    n = len(latency["search bm25"][0])
    print("View == single: " + ", ".join(f"{op} {m}/{n}" for op, m in matches.items()))
    for line in mismatches:
        print(f"  mismatch {line}")
    return 0


Op = Callable[[Workspace, str], object]


def _latency(
    args: argparse.Namespace, ws: Workspace, single: Workspace
) -> tuple[dict[str, tuple[list[float], list[float]]], dict[str, int], list[str]]:
    queries = _queries(ws, args.queries, seed=args.seed)
    ops: dict[str, Op] = {
        "search bm25": lambda w, q: w.search(q, mode="bm25", k=args.k),
        "search hybrid": lambda w, q: w.search(q, mode="hybrid", k=args.k),
        "build_context": lambda w, q: w.build_context(q, q, record=False,
                                                      budget_tokens=args.budget),
    }  # fmt: skip
    _say(f"latency: {len(queries)} queries x {len(ops)} calls x 2, warm-up pass ...")
    for q in queries:
        for fn in ops.values():
            fn(ws, q)
            fn(single, q)
    _say("latency: measuring ...")
    times: dict[str, tuple[list[float], list[float]]] = {op: ([], []) for op in ops}
    matches = dict.fromkeys(("bm25", "hybrid", "context citations"), 0)
    bad: list[str] = []
    for i, q in enumerate(queries):
        got: dict[str, tuple[object, object]] = {}
        for op, fn in ops.items():
            out: list[object] = [None, None]
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                out[side] = fn((ws, single)[side], q)
                times[op][side].append((time.perf_counter() - t0) * 1000)
            got[op] = (out[0], out[1])
        for key, op in (("bm25", "search bm25"), ("hybrid", "search hybrid")):
            a, b = got[op]
            assert isinstance(a, list) and isinstance(b, list)
            if _same(a, b):
                matches[key] += 1
            elif len(bad) < 8:
                bad.append(f"{key} {q!r}:\n    View   {_show(a)}\n    single {_show(b)}")
        pa, pb = got["build_context"]
        assert isinstance(pa, ContextPack) and isinstance(pb, ContextPack)
        cite = [[(c.source_uri, c.sha256) for c in p.citations] for p in (pa, pb)]
        matches["context citations"] += cite[0] == cite[1]
    _say("latency: done")
    return times, matches, bad


if __name__ == "__main__":
    raise SystemExit(main())
