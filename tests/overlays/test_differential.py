"""A View over base + overlay answers exactly as a full rebuild of the same working tree.

Hypothesis writes random scripts of branch creation, checkouts, edits, adds, deletes,
renames, staging and commits on a real temporary git repository. After every step the
workspace (one base, refreshed overlays) and a fresh full index of the same tree (its own
state folder) are asked the same questions: BM25, dense and hybrid search (same ids in the
same order, scores within float tolerance) and build_context (the same citations, with
their spans, hashes and scores, and the same pointers to what did not fit).

The full rebuild indexes a plain copy of the working tree (no git: one segment, no
overlay). Modification times are pinned to the base commit's time after every step, so the
comparison holds with the (off by default) recency feature on too: a base records its
commit's time for its files, the overlay and the copy record the files' own. Co-change is
off here: it reads the base's git history, which a copy outside git has none of.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Config, ContextPack, Workspace
from engine.core import Lane, RerankWeights
from engine.retrieval import Scored
from tests.engine.test_workspace import GIT_ENV

CONFIG = Config(dense_model="hash", ledger=False)
# Recency on: the View must match with every feature of the rerank contributing, except
# co-change (the feature and the recall): it reads the git history, which the plain copy
# indexed beside it does not have (tests/overlays/test_layers.py and test_history.py).
_BASE_SETTINGS = CONFIG.context_settings()
SETTINGS = replace(_BASE_SETTINGS, weights=RerankWeights(recency=0.05, cochange=0.0),
                   recall=replace(_BASE_SETTINGS.recall, cochange_from=0))  # fmt: skip
WORDS = ["parse", "value", "render", "token", "cache", "index", "branch", "merge", "query"]
QUERIES = ["parse value", "render token cache", "branch merge", "index query parse", "fn_3"]
REL = 1e-4  # tantivy scores in f32, the View rescores in f64
PINNED = 1_700_000_000  # seconds: the initial commit's date and every file's mtime
GIT_DATED = {
    **GIT_ENV,
    "GIT_COMMITTER_DATE": f"{PINNED} +0000",
    "GIT_AUTHOR_DATE": f"{PINNED} +0000",
}

Step = tuple[str, int, int]
steps = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "edit",
                "add",
                "delete",
                "rename",
                "branch",
                "checkout",
                "commit",
                "stage",
                "drop_function",
            ]
        ),
        st.integers(0, 50),
        st.integers(0, 50),
    ),
    min_size=2,
    max_size=5,
)


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=GIT_DATED)
    return out.stdout.decode()


def _module(n: int, salt: int) -> str:
    body = []
    for j in range(3):
        a, b = WORDS[(n + j + salt) % len(WORDS)], WORDS[(n * 3 + j * 5 + salt) % len(WORDS)]
        body.append(f"def fn_{n}_{j}(x):\n    return {a}_{b}(x) + {j + salt}\n")
    return "\n".join(body)


def _py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*.py"))


def _apply(root: Path, step: Step, branches: list[str]) -> None:
    op, a, b = step
    files = _py_files(root)
    if op == "edit" and files:
        f = files[a % len(files)]
        f.write_text(f.read_text() + f"\ndef extra_{a}_{b}(q):\n    return {WORDS[b % 9]}(q)\n")
    elif op == "add":
        (root / f"new_{a}.py").write_text(_module(a, b))
    elif op == "delete" and files:
        files[a % len(files)].unlink()
    elif op == "rename" and files:
        src, target = files[a % len(files)], root / f"moved_{b}.py"
        if src != target:
            if _tracked(root, src):
                _git(root, "mv", "-f", src.name, target.name)
            else:
                src.rename(target)
    elif op == "drop_function" and files:
        f = files[a % len(files)]
        kept = [part for part in f.read_text().split("\n\n") if f"fn_{a % 4}_" not in part]
        f.write_text("\n\n".join(kept))
    elif op == "branch":
        name = f"b{a}"
        if name not in branches:
            _git(root, "checkout", "-q", "-b", name)
            branches.append(name)
    elif op == "checkout" and branches:
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "--allow-empty", "-m", "wip")
        _git(root, "checkout", "-q", branches[a % len(branches)])
    elif op == "commit":
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "--allow-empty", "-m", f"c{a}")
    elif op == "stage":
        _git(root, "add", "-A")


def _tracked(root: Path, path: Path) -> bool:
    return bool(_git(root, "ls-files", "--", path.name).strip())


def _pin_mtimes(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.parts and ".cortex" not in path.parts:
            os.utime(path, (PINNED, PINNED))


def _same_answers(ws: Workspace, reference: Path, context: str) -> None:
    shutil.rmtree(reference, ignore_errors=True)
    copy = reference / "tree"
    shutil.copytree(ws.root, copy, ignore=shutil.ignore_patterns(".git", ".cortex"))
    with Workspace.open(copy, CONFIG.with_(state_dir=str(reference / "state"))) as full:
        full.index()
        for query in QUERIES:
            for mode in ("bm25", "dense", "hybrid"):
                got = ws.search(query, mode=mode, k=8)
                want = full.search(query, mode=mode, k=8)
                assert [h.chunk.id for h in got] == [h.chunk.id for h in want], (context, query)
                for g, w in zip(got, want, strict=True):
                    assert math.isclose(g.score, w.score, rel_tol=REL), (context, query, mode)
        for query in QUERIES[:3]:
            ranked_a: list[Scored] = []
            ranked_b: list[Scored] = []
            a = ws.build_context(
                query, budget_tokens=1200, record=False, explain=ranked_a, settings=SETTINGS
            )
            b = full.build_context(
                query, budget_tokens=1200, record=False, explain=ranked_b, settings=SETTINGS
            )
            # The whole reranked candidate list, with every feature's contribution.
            assert [c.chunk.id for c in ranked_a] == [c.chunk.id for c in ranked_b], context
            for x, y in zip(ranked_a, ranked_b, strict=True):
                assert math.isclose(x.score, y.score, rel_tol=REL, abs_tol=1e-9), context
            # The packed evidence too, when the git workspace shows no working-tree diff
            # (the plain copy has none, and a diff lane takes room from the evidence).
            if not any(block.lane is Lane.DIFF for block in a.prompt_blocks):
                assert _evidence(a) == _evidence(b), (context, query)
                assert [(p.source_uri, p.reason) for p in a.reachable] == [
                    (p.source_uri, p.reason) for p in b.reachable
                ], (context, query)
                assert a.advisory == b.advisory, (context, query)
            else:  # the same advice, though the room it says is left differs
                assert _unnumbered(a.advisory) == _unnumbered(b.advisory), (context, query)


def _unnumbered(advice: tuple[str, ...]) -> list[str]:
    return [re.sub(r"[\d,]+", "N", line) for line in advice]


def _evidence(pack: ContextPack) -> list[tuple[object, ...]]:
    return [
        (s.id, s.chunk_id, s.source_uri, s.sha256, s.reason_tag, s.text) for s in pack.citations
    ]


def start_repo(root: Path) -> Path:
    """A git repository at ``root`` with five modules and a README in one commit on
    ``main``, file times pinned (the start of every branch script)."""
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "T")
    for n in range(5):
        (root / f"m{n}.py").write_text(_module(n, 0))
    (root / "README.md").write_text("# Notes\n\nparse value and render token\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    _pin_mtimes(root)
    return root


@settings(
    max_examples=12,
    deadline=None,
    # The same scripts in every CI run; CORTEX_EXPLORE=1 draws new ones each run.
    derandomize=not os.environ.get("CORTEX_EXPLORE"),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(script=steps)
def test_view_equals_full_rebuild_after_every_step(
    tmp_path_factory: pytest.TempPathFactory, script: list[Step]
) -> None:
    """Random branch scripts: after each step the View answers as a full rebuild does."""
    top = tmp_path_factory.mktemp("diff")
    root = start_repo(top / "repo")
    branches = ["main"]
    with Workspace.open(root, CONFIG) as ws:
        ws.index()
        _same_answers(ws, top / "ref", "initial")
        for i, step in enumerate(script):
            _apply(root, step, branches)
            _pin_mtimes(root)
            _same_answers(ws, top / "ref", f"after step {i}: {step} of {script}")
