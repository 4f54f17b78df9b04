"""Bases and overlays on disk: which exist, building them, composing a View, removing old ones.

    <state>/bases/<commit>/                 a Segment of the tree at a commit ("tree" outside git),
                                            written once and never patched (exact BM25 stats)
    <state>/overlays/<workspace>/<branch>/<user>/
                                            a Segment of the files that differ from the base
        overlay.json                        base, root, branch, user, freshness token,
                                            overlay paths, tombstones
        history.json                        which files changed together in the commits up
                                            to the checked-out commit (``_history``)
        memory.npz                          the Views' in-memory BM25 side of this overlay,
                                            saved by a refresh (``_memories``)

Many branches and working trees share one base; each overlay holds only its diff. ``overlays``
says what differs (git) and composes the View; this module builds the Segments.

With ``CORTEX_BACKEND=qdrant`` (``engine.backend``) the segments are still built here, then
mirrored into Qdrant layers (base ``base:<commit>:<chunker>``, overlay
``overlay:<workspace>:<branch>:<user>``; only changed files are written), and the View is
the branch's scope over the Qdrant backend instead of the local segments.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from engine.backend import BackendSettings, QdrantBackend, connect, release
from engine.core import (
    Config,
    ConfigError,
    GcReport,
    IndexNotBuiltError,
    IndexReport,
    Progress,
    chunker_fingerprint,
    content_sha,
)
from engine.index._build import BuildRestart, build_segment
from engine.index._history import Histories
from engine.index._memories import Memories
from engine.index._update import covered, ensure_dense, licence_folders, relicensed, update_segment
from engine.segment import Segment
from indexers import Chunker, SourceFile, TokenCounter, redacted_path, walk
from overlays import (
    ChangeHistory,
    Scope,
    View,
    base_commit,
    changed_paths,
    checkout,
    commit_time_ns,
    git_state,
    live_refs,
    rev_parse,
    tree_token,
)

if TYPE_CHECKING:
    from engine.embed import Embedder, EmbeddingCache

__all__ = ["QUICK_FILES", "Layers", "OverlayInfo", "RefreshTooFar", "tree_size"]

# A refresh a request makes on the way (``quick``) takes at most this many files the index
# has not seen; more (a checkout, a pull) is left to a full index, in the background on a
# server: 400 files took ~25 s of overlay refresh on this 2-core machine.
QUICK_FILES = 200


class RefreshTooFar(Exception):  # noqa: N818 (a signal, not an error a caller sees)
    """A quick refresh would build a base or take too many files: do a full one."""

_NO_GIT = "tree"  # the base of a folder outside git: its content at the first index
_INFO = "overlay.json"
_BUILDING, _RETIRED = ".building", ".retired"  # a base made beside the one in use; the old one


@dataclass(frozen=True, slots=True)
class OverlayInfo:
    """What an overlay was built from, and what it holds."""

    base: str
    root: str
    branch: str
    user: str
    token: str
    paths: list[str] = field(default_factory=list)
    tombstones: list[str] = field(default_factory=list)
    built: str = ""
    # Files the walk skipped, by reason, in the working tree as this overlay saw it (the
    # base's skips less the paths it looked at again, and its own); None in older records.
    skipped: dict[str, int] | None = None

    def skipped_counts(self, base: Segment) -> dict[str, int]:
        """Skipped files by reason: this record's, else (an older record) the base's."""
        return dict(self.skipped) if self.skipped is not None else base.meta.skipped_counts()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80] or "_"


@cache
def _name_slug(name: str) -> str:
    """A folder name for a branch or user name: the name itself where it is a plain one
    holding no credential, else the slug of its redacted form and a digest of the whole
    (so that ``feature/x`` and ``feature-x`` never share a folder)."""
    shown = redacted_path(name)
    if _slug(name) == name == shown:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{_slug(shown)[:60]}-{digest}"


class Layers:
    """The bases and overlays of one workspace root for one user, under one state folder."""

    def __init__(self, root: Path, state_dir: Path, config: Config) -> None:
        self.root = root
        self.state_dir = state_dir
        self.config = config
        self.user = config.user or _login()
        self.workspace = hashlib.sha256(str(root).encode()).hexdigest()[:12]
        self._base_ref_checked = False
        self._segments: dict[Path, Segment] = {}
        self._view: tuple[tuple[str, str, int, str], View] | None = None
        # The Views' in-memory sides, advanced from one View to the next by what changed
        # (the overlay's BM25 postings are not rebuilt) and saved by each refresh.
        self._memories = Memories()
        self._histories = Histories(root)
        # The state folder, when it lives in the tree: never part of what differs.
        inside = state_dir.resolve()
        self.inside = (inside.relative_to(root).as_posix(),) if inside.is_relative_to(root) else ()
        self.backend = BackendSettings.from_env()
        self._qdrant: QdrantBackend | None = None

    def close(self) -> None:
        """Close every open segment (and the Qdrant connection)."""
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
        self.drop_memories()
        if self._qdrant is not None:
            release(self._qdrant)
            self._qdrant = None

    # -- the Qdrant backend -------------------------------------------------------------

    def qdrant(self) -> QdrantBackend | None:
        """The Qdrant backend when ``CORTEX_BACKEND=qdrant`` (connected once), else None."""
        if self.backend.kind == "qdrant" and self._qdrant is None:
            self._qdrant = connect(self.backend, self.backend_home)
        return self._qdrant

    @property
    def backend_home(self) -> Path:
        """The configured state folder, not this Layers' own: a rebuild stages its segments
        elsewhere but must write the workspace's edge shard."""
        state = Path(self.config.state_dir).expanduser()
        return state if state.is_absolute() else self.root / state

    def base_layer(self, base: str) -> str:
        """The Qdrant layer of the base at ``base``: one per commit and chunker settings,
        shared by every workspace and user (a folder outside git: its own)."""
        chunker = self.segment(self.base_dir(base)).meta.get_info("chunker") or ""
        name = f"tree-{self.workspace}" if base == _NO_GIT else base
        return f"base:{name}:{hashlib.sha256(chunker.encode()).hexdigest()[:12]}"

    def overlay_layer(self, branch: str) -> str:
        """The Qdrant layer of this user's overlay of ``branch`` in this workspace."""
        return f"overlay:{self.workspace}:{branch}:{self.user}"

    def _mirror(
        self, base: str, branch: str, embedder: Embedder | None, cache: EmbeddingCache | None
    ) -> None:
        qdrant = self.qdrant()
        if qdrant is None:
            return
        base_segment = self.segment(self.base_dir(base))
        overlay = self.segment(self.overlay_dir(branch), create=True)
        qdrant.mirror(base_segment, self.base_layer(base), embedder=embedder, cache=cache)
        qdrant.mirror(overlay, self.overlay_layer(branch), embedder=embedder, cache=cache)

    def forget_remote(
        self,
        in_paths: Callable[[str], bool] | None,
        text: str | None,
        *,
        dry_run: bool,
        embedder: Embedder | None,
        cache: EmbeddingCache | None,
    ) -> int:
        """With the Qdrant backend: remove what ``forget`` removed locally from every layer
        of the collection (``QdrantBackend.forget``), then write this branch's layers again
        from the purged segments, so its files answer at once. Returns the points removed
        (0 with the embedded backend). Call after the segments were purged, under the
        workspace's writer lock."""
        qdrant = self.qdrant()
        if qdrant is None:
            return 0
        removed = qdrant.forget(in_paths, text, dry_run=dry_run)
        if removed and not dry_run:
            try:
                info = self.current()[0]
            except IndexNotBuiltError:
                return removed
            if info.token:  # an overlay exists: both layers are this workspace's to write
                self._mirror(info.base, info.branch, embedder, cache)
        return removed

    # -- where things are -------------------------------------------------------------

    def token(self) -> tuple[str, str]:
        """(branch, freshness token) of the working tree now; cheap (one ``git status``)."""
        state = git_state(self.root, self.inside)
        if state is None:
            return "", tree_token(self.root, self.inside)
        return state.branch or "detached", state.token

    def base_dir(self, base: str) -> Path:
        """Where the base at ``base`` lives."""
        return self.state_dir / "bases" / _slug(base)

    def overlay_dir(self, branch: str) -> Path:
        """Where this user's overlay of ``branch`` in this workspace lives."""
        return self.state_dir / "overlays" / self.workspace / _name_slug(branch) / _name_slug(
            self.user
        )

    def info(self, branch: str) -> OverlayInfo | None:
        """The overlay record of ``branch`` (None before its first index)."""
        path = self.overlay_dir(branch) / _INFO
        try:
            return OverlayInfo(**json.loads(path.read_text("utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def segment(self, directory: Path, *, create: bool = False) -> Segment:
        """The Segment in ``directory`` (opened once; again when another process has
        replaced the folder, so a long-running server never reads or writes a deleted one)."""
        segment = self._segments.get(directory)
        if segment is not None and segment.replaced():
            self._close(directory)
            segment = None
        if segment is None:
            segment = self._segments[directory] = Segment(directory, create=create)
        return segment

    def complete_bases(self) -> list[str]:
        """Bases fully written, newest first."""
        found: list[tuple[float, str]] = []
        for directory in (self.state_dir / "bases").glob("*"):
            marker = directory / "complete"
            if directory.suffix in (_BUILDING, _RETIRED):
                continue  # marked just before it is renamed into place, or on its way out
            try:
                found.append((marker.stat().st_mtime, marker.read_text("utf-8").strip()))
            except OSError:  # not complete, or renamed away while read
                continue
        return [b for _, b in sorted(found, reverse=True)]

    # -- building -------------------------------------------------------------------

    def refresh(
        self,
        *,
        counter: TokenCounter,
        embedder: Embedder | None,
        cache: EmbeddingCache | None,
        progress: Progress | None = None,
        quick: bool = False,
    ) -> tuple[IndexReport, OverlayInfo, IndexReport | None]:
        """Bring this branch's overlay (and, when needed, a base) up to the working tree.

        Returns (overlay report, overlay record, base report or None when no base was built).
        ``quick``: raise ``RefreshTooFar``, before writing anything, where a base must be
        built or the overlay would take more than ``QUICK_FILES`` new files (a request
        should not wait a minute for it). Call under the workspace's writer lock.
        """
        branch, token = self.token()
        info = self.info(branch)
        base = self._choose_base(info)
        base_report = None
        filled = (0, 0)  # vectors a newly configured model gave the base: (computed, reused)
        if quick and not self._usable(base, counter):
            raise RefreshTooFar(f"a new base at {base[:12]} must be built (a far move, or "
                                "the chunker or file rules changed)")  # fmt: skip
        if not self._usable(base, counter):
            base_report = self._build_base(base, counter, embedder, cache, progress)
        elif embedder is not None and cache is not None:
            filled = ensure_dense(self.segment(self.base_dir(base)), self.config,
                                  embedder=embedder, cache=cache, progress=progress)  # fmt: skip
        candidates = None if base == _NO_GIT else changed_paths(self.root, base, self.inside)
        if quick and candidates is not None and info is not None:
            new = len(set(candidates) - set(info.paths))
            if new > QUICK_FILES:
                raise RefreshTooFar(f"{new:,} files differ from the index (a checkout or a "
                                    "pull)")  # fmt: skip
        far = self.config.rebase_fraction * len(self.segment(self.base_dir(base)).files())
        if candidates is not None and not self.config.base_ref and len(candidates) > far:
            target = self._target_base()
            if target not in (None, base):  # the branch moved far: a base closer to it
                base = target
                if not self._usable(base, counter):
                    base_report = self._build_base(base, counter, embedder, cache, progress)
                candidates = changed_paths(self.root, base, self.inside)
        report, record = self._build_overlay(
            base, branch, token, candidates, counter, embedder, cache, progress
        )
        if filled != (0, 0):  # counted, or `index --dense X` said "0 computed" after 120
            report = replace(report, embeddings_computed=report.embeddings_computed + filled[0],
                             embeddings_reused=report.embeddings_reused + filled[1])  # fmt: skip
        if base != _NO_GIT:
            self._histories.write(self.overlay_dir(branch))
        if self.backend.kind == "embedded":  # what the View's first query would build, saved
            start = time.perf_counter()
            base_dir, overlay_dir = self.base_dir(base), self.overlay_dir(branch)
            segments = (self.segment(base_dir), self.segment(overlay_dir, create=True))
            self._memories.prepare(base_dir, overlay_dir, segments, record.paths,
                                   record.tombstones, progress)  # fmt: skip
            report = replace(report, seconds={**report.seconds,
                                              "memory": time.perf_counter() - start})  # fmt: skip
        self._mirror(base, branch, embedder, cache)
        self._view = None
        return report, record, base_report

    def supply_history(self, history: ChangeHistory | None) -> None:
        """Use ``history`` for every View of this workspace instead of the one read from
        git: a tree exported without its ``.git`` (a sandbox copy, the eval harness's
        checkouts) can be given the history of the commit it holds. None: the one read
        from git again."""
        self._histories.supplied = history
        self._view = None

    def history(self, branch: str) -> ChangeHistory | None:
        """The co-change history the branch's Views read (``engine.index._history``)."""
        return self._histories.of(self.overlay_dir(branch))

    def chunked_as_configured(self, base: str, counter: TokenCounter) -> bool:
        """Whether the complete base at ``base`` was chunked as configured now."""
        meta = self.segment(self.base_dir(base)).meta
        return meta.get_info("chunker") == chunker_fingerprint(self.config, counter)

    def _usable(self, base: str, counter: TokenCounter) -> bool:
        """Whether the base at ``base`` is complete and chunked as configured now (a base is
        never patched: other chunker settings mean a new one)."""
        if not (self.base_dir(base) / "complete").exists():
            return False
        return self.chunked_as_configured(base, counter)

    def check_base_ref(self) -> None:
        """Refuse a ``base_ref`` that names no commit on every call (once a process), not
        only when indexing: search, status and context answered as if it were unset."""
        if self.config.base_ref and not self._base_ref_checked:
            self._target_base()
            self._base_ref_checked = True

    def _target_base(self) -> str | None:
        if self.config.base_ref:
            commit = rev_parse(self.root, self.config.base_ref)
            if commit is None:
                raise ConfigError(
                    f"base_ref {self.config.base_ref!r} (CORTEX_BASE_REF) is not a commit in "
                    f"{self.root}"
                )
            return commit
        return base_commit(self.root)

    def _choose_base(self, info: OverlayInfo | None) -> str:
        target = self._target_base()
        if target is None:
            return _NO_GIT
        if self.config.base_ref:
            return target
        # A folder base (made before the first commit) is never chosen once there are commits.
        if info is not None and info.base != _NO_GIT and (
            self.base_dir(info.base) / "complete"
        ).exists():
            return info.base
        existing = [b for b in self.complete_bases() if b != _NO_GIT]
        if target in existing or not existing:
            return target
        return existing[0]  # share the newest base; a far one is replaced in ``refresh``

    def _build_base(
        self,
        base: str,
        counter: TokenCounter,
        embedder: Embedder | None,
        cache: EmbeddingCache | None,
        progress: Progress | None,
    ) -> IndexReport:
        # Built beside the base in use (one made under other chunker or file rules keeps
        # answering, in this process and others, until the new one is complete), then
        # swapped in. An interrupted build of the same base goes on from where it stopped
        # (``engine.index._build``).
        directory = self.base_dir(base)
        building = directory.with_name(directory.name + _BUILDING)

        def build(tree: Path, *, resume: bool) -> IndexReport:
            self._close(building)
            if resume:
                try:
                    return build_segment(self.segment(building, create=True), tree,
                                         self.config, counter=counter, embedder=embedder,
                                         cache=cache, progress=progress)  # fmt: skip
                except BuildRestart:
                    self._close(building)
            shutil.rmtree(building, ignore_errors=True)
            return build_segment(self.segment(building, create=True), tree, self.config,
                                 counter=counter, embedder=embedder, cache=cache,
                                 progress=progress)  # fmt: skip

        report: IndexReport | None = None
        resume = True
        if base == _NO_GIT or not changed_paths(self.root, base, self.inside):
            started = time.time_ns()
            report = build(self.root, resume=resume)  # the folder is exactly the base
            if base != _NO_GIT and self._written_since(building, started):
                # A file written while the tree was read (an edit, then its revert) may
                # hold neither the commit's text nor the tree's: the commit's files instead.
                report, resume = None, False
        if report is None:
            with checkout(self.root, base, self.state_dir / "checkout") as tree:
                report = build(tree, resume=resume)
        segment = self.segment(building)
        when = None if base == _NO_GIT else commit_time_ns(self.root, base)
        if when is not None:  # the base's files are as old as its commit, wherever built
            segment.meta.set_mtimes(when)
        segment.meta.set_info("commit", "" if base == _NO_GIT else base)
        (building / "complete").write_text(base + "\n", "utf-8")
        self._close(building)
        self._close(directory)
        retired = directory.with_name(directory.name + _RETIRED)
        shutil.rmtree(retired, ignore_errors=True)
        if directory.exists():
            directory.rename(retired)  # open readers keep their files until they close
        building.rename(directory)
        shutil.rmtree(retired, ignore_errors=True)
        return report

    def _written_since(self, directory: Path, since_ns: int) -> bool:
        """Whether a file the segment at ``directory`` read was written at or after
        ``since_ns`` (or is gone)."""
        for path in self.segment(directory).files():
            try:
                if (self.root / path).stat().st_mtime_ns >= since_ns:
                    return True
            except OSError:
                return True
        return False

    def _close(self, directory: Path) -> None:
        """Close this process's segment at ``directory`` (and forget its View sides)."""
        segment = self._segments.pop(directory, None)
        if segment is not None:
            segment.close()
        self._memories.forget(directory)
        self._view = None

    def _build_overlay(
        self,
        base: str,
        branch: str,
        token: str,
        candidates: set[str] | None,
        counter: TokenCounter,
        embedder: Embedder | None,
        cache: EmbeddingCache | None,
        progress: Progress | None,
    ) -> tuple[IndexReport, OverlayInfo]:
        base_files = self.segment(self.base_dir(base)).files()
        directory = self.overlay_dir(branch)
        previous = self.info(branch)
        if previous is not None and previous.base != base:
            old = self._segments.pop(directory, None)
            if old is not None:
                old.close()
            shutil.rmtree(directory, ignore_errors=True)  # built against another base
        differ: list[SourceFile] = []
        present: set[str] = set()
        opts = self.config.walk_options()
        skipped: Counter[str] = Counter()
        for item in walk(self.root, opts, only=candidates):
            if isinstance(item, SourceFile):
                present.add(item.path)
                known = base_files.get(item.path)
                if known is None or known.content_sha256 != content_sha(item.data):
                    differ.append(item)
            else:
                skipped[item.reason.value] += 1
        if candidates is not None:  # the base's skips of the paths not looked at again
            skipped.update(reason for path, reason in
                           self.segment(self.base_dir(base)).meta.skipped_reasons()
                           if path not in candidates)  # fmt: skip
        # Every base path the overlay replaces or drops: changed, renamed away, deleted, or
        # no longer indexable (now ignored, too large...).
        looked = set(base_files) if candidates is None else candidates & set(base_files)
        changed = {s.path for s in differ}
        # Base files of unchanged bytes whose licence a changed manifest or licence text
        # moved: the overlay holds them (and, not looked at above, they are tombstoned).
        folders = licence_folders(changed | {p for p in looked if p not in present})
        if folders:
            near = {p for p in base_files
                    if p not in changed and p not in present and covered(p, folders)}  # fmt: skip
            chunker = Chunker(self.root, options=self.config.chunk_options(), counter=counter)
            found = (i for i in walk(self.root, opts, only=near) if isinstance(i, SourceFile))
            moved = relicensed(found, base_files, folders, chunker) if near else []
            differ += moved
            looked |= {s.path for s in moved}
        tombstones = sorted(p for p in looked if p not in present or p in changed)
        segment = self.segment(directory, create=True)
        report = update_segment(segment, self.root, self.config, counter=counter,
                                embedder=embedder, cache=cache, progress=progress,
                                listing=differ, lexical=False)  # fmt: skip
        if candidates is not None and differ:
            # A file edited while this ran and put back before it ended leaves the tree's
            # token as it was, but the overlay holds the edit: the record then says stale,
            # so the next call reads the file again (it served content found nowhere).
            after = changed_paths(self.root, base, self.inside)
            if after is None or not changed <= after:
                token = ""
        record = OverlayInfo(
            base=base,
            root=str(self.root),
            branch=branch,
            user=self.user,
            token=token,
            paths=sorted(s.path for s in differ),
            tombstones=tombstones,
            built=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            skipped=dict(sorted(skipped.items())),
        )
        tmp = directory / (_INFO + ".tmp")
        tmp.write_text(json.dumps(asdict(record), indent=1) + "\n", "utf-8")
        tmp.replace(directory / _INFO)
        return report, record

    # -- reading --------------------------------------------------------------------

    def view(self, info: OverlayInfo) -> View:
        """The View of ``info``'s base and overlay (cached until either changes)."""
        base = self.segment(self.base_dir(info.base))
        overlay = self.segment(self.overlay_dir(info.branch), create=True)
        history = self.history(info.branch)
        # What ranking reads from the history names it: the View, its ident and so the
        # replay key change with it (a refresh in another process, a supplied history).
        mark = f"{history.commit[:12]}+{history.commits}" if history is not None else ""
        built = _build_mark(base)
        key = (info.token, built, overlay.meta.generation, mark)
        if self._view is not None and self._view[0] == key:
            return self._view[1]
        ident = f"{info.base}:{built}:{overlay.meta.generation}:{info.token[:16]}"
        if mark:
            ident += f":h{mark}"
        qdrant = self.qdrant()
        if qdrant is not None:
            scope = Scope(self.base_layer(info.base), self.overlay_layer(info.branch),
                          frozenset(info.paths), frozenset(info.tombstones))  # fmt: skip
            missing = qdrant.missing_layers(scope)
            if missing:
                raise IndexNotBuiltError(
                    f"the Qdrant collection has no layer {missing[0]!r}: run `cortex index` "
                    "with CORTEX_BACKEND=qdrant to write this branch's layers"
                )
            view = View.over(qdrant, scope, ident=ident, history=history)
            self._view = (key, view)
            return view
        memory = self._memories.of(self.base_dir(info.base), self.overlay_dir(info.branch), base)
        view = View(
            base,
            overlay,
            overlay_paths=info.paths,
            tombstones=info.tombstones,
            ident=ident,
            memory=memory,
            history=history,
        )
        self._view = (key, view)
        return view

    def drop_memories(self) -> None:
        """Forget the Views' in-memory sides (the next View builds its own from scratch)
        and the histories read."""
        self._memories.forget()
        self._histories.forget()
        self._view = None

    def memory_reads(self) -> int:
        """Paths whose documents the last View's in-memory side had to read (summed over
        this workspace's base and overlay pairs)."""
        return sum(m.last_read for m in self._memories.values())

    def base_segment(self) -> Segment:
        """The base segment this branch's View reads (for tools that sample the index)."""
        return self.segment(self.base_dir(self.current()[0].base))

    def current(self) -> tuple[OverlayInfo, str]:
        """This branch's overlay record and the working tree's token now.

        A branch without an overlay yet gets a stand-in over the newest base (empty, with a
        token that never matches, so the caller refreshes it or says it is stale); no base
        at all raises ``IndexNotBuiltError``.
        """
        branch, token = self.token()
        info = self.info(branch)
        if info is not None and (self.base_dir(info.base) / "complete").exists():
            return info, token
        bases = self.complete_bases()
        if not bases:
            raise IndexNotBuiltError(f"no index of {self.root}; run `cortex index` first")
        return OverlayInfo(bases[0], str(self.root), branch, self.user, token=""), token

    # -- cleaning -------------------------------------------------------------------

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Remove overlays of working trees or branches that no longer exist, then bases
        no overlay and not this working tree's branch uses. Call under the writer lock."""
        removed: list[str] = []
        keep_bases: set[str] = set()
        with suppress(ConfigError):  # the base this working tree's branch reads now, though
            branch, _ = self.token()  # it has no overlay yet (a branch renamed or merged)
            keep_bases.add(self._choose_base(self.info(branch)))
        freed = 0
        for marker in sorted((self.state_dir / "overlays").glob(f"*/*/*/{_INFO}")):
            try:
                info = OverlayInfo(**json.loads(marker.read_text("utf-8")))
            except (OSError, ValueError, TypeError):
                info = None
            if info is not None and _alive(info):
                keep_bases.add(info.base)
                continue
            freed += tree_size(marker.parent)
            removed.append(str(marker.parent.relative_to(self.state_dir)))
            if not dry_run:
                self._drop(marker.parent)
                qdrant = self.qdrant() if info is not None else None
                if qdrant is not None and info is not None:  # overlays are per user: ours
                    qdrant.drop_layer(self.overlay_layer(info.branch))
        gone_bases: list[str] = []
        kept: list[str] = []  # complete bases that stay
        for directory in sorted((self.state_dir / "bases").glob("*")):
            name = (directory / "complete").read_text("utf-8").strip() if (
                directory / "complete").exists() else directory.name  # fmt: skip
            if name in keep_bases:
                if (directory / "complete").exists():
                    kept.append(name)
                continue
            freed += tree_size(directory)
            gone_bases.append(name)
            if not dry_run:
                self._drop(directory)
        layers, shard_bytes = self._gc_layers(kept, dry_run=dry_run)
        return GcReport(removed, gone_bases, freed + shard_bytes, layers)

    def _gc_layers(self, kept: Sequence[str], *, dry_run: bool) -> tuple[list[str], int]:
        """Drop the base layers of this state folder's own Qdrant edge shard that no kept
        base is (old commits' bases, bases chunked before an upgrade), then compact the
        shard; returns the layers and the bytes freed (a dry run: the shard's bytes in
        proportion to the files those layers hold). A shard or server elsewhere may hold
        other workspaces' layers: left to its operator."""
        qdrant = self.qdrant()
        if qdrant is None or not qdrant.owned:
            return [], 0
        keep = {self.base_layer(name) for name in kept}
        ours = f"base:tree-{self.workspace}:"
        held = qdrant.layers()
        doomed = sorted(
            layer for layer in held
            if layer.startswith("base:") and layer not in keep
            and (not layer.startswith("base:tree-") or layer.startswith(ours))
        )  # fmt: skip
        if not doomed:
            return [], 0
        shard = getattr(qdrant.store, "directory", None)
        before = tree_size(shard) if isinstance(shard, Path) else 0
        if dry_run:
            files = sum(held.values()) or 1
            return doomed, before * sum(held[layer] for layer in doomed) // files
        for layer in doomed:
            qdrant.drop_layer(layer)
        qdrant.compact()
        return doomed, max(0, before - tree_size(shard)) if isinstance(shard, Path) else 0

    def _drop(self, directory: Path) -> None:
        segment = self._segments.pop(directory, None)
        if segment is not None:
            segment.close()
        self._memories.forget(directory)
        self._histories.forget(directory)
        self._view = None
        shutil.rmtree(directory, ignore_errors=True)
        parent = directory.parent
        while parent != self.state_dir and parent.exists() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def _alive(info: OverlayInfo) -> bool:
    """Whether the working tree and branch an overlay was built for still exist."""
    root = Path(info.root)
    if not root.is_dir():
        return False
    refs = live_refs(root)
    if refs is None:
        return info.base == _NO_GIT
    branches, _ = refs
    return info.branch == "detached" or info.branch in branches


def tree_size(path: Path) -> int:
    """The bytes the files under ``path`` take: each file's size, or the blocks it holds
    when fewer (Qdrant's edge shard preallocates 32 MiB sparse files: 320 MB read as held
    for a 3.8 MB shard)."""
    total = 0
    for p in path.rglob("*"):
        if p.is_file():
            st = p.stat()
            blocks = getattr(st, "st_blocks", None)
            total += st.st_size if blocks is None else min(st.st_size, blocks * 512)
    return total


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "user"


def _build_mark(base: Segment) -> str:
    """What a View's base holds besides its commit, in 12 hex digits: the chunker's
    fingerprint (its version and settings, the file rules), the generation (a forget bumps
    it) and the BM25 totals (what a forget took out: a rebuild starts the generation
    over). A base folder is named by its commit alone, so without this one replay key
    could name two prompts. All three follow from what was indexed, so the same tree
    indexed on another machine gives the same mark."""
    meta = base.meta
    parts = (meta.get_info("chunker") or "", str(meta.generation),
             meta.get_info("lexical_stats") or "")  # fmt: skip
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:12]
