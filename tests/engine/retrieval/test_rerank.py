"""Rerank: named features scaled per request, weighted, and kept for --explain."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core import RerankWeights
from engine.retrieval import DECLARATION_PRIOR, Candidate, rerank
from indexers import DocType
from tests.engine.records import chunk

IMPL = chunk("pkg/parse.py", "def parse_url(text):\n    return text.split('/')", symbol="parse_url",
             defines=("parse_url",), tokens=40)  # fmt: skip
TEST = chunk("tests/test_parse.py", "def test_parse_url():\n    assert parse_url('a/b')",
             symbol="test_parse_url", doc_type=DocType.TEST, references=("parse_url",),
             tokens=40)  # fmt: skip


def _cands() -> list[Candidate]:
    return [Candidate(IMPL, {"bm25": 2}, {"bm25": 3.0}, 0.02),
            Candidate(TEST, {"bm25": 1}, {"bm25": 4.0}, 0.03)]  # fmt: skip


def test_contributions_sum_to_the_score_and_are_scaled() -> None:
    """Each snippet's score is the sum of its features' points, every value in [0, 1]."""
    for s in rerank(_cands(), ["parse_url"], None, {}, {}, RerankWeights()):
        assert s.score == pytest.approx(sum(c.points for c in s.contributions))
        assert all(0.0 <= c.value <= 1.0 for c in s.contributions)
        assert all(c.points == pytest.approx(c.weight * c.value) for c in s.contributions)


def test_definitions_and_the_source_prior_put_code_first() -> None:
    """The section defining the name asked about, in implementation code, outranks a test
    that recall put first."""
    scored = rerank(_cands(), ["parse_url"], None, {}, {}, RerankWeights())
    assert [s.chunk.path for s in scored] == ["pkg/parse.py", "tests/test_parse.py"]
    features = {c.feature: c.value for c in scored[0].contributions}
    assert features["defines"] == 1.0 and features["source"] == 1.0


def test_zero_weights_drop_features_and_cosine_reads_vectors() -> None:
    """A feature weighted 0 is not listed; cosine is scaled across the candidates."""
    weights = RerankWeights(recall=0.0, file=0.0, defines=0.0, mentions=0.0, signal=0.0,
                            source=0.0, depth=0.0, code_ratio=0.0, entropy=0.0, size=0.0,
                            phrase=0.0, place=0.0, cosine=1.0, cochange=0.0)  # fmt: skip
    query = np.array([1.0, 0.0], dtype=np.float32)
    vectors = {TEST.id: np.array([1.0, 0.0], np.float32), IMPL.id: np.array([0.0, 1.0], np.float32)}
    scored = rerank(_cands(), [], query, vectors, {}, weights)
    assert [c.feature for c in scored[0].contributions] == ["cosine"]
    assert scored[0].chunk.id == TEST.id and scored[0].score == 1.0 and scored[1].score == 0.0


def test_empty_in_empty_out_and_ties_by_id() -> None:
    """No candidates give no ranking; equal scores order by chunk id."""
    assert rerank([], [], None, {}, {}, RerankWeights()) == []
    twins = [Candidate(chunk(f"{n}.py", "x = 1"), {}, {}, 0.0) for n in "ba"]
    scored = rerank(twins, [], None, {}, {}, RerankWeights())
    assert [s.chunk.id for s in scored] == sorted(c.chunk.id for c in twins)


def test_a_question_about_tests_can_reach_them() -> None:
    """With the tests intent the test is no longer held down by the source prior."""
    from engine.retrieval import Intent

    plain = {
        c.feature: c.value
        for c in rerank(_cands(), [], None, {}, {}, RerankWeights())[1].contributions
    }
    asked = rerank(_cands(), [], None, {}, {}, RerankWeights(), frozenset({Intent.TESTS}))
    assert plain["source"] == 0.0
    assert asked[0].chunk.path == "tests/test_parse.py"
    assert {c.feature: c.value for c in asked[0].contributions}["source"] == 1.0


def test_a_quoted_message_lifts_the_section_that_holds_it() -> None:
    """The section holding a phrase the request quotes scores the phrase feature."""
    raises = chunk("pkg/args.py", 'def check(args):\n    raise UsageError("Got unexpected extra '
                   'argument")', symbol="check", tokens=40)  # fmt: skip
    cands = [*_cands(), Candidate(raises, {"bm25": 3}, {"bm25": 1.0}, 0.01)]
    phrases = (("got", "unexpected", "extra", "argument"),)
    scored = rerank(cands, [], None, {}, {}, RerankWeights(), phrases=phrases)
    assert scored[0].chunk.id == raises.id
    assert {c.feature: c.value for c in scored[0].contributions}["phrase"] == 1.0


def test_declaration_files_rank_below_the_code_they_declare() -> None:
    """A ``.d.ts`` or ``.pyi`` section gets a share of a definition's source prior, so the
    implementation it restates wins a tie that recall left to the declaration."""
    for suffix in (".d.ts", ".pyi"):
        decl = chunk(f"types/parse{suffix}", "export function parseUrl(text: string): string[]",
                     symbol="parseUrl", doc_type=DocType.DEFINITION, tokens=40)  # fmt: skip
        body = "export function parseUrl(text) {\n  return text.split('/')\n}"
        impl = chunk("src/parse.js", body,
                     symbol="parseUrl", doc_type=DocType.IMPLEMENTATION, tokens=40)  # fmt: skip
        cands = [Candidate(decl, {"bm25": 1}, {"bm25": 4.0}, 0.03),
                 Candidate(impl, {"bm25": 2}, {"bm25": 3.0}, 0.03)]  # fmt: skip
        scored = rerank(cands, [], None, {}, {}, RerankWeights())
        assert scored[0].chunk.id == impl.id, suffix
        source = {s.chunk.id: {c.feature: c.value for c in s.contributions}["source"]
                  for s in scored}  # fmt: skip
        assert source[decl.id] == DECLARATION_PRIOR * 1.0 and source[impl.id] == 1.0


def test_cochange_lifts_the_file_that_changes_with_the_strong_ones() -> None:
    """Two files recall ranks alike: the one that has changed together with the request's
    strong file wins on co-change; without history the feature is 0 everywhere."""
    strong = chunk("pkg/core.py", "def core():\n    return 1", symbol="core", tokens=40)
    near = chunk("pkg/near.py", "def near():\n    return 2", symbol="near", tokens=40)
    far = chunk("pkg/far.py", "def far():\n    return 3", symbol="far", tokens=40)
    cands = [Candidate(strong, {"bm25": 1}, {"bm25": 9.0}, 0.05),
             Candidate(far, {"bm25": 2}, {"bm25": 3.0}, 0.02),
             Candidate(near, {"bm25": 3}, {"bm25": 3.0}, 0.02)]  # fmt: skip
    related = {"pkg/near.py": {"pkg/core.py": 0.5, "pkg/far.py": 0.1},
               "pkg/core.py": {"pkg/near.py": 0.5}, "pkg/far.py": {"pkg/near.py": 0.1}}  # fmt: skip
    scored = rerank(cands, [], None, {}, {}, RerankWeights(), related=related)
    values = {s.chunk.path: {c.feature: c.value for c in s.contributions} for s in scored}
    assert values["pkg/near.py"]["cochange"] == 1.0  # strong file x 0.5, the far one adds 0
    assert values["pkg/far.py"]["cochange"] == 0.0  # its only neighbour, near, is as weak
    assert values["pkg/core.py"]["cochange"] == 0.0  # near's strength is 0 (the weakest)
    order = [s.chunk.path for s in scored]
    assert order.index("pkg/near.py") < order.index("pkg/far.py")
    plain = rerank(cands, [], None, {}, {}, RerankWeights())
    assert all(c.value == 0.0 for s in plain for c in s.contributions if c.feature == "cochange")
