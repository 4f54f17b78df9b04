"""A View's in-memory BM25 side: the overlay's documents and the base documents it hides,
kept up to date by what changed since the last View rather than rebuilt.

For each table (sections, pages) a ``Side`` holds a set of documents as postings arrays per
field: a few immutable blocks (term id, row, tf, sorted by term id), each row's length, and
a mask of live rows. A new View over the same base and overlay segments:

- asks the overlay for a key per path (``Part.file_keys``: changes whenever the path's
  documents do) and finds the paths that appeared, changed or left;
- reads only the documents of the paths that appeared or changed (the hidden base paths
  are immutable: a path's documents are read once);
- makes a new ``Side`` that shares every existing block, with the rows of the paths that
  left or changed masked out and one new block for the new documents.

Sides are immutable, so a View keeps answering from the snapshot it was made with while a
newer View advances the shared state. When masked rows outnumber live ones, or blocks pile
up, the side is rebuilt from its live documents with a fresh ``TermTable`` (so the term
numbering, too, holds only what is live). The arithmetic is the one ``bm25`` uses, in the
same order, so a document scores bit for bit the same wherever it lives.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import zipfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from overlays._bm25 import K1, B, DocTerms, FieldStats, TableStats, TermTable, idf, packed
from overlays._bm25 import stored_length as _stored_length

if TYPE_CHECKING:
    from overlays._part import Part

__all__ = ["SNAPSHOT_FORMAT", "TABLES", "Memory", "OverlayMemory", "Side"]

log = logging.getLogger(__name__)

SNAPSHOT_FORMAT = 1  # what ``OverlayMemory.save`` writes; another number is not read
TABLES = ("sections", "pages")  # the tables a View keeps in memory
# Paths read (both tables, both sides) before ``prepare`` writes the snapshot again: one
# edited file is read again faster than tens of megabytes are written.
SAVE_AFTER_PATHS = 32
MAX_BLOCKS = 8  # blocks per field before the small ones merge: each query term probes each
_EMPTY_I = np.zeros(0, dtype=np.int64)
_EMPTY_F = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Block:
    """One field's postings of a run of rows: term ids sorted, with their rows and tfs."""

    cols: np.ndarray
    rows: np.ndarray
    tfs: np.ndarray

    @classmethod
    def of(cls, docs: Sequence[DocTerms], name: str, table: TermTable, first: int) -> _Block:
        ids: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        widths: list[int] = []
        for doc in docs:
            if name not in doc.fields:
                widths.append(0)
                continue
            term_ids, counts = packed(doc, name, table)
            ids.append(term_ids)
            tfs.append(counts)
            widths.append(len(term_ids))
        cols = np.concatenate(ids) if ids else _EMPTY_I
        order = np.argsort(cols, kind="stable")
        rows = np.repeat(np.arange(first, first + len(docs), dtype=np.int64), widths)
        return cls(cols[order], rows[order], (np.concatenate(tfs) if tfs else _EMPTY_F)[order])

    @classmethod
    def merged(cls, blocks: Sequence[_Block]) -> _Block:
        """One block holding the postings of ``blocks`` (the same term numbering)."""
        cols = np.concatenate([b.cols for b in blocks])
        order = np.argsort(cols, kind="stable")
        rows = np.concatenate([b.rows for b in blocks])[order]
        return cls(cols[order], rows, np.concatenate([b.tfs for b in blocks])[order])

    def find(self, col: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.searchsorted(self.cols, [col, col + 1])
        return self.rows[lo:hi], self.tfs[lo:hi]


def _lengths(docs: Sequence[DocTerms], names: Sequence[str]) -> tuple[dict[str, np.ndarray], ...]:
    raw = {n: np.array([d.fields[n][0] if n in d.fields else 0 for d in docs], dtype=np.int64)
           for n in names}  # fmt: skip
    stored = {n: np.array([float(_stored_length(int(v))) for v in raw[n]], dtype=np.float64)
              for n in names}  # fmt: skip
    return raw, stored


@dataclass(frozen=True, slots=True)
class Side:
    """A set of documents of one table, by field, as immutable postings blocks plus a mask
    of the rows still live."""

    ids: tuple[str, ...]  # per row: the document's id
    paths: tuple[str, ...]  # ... and its path
    # Per row, the document's terms: what a rebuild starts from. None for a side read from
    # a snapshot file (``OverlayMemory``), which is built again from its paths instead.
    docs: tuple[DocTerms, ...] | None
    live: np.ndarray  # bool per row
    names: tuple[str, ...]  # the fields
    raw: dict[str, np.ndarray]  # per field: raw token count per row
    stored: dict[str, np.ndarray]  # per field: the length tantivy remembers, per row
    blocks: dict[str, tuple[_Block, ...]]
    table: TermTable
    count: int = 0  # live rows
    totals: dict[str, int] = field(default_factory=dict)  # per field: live raw tokens

    @classmethod
    def build(cls, docs: Sequence[DocTerms], names: Sequence[str] | None = None) -> Side:
        """A side holding ``docs``, with a term table of its own."""
        fields = tuple(names if names is not None else
                       sorted({n for d in docs for n in d.fields}))  # fmt: skip
        table = TermTable()
        live = np.ones(len(docs), dtype=bool)
        raw, stored = _lengths(docs, fields)
        blocks: dict[str, tuple[_Block, ...]] = {n: (_Block.of(docs, n, table, 0),) for n in fields}
        return cls._made(tuple(d.id for d in docs), tuple(d.path for d in docs), tuple(docs),
                         live, fields, raw, stored, blocks, table)  # fmt: skip

    @classmethod
    def _made(
        cls,
        ids: tuple[str, ...],
        paths: tuple[str, ...],
        docs: tuple[DocTerms, ...] | None,
        live: np.ndarray,
        names: tuple[str, ...],
        raw: dict[str, np.ndarray],
        stored: dict[str, np.ndarray],
        blocks: dict[str, tuple[_Block, ...]],
        table: TermTable,
    ) -> Side:
        totals = {n: int(raw[n][live].sum()) for n in names}
        return cls(ids, paths, docs, live, names, raw, stored, blocks, table, int(live.sum()),
                   totals)  # fmt: skip

    def changed(self, dropped: Collection[int], added: Sequence[DocTerms]) -> Side | None:
        """This side with the rows ``dropped`` masked out and ``added`` appended as a new
        block (the small blocks merge past ``MAX_BLOCKS``; the side is rebuilt from its live
        documents, with a fresh term table, once the dead outnumber the live). None when it
        must be rebuilt but holds no documents to rebuild from (read from a snapshot)."""
        if not dropped and not added:
            return self
        live = self.live.copy()
        if dropped:
            live[np.fromiter(dropped, dtype=np.int64, count=len(dropped))] = False
        names = tuple(sorted(set(self.names) | {n for d in added for n in d.fields}))
        alive = int(live.sum()) + len(added)
        dead = len(live) - int(live.sum())
        if names != self.names or dead > alive:
            if self.docs is None:
                return None
            kept = [d for d, keep in zip(self.docs, live, strict=True) if keep]
            return Side.build([*kept, *added], names)
        first = len(self.ids)
        more_raw, more_stored = _lengths(added, names)
        raw = {n: np.concatenate([self.raw[n], more_raw[n]]) for n in names}
        stored = {n: np.concatenate([self.stored[n], more_stored[n]]) for n in names}
        blocks: dict[str, tuple[_Block, ...]] = {}
        for n in names:
            chain = (*self.blocks[n], _Block.of(added, n, self.table, first))
            blocks[n] = chain if len(chain) <= MAX_BLOCKS else (chain[0], _Block.merged(chain[1:]))
        live = np.concatenate([live, np.ones(len(added), dtype=bool)])
        return Side._made(
            (*self.ids, *(d.id for d in added)), (*self.paths, *(d.path for d in added)),
            None if self.docs is None else (*self.docs, *added),
            live, names, raw, stored, blocks, self.table,
        )  # fmt: skip

    def get(self, name: str, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(live rows, tfs) of the documents holding ``term`` in field ``name``."""
        col = self.table.id(term, create=False)
        if col is None or name not in self.blocks:
            return None
        rows: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        for block in self.blocks[name]:
            r, t = block.find(col)
            if len(r):
                keep = self.live[r]
                rows.append(r[keep])
                tfs.append(t[keep])
        if not rows:
            return None
        found = np.concatenate(rows), np.concatenate(tfs)
        return found if len(found[0]) else None

    def df(self, name: str, term: str) -> int:
        """How many live documents hold ``term`` in field ``name``."""
        got = self.get(name, term)
        return 0 if got is None else len(got[0])


@dataclass(frozen=True, slots=True)
class Memory:
    """One table of a View, in memory: the overlay's documents (``added``) and the hidden
    base documents (``gone``), and how they move the base's statistics."""

    added: Side
    gone: Side
    rows_of: Mapping[str, tuple[str, list[int]]]  # the added side's rows, per path

    def top(
        self,
        terms: Sequence[str],
        view: TableStats,
        weights: Mapping[str, float],
        k: int,
        paths: Collection[str] | None,
    ) -> list[tuple[str, str, float]]:
        """The overlay's ``k`` best live documents (and any tied with the k-th) under
        ``view``, as (id, path, score)."""
        side = self.added
        total = np.zeros(len(side.ids))
        for name, weight in weights.items():
            if weight == 0.0 or name not in side.blocks or not view.docs:
                continue
            average = view.average(name)
            df = view.fields[name].df if name in view.fields else {}
            for term in terms:
                found = side.get(name, term)
                if found is None:
                    continue
                rows, tf = found  # same operations, same order as ``bm25``
                norm = K1 * (1.0 - B + B * side.stored[name][rows] / average)
                weight_idf = weight * idf(view.docs, df.get(term, 0)) * (K1 + 1.0)
                total[rows] += weight_idf * tf / (tf + norm)
        if paths is not None:
            keep = np.zeros(len(total), dtype=bool)
            for path in paths:
                held = self.rows_of.get(path)
                if held is not None:
                    keep[held[1]] = True
            total[~keep] = 0.0
        hit = np.flatnonzero(total > 0)
        if len(hit) > k:
            cut = np.partition(total[hit], len(hit) - k)[len(hit) - k]
            hit = hit[total[hit] >= cut]
        return [(side.ids[i], side.paths[i], float(total[i])) for i in hit]

    def stats(self, own: TableStats, terms: Sequence[str]) -> TableStats:
        """The View's statistics: the base's, minus the hidden documents, plus the overlay's."""
        fields: dict[str, FieldStats] = {}
        add, gone = self.added, self.gone
        for name in set(own.fields) | set(add.names):
            mine = own.fields.get(name, FieldStats())
            tokens = mine.tokens + add.totals.get(name, 0) - gone.totals.get(name, 0)
            df = {t: mine.df.get(t, 0) + add.df(name, t) - gone.df(name, t) for t in terms}
            fields[name] = FieldStats(tokens, df)
        return TableStats(own.docs + add.count - gone.count, fields)


class _Tracked:
    """A side, and which of its rows each path's documents hold (with the path's key)."""

    def __init__(self, side: Side, rows: dict[str, tuple[str, list[int]]]) -> None:
        self.side = side
        self.rows = rows

    @classmethod
    def empty(cls) -> _Tracked:
        return cls(Side.build([]), {})

    def advance(
        self, want: Mapping[str, str], read: Callable[[Sequence[str]], list[DocTerms]]
    ) -> tuple[_Tracked, int]:
        """The state for the paths and keys in ``want``, reading only the paths that are new
        or whose key changed; returns it and how many paths were read."""
        dropped: list[int] = []
        rows = dict(self.rows)
        for path, (key, held) in self.rows.items():
            if want.get(path) != key:
                dropped.extend(held)
                del rows[path]
        fresh = sorted(p for p in want if p not in rows)
        if not fresh and not dropped:
            return self, 0
        docs = read(fresh) if fresh else []
        side = self.side.changed(dropped, docs)
        docs_now: Sequence[DocTerms]
        if side is None:  # read from a snapshot and due a rebuild: from every path, read again
            fresh = sorted(want)
            docs_now = read(fresh)
            side, rows, first = Side.build(docs_now), {}, 0
        elif len(side.ids) != len(self.side.ids) + len(docs):  # rebuilt: rows renumbered
            assert side.docs is not None  # a rebuilt side holds its documents
            rows, docs_now, first = {}, side.docs, 0
        else:
            docs_now, first = docs, len(self.side.ids)
        for path in fresh:
            rows[path] = (want[path], [])
        for i, doc in enumerate(docs_now, start=first):
            rows.setdefault(doc.path, (want.get(doc.path, ""), []))[1].append(i)
        return _Tracked(side, rows), len(fresh)


class OverlayMemory:
    """The in-memory side of every View over one base segment and one overlay segment,
    advanced from View to View by what changed (see the module docstring).

    With a ``snapshot`` file, ``save`` writes the sides there, and a memory meeting its
    segments for the first time (a new process) starts from that file when it was written
    for the same ``ident`` (what the base's documents are), then reads only what changed
    since: a large overlay's first query no longer analyses every document it holds.

    ``memory`` is safe to call from several threads; each call returns an immutable
    ``Memory`` that later calls never change."""

    def __init__(self, snapshot: Path | None = None, ident: str = "") -> None:
        self._lock = threading.Lock()
        self._parts: tuple[object, object] | None = None
        self._tables: dict[str, tuple[_Tracked, _Tracked]] = {}
        self.snapshot = snapshot
        self.ident = ident
        self.last_read = 0  # paths read by the last advance (for tests and benchmarks)
        self.loaded = False  # whether the state started from the snapshot file
        self._unsaved = 0  # paths read since the snapshot was read or written

    def memory(
        self,
        table: str,
        base: Part,
        overlay: Part,
        overlay_paths: Collection[str],
        hidden: Collection[str],
    ) -> Memory:
        """``table``'s memory for a View of ``base`` and ``overlay`` holding
        ``overlay_paths`` and hiding ``hidden`` base paths."""
        with self._lock:
            if self._parts is None or self._parts[0] is not base or self._parts[1] is not overlay:
                self._parts = (base, overlay)  # other segments: only the snapshot carries over
                self._tables = self._read()
                self.loaded = bool(self._tables)
                self._unsaved = 0
            added, gone = self._tables.get(table) or (_Tracked.empty(), _Tracked.empty())
            keys = overlay.file_keys(sorted(overlay_paths))
            added, read_added = added.advance(keys, lambda ps: overlay.docs_of(table, ps))
            # The base never changes under one Segment: a hidden path's documents are fixed.
            gone, read_gone = gone.advance(
                dict.fromkeys(hidden, ""), lambda ps: base.docs_of(table, ps)
            )
            self._tables[table] = (added, gone)
            self.last_read = read_added + read_gone
            self._unsaved += self.last_read
            return Memory(added.side, gone.side, added.rows)

    def prepare(
        self, base: Part, overlay: Part, overlay_paths: Collection[str], hidden: Collection[str]
    ) -> int:
        """Bring every table up to the View of ``overlay_paths`` and ``hidden`` (what its
        first query would do) and save the snapshot once ``SAVE_AFTER_PATHS`` paths were
        read since it was (a new process reads fewer again than a save writes); returns
        the paths read. A View that hides nothing needs no memory: its snapshot goes."""
        if not hidden:
            self.discard()
            return 0
        read = 0
        for table in TABLES:
            self.memory(table, base, overlay, overlay_paths, hidden)
            read += self.last_read
        if self.snapshot is not None and (
            self._unsaved >= SAVE_AFTER_PATHS or not self.snapshot.exists()
        ):
            try:
                self.save()
            except OSError as err:  # a cache: the next process builds it, as before
                log.warning("could not save the overlay memory %s (%s)", self.snapshot, err)
        return read

    def save(self) -> None:
        """Write every table's sides to the snapshot file, atomically (a reader sees the
        old file or the new one, never a part)."""
        if self.snapshot is None:
            return
        with self._lock:
            tables = dict(self._tables)  # sides and row maps are never changed once made
            self._unsaved = 0
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, Any] = {"format": SNAPSHOT_FORMAT, "ident": self.ident, "tables": {}}
        for table, pair in sorted(tables.items()):
            meta["tables"][table] = {
                which: _side_out(tracked, f"{table}/{which}/", arrays)
                for which, tracked in zip(("added", "gone"), pair, strict=True)
            }
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
        self.snapshot.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".memory-", suffix=".tmp", dir=self.snapshot.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, allow_pickle=False, **arrays)
            Path(tmp).replace(self.snapshot)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def discard(self) -> None:
        """Remove the snapshot file (the in-memory state stays; a file that cannot be
        removed is logged: a reader checks every path's key against it anyway)."""
        if self.snapshot is not None:
            try:
                self.snapshot.unlink(missing_ok=True)
            except OSError as err:
                log.warning("could not remove the overlay memory %s (%s)", self.snapshot, err)

    def _read(self) -> dict[str, tuple[_Tracked, _Tracked]]:
        """The snapshot's tables, or none (no file, another ident, or unreadable: logged)."""
        if self.snapshot is None or not self.snapshot.exists():
            return {}
        try:
            with np.load(self.snapshot, allow_pickle=False) as got:
                meta = json.loads(got["meta"].tobytes().decode("utf-8"))
                if meta.get("format") != SNAPSHOT_FORMAT or meta.get("ident") != self.ident:
                    return {}
                return {
                    table: (_side_in(sides["added"], f"{table}/added/", got),
                            _side_in(sides["gone"], f"{table}/gone/", got))
                    for table, sides in meta["tables"].items()
                }  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile) as err:
            log.warning("ignoring the unreadable overlay memory %s (%s): building it again",
                        self.snapshot, err)  # fmt: skip
            return {}


