"""Static (token-lookup) embeddings distilled locally from a transformer, model2vec-style.

Distilling runs every vocabulary token through the transformer once (``[CLS] tok [SEP]``,
mean-pooled), reduces the outputs to ``dims`` with PCA and scales each row by a SIF weight
that treats the token's rank in the vocabulary as a Zipf frequency estimate: the recipe of
``model2vec.distill`` 0.10, written out here because its ``distill`` extra pins an older
``transformers`` than sentence-transformers needs. A text's vector is then the normalised
sum of its tokens' rows: no attention, so ~6,800 code sections/s on two CPU cores.

On disk a model is a directory, written atomically (temp directory, then rename)::

    manifest.json    format, version, source, dims, vocab_size, max_tokens, file sha256s
    vectors.npy      float32 (vocab_size, dims), loaded with allow_pickle=False
    tokenizer.json   a Hugging Face ``tokenizers`` tokenizer (padding off)

torch and transformers are imported only by ``distill``; loading and embedding need numpy
and ``tokenizers``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from engine.core import CacheError, ConfigError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "DEFAULT_STATIC_MAX_TOKENS",
    "StaticManifest",
    "StaticModel",
    "TokenOutputs",
    "distill",
    "load_static_model",
    "read_manifest",
    "save_static_model",
    "sif_weights",
    "token_outputs",
]

FORMAT = "cortex-static-embedding"
FORMAT_VERSION = 1  # bump when the recipe or the layout changes: the directory name hashes it
# A static model has no attention window; the cap only bounds the cost of one huge chunk
# (a 512-token tiktoken section of code is ~600 WordPiece tokens).
DEFAULT_STATIC_MAX_TOKENS = 2048
_SIF_COEFFICIENT = 1e-4  # model2vec's default: weight = a / (a + p(rank))
_DROP_TOKEN = re.compile(r"\[unused\d+\]")  # BERT's placeholder rows: no text maps to them
_DISTILL_BATCH = 1024  # tokens per forward pass: sequences are 3 long, so memory is tiny
# Texts per gather in ``embed``: 128 texts x 2048 tokens x 256 float32 bounds it at 256 MiB,
# and typical chunks (~300 WordPiece tokens) keep it near 40 MiB.
_EMBED_BLOCK = 128
_STALE_TMP_S = 3600.0  # distilling takes 20-90 s: older temp dirs are from killed runs
_MANIFEST = "manifest.json"
_VECTORS = "vectors.npy"
_TOKENIZER = "tokenizer.json"


@dataclass(frozen=True, slots=True)
class StaticManifest:
    """What ``manifest.json`` records about a saved static model."""

    source: str
    dims: int
    vocab_size: int
    max_tokens: int
    vectors_sha256: str
    tokenizer_sha256: str
    format: str = FORMAT
    version: int = FORMAT_VERSION

    @property
    def fingerprint(self) -> str:
        """A short hash of everything that decides the vectors: the model id's suffix."""
        key = f"{self.vectors_sha256}:{self.tokenizer_sha256}:{self.max_tokens}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class StaticModel:
    """A loaded static model: a row per token id, and the tokenizer that picks the rows."""

    manifest: StaticManifest
    vectors: npt.NDArray[np.float32]
    tokenizer: Tokenizer
    unk_id: int | None

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors, one row per text; a text with no known token gets the zero row."""
        out = np.zeros((len(texts), self.manifest.dims), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        for start in range(0, len(texts), _EMBED_BLOCK):
            ids = [e.ids for e in encodings[start : start + _EMBED_BLOCK]]
            lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter((i for row in ids for i in row), np.int64, int(lengths.sum()))
            owner = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
            if self.unk_id is not None:
                known = flat != self.unk_id
                flat, owner = flat[known], owner[known]
            if not flat.size:
                continue
            # Rows are grouped by text already, so one reduceat sums every text's tokens.
            firsts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            out[start + owner[firsts]] = np.add.reduceat(self.vectors[flat], firsts, axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.where(norms > 0, norms, 1.0)
        return out


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_manifest(directory: Path) -> StaticManifest:
    """The manifest of the model saved in ``directory``; ``CacheError`` if unreadable."""
    path = directory / _MANIFEST
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
        manifest = StaticManifest(**raw)
    except (OSError, ValueError, TypeError) as exc:
        raise CacheError(
            f"static model manifest {path} is unreadable ({exc}); delete {directory} to rebuild"
        ) from exc
    if manifest.format != FORMAT or manifest.version != FORMAT_VERSION:
        raise CacheError(
            f"{directory} holds {manifest.format} v{manifest.version}, this cortex reads "
            f"{FORMAT} v{FORMAT_VERSION}; delete it to rebuild"
        )
    return manifest


def load_static_model(directory: Path) -> StaticModel:
    """Load a saved model, checking both files against the manifest's sha256."""
    from tokenizers import Tokenizer

    manifest = read_manifest(directory)
    try:
        vector_bytes = (directory / _VECTORS).read_bytes()
        tokenizer_bytes = (directory / _TOKENIZER).read_bytes()
    except OSError as exc:
        raise CacheError(f"static model {directory} is incomplete ({exc}); delete it") from exc
    if _sha256(vector_bytes) != manifest.vectors_sha256:
        raise CacheError(f"{directory / _VECTORS} does not match its manifest; delete {directory}")
    if _sha256(tokenizer_bytes) != manifest.tokenizer_sha256:
        raise CacheError(
            f"{directory / _TOKENIZER} does not match its manifest; delete {directory}"
        )
    vectors = np.load(io.BytesIO(vector_bytes), allow_pickle=False)
    if vectors.dtype != np.float32 or vectors.shape != (manifest.vocab_size, manifest.dims):
        raise CacheError(
            f"{directory / _VECTORS} is {vectors.dtype} {vectors.shape}, the manifest says "
            f"float32 ({manifest.vocab_size}, {manifest.dims}); delete {directory}"
        )
    tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
    if tokenizer.get_vocab_size(with_added_tokens=True) > manifest.vocab_size:
        raise CacheError(f"{directory}: the tokenizer has ids past the vector rows; delete it")
    tokenizer.no_padding()
    tokenizer.enable_truncation(manifest.max_tokens)
    return StaticModel(manifest, vectors, tokenizer, _unk_id(tokenizer))


