"""Configuration: one frozen object, named defaults, environment read in one place."""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import PurePosixPath
from typing import Any

from engine.core._errors import ConfigError
from engine.core._learning import DEFAULT_LEARN_BOUND, DEFAULT_LEARN_RATE, LearnSettings
from engine.core._limits import check_budget, whole_number, yes_no
from engine.core._settings import (
    DEFAULT_WORD_FORMS,
    ContextSettings,
    FileRanking,
    Fusion,
    PackSettings,
    RecallSettings,
)
from indexers import (
    DEFAULT_ENCODING,
    DEFAULT_MAX_SECTION_TOKENS,
    DEFAULT_WINDOW_OVERLAP_LINES,
    ChunkOptions,
    WalkOptions,
)

__all__ = ["ENV_PREFIX", "Config", "ConfigWarning"]

ENV_PREFIX = "CORTEX_"
# CORTEX_ variables that are not ``Config`` fields, each read where it is used:
# CORTEX_TOKEN (engine.serve: the HTTP bearer token, a secret kept out of Config) and
# CORTEX_BACKEND / CORTEX_QDRANT_* (engine.backend's settings).
OTHER_ENV = ("TOKEN", "BACKEND", "QDRANT_URL", "QDRANT_COLLECTION", "QDRANT_API_KEY")
_warned: set[str] = set()  # each unknown variable is said once per process
DEFAULT_MAX_FILE_BYTES = 1 << 20  # 1 MiB: larger files are data or generated, not code to read
DEFAULT_STATE_DIR = ".cortex"  # under the workspace root unless an absolute path is given
# The dense index's model. "static" (MiniLM's vocabulary rows tuned on MiniLM's vectors,
# shipped in engine/embed/data) embeds the standard library in about a minute on 2 cores;
# MiniLM itself takes over an hour there.
DEFAULT_DENSE_MODEL = "static"
DEFAULT_EMBED_BATCH = 256  # texts per embedder call: progress and cache writes per batch
DEFAULT_SEED = 0  # faiss k-means and anything else random: fixed, so builds repeat exactly
DEFAULT_BUDGET = 8000  # tokens of context per turn: room for ~15-25 functions with headers


