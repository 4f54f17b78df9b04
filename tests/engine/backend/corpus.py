"""A base, an overlay and the branch they make, built as real segments, for backend tests.

The base is a folder at "commit" ``BASE``; the branch edits two files, deletes one, adds one
and renames one. Most fields are short; ``long_module``'s run past 40 terms, where tantivy
rounds a field's length and Qdrant does not. ``Built`` holds the base segment, the overlay
segment (only the files that differ), the ``Scope`` that makes them the branch, and a
segment of the whole branch built from scratch: what every backend's answers within the
scope are compared with.
"""

from __future__ import annotations

import math
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from engine import Config
from engine.backend import ClientStore, EdgeStore, QdrantBackend, Store
from engine.embed import Embedder, EmbeddingCache, make_embedder
from engine.index import update_segment
from engine.segment import Segment
from indexers import SourceFile, WordCounter, walk
from overlays import Backend, Embedded, Scope

CONFIG = Config(dense_model="hash", ledger=False)
BASE, OVERLAY = "base-commit-1", "ws1/feature/ana"
WORDS = ["parse", "value", "render", "token", "cache", "index", "branch", "merge", "query"]


def module(n: int, salt: int, funcs: int = 2) -> str:
    """A small Python module: ``funcs`` short functions, every field well under 40 terms."""
    body = []
    for j in range(funcs):
        a, b = WORDS[(n + j + salt) % len(WORDS)], WORDS[(n * 3 + j * 5 + salt) % len(WORDS)]
        body.append(f"def fn_{n}_{j}(x):\n    return {a}_{b}(x) + {j + salt}\n")
    return "\n".join(body)


def long_module(n: int, salt: int) -> str:
    """A module of four functions whose bodies run past 40 terms (about 45 to 150), where
    tantivy stores a field's length rounded down and Qdrant keeps it exact."""
    body = []
    for j in range(4):
        pairs = [(WORDS[(n + i + salt) % len(WORDS)], WORDS[(n * 5 + i * i + j) % len(WORDS)])
                 for i in range(14 + 11 * j + n)]  # fmt: skip
        calls = [f"{a}_{b}(x)" for a, b in pairs]
        body.append(f"def long_{n}_{j}(x):\n    return " + " + ".join(calls) + "\n")
    return "\n".join(body)


def base_files() -> dict[str, str]:
    """The base tree."""
    files = {f"pkg/m{n}.py": module(n, 0) for n in range(8)}
    files["pkg/long0.py"] = long_module(0, 0)
    files["pkg/long1.py"] = long_module(1, 0)
    files["docs/README.md"] = "# Notes\n\nparse value and render token\n"
    files["pkg/sub/m0.py"] = module(20, 1)
    return files


def branch_files() -> dict[str, str]:
    """The branch's tree: m1 and long0 edited, m2 deleted, m3 renamed to moved.py, new.py
    added."""
    files = base_files()
    files["pkg/m1.py"] += "\ndef extra_cache(q):\n    return merge_query(q)\n"
    files["pkg/long0.py"] += "\n" + long_module(2, 3)
    del files["pkg/m2.py"]
    files["pkg/moved.py"] = files.pop("pkg/m3.py")
    files["pkg/new.py"] = module(30, 2)
    return files


def write(root: Path, files: dict[str, str]) -> None:
    """Write ``files`` under ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@dataclass
class Built:
    """Segments of the base, the overlay and the whole branch, and the branch's scope."""

    base: Segment
    overlay: Segment
    full: Segment
    scope: Scope
    embedder: Embedder
    cache: EmbeddingCache

    def embedded(self) -> Embedded:
        """The embedded backend over the base and overlay segments."""
        return Embedded(self.base, self.overlay)

    def reference(self) -> tuple[Backend, Scope]:
        """A backend and scope that answer as one index of the branch."""
        return Embedded(self.full), Scope("full")

    def close(self) -> None:
        """Close every segment and the cache."""
        for segment in (self.base, self.overlay, self.full):
            segment.close()
        self.cache.close()