def _unk_id(tokenizer: Tokenizer) -> int | None:
    # The unknown token carries no meaning, and every unseen symbol maps to it.
    token = getattr(tokenizer.model, "unk_token", None)
    return tokenizer.token_to_id(token) if isinstance(token, str) else None


def save_static_model(
    directory: Path,
    vectors: npt.NDArray[np.float32],
    tokenizer_json: str,
    *,
    source: str,
    max_tokens: int = DEFAULT_STATIC_MAX_TOKENS,
) -> StaticManifest:
    """Write a model to ``directory`` atomically and return its manifest.

    The files go to a temp directory beside it, which is renamed into place only when
    complete: a killed run leaves a hidden ``.tmp`` directory, never a half model. If
    ``directory`` appeared meanwhile (another process won), that one is kept.
    """
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"vectors must be 2-D (vocab, dims), got shape {matrix.shape}")
    buffer = io.BytesIO()
    np.save(buffer, matrix, allow_pickle=False)
    vector_bytes = buffer.getvalue()
    tokenizer_bytes = tokenizer_json.encode("utf-8")
    manifest = StaticManifest(
        source=source,
        dims=int(matrix.shape[1]),
        vocab_size=int(matrix.shape[0]),
        max_tokens=max_tokens,
        vectors_sha256=_sha256(vector_bytes),
        tokenizer_sha256=_sha256(tokenizer_bytes),
    )
    manifest_bytes = (json.dumps(asdict(manifest), indent=2, sort_keys=True) + "\n").encode()
    directory.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(directory)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
    try:
        for name, data in (
            (_VECTORS, vector_bytes),
            (_TOKENIZER, tokenizer_bytes),
            (_MANIFEST, manifest_bytes),
        ):
            with (tmp / name).open("wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())  # the rename must never publish unwritten blocks
        try:
            tmp.rename(directory)
        except OSError:
            if not (directory / _MANIFEST).is_file():
                raise
            return read_manifest(directory)  # another process saved it first: theirs stands
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _remove_stale_temps(directory: Path) -> None:
    cutoff = time.time() - _STALE_TMP_S
    for leftover in directory.parent.glob(f".{directory.name}.*.tmp"):
        try:
            if leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass  # another process removed it first


@dataclass(frozen=True, slots=True)
class TokenOutputs:
    """The teacher's output for each vocabulary token alone (``[CLS] tok [SEP]``, mean-pooled).

    ``outputs[j]`` belongs to token id ``kept[j]``; ids not kept (special tokens, BERT's
    ``[unusedN]`` rows) have no text that maps to them."""

    outputs: npt.NDArray[np.float32]
    kept: npt.NDArray[np.int64]
    vocab_size: int
    tokenizer_json: str


def token_outputs(source: str) -> TokenOutputs:
    """Run every vocabulary token of ``source`` (a local model directory or a cached Hugging
    Face name) through it once. Raises ``OSError`` if the model is not available offline
    (nothing is downloaded)."""
    import inspect

    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, use_fast=True)
    model = AutoModel.from_pretrained(source, local_files_only=True).eval()
    # A copy without the model's padding (MiniLM's tokenizer.json pads to 128): it is both
    # what frames the probe below and what the saved model tokenizes with.
    backend = type(tokenizer.backend_tokenizer).from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_padding()
    backend.no_truncation()
    prefix, suffix = _special_frame(backend)
    vocab_size = backend.get_vocab_size(with_added_tokens=True)
    vocab = backend.get_vocab(with_added_tokens=True)
    keep = np.ones(vocab_size, dtype=bool)
    for token, token_id in vocab.items():
        if _DROP_TOKEN.fullmatch(token):
            keep[token_id] = False
    for token_id, added in backend.get_added_tokens_decoder().items():
        if added.special:  # [CLS], [PAD], [UNK]…: markers, not text (their rows stay zero)
            keep[token_id] = False
    kept = np.flatnonzero(keep)
    hidden = int(model.config.hidden_size)

    # BERT wants segment ids; models without segments (DistilBERT…) reject the argument.
    segments = "token_type_ids" in inspect.signature(model.forward).parameters
    outputs = np.empty((kept.size, hidden), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, kept.size, _DISTILL_BATCH):
            ids = kept[start : start + _DISTILL_BATCH]
            batch = torch.tensor([[*prefix, int(i), *suffix] for i in ids], dtype=torch.long)
            inputs = {"input_ids": batch, "attention_mask": torch.ones_like(batch)}
            if segments:
                inputs["token_type_ids"] = torch.zeros_like(batch)
            states = model(**inputs).last_hidden_state
            outputs[start : start + ids.size] = states.mean(dim=1).float().numpy()
    return TokenOutputs(np.nan_to_num(outputs), kept.astype(np.int64), vocab_size, backend.to_str())