@dataclass(frozen=True, slots=True)
class Config:
    """Everything tunable. Build it with keywords, ``from_env``, or ``with_``; never mutate.

    >>> Config(max_section_tokens=256).chunk_options().max_section_tokens
    256
    """

    max_section_tokens: int = DEFAULT_MAX_SECTION_TOKENS
    window_overlap_lines: int = DEFAULT_WINDOW_OVERLAP_LINES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    encoding: str = DEFAULT_ENCODING  # tiktoken encoding used for every token count
    state_dir: str = DEFAULT_STATE_DIR
    # "static", "static-distilled", "minilm", "none", "hash" (tests), or any
    # sentence-transformers name or path.
    dense_model: str = DEFAULT_DENSE_MODEL
    embedding_cache: str = ""  # path of the vector cache; "" = <state_dir>/embeddings.sqlite
    model_cache_dir: str = ""  # where static models live; "" = ~/.cache/cortex/models
    embed_batch_size: int = DEFAULT_EMBED_BATCH
    seed: int = DEFAULT_SEED
    budget_tokens: int = DEFAULT_BUDGET
    fusion: str = "rrf"  # how recall lists combine: "rrf" or "score"
    # How files rank from their sections: "learned" (a model over per-file aggregates) or
    # "sections" (the sum of each file's three best section scores).
    file_ranking: str = "learned"
    # Other forms of a short request's words searched beside them, per word (0: off).
    word_forms: int = DEFAULT_WORD_FORMS
    mmr_lambda: float = 0.75  # evidence selection: relevance (1.0) vs novelty (0.0)
    ledger: bool = True  # record every build_context turn in the evidence ledger
    ledger_path: str = ""  # "" = <state_dir>/ledger.sqlite
    # Overlays: whose overlay a call reads ("" = the login name), what a call does when the
    # working tree moved since the overlay was built ("auto": refresh it first; "advise":
    # answer from the index as it is and say so), the commit bases are built at ("" = the
    # merge-base of HEAD with the default branch), and when an overlay that grew past this
    # fraction of its base's files moves to a new base.
    user: str = ""
    refresh: str = "auto"
    base_ref: str = ""
    rebase_fraction: float = 0.3
    # Learning from outcomes (feedback with an outcome): the EMA step of this workspace's
    # rerank offsets and how far each may move (``LearnSettings``).
    learn_rate: float = DEFAULT_LEARN_RATE
    learn_bound: float = DEFAULT_LEARN_BOUND

    def __post_init__(self) -> None:
        self._check_types()
        if self.max_section_tokens < 16:
            raise ConfigError(f"max_section_tokens must be >= 16, got {self.max_section_tokens}")
        if self.window_overlap_lines < 0:
            raise ConfigError(f"window_overlap_lines must be >= 0, got {self.window_overlap_lines}")
        if self.embed_batch_size < 1:
            raise ConfigError(f"embed_batch_size must be >= 1, got {self.embed_batch_size}")
        check_budget(self.budget_tokens)
        if self.word_forms < 0:
            raise ConfigError(f"word_forms must be >= 0, got {self.word_forms}")
        if self.fusion not in ("rrf", "score"):
            raise ConfigError(f"fusion must be 'rrf' or 'score', got {self.fusion!r}")
        if self.file_ranking not in tuple(FileRanking):
            raise ConfigError(f"file_ranking must be 'learned' or 'sections', "
                              f"got {self.file_ranking!r}")  # fmt: skip
        if not 0.0 <= self.mmr_lambda <= 1.0:
            raise ConfigError(f"mmr_lambda must be within [0, 1], got {self.mmr_lambda}")
        if not self.state_dir:
            raise ConfigError("state_dir must not be empty")
        if self.refresh not in ("auto", "advise"):
            raise ConfigError(f"refresh must be 'auto' or 'advise', got {self.refresh!r}")
        if not self.rebase_fraction > 0.0:
            raise ConfigError(f"rebase_fraction must be > 0, got {self.rebase_fraction}")
        if not 0.0 < self.learn_rate <= 1.0:
            raise ConfigError(f"learn_rate must be within (0, 1], got {self.learn_rate}")
        if not self.learn_bound >= 0.0:
            raise ConfigError(f"learn_bound must be >= 0, got {self.learn_bound}")
        if self.max_file_bytes < 1:
            raise ConfigError(f"max_file_bytes must be >= 1, got {self.max_file_bytes}")
        if self.encoding != DEFAULT_ENCODING and self.encoding not in _encodings():
            raise ConfigError(f"encoding must be a tiktoken encoding ({DEFAULT_ENCODING}, the "
                              f"offline one, or {', '.join(_encodings()[1:])}), "
                              f"got {self.encoding!r}")  # fmt: skip

    def _check_types(self) -> None:
        """Each setting of its default's type (``Config(ledger="false")`` left the ledger
        on; ``include="src/**"`` failed later as one-character globs); a list of globs is
        taken as a tuple."""
        for f in fields(self):
            value, default = getattr(self, f.name), f.default
            if isinstance(default, tuple):
                if isinstance(value, list):
                    value = tuple(value)
                    object.__setattr__(self, f.name, value)
                good = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
                kind = "a tuple of strings"
            elif isinstance(default, bool):
                good, kind = isinstance(value, bool), "True or False"
            elif isinstance(default, int):
                good, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
            elif isinstance(default, float):
                good = isinstance(value, (int, float)) and not isinstance(value, bool)
                kind = "a number"
            else:
                good, kind = isinstance(value, str), "a string"
            if not good:
                raise ConfigError(f"{f.name} must be {kind}, got {value!r}")

    def with_(self, **changes: Any) -> Config:
        """A copy with ``changes`` applied (validated like a new one)."""
        try:
            return replace(self, **changes)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc

    def chunk_options(self) -> ChunkOptions:
        """The indexers' chunking options."""
        return ChunkOptions(self.max_section_tokens, self.window_overlap_lines)

    def context_settings(self) -> ContextSettings:
        """The retrieval and packing settings of ``build_context``."""
        return ContextSettings(
            recall=RecallSettings(fusion=Fusion(self.fusion), word_forms=self.word_forms),
            pack=PackSettings(mmr_lambda=self.mmr_lambda),
            file_ranking=FileRanking(self.file_ranking),
        )

    def learn_settings(self) -> LearnSettings:
        """How outcomes move this workspace's rerank offsets."""
        return LearnSettings(rate=self.learn_rate, bound=self.learn_bound)

    def walk_options(self) -> WalkOptions:
        """The indexers' file-selection options. A state folder inside the workspace under
        another name than ``.cortex`` (always skipped) is excluded: cortex never indexes
        its own state (outside git nothing else leaves it out)."""
        exclude = self.exclude
        own = PurePosixPath(self.state_dir.replace("\\", "/"))
        inside = own.parts and own.parts[0] not in (".", "..", DEFAULT_STATE_DIR)
        if inside and not own.is_absolute():
            exclude = (*exclude, f"{own.as_posix()}/")
        return WalkOptions(max_file_bytes=self.max_file_bytes, include=self.include,
                           exclude=exclude)  # fmt: skip

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, /, **overrides: Any) -> Config:
        """Defaults, then ``CORTEX_*`` environment variables, then ``overrides``.

        ``CORTEX_MAX_SECTION_TOKENS=256``; tuples are comma-separated
        (``CORTEX_EXCLUDE=docs/**,*.json``).
        """
        environ = os.environ if environ is None else environ
        for message in unknown_env(environ):
            if message not in _warned:
                _warned.add(message)
                warnings.warn(message, ConfigWarning, stacklevel=2)
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if raw is None:
                continue
            values[f.name] = _parse(f.name, raw, f.default)
        from_env = set(values)
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc
        except ConfigError as exc:  # say which variable, when one set the value refused
            named = [n for n in from_env - set(overrides) if str(exc).startswith(f"{n} ")]
            if named:
                raise ConfigError(f"{ENV_PREFIX}{named[0].upper()}: {exc}") from exc
            raise