def _side_out(tracked: _Tracked, prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """``tracked``'s side into ``arrays`` (postings as each term's run length, rows and
    tfs); returns the rest: fields, ids, paths, terms by number, rows per path."""
    side = tracked.side
    arrays[prefix + "live"] = side.live
    blocks: dict[str, int] = {}
    for name in side.names:
        arrays[f"{prefix}raw/{name}"] = side.raw[name]
        arrays[f"{prefix}stored/{name}"] = side.stored[name]
        blocks[name] = len(side.blocks[name])
        for j, block in enumerate(side.blocks[name]):
            terms, runs = np.unique(block.cols, return_counts=True)
            at = f"{prefix}block/{name}/{j}/"
            # Narrow on disk, widened again when read: a term frequency is a count.
            arrays[at + "terms"] = terms.astype(np.int32)
            arrays[at + "runs"] = runs.astype(np.int32)
            arrays[at + "rows"] = block.rows.astype(np.int32)
            arrays[at + "tfs"] = block.tfs.astype(np.uint32)
    return {"names": list(side.names), "ids": list(side.ids), "paths": list(side.paths),
            "terms": side.table.terms(), "blocks": blocks,
            "rows": {p: [key, held] for p, (key, held) in tracked.rows.items()}}  # fmt: skip


def _side_in(meta: dict[str, Any], prefix: str, got: Any) -> _Tracked:
    """The side ``_side_out`` wrote (its documents not kept: see ``Side.docs``); raises
    ValueError when the parts do not fit together."""
    ids, paths = tuple(map(str, meta["ids"])), tuple(map(str, meta["paths"]))
    names = tuple(map(str, meta["names"]))
    table = TermTable.of([str(t) for t in meta["terms"]])
    live = np.asarray(got[prefix + "live"], dtype=bool)
    raw = {n: np.asarray(got[f"{prefix}raw/{n}"], dtype=np.int64) for n in names}
    stored = {n: np.asarray(got[f"{prefix}stored/{n}"], dtype=np.float64) for n in names}
    blocks: dict[str, tuple[_Block, ...]] = {}
    for name in names:
        chain = []
        for j in range(int(meta["blocks"][name])):
            at = f"{prefix}block/{name}/{j}/"
            terms = np.asarray(got[at + "terms"], dtype=np.int64)
            cols = np.repeat(terms, np.asarray(got[at + "runs"], dtype=np.int64))
            rows = np.asarray(got[at + "rows"], dtype=np.int64)
            tfs = np.asarray(got[at + "tfs"], dtype=np.float64)
            if not len(cols) == len(rows) == len(tfs) or (
                len(cols) and (cols[-1] >= len(table) or rows.max() >= len(ids) or rows.min() < 0)
            ):
                raise ValueError(f"{at}: postings out of range")
            chain.append(_Block(cols, rows, tfs))
        blocks[name] = tuple(chain)
    if not len(ids) == len(paths) == len(live) or any(
        len(raw[n]) != len(ids) or len(stored[n]) != len(ids) for n in names
    ):
        raise ValueError(f"{prefix}: rows do not line up")
    rows_of = {str(p): (str(key), [int(r) for r in held])
               for p, (key, held) in meta["rows"].items()}  # fmt: skip
    side = Side._made(ids, paths, None, live, names, raw, stored, blocks, table)
    return _Tracked(side, rows_of)
