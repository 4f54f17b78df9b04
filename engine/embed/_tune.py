"""Tuning a static model on its teacher's text vectors (tokenlearn-style), and the shipped file.

Distillation (``_static.distill``) gives each vocabulary token the teacher's output for that
token alone. Tuning goes one step further: texts are run through the teacher once, and the
token rows are fitted so that the normalised sum of a text's rows points where the
teacher's vector for the whole text does (cosine loss, sparse Adam, a held-out share of
the texts scored before and after). The rows start from the distilled ones (centred, SIF
weighted, at the teacher's full width); tokens no text uses keep them. The fitted rows are
then projected on their top ``dims`` principal axes (no centring: a text's vector is a sum
of rows, so a shared shift would depend on its length).

The result ships as one ``.npz`` (``allow_pickle=False``): int8 rows with one float32
scale per row, the tokenizer's JSON, and a JSON manifest of the recipe. Loading it needs
numpy only; fitting needs torch, imported by ``fit`` alone.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.core import CacheError, ConfigError
from engine.embed._static import pca

__all__ = [
    "TUNED_FORMAT",
    "TUNED_VERSION",
    "FitReport",
    "TunedModel",
    "dequantize",
    "fit",
    "load_tuned",
    "project",
    "quantize",
    "save_tuned",
]

TUNED_FORMAT = "cortex-static-tuned"
TUNED_VERSION = 1
_INT8_MAX = 127.0


@dataclass(frozen=True, slots=True)
class FitReport:
    """What one ``fit`` did: texts used, and the held-out cosine loss before and after."""

    texts: int
    held_out: int
    epochs: int
    loss_before: float
    loss_after: float
    losses: tuple[float, ...]  # held-out loss after each epoch


@dataclass(frozen=True, slots=True)
class TunedModel:
    """A loaded tuned model: float32 rows, the tokenizer's JSON, and its manifest."""

    vectors: npt.NDArray[np.float32]
    tokenizer_json: str
    manifest: dict[str, Any]
    sha256: str  # of the file it was read from: what names its cache directory