def _encodings() -> list[str]:
    """tiktoken's encodings, the offline default first (tiktoken is imported only when a
    configuration names another)."""
    import tiktoken

    return [DEFAULT_ENCODING, *(n for n in tiktoken.list_encoding_names() if n != DEFAULT_ENCODING)]


class ConfigWarning(UserWarning):
    """A setting cortex reads past (an unknown ``CORTEX_`` variable); the CLI prints it as
    one ``cortex: warning:`` line."""


def unknown_env(environ: Mapping[str, str]) -> list[str]:
    """One message per ``CORTEX_`` variable that names no setting, with the nearest one:
    a misspelt variable would otherwise be ignored without a word."""
    known = [f.name.upper() for f in fields(Config)] + list(OTHER_ENV)
    out = []
    for key in sorted(k for k in environ if k.startswith(ENV_PREFIX)):
        name = key[len(ENV_PREFIX):]
        if name in known:
            continue
        near = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.6)
        hint = f" (did you mean {ENV_PREFIX}{near[0]}?)" if near else ""
        out.append(f"{key} is not a cortex setting and is ignored{hint}")
    return out


def _parse(name: str, raw: str, default: object) -> object:
    if isinstance(default, bool):
        return yes_no(f"{ENV_PREFIX}{name.upper()}", raw)
    if isinstance(default, float):
        try:
            if not raw.isascii():  # float() and int() read "٣" as 3
                raise ValueError(raw)
            return float(raw)
        except ValueError as exc:
            raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be a number, got {raw!r}") from exc
    if isinstance(default, int):
        try:
            return whole_number(name, raw.strip(), signed=True)
        except ConfigError as exc:
            raise ConfigError(
                f"{ENV_PREFIX}{name.upper()} must be an integer, got {raw!r}"
            ) from exc
    if isinstance(default, tuple):
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    return raw