def segment_of(
    directory: Path,
    root: Path,
    embedder: Embedder,
    cache: EmbeddingCache,
    only: set[str] | None = None,
) -> Segment:
    """A segment of ``root`` (of the paths ``only`` when given, scored in memory as an
    overlay is), built in one run."""
    segment = Segment(directory, create=True)
    listing = None
    if only is not None:
        listing = [s for s in walk(root, CONFIG.walk_options())
                   if isinstance(s, SourceFile) and s.path in only]  # fmt: skip
    update_segment(segment, root, CONFIG, counter=WordCounter(), embedder=embedder, cache=cache,
                   listing=listing, lexical=only is None)  # fmt: skip
    return segment


def build(top: Path) -> Built:
    """Base, overlay and full-branch segments under ``top``."""
    embedder = make_embedder("hash", CONFIG)
    assert embedder is not None
    cache = EmbeddingCache(top / "embeddings.sqlite")
    base_tree, branch_tree = top / "base-tree", top / "branch-tree"
    write(base_tree, base_files())
    write(branch_tree, branch_files())
    old, new = base_files(), branch_files()
    differ = {p for p, t in new.items() if old.get(p) != t}
    tombstones = {p for p in old if p not in new or p in differ}
    base = segment_of(top / "base", base_tree, embedder, cache)
    overlay = segment_of(top / "overlay", branch_tree, embedder, cache, only=differ)
    full = segment_of(top / "full", branch_tree, embedder, cache)
    scope = Scope(BASE, OVERLAY, frozenset(differ), frozenset(tombstones - differ))
    return Built(base, overlay, full, scope, embedder, cache)


def qdrant(built: Built, kind: str, where: Path) -> QdrantBackend:
    """A Qdrant backend of ``kind`` ("local": qdrant-client's local mode; "edge": the
    engine in process; "server": the cluster at ``QDRANT_URL``, in a collection of its own
    that ``close`` drops) holding the base and overlay as layers."""
    store: Store
    if kind == "local":
        store = ClientStore(":memory:", "cortex", api_key=None)
    elif kind == "server":
        store = LiveStore(os.environ["QDRANT_URL"], f"cortex-test-{uuid.uuid4().hex[:12]}",
                          api_key=os.environ.get("QDRANT_API_KEY") or None)  # fmt: skip
    else:
        store = EdgeStore(where / "edge")
    backend = QdrantBackend(store)
    backend.mirror(built.base, BASE, embedder=built.embedder, cache=built.cache)
    backend.mirror(built.overlay, OVERLAY, embedder=built.embedder, cache=built.cache)
    return backend


class LiveStore(ClientStore):
    """A server collection made for one test and dropped when closed."""

    def close(self) -> None:
        self._client.delete_collection(self.collection)
        super().close()


def assert_same_ranking(
    got: list[tuple[str, float]], want: list[tuple[str, float]], rel: float, context: object = ""
) -> None:
    """``got`` ranks as ``want``: scores equal rank by rank within ``rel``, and ids equal
    except among scores that tie within the tolerance (f32 noise may order those, or pick
    which of them makes the cut, either way)."""
    assert len(got) == len(want), context
    tol = 2 * rel
    for i, ((gid, gs), (wid, ws)) in enumerate(zip(got, want, strict=True)):
        assert math.isclose(gs, ws, rel_tol=rel, abs_tol=1e-6), (context, i, got, want)
        if gid != wid:
            near = [w for j, (_, w) in enumerate(want)
                    if j != i and math.isclose(w, ws, rel_tol=tol, abs_tol=1e-6)]  # fmt: skip
            at_cut = math.isclose(ws, want[-1][1], rel_tol=tol, abs_tol=1e-6)
            assert near or at_cut, (context, i, got, want)
