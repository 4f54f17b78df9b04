"""BM25 on real code: Qdrant's engine against tantivy, where their length rounding differs.

On this repository's own ``overlays`` and ``engine`` retrieval/packing/index/segment code
(about 500 sections, many fields past 40 terms, where tantivy rounds a field's length and
Qdrant does not), 3-term queries cut from random sections, sections and pages: the Qdrant
backend rescores its candidates with tantivy's rounded lengths, so it returns tantivy's
ids in tantivy's order with tantivy's scores (f32 there, f64 here). Before the rescoring,
top-10 overlap was 98.8% on average and a hit's score differed by 0.27% at the median and
4.5% at most.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from engine.backend import EdgeStore, QdrantBackend
from engine.embed import EmbeddingCache, make_embedder
from engine.segment import code_terms
from overlays import Embedded, Scope
from tests.engine.backend.corpus import CONFIG, assert_same_ranking, segment_of

ROOT = Path(__file__).resolve().parents[3]
TREES = ["overlays", "engine/retrieval", "engine/packing", "engine/index", "engine/segment"]
REL = 5e-6  # tantivy sums in f32 (a few units in the last place per term); here in f64


def test_edge_bm25_agrees_with_tantivy_on_real_code(tmp_path: Path) -> None:
    """Every query: tantivy's top 10 ids in its order, scores equal to float rounding."""
    tree = tmp_path / "tree"
    for name in TREES:
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    embedder = make_embedder("hash", CONFIG)
    assert embedder is not None
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    segment = segment_of(tmp_path / "segment", tree, embedder, cache)
    qdrant = QdrantBackend(EdgeStore(tmp_path / "edge"))
    qdrant.mirror(segment, "base", embedder=embedder, cache=cache)
    reference, scope = Embedded(segment), Scope("base")
    rng = random.Random(0)
    chunks = [c for p in sorted(segment.files()) for c in segment.chunks_of(p)]
    queries = []
    for chunk in rng.sample(chunks, 40):
        words = code_terms(chunk.text).split()
        if len(words) > 4:
            at = rng.randrange(len(words) - 3)
            queries.append(" ".join(words[at : at + 3]))
    asked = 0
    for table in ("sections", "pages"):
        for query in queries:
            want = reference.search(Scope("local"), table, query, 10)  # type: ignore[arg-type]
            got = qdrant.search(scope, table, query, 10)  # type: ignore[arg-type]
            asked += bool(want)
            assert_same_ranking([(f.id, f.score) for f in got], [(f.id, f.score) for f in want],
                                REL, (table, query))  # fmt: skip
    qdrant.close()
    segment.close()
    cache.close()
    assert asked >= 40
