"""Dense models side by side: doc comment -> function retrieval, embedding speed, query time.

    python -m eval.bench_dense --repos DIR [--models static,static-distilled,minilm]

Quality: for each language, functions with a doc comment are taken from the repositories
under ``--repos`` (Python: the docstring, by ``ast``; Go ``//``, Rust ``///``, Java and
TypeScript/JavaScript ``/** */`` comments right above a function or method). The query is
the comment's first sentence, the document the function without it; each query ranks all
documents of its language by cosine. Printed: MRR@10 and Acc@1 per language and model.
These repositories are the dev split's and the multilingual split's (none is in the static
model's training corpus, the standard library). Speed: sections/s embedding 2,000 stdlib
sections (as the index embeds them) and the median ms of one query, on this machine.
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import statistics
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from engine import Config
from engine.embed import Embedder, make_embedder
from eval.swebench_data import find_git_dir, materialise
from eval.train_static import section_texts

# language -> (repositories as owner/name, file suffixes): the dev and multilingual splits'.
LANGUAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "python": (("pytest-dev/pytest", "sphinx-doc/sphinx", "astropy/astropy"), (".py",)),
    "go": (("gin-gonic/gin", "prometheus/prometheus"), (".go",)),
    "rust": (("tokio-rs/tokio", "nushell/nushell"), (".rs",)),
    "java": (("jhy/jsoup", "mockito/mockito"), (".java",)),
    "ts/js": (("colinhacks/zod", "preactjs/preact"), (".ts", ".tsx", ".js")),
}
_PER_LANGUAGE = 1200  # pairs per language: every query ranks this many documents
_DOC_LINE = re.compile(r"^\s*(//|/\*\*|\*|\*/)")
_DOC_MARK = re.compile(r"^\s*(///?|/\*\*|\*/|\*)\s?")
_NOT_SIGNATURE = re.compile(
    r"^\s*(if|for|while|return|let|const|var|else|switch|catch|expect|new|await|try|match)\b"
    r"|^\s*[})]"
)
_SIGNATURE = re.compile(
    r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?(fn|func)\b"
    r"|^\s*(public|protected|private|static|export|async|function)\b"
    r"|^\s*[\w<>\[\], ]+\s+\w+\s*\("
)


def first_sentence(text: str) -> str | None:
    """The first sentence of ``text`` when it has 4-40 words."""
    flat = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", flat)
    sentence = match.group(1) if match else flat
    return sentence if 4 <= len(sentence.split()) <= 40 else None


def python_pairs(text: str) -> Iterator[tuple[str, str]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    lines = text.split("\n")
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        doc = ast.get_docstring(node)
        query = first_sentence(doc.split("\n\n")[0]) if doc else None
        first = node.body[0]
        if query is None or first.end_lineno is None or node.end_lineno is None:
            continue
        body = lines[node.lineno - 1 : first.lineno - 1] + lines[first.end_lineno : node.end_lineno]
        if len(body) >= 3:
            yield query, "\n".join(body)


def comment_pairs(text: str, suffix: str) -> Iterator[tuple[str, str]]:
    lines = text.split("\n")
    marker = {".rs": "///", ".go": "//"}.get(suffix, "/**")
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith(marker):
            i += 1
            continue
        j, doc = i, []
        while j < len(lines) and _DOC_LINE.match(lines[j]):
            doc.append(_DOC_MARK.sub("", lines[j]))
            j += 1
        while j < len(lines) and re.match(r"^\s*(#\[|@)", lines[j]):  # attributes
            j += 1
        if (
            j < len(lines)
            and _SIGNATURE.match(lines[j])
            and not _NOT_SIGNATURE.match(lines[j])
            and "{" in "".join(lines[j : j + 4])
        ):
            depth, k, opened = 0, j, False
            while k < len(lines) and k < j + 200:
                depth += lines[k].count("{") - lines[k].count("}")
                opened = opened or "{" in lines[k]
                k += 1
                if opened and depth <= 0:
                    break
            prose = " ".join(d for d in doc if not d.strip().startswith("@"))
            query = first_sentence(prose) if prose.strip() else None
            if query and 3 <= k - j <= 200:
                yield query, "\n".join(lines[j:k])
        i = max(j, i + 1)


def pairs(tree: Path, suffixes: tuple[str, ...]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in sorted(tree.rglob("*")):
        if path.suffix not in suffixes or path.name.endswith(".d.ts") or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if path.suffix == ".py":
            found.extend(python_pairs(text))
        else:
            found.extend(comment_pairs(text, path.suffix))
    return found


def mrr_at(scores: np.ndarray, k: int = 10) -> tuple[float, float]:
    """MRR@k and Acc@1 where query i's answer is document i."""
    own = np.diag(scores)[:, None]
    ranks = (scores > own).sum(axis=1)
    return float(np.mean(np.where(ranks < k, 1.0 / (ranks + 1.0), 0.0))), float(np.mean(ranks == 0))


def speed(embedder: Embedder, sections: list[str], queries: list[str]) -> tuple[float, float]:
    """Sections/s over ``sections`` and the median ms of one query."""
    embedder.embed(sections[:8])  # load the model outside the timing
    started = time.perf_counter()
    embedder.embed(sections)
    rate = len(sections) / (time.perf_counter() - started)
    times = []
    for query in queries:
        t = time.perf_counter()
        embedder.embed_query(query)
        times.append((time.perf_counter() - t) * 1000)
    return rate, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repos", type=Path, required=True, help="git dirs, as eval.swebench")
    parser.add_argument("--models", default="static,static-distilled,minilm")
    parser.add_argument("--speed-sections", type=int, default=2000)
    args = parser.parse_args(argv)
    config = Config.from_env()
    data: dict[str, list[tuple[str, str]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-dense-") as tmp:
        for language, (repos, suffixes) in LANGUAGES.items():
            found: list[tuple[str, str]] = []
            for repo in repos:
                try:
                    git_dir = find_git_dir(args.repos, repo)
                except FileNotFoundError as exc:
                    print(f"skipped: {exc}")
                    continue
                tree = Path(tmp) / repo
                materialise(git_dir, "HEAD", tree)
                found.extend(pairs(tree, suffixes))
            distinct = list({q.lower(): (q, d) for q, d in found}.values())
            random.Random(3).shuffle(distinct)
            if distinct:
                data[language] = distinct[:_PER_LANGUAGE]
    print("pairs:", ", ".join(f"{lang} {len(p)}" for lang, p in data.items()))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sections = section_texts(stdlib / "email")
    sections = (sections * (args.speed_sections // max(1, len(sections)) + 1))[
        : args.speed_sections
    ]
    queries = [q for p in data.values() for q, _ in p[:20]]
    header = " | ".join(f"{lang} MRR@10 / Acc@1" for lang in data)
    print(f"| model | {header} | mean MRR@10 | sections/s | query ms |")
    print("|---" * (len(data) + 4) + "|")
    for name in args.models.split(","):
        embedder = make_embedder(name, config)
        if embedder is None:
            continue
        cells, mrrs = [], []
        for ps in data.values():
            q = embedder.embed([a for a, _ in ps])
            d = embedder.embed([b for _, b in ps])
            m, a1 = mrr_at(q @ d.T)
            mrrs.append(m)
            cells.append(f"{m:.3f} / {a1 * 100:.1f}")
        rate, query_ms = speed(embedder, sections, queries)
        print(f"| {name} | {' | '.join(cells)} | {np.mean(mrrs):.3f} | {rate:,.0f} | "
              f"{query_ms:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
