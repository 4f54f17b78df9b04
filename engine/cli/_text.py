"""What the CLI prints for people: status, an index report, a chunk listing's summary."""

from __future__ import annotations

import re
from typing import TextIO

from engine import IndexReport, Status, Survey

__all__ = ["render_index_report", "render_status", "render_summary", "terminal_safe"]

# Control characters but tab and newline: an escape sequence or a carriage return in a
# saved note or a session step would recolour, hide or overwrite what a person reads.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with its control characters shown as ``\\xNN`` (tab and newline kept), for
    the listings people read; ``--json``, ``context`` and ``replay`` give the text as is."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)

_FALLBACKS_SHOWN = 5  # files named under "windows:"; --json lists them all


def render_summary(totals: Survey, out: TextIO) -> None:
    """The totals of a ``cortex chunks`` run."""
    skipped = sum(totals.skipped.values())
    out.write(
        f"\n{totals.root}: {totals.files:,} files ({totals.bytes / 1e6:.1f} MB) -> "
        f"{totals.chunks:,} chunks, {totals.tokens:,} tokens in {totals.seconds:.1f} s\n"
    )
    if totals.by_language:
        langs = ", ".join(f"{k} {v:,}" for k, v in totals.by_language.most_common())
        out.write(f"  languages: {langs}\n")
    if totals.by_kind:
        kinds = ", ".join(f"{k} {v:,}" for k, v in totals.by_kind.most_common())
        out.write(f"  chunks:    {kinds}\n")
    if totals.redactions:
        found = ", ".join(f"{k} {v:,}" for k, v in totals.redactions.most_common())
        out.write(f"  redacted:  {sum(totals.redactions.values()):,} secrets ({found})\n")
    if skipped:
        reasons = ", ".join(f"{k} {v:,}" for k, v in totals.skipped.most_common())
        out.write(f"  skipped:   {skipped:,} files ({reasons})\n")
    out.write(_fallbacks(totals.fallbacks))


def _fallbacks(fallbacks: dict[str, str]) -> str:
    """The files cut into line windows because their chunker failed: a count, then the
    first few with why."""
    if not fallbacks:
        return ""
    lines = [f"  windows:   {len(fallbacks):,} files cut into line windows, their "
             "chunker failed (sections have no names):\n"]  # fmt: skip
    for path, why in sorted(fallbacks.items())[:_FALLBACKS_SHOWN]:
        lines.append(f"    {path}: {why}\n")
    if len(fallbacks) > _FALLBACKS_SHOWN:
        lines.append(f"    ... and {len(fallbacks) - _FALLBACKS_SHOWN:,} more\n")
    return "".join(lines)


def render_index_report(root: str, report: IndexReport) -> str:
    """What ``cortex index`` did, in a few lines."""
    skipped = sum(report.skipped.values())
    reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(report.skipped.items()))
    out = [
        f"indexed {root}: {report.files:,} files, {report.chunks:,} chunks "
        f"in {report.total_seconds:.1f} s\n"
        f"  files:      {report.added:,} added, {report.changed:,} changed, "
        f"{report.removed:,} removed, {report.unchanged:,} unchanged\n"
        f"  chunks:     {report.chunks_added:,} added, {report.chunks_removed:,} removed\n"
        f"  skipped:    {skipped:,} files" + (f" ({reasons})" if reasons else "") + "\n"
    ]
    if report.resumed:
        out.append(f"  resumed:    {report.resumed:,} files kept from an interrupted run\n")
    if report.dense_model:
        out.append(
            f"  embeddings: {report.embeddings_computed:,} computed, "
            f"{report.embeddings_reused:,} reused ({report.dense_model})\n"
        )
    else:
        out.append("  embeddings: off (dense_model = none)\n")
    if report.redactions:
        found = ", ".join(f"{k} {v:,}" for k, v in sorted(report.redactions.items()))
        out.append(f"  redacted:   {sum(report.redactions.values()):,} secrets ({found})\n")
    out.append(_fallbacks(report.fallbacks))
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    out.append(f"  time:       {stages}\n")
    return "".join(out)


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
    if st.history_commit:
        out.append(f"  history:    {st.history_commits:,} commits up to {st.history_commit[:12]} "
                   "(which files change together)\n")  # fmt: skip
    if st.dense_model:
        current = "current" if st.dense_current else "behind the metadata: run `cortex index`"
        recall = f", recall@10 {st.dense_recall:.3f}" if st.dense_recall is not None else ""
        out.append(
            f"  vectors:    {st.dense_vectors:,} {st.dense_kind} ({st.dense_model}{recall}); "
            f"{current}\n"
        )
    else:
        out.append("  vectors:    none (lexical only)\n")
    if st.dense_problem:
        out.append(f"  dense:      NOT USABLE: {st.dense_problem}\n")
    if st.skipped:
        out.append(f"  skipped:    {', '.join(f'{k} {v:,}' for k, v in st.skipped.items())}\n")
    if st.rechunk:
        out.append("  chunker:    the base was chunked under other settings (a new release's "
                   "chunker, changed file rules): answers come from it until `cortex index` "
                   "builds it again\n")  # fmt: skip
    if walked:
        fresh = (
            "up to date"
            if not st.stale_files and not st.rechunk
            else "files as indexed, chunker not: run `cortex index`"
            if not st.stale_files
            else (
                f"{st.stale_files:,} files differ ({st.changed} changed, {st.added} added, "
                f"{st.removed} removed): run `cortex index`"
            )
        )
        out.append(f"  freshness:  {fresh}\n")
    out.append(f"  backend:    {st.backend}\n")
    out.append(f"  disk:       {st.disk_bytes / 1e6:.1f} MB in {st.state_dir}\n")
    return "".join(out)
