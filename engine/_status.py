"""What ``Workspace.status``, ``index`` and ``resolve`` report: the records and how they are
put together from a View, its base and overlay, and the working tree."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine._config import Config
from engine._errors import ConfigError, IndexNotBuiltError
from engine._indexer import IndexReport, content_sha
from engine._layers import Layers
from engine._meta import FileRecord
from engine._segment import page_text
from indexers import Skipped, TokenCounter, sha256_text, walk
from overlays import View, head_commit

__all__ = [
    "URI",
    "Resolved",
    "Status",
    "combined_report",
    "render_status",
    "resolve_in",
    "status_of",
    "tree_size",
]

URI = re.compile(r"^(?P<path>[^#]+?)(?:#L(?P<start>\d+)(?:-L?(?P<end>\d+))?)?$")


@dataclass(frozen=True, slots=True)
class Resolved:
    """``Workspace.resolve``'s answer: where, what hash, how big; text only with a proof."""

    uri: str
    path: str
    start_line: int | None
    end_line: int | None
    sha256: str | None  # of the lines' text as indexed
    tokens: int | None
    license: str | None
    text: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Status:
    """What is indexed, with which models, and how far the working tree has moved since."""

    root: Path
    state_dir: Path
    indexed: bool
    commit: str | None = None  # checked out now
    indexed_commit: str | None = None
    indexed_at: str | None = None
    files: int = 0
    chunks: int = 0
    tokens: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    encoding: str | None = None
    dense_model: str | None = None
    dense_vectors: int = 0
    dense_kind: str | None = None
    dense_recall: float | None = None
    dense_current: bool = False
    changed: int = 0  # files whose content differs from the index
    added: int = 0
    removed: int = 0
    disk_bytes: int = 0
    branch: str = ""  # "detached" on a detached HEAD; "" outside git
    user: str = ""
    overlay_files: int = 0  # files that differ from the base (this branch, this user)
    tombstones: int = 0  # base files the overlay hides (changed, renamed, deleted)
    overlay_bytes: int = 0
    base_bytes: int = 0
    stale: bool = False  # the working tree moved since the overlay was built

    @property
    def stale_files(self) -> int:
        """Files the index does not reflect."""
        return self.changed + self.added + self.removed


def resolve_in(
    view: View, uri: str, proof: Mapping[str, str] | None, counter: TokenCounter
) -> Resolved:
    """``Workspace.resolve`` over ``view`` (see there)."""
    match = URI.match(uri.strip())
    if match is None:
        raise ConfigError(f"bad uri {uri!r}; use path#L10-L20, path#L10 or path")
    path = match["path"]
    record = view.files().get(path)
    if record is None:
        why = "not in the index (skipped, ignored, or never indexed)"
        return Resolved(uri, path, None, None, None, None, None, reason=why)
    lines = page_text(view.chunks_of(path)).split("\n")
    start = int(match["start"]) if match["start"] else 1
    end = int(match["end"]) if match["end"] else (start if match["start"] else record.line_count)
    if start < 1 or end < start:
        raise ConfigError(f"bad line range in {uri!r}; lines count from 1, start <= end")
    if start > record.line_count:
        why = f"the indexed file has only {record.line_count} lines"
        return Resolved(uri, path, start, end, None, None, record.license, reason=why)
    end = min(end, record.line_count)
    text = "\n".join(lines[start - 1 : end])
    sha = sha256_text(text)
    meta = Resolved(uri, path, start, end, sha, counter.count(text), record.license)
    if proof is None:
        return replace(meta, reason="metadata only: no proof of possession given")
    if proof.get("path", "").strip().lstrip("./") != path:
        return replace(meta, reason=f"metadata only: the proof is for {proof.get('path')!r}")
    if str(proof.get("sha256", "")).lower() not in (sha, record.content_sha256):
        return replace(meta, reason="metadata only: the proof does not match the indexed "
                       "content (changed since, or another version)")  # fmt: skip
    return replace(meta, text=text, reason="proof matches the indexed content")


def status_of(layers: Layers, config: Config, *, check_files: bool) -> Status:
    """``Workspace.status`` (see there)."""
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
    model = meta.get_info("dense_model") or None
    dense = base.dense(model) if model else None
    changed = added = removed = 0
    if check_files:
        changed, added, removed = _staleness(layers.root, config, files)
    return Status(
        root=layers.root,
        state_dir=layers.state_dir,
        indexed=True,
        commit=commit,
        indexed_commit=info.base or None,
        indexed_at=info.built,
        files=len(files),
        chunks=base_chunks - sum(f.chunks for f in hidden) + over_chunks,
        tokens=base_tokens - sum(f.tokens for f in hidden) + over_tokens,
        skipped=meta.skipped_counts(),
        encoding=meta.get_info("encoding"),
        dense_model=model,
        dense_vectors=dense.ntotal if dense is not None else 0,
        dense_kind=dense.kind if dense is not None else None,
        dense_recall=dense.measured_recall if dense is not None else None,
        dense_current=model is not None and base.dense_generation(model) == meta.generation,
        changed=changed,
        added=added,
        removed=removed,
        disk_bytes=tree_size(layers.state_dir),
        branch=info.branch,
        user=info.user,
        overlay_files=len(info.paths),
        tombstones=len(info.tombstones),
        overlay_bytes=tree_size(layers.overlay_dir(info.branch)),
        base_bytes=tree_size(layers.base_dir(info.base)),
        stale=info.token != token,
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
    )


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def render_status(st: Status, *, walked: bool) -> str:
    """``cortex status``'s text (``walked``: ``st`` counted changed files)."""
    if not st.indexed:
        return f"{st.root}: not indexed yet (run `cortex index`)\n"
    out: list[str] = []
    base = (st.indexed_commit or "the folder at its first index")[:12]
    where = f"branch {st.branch}" if st.branch else "no git"
    head = f", HEAD {(st.commit or '-')[:12]}" if st.commit else ""
    stale = "stale: the tree moved since (refreshed on the next call)" if st.stale else "current"
    out.append(
        f"{st.root}\n"
        f"  base:       {base} ({st.base_bytes / 1e6:.1f} MB, shared by every branch)\n"
        f"  overlay:    {where}{head}, user {st.user}: {st.overlay_files:,} files differ "
        f"from the base, {st.tombstones:,} base files hidden; "
        f"{st.overlay_bytes / 1e6:.2f} MB; built {st.indexed_at}; {stale}\n"
        f"  contents:   {st.files:,} files, {st.chunks:,} chunks, {st.tokens:,} tokens "
        f"({st.encoding})\n"
    )
    if st.dense_model:
        current = "current" if st.dense_current else "behind the metadata: run `cortex index`"
        recall = f", recall@10 {st.dense_recall:.3f}" if st.dense_recall is not None else ""
        out.append(
            f"  vectors:    {st.dense_vectors:,} {st.dense_kind} ({st.dense_model}{recall}); "
            f"{current}\n"
        )
    else:
        out.append("  vectors:    none (lexical only)\n")
    if st.skipped:
        out.append(f"  skipped:    {', '.join(f'{k} {v:,}' for k, v in st.skipped.items())}\n")
    if walked:
        fresh = (
            "up to date"
            if not st.stale_files
            else (
                f"{st.stale_files:,} files differ ({st.changed} changed, {st.added} added, "
                f"{st.removed} removed): run `cortex index`"
            )
        )
        out.append(f"  freshness:  {fresh}\n")
    out.append(f"  disk:       {st.disk_bytes / 1e6:.1f} MB in {st.state_dir}\n")
    return "".join(out)