def fit(
    init: npt.NDArray[np.float32],
    token_ids: Sequence[Sequence[int]],
    targets: npt.NDArray[np.float32],
    *,
    epochs: int = 10,
    lr: float = 3e-3,
    batch: int = 256,
    held_out: float = 0.05,
    seed: int = 0,
    on_epoch: Callable[[int, float], None] | None = None,
) -> tuple[npt.NDArray[np.float32], FitReport]:
    """Fit ``init``'s rows so each text's normalised row sum matches its target vector.

    ``token_ids[i]`` are text i's token ids (no special tokens), ``targets[i]`` the
    teacher's vector for it, as wide as ``init``. A ``held_out`` share of the texts (at
    least one) is never trained on and scores each epoch (``on_epoch(epoch, loss)``).
    Texts without tokens are dropped. Returns the fitted rows and a ``FitReport``.
    """
    import torch

    if init.ndim != 2 or targets.ndim != 2 or targets.shape[1] != init.shape[1]:
        raise ConfigError(
            f"rows {init.shape} and targets {targets.shape} must be 2-D and equally wide"
        )
    if len(token_ids) != targets.shape[0]:
        raise ConfigError(f"{len(token_ids)} token lists for {targets.shape[0]} targets")
    if epochs < 1 or batch < 1 or not 0.0 < held_out < 1.0 or not lr > 0.0:
        raise ConfigError("epochs and batch must be >= 1, held_out in (0, 1), lr > 0")
    usable = [i for i, ids in enumerate(token_ids) if len(ids) > 0]
    if len(usable) < 2:
        raise ConfigError("fitting needs at least two texts with tokens")
    vocab = init.shape[0]
    if any(not 0 <= t < vocab for i in usable for t in token_ids[i]):
        raise ConfigError(f"token ids must be in 0..{vocab - 1}")

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    order = np.array(usable)
    rng.shuffle(order)
    n_held = max(1, round(len(order) * held_out))
    held, train = order[:n_held], order[n_held:]
    if not train.size:
        raise ConfigError("no text left to train on after the held-out share")

    rows = torch.nn.EmbeddingBag(vocab, init.shape[1], mode="sum", sparse=True)
    rows.weight.data = torch.tensor(np.asarray(init, dtype=np.float32))
    optimiser = torch.optim.SparseAdam(list(rows.parameters()), lr=lr)
    goal = torch.tensor(np.asarray(targets, dtype=np.float32))

    def bag(indices: npt.NDArray[np.int64]) -> tuple[Any, Any]:
        lists = [token_ids[int(i)] for i in indices]
        flat = torch.tensor([t for ids in lists for t in ids], dtype=torch.long)
        starts = np.concatenate(([0], np.cumsum([len(ids) for ids in lists])[:-1]))
        return flat, torch.tensor(starts, dtype=torch.long)

    def loss_of(indices: npt.NDArray[np.int64]) -> Any:
        flat, starts = bag(indices)
        got = rows(flat, starts)
        cosine = torch.nn.functional.cosine_similarity(got, goal[indices], dim=1)
        return (1.0 - cosine).mean()

    def held_loss() -> float:
        with torch.no_grad():
            total = 0.0
            for start in range(0, held.size, 4096):
                part = held[start : start + 4096]
                total += float(loss_of(part)) * part.size
            return total / held.size

    before = held_loss()
    losses: list[float] = []
    for epoch in range(1, epochs + 1):
        rng.shuffle(train)
        for start in range(0, train.size, batch):
            loss = loss_of(train[start : start + batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()  # type: ignore[no-untyped-call]
        losses.append(held_loss())
        if on_epoch is not None:
            on_epoch(epoch, losses[-1])
    fitted = rows.weight.detach().numpy().astype(np.float32)
    report = FitReport(
        texts=int(train.size),
        held_out=int(held.size),
        epochs=epochs,
        loss_before=before,
        loss_after=losses[-1],
        losses=tuple(losses),
    )
    return fitted, report


def project(rows: npt.NDArray[np.float32], dims: int) -> npt.NDArray[np.float32]:
    """``rows`` on their top ``dims`` principal axes, uncentred; all-zero rows stay zero.

    A text's vector is a sum of rows, so a linear map of the rows is the same map of every
    text's vector; signs are fixed so that rebuilds agree."""
    if not 1 <= dims <= rows.shape[1]:
        raise ConfigError(f"dims must be in 1..{rows.shape[1]}, got {dims}")
    used = np.linalg.norm(rows, axis=1) > 0
    out = np.zeros((rows.shape[0], dims), dtype=np.float32)
    out[used] = pca(rows[used].astype(np.float64), dims, centre=False).astype(np.float32)
    return out


def quantize(
    rows: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Symmetric int8 per row: ``rows ≈ q * scale[:, None]``, each row's largest |value|
    mapped to 127 (an all-zero row gets scale 0)."""
    peak = np.abs(rows).max(axis=1).astype(np.float32)
    scale = (peak / _INT8_MAX).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0)[:, None]
    q = np.clip(np.rint(rows / safe), -_INT8_MAX, _INT8_MAX).astype(np.int8)
    return q, scale


def dequantize(q: npt.NDArray[np.int8], scale: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The float32 rows ``quantize`` stands for."""
    out: npt.NDArray[np.float32] = (q.astype(np.float32) * scale[:, None]).astype(np.float32)
    return out


def save_tuned(
    path: Path, rows: npt.NDArray[np.float32], tokenizer_json: str, recipe: dict[str, Any]
) -> None:
    """Write a tuned model to ``path`` (compressed ``.npz``, via a temp file and a rename)."""
    q, scale = quantize(np.asarray(rows, dtype=np.float32))
    manifest = {
        "format": TUNED_FORMAT,
        "version": TUNED_VERSION,
        "dims": int(rows.shape[1]),
        "vocab_size": int(rows.shape[0]),
        "tokenizer_sha256": hashlib.sha256(tokenizer_json.encode()).hexdigest(),
        "recipe": recipe,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        np.savez_compressed(
            fh,
            rows=q,
            scales=scale,
            tokenizer=np.frombuffer(tokenizer_json.encode(), dtype=np.uint8),
            manifest=np.frombuffer(json.dumps(manifest, sort_keys=True).encode(), dtype=np.uint8),
        )
    tmp.replace(path)


def load_tuned(path: Path) -> TunedModel:
    """Read and check a file ``save_tuned`` wrote; ``CacheError`` naming it if it is not one."""
    try:
        data = path.read_bytes()
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            q = npz["rows"]
            scale = npz["scales"]
            tokenizer_json = npz["tokenizer"].tobytes().decode()
            manifest = json.loads(npz["manifest"].tobytes().decode())
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise CacheError(f"tuned static model {path} cannot be read: {exc}") from exc
    problems = []
    if not isinstance(manifest, dict) or manifest.get("format") != TUNED_FORMAT:
        problems.append("not a cortex tuned static model")
    elif manifest.get("version") != TUNED_VERSION:
        problems.append(f"version {manifest.get('version')}, this cortex reads {TUNED_VERSION}")
    elif q.dtype != np.int8 or q.ndim != 2 or scale.shape != (q.shape[0],):
        problems.append(f"rows {q.dtype} {q.shape} with scales {scale.shape}")
    elif (manifest.get("vocab_size"), manifest.get("dims")) != q.shape:
        problems.append(f"manifest says {manifest.get('vocab_size')}x{manifest.get('dims')}")
    elif manifest.get("tokenizer_sha256") != hashlib.sha256(tokenizer_json.encode()).hexdigest():
        problems.append("tokenizer does not match its sha256")
    elif not np.all(np.isfinite(scale)):
        problems.append("non-finite scales")
    if problems:
        raise CacheError(f"tuned static model {path}: {problems[0]}")
    return TunedModel(
        vectors=dequantize(q, scale),
        tokenizer_json=tokenizer_json,
        manifest=manifest,
        sha256=hashlib.sha256(data).hexdigest(),
    )

