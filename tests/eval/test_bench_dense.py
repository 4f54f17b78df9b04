"""The dense benchmark's pairs (doc comment -> function) and its MRR, and the trainer's corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eval.bench_dense import comment_pairs, first_sentence, mrr_at, pairs, python_pairs
from eval.train_static import corpus

PY = '''
def shipping_cost(order, region):
    """Compute what delivery costs for one order.

    More text that is not the query.
    """
    rate = RATES[region]
    return rate * order.weight


def tiny():
    """Too short."""
    return 1
'''

GO = """// ShippingCost returns the delivery price for one order.
func ShippingCost(o Order, region string) float64 {
\trate := rates[region]
\treturn rate * o.Weight
}

// not a doc: a statement follows, not a function
if x {
}
"""

RUST = """/// Parses the header line into a name and a value.
#[inline]
pub fn parse_header(line: &str) -> (String, String) {
    let (a, b) = line.split_once(':').unwrap();
    (a.into(), b.into())
}
"""

JAVA = """class A {
    /**
     * Resets the token so it can be used again.
     * @return this token
     */
    Token reset() {
        start = -1;
        return this;
    }
}
"""


def test_first_sentence_needs_four_to_forty_words() -> None:
    assert first_sentence("Compute the cost of it. Then more.") == "Compute the cost of it."
    assert first_sentence("Too short.") is None
    assert first_sentence(" ".join(["word"] * 41)) is None


def test_python_pairs_drop_the_docstring_from_the_document() -> None:
    [(query, doc)] = list(python_pairs(PY))
    assert query == "Compute what delivery costs for one order."
    assert "def shipping_cost" in doc and "return rate * order.weight" in doc
    assert "delivery" not in doc and "More text" not in doc


def test_comment_pairs_per_language() -> None:
    [(q, d)] = list(comment_pairs(GO, ".go"))
    assert q == "ShippingCost returns the delivery price for one order."
    assert d.startswith("func ShippingCost") and d.rstrip().endswith("}") and "//" not in d
    [(q, d)] = list(comment_pairs(RUST, ".rs"))
    assert q == "Parses the header line into a name and a value."
    assert d.startswith("pub fn parse_header") and "#[inline]" not in d
    [(q, d)] = list(comment_pairs(JAVA, ".java"))
    assert q == "Resets the token so it can be used again."
    assert d.strip().startswith("Token reset()") and "@return" not in d


def test_pairs_walks_a_tree_by_suffix(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(PY)
    (tmp_path / "b.go").write_text(GO)
    (tmp_path / "types.d.ts").write_text("/** Declares the thing for the type checker. */\n")
    assert [q for q, _ in pairs(tmp_path, (".py",))] == [
        "Compute what delivery costs for one order."
    ]
    assert len(pairs(tmp_path, (".go", ".ts"))) == 1


def test_mrr_at_counts_the_rank_of_the_diagonal() -> None:
    scores = np.array([[0.9, 0.1, 0.2], [0.8, 0.5, 0.1], [0.1, 0.2, 0.3]], dtype=np.float32)
    mrr, acc1 = mrr_at(scores)  # ranks 1, 2, 1
    assert np.isclose(mrr, (1 + 0.5 + 1) / 3) and np.isclose(acc1, 2 / 3)
    assert mrr_at(scores, k=1)[0] == 2 / 3


def test_train_corpus_is_sampled_docstrings_then_sections(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(PY)
    texts = corpus(tmp_path, sections=10, docstrings=10, seed=1)
    assert texts[0] == "Compute what delivery costs for one order."
    assert any("def shipping_cost" in t for t in texts[1:])
    assert corpus(tmp_path, sections=10, docstrings=10, seed=1) == texts