def sif_weights(count: int) -> npt.NDArray[np.float64]:
    """SIF weight per rank ``a / (a + p(rank))``, from Zipf's law on the vocabulary order
    (BERT ids follow frequency): frequent tokens count less."""
    inv_rank = 1.0 / np.arange(2, count + 2, dtype=np.float64)
    weights: npt.NDArray[np.float64] = _SIF_COEFFICIENT / (
        _SIF_COEFFICIENT + inv_rank / inv_rank.sum()
    )
    return weights


def distill(source: str, dims: int) -> tuple[npt.NDArray[np.float32], str]:
    """Distill ``source`` (a local model directory or a cached Hugging Face name).

    Returns the ``(vocab_size, dims)`` float32 matrix and the tokenizer as JSON. Raises
    ``OSError`` if the model is not available offline (nothing is downloaded) and
    ``ConfigError`` if ``dims`` exceeds the model's width.
    """
    from transformers import AutoConfig

    # Checked before every token runs through the model (that takes 20-90 s).
    hidden = int(AutoConfig.from_pretrained(source, local_files_only=True).hidden_size)
    if not 1 <= dims <= hidden:
        raise ConfigError(f"static dims must be in 1..{hidden} for {source}, got {dims}")
    found = token_outputs(source)
    reduced = pca(found.outputs.astype(np.float64), dims)
    weights = sif_weights(found.kept.size)
    matrix = np.zeros((found.vocab_size, dims), dtype=np.float32)
    matrix[found.kept] = (reduced * weights[:, None]).astype(np.float32)
    return matrix, found.tokenizer_json


def _special_frame(backend: Tokenizer) -> tuple[list[int], list[int]]:
    """The special ids the tokenizer puts before and after one token (BERT: CLS, SEP)."""
    probe = backend.encode("a", add_special_tokens=False).ids
    framed = backend.encode("a", add_special_tokens=True).ids
    if len(probe) != 1 or probe[0] not in framed:
        raise ConfigError("cannot distill: the tokenizer does not frame a single token")
    at = framed.index(probe[0])
    return framed[:at], framed[at + 1 :]


def pca(
    x: npt.NDArray[np.float64], dims: int, *, centre: bool = True
) -> npt.NDArray[np.float64]:
    """Rows of ``x`` on its top ``dims`` principal axes (numpy SVD), centred first unless
    ``centre`` is False, signs fixed."""
    base = x - x.mean(axis=0) if centre else x
    _, _, vt = np.linalg.svd(base, full_matrices=False)
    scores: npt.NDArray[np.float64] = base @ vt[:dims].T
    # SVD signs are arbitrary; make each axis's largest score positive so rebuilds agree.
    biggest = scores[np.argmax(np.abs(scores), axis=0), np.arange(scores.shape[1])]
    signed: npt.NDArray[np.float64] = scores * np.where(biggest < 0, -1.0, 1.0)
    return signed
