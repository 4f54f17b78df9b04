"""What ``Workspace.status`` and ``index`` report, put together from the bases, this branch's
overlay and the working tree."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from engine.core import Config, IndexNotBuiltError, IndexReport, Status, content_sha
from engine.index._layers import Layers, tree_size
from engine.segment import FileRecord
from indexers import Skipped, TokenCounter, walk
from overlays import head_commit

__all__ = ["combined_report", "status_of", "tree_size"]


def status_of(
    layers: Layers, config: Config, *, check_files: bool, model: str | None = None,
    counter: TokenCounter | None = None,
) -> Status:  # fmt: skip
    """``Workspace.status`` (see there). ``model``: the configured dense model's id, whose
    vectors are reported when the base holds them (a base keeps one dense index a model);
    else the model the base was last indexed with. ``counter``: the configured one, to say
    whether the base was chunked as configured now."""
    commit = head_commit(layers.root)
    try:
        info, token = layers.current()
    except IndexNotBuiltError:
        return Status(layers.root, layers.state_dir, indexed=False, commit=commit)
    view = layers.view(info)
    base = layers.segment(layers.base_dir(info.base))
    overlay = layers.segment(layers.overlay_dir(info.branch))
    meta = base.meta
    files = view.files()
    _, base_chunks, base_tokens = meta.counts()
    _, over_chunks, over_tokens = overlay.meta.counts()
    hidden = [files_ for p, files_ in base.files().items() if p in view.hidden]
    if model is None or base.dense(model) is None:
        model = meta.get_info("dense_model") or None
    dense = base.dense(model) if model else None
    changed = added = removed = 0
    if check_files:
        changed, added, removed = _staleness(layers.root, config, files)
    rechunk = counter is not None and not layers.chunked_as_configured(info.base, counter)
    return Status(
        root=layers.root,
        state_dir=layers.state_dir,
        indexed=True,
        rechunk=rechunk,
        commit=commit,
        indexed_commit=info.base or None,
        indexed_at=info.built,
        files=len(files),
        chunks=base_chunks - sum(f.chunks for f in hidden) + over_chunks,
        tokens=base_tokens - sum(f.tokens for f in hidden) + over_tokens,
        skipped=info.skipped_counts(base),
        encoding=meta.get_info("encoding"),
        dense_model=model,
        dense_vectors=dense.ntotal if dense is not None else 0,
        dense_kind=dense.kind if dense is not None else None,
        dense_recall=dense.measured_recall if dense is not None else None,
        # The overlay's vectors too: a run killed between its metadata and vector writes
        # leaves its new chunks out of dense search until the next refresh.
        dense_current=model is not None and base.dense_generation(model) == meta.generation
        and (not info.paths or overlay.dense_generation(model) == overlay.meta.generation),
        changed=changed,
        added=added,
        removed=removed,
        disk_bytes=tree_size(layers.state_dir),
        backend=layers.backend.describe(layers.backend_home),
        branch=info.branch,
        user=info.user,
        overlay_files=len(info.paths),
        tombstones=len(info.tombstones),
        overlay_bytes=tree_size(layers.overlay_dir(info.branch)),
        base_bytes=tree_size(layers.base_dir(info.base)),
        stale=info.token != token,
        history_commit=view.history.commit if view.history is not None else None,
        history_commits=view.history.commits if view.history is not None else 0,
    )


def _staleness(root: Path, config: Config, known: Mapping[str, FileRecord]) -> tuple[int, int, int]:
    seen: set[str] = set()
    changed = added = 0
    for item in walk(root, config.walk_options()):
        if isinstance(item, Skipped):
            continue
        seen.add(item.path)
        old = known.get(item.path)
        if old is None:
            added += 1
        elif old.content_sha256 != content_sha(item.data):
            changed += 1
    return changed, added, len(set(known) - seen)


def combined_report(
    base: IndexReport | None,
    overlay: IndexReport,
    before: Mapping[str, FileRecord],
    after: Mapping[str, FileRecord],
    skipped: dict[str, int],
) -> IndexReport:
    """One report for a run that may have built a base and refreshed an overlay, counted
    against what the previous View held: what a caller sees change, and what was re-done."""
    added = sum(1 for p in after if p not in before)
    # A new base re-chunks every file (other chunker settings, or a move to another commit).
    changed = sum(1 for p, f in after.items() if p in before and (
        base is not None or before[p].content_sha256 != f.content_sha256))  # fmt: skip
    seconds = {f"overlay {k}": v for k, v in overlay.seconds.items()}
    computed, reused = overlay.embeddings_computed, overlay.embeddings_reused
    chunks_added, chunks_removed = overlay.chunks_added, overlay.chunks_removed
    if base is not None:
        seconds = {**{f"base {k}": v for k, v in base.seconds.items()}, **seconds}
        computed, reused = computed + base.embeddings_computed, reused + base.embeddings_reused
        chunks_added += base.chunks_added
        # The new base replaces the whole previous View: each of its chunks is gone, and
        # ``chunks`` is what it held plus what was added less what was removed.
        chunks_removed += sum(f.chunks for f in before.values())
    return IndexReport(
        files=len(after),
        added=added,
        changed=changed,
        removed=sum(1 for p in before if p not in after),
        unchanged=len(after) - added - changed,
        chunks=sum(f.chunks for f in after.values()),
        chunks_added=chunks_added,
        chunks_removed=chunks_removed,
        skipped=skipped,
        embeddings_computed=computed,
        embeddings_reused=reused,
        dense_model=overlay.dense_model,
        seconds=seconds,
        redactions=dict(Counter(overlay.redactions) + Counter(base.redactions if base else {})),
        fallbacks={**(base.fallbacks if base else {}), **overlay.fallbacks},
        resumed=base.resumed if base else 0,
    )
