"""The ``cortex`` command: a thin shell over the library.

Each command parses its arguments, calls the library, and renders; errors are mapped to a
message and an exit code in exactly one place, ``main``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, TextIO

from engine._config import Config
from engine._context import Snippet
from engine._errors import ConfigError, CortexError
from engine._query import ToolSignal
from engine._rerank import Scored
from engine._search import SearchMode
from engine._status import render_status
from engine._survey import Survey, survey
from engine._workspace import Workspace
from indexers import Chunk, ChunkedFile, Skipped
from ledger import FeedbackRecord, TurnRecord

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERROR = 1  # a CortexError: bad workspace, unreadable state
EXIT_USAGE = 2  # argparse's own code for bad arguments; ConfigError uses it too
EXIT_INTERRUPTED = 130


def _progress(
    items: Iterator[ChunkedFile | Skipped], enabled: bool
) -> Iterator[ChunkedFile | Skipped]:
    """Show a files/s counter on stderr while ``items`` is consumed (only on a terminal)."""
    if not enabled:
        yield from items
        return
    from tqdm import tqdm

    with tqdm(unit=" files", desc="chunking", file=sys.stderr, leave=False) as bar:
        for item in items:
            bar.update(1)
            yield item


def _chunk_json(cf: ChunkedFile, with_text: bool) -> Iterator[dict[str, object]]:
    for c in cf.chunks:
        yield _chunk_row(c, with_text)


def _chunk_row(c: Chunk, with_text: bool) -> dict[str, object]:
    row: dict[str, object] = {
        "type": "chunk",
        "id": c.id,
        "page_id": c.page_id,
        "path": c.path,
        "start_line": c.span.start_line,
        "end_line": c.span.end_line,
        "source_uri": c.source_uri,
        "title": c.title,
        "kind": c.kind.value,
        "symbol": c.symbol,
        "language": c.language,
        "doc_type": c.doc_type.value,
        "tokens": c.tokens,
        "sha256": c.sha256,
        "license": c.license,
        "depth": c.depth,
        "part": c.part,
        "parts": c.parts,
        "context": c.context,
        "defines": list(c.defines),
        "references": list(c.references),
    }
    if with_text:
        row["text"] = c.text
    return row


def _summary_json(totals: Survey) -> dict[str, object]:
    return {
        "type": "summary",
        "root": str(totals.root),
        "files": totals.files,
        "chunks": totals.chunks,
        "tokens": totals.tokens,
        "bytes": totals.bytes,
        "skipped": dict(sorted(totals.skipped.items())),
        "languages": dict(sorted(totals.by_language.items())),
        "kinds": dict(sorted(totals.by_kind.items())),
        "seconds": round(totals.seconds, 3),
    }


def _render_summary(totals: Survey, out: TextIO) -> None:
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
    if skipped:
        reasons = ", ".join(f"{k} {v:,}" for k, v in totals.skipped.most_common())
        out.write(f"  skipped:   {skipped:,} files ({reasons})\n")


def cmd_chunks(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """List the chunks of a file or tree, and what was skipped and why."""
    totals, items = survey(args.path, config)
    for item in _progress(items, enabled=sys.stderr.isatty() and not args.json):
        if args.json:
            if isinstance(item, Skipped):
                row = {
                    "type": "skip",
                    "path": item.path,
                    "reason": item.reason.value,
                    "detail": item.detail,
                }
                out.write(json.dumps(row) + "\n")
            elif not args.summary:
                for chunk_row in _chunk_json(item, args.text):
                    out.write(json.dumps(chunk_row) + "\n")
            continue
        if args.summary:
            continue
        if isinstance(item, Skipped):
            detail = f" ({item.detail})" if item.detail else ""
            out.write(f"skip  {item.path}  {item.reason.value}{detail}\n")
            continue
        page = item.page
        out.write(
            f"{page.path}  [{page.language}, {page.doc_type.value}, {page.license}] "
            f"{len(item.chunks)} chunks\n"
        )
        for c in item.chunks:
            part = f" ({c.part}/{c.parts})" if c.parts > 1 else ""
            out.write(
                f"  {c.span!s:>11}  {c.kind.value:<9} {c.symbol or '-'}{part}  {c.tokens} tok\n"
            )
            if args.text:
                for line in c.text.split("\n"):
                    out.write(f"      | {line}\n")
    if args.json:
        out.write(json.dumps(_summary_json(totals)) + "\n")
    else:
        _render_summary(totals, out)
    return EXIT_OK


class _Bars:
    """tqdm bars on stderr, one per indexing stage (files, chunks, embeddings) with ETA."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None

    def stage(self, name: str, total: int | None, unit: str) -> None:
        self.end()
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=name, unit=f" {unit}", file=sys.stderr, leave=False)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def cmd_index(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Index a folder (incremental: only changed files are re-chunked and re-embedded)."""
    with Workspace.open(args.path, config, check=not args.rebuild) as ws:
        bars = _Bars(enabled=sys.stderr.isatty() and not args.quiet)
        try:
            report = ws.index(progress=bars, rebuild=args.rebuild)
        finally:
            bars.end()
        if args.json:
            out.write(json.dumps(_jsonable(report)) + "\n")
            return EXIT_OK
        skipped = sum(report.skipped.values())
        reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(report.skipped.items()))
        out.write(
            f"indexed {ws.root}: {report.files:,} files, {report.chunks:,} chunks "
            f"in {report.total_seconds:.1f} s\n"
            f"  files:      {report.added:,} added, {report.changed:,} changed, "
            f"{report.removed:,} removed, {report.unchanged:,} unchanged\n"
            f"  chunks:     {report.chunks_added:,} added, {report.chunks_removed:,} removed\n"
            f"  skipped:    {skipped:,} files" + (f" ({reasons})" if reasons else "") + "\n"
        )
        if report.dense_model:
            out.write(
                f"  embeddings: {report.embeddings_computed:,} computed, "
                f"{report.embeddings_reused:,} reused ({report.dense_model})\n"
            )
        else:
            out.write("  embeddings: off (dense_model = none)\n")
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
        out.write(f"  time:       {stages}\n")
    return EXIT_OK


def cmd_search(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Search the index: ranked sections with path:lines, symbol and score."""
    with Workspace.open(args.path, config) as ws:
        hits = ws.search(args.query, mode=args.mode, k=args.k)
    if args.json:
        for rank, hit in enumerate(hits, start=1):
            row = {"rank": rank, **_jsonable(hit), "chunk": _chunk_row(hit.chunk, args.text)}
            out.write(json.dumps(row) + "\n")
        return EXIT_OK
    if not hits:
        out.write("no results\n")
    for rank, hit in enumerate(hits, start=1):
        c = hit.chunk
        out.write(
            f"{rank:>3}. {c.path}:{c.span.start_line}-{c.span.end_line}  "
            f"{c.symbol or c.kind.value}  {hit.score:.4f}\n"
        )
        if args.text:
            for line in c.text.split("\n"):
                out.write(f"       | {line}\n")
    return EXIT_OK


def cmd_status(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Say what is indexed (base, this branch's overlay, files, model) and how stale it is."""
    with Workspace.open(args.path, config) as ws:
        st = ws.status(check_files=not args.fast)
    if args.json:
        out.write(json.dumps(_jsonable(st)) + "\n")
        return EXIT_OK
    out.write(render_status(st, walked=not args.fast))
    return EXIT_OK


def cmd_gc(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Remove the overlays of branches and working trees that no longer exist, and the bases
    no overlay uses any more."""
    with Workspace.open(args.path, config) as ws:
        report = ws.gc(dry_run=args.dry_run)
    if args.json:
        out.write(json.dumps(_jsonable(report)) + "\n")
        return EXIT_OK
    verb = "would remove" if args.dry_run else "removed"
    for overlay in report.overlays:
        out.write(f"{verb} overlay {overlay}\n")
    for base in report.bases:
        out.write(f"{verb} base {base[:12]}\n")
    out.write(
        f"{verb} {len(report.overlays)} overlays and {len(report.bases)} bases: "
        f"{report.freed_bytes / 1e6:.1f} MB\n"
    )
    return EXIT_OK


def cmd_context(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Build the packed context for a request and print it (what a model would get)."""
    with Workspace.open(args.path, config) as ws:
        if args.index:
            ws.index()
        explain: list[Scored] = []
        pack = ws.build_context(
            args.goal or args.query,
            args.query,
            tool_signals=[ToolSignal(s) for s in args.signal or ()],
            budget_tokens=args.budget,
            explain=explain if args.explain else None,
        )
    if args.json:
        body = {
            "replay_key": pack.replay_key,
            "tokens_used": pack.tokens_used,
            "budget_tokens": pack.budget_tokens,
            "advisory": list(pack.advisory),
            "citations": [_snippet_row(s, args.explain) for s in pack.citations],
            "reachable": [_jsonable(p) for p in pack.reachable],
            "render": pack.render(),
        }
        out.write(json.dumps(body) + "\n")
        return EXIT_OK
    out.write(pack.render())
    note = f"-- {pack.tokens_used:,}/{pack.budget_tokens:,} tokens, {len(pack.citations)} " \
        f"snippets, {len(pack.reachable)} left out (~{pack.omitted_tokens:,} tokens); " \
        f"replay key {pack.replay_key}\n"  # fmt: skip
    sys.stderr.write(note)
    for line in pack.advisory:
        sys.stderr.write(f"-- advisory: {line}\n")
    if args.explain:
        out.write("\n## Why these\n")
        for s in pack.citations:
            parts = ", ".join(f"{c.feature} {c.points:+.2f}" for c in s.contributions if c.points)
            out.write(f"[{s.id}] {s.title}  score {s.fused_score:.3f} ({s.reason_tag}): {parts}\n")
    return EXIT_OK


def cmd_replay(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Print the exact prompt recorded under a replay key (--rebuild: and today's diff)."""
    with Workspace.open(args.path, config) as ws:
        replay = ws.replay(args.key, rebuild=args.rebuild)
    if args.rebuild:
        out.write(replay.diff or "no difference: retrieval gives the same context today\n")
    else:
        out.write(replay.text)
    return EXIT_OK


def cmd_ledger(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Read the evidence ledger: verify the chain, list recent records, show a turn."""
    with Workspace.open(args.path, config) as ws:
        if args.action == "verify":
            report = ws.journal.verify(blobs=True)
            if report.ok:
                out.write(f"ok: {report.checked:,} records, chain and stored texts intact\n")
                return EXIT_OK
            out.write(
                f"BROKEN at record {report.first_bad_seq} (turn {report.first_bad_turn}): "
                f"{report.reason}\n"
            )
            return EXIT_ERROR
        if args.action == "log":
            for record in ws.journal.log(args.n):
                turn = getattr(record, "turn_id", None) or "-"
                extra = ""
                if isinstance(record, TurnRecord):
                    extra = f"{len(record.snippets)} snippets, {record.tokens_used} tokens, " \
                        f"key {record.replay_key}"  # fmt: skip
                elif isinstance(record, FeedbackRecord):
                    extra = f"cited {list(record.cited)}, dropped {len(record.dropped)}, " \
                        f"stale {list(record.stale)}, outcome {record.outcome}"  # fmt: skip
                out.write(
                    f"{record.seq:>6}  {record.time}  {record.kind.value:<9} {turn}  {extra}\n"
                )
            return EXIT_OK
        turn = ws.journal.find(args.key or "")
        if turn is None:
            raise ConfigError(f"unknown replay key {args.key!r}")
        out.write(json.dumps(_jsonable_deep(turn), indent=2) + "\n")
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Serve the workspace to IDE agents over MCP (stdio): context, feedback, replay, ..."""
    from engine._mcp import run_stdio

    run_stdio(args.path, config, watch=args.watch)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Serve the workspace over HTTP: MCP at /mcp and a JSON API under /v1."""
    from engine._http import serve

    serve(args.path, config, host=args.host, port=args.port, token=args.token, watch=args.watch)
    return EXIT_OK


def _jsonable_deep(obj: object) -> object:
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable_deep(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, tuple | list):
        return [_jsonable_deep(x) for x in obj]
    return obj


def _snippet_row(s: Snippet, explain: bool) -> dict[str, object]:
    row: dict[str, object] = {
        "id": s.id,
        "title": s.title,
        "source_uri": s.source_uri,
        "start_line": s.span.start_line,
        "end_line": s.span.end_line,
        "sha256": s.sha256,
        "license": s.license,
        "approx_tokens": s.approx_tokens,
        "fused_score": s.fused_score,
        "reason_tag": s.reason_tag,
    }
    if explain:
        row["contributions"] = {c.feature: round(c.points, 4) for c in s.contributions}
    return row


def _jsonable(obj: object) -> dict[str, object]:
    """A dataclass as JSON-ready dict (paths as strings, chunks left to ``_chunk_row``)."""
    out: dict[str, object] = {}
    for f in fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if isinstance(value, Chunk):
            continue
        out[f.name] = str(value) if isinstance(value, Path) else value
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cortex",
        description="Retrieval and context packing for code workspaces.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    chunks = sub.add_parser(
        "chunks",
        help="list the chunks of a file or tree, and what was skipped and why",
        description=cmd_chunks.__doc__,
    )
    chunks.add_argument("path", nargs="?", default=".", help="a file or folder (default: .)")
    chunks.add_argument("--json", action="store_true", help="JSON lines: chunks, skips, summary")
    chunks.add_argument(
        "--summary", action="store_true", help="only the totals (and skips in --json)"
    )
    chunks.add_argument("--text", action="store_true", help="include each chunk's text")
    chunks.add_argument(
        "--max-tokens",
        type=int,
        dest="max_section_tokens",
        help="split sections larger than this many tokens (default 512)",
    )
    chunks.add_argument(
        "--include", action="append", metavar="GLOB", help="only index matching paths (repeatable)"
    )
    chunks.add_argument(
        "--exclude", action="append", metavar="GLOB", help="skip matching paths (repeatable)"
    )
    chunks.set_defaults(func=cmd_chunks)

    index = sub.add_parser("index", help=cmd_index.__doc__, description=cmd_index.__doc__)
    index.add_argument("path", nargs="?", default=".", help="the workspace folder (default: .)")
    index.add_argument("--rebuild", action="store_true", help="drop the index and start over")
    index.add_argument(
        "--dense",
        dest="dense_model",
        metavar="MODEL",
        help="dense model: static (default), minilm, none, or a model name/path",
    )
    index.add_argument("--json", action="store_true", help="print the report as JSON")
    index.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    index.set_defaults(func=cmd_index)

    search = sub.add_parser("search", help=cmd_search.__doc__, description=cmd_search.__doc__)
    search.add_argument("query")
    search.add_argument("--path", default=".", help="the workspace folder (default: .)")
    search.add_argument("--mode", choices=[m.value for m in SearchMode], default="hybrid")
    search.add_argument("-k", type=int, default=10, help="how many results (default 10)")
    search.add_argument("--json", action="store_true", help="JSON lines, one per result")
    search.add_argument("--text", action="store_true", help="show each section's text")
    search.add_argument("--dense", dest="dense_model", metavar="MODEL", help=argparse.SUPPRESS)
    search.set_defaults(func=cmd_search)

    context = sub.add_parser("context", help=cmd_context.__doc__, description=cmd_context.__doc__)
    context.add_argument("query", help="what the next step needs (also the goal by default)")
    context.add_argument(
        "--goal", help="the task's goal, pinned verbatim and searched too (default: the query)"
    )
    context.add_argument("--path", default=".", help="the workspace folder (default: .)")
    context.add_argument("--budget", type=int, default=None, help="token budget (default 8000)")
    context.add_argument(
        "--signal",
        action="append",
        metavar="TEXT",
        help="tool output to ground on (traceback, failing test); repeatable",
    )
    context.add_argument("--index", action="store_true", help="refresh the index first")
    context.add_argument("--json", action="store_true", help="the pack as one JSON object")
    context.add_argument("--explain", action="store_true", help="show why each snippet was chosen")
    context.set_defaults(func=cmd_context)

    replay = sub.add_parser("replay", help=cmd_replay.__doc__, description=cmd_replay.__doc__)
    replay.add_argument("key", help="a replay key from `cortex context` or the API")
    replay.add_argument("--path", default=".", help="the workspace folder (default: .)")
    replay.add_argument(
        "--rebuild",
        action="store_true",
        help="re-run retrieval on the recorded inputs and show the difference",
    )
    replay.set_defaults(func=cmd_replay)

    led = sub.add_parser("ledger", help=cmd_ledger.__doc__, description=cmd_ledger.__doc__)
    led.add_argument("action", choices=["verify", "log", "show"])
    led.add_argument("key", nargs="?", help="for show: a replay key")
    led.add_argument("--path", default=".", help="the workspace folder (default: .)")
    led.add_argument("-n", type=int, default=20, help="for log: how many records (default 20)")
    led.set_defaults(func=cmd_ledger)

    status = sub.add_parser("status", help=cmd_status.__doc__, description=cmd_status.__doc__)
    status.add_argument("path", nargs="?", default=".", help="the workspace folder (default: .)")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument("--fast", action="store_true", help="skip the walk that counts changes")
    status.set_defaults(func=cmd_status)

    gc = sub.add_parser("gc", help=cmd_gc.__doc__, description=cmd_gc.__doc__)
    gc.add_argument("path", nargs="?", default=".", help="the workspace folder (default: .)")
    gc.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    gc.add_argument("--json", action="store_true", help="print the report as JSON")
    gc.set_defaults(func=cmd_gc)

    mcp = sub.add_parser("mcp", help=cmd_mcp.__doc__, description=cmd_mcp.__doc__)
    mcp.add_argument("path", nargs="?", default=".", help="the workspace folder (default: .)")
    mcp.add_argument(
        "--watch",
        type=float,
        default=None,
        metavar="SECONDS",
        help="re-index when files change, checking this often (default 60; 0: off)",
    )
    mcp.set_defaults(func=cmd_mcp)

    serve = sub.add_parser("serve", help=cmd_serve.__doc__, description=cmd_serve.__doc__)
    serve.add_argument("path", nargs="?", default=".", help="the workspace folder (default: .)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    serve.add_argument(
        "--token", help="require this bearer token (default: $CORTEX_TOKEN; none: no auth)"
    )
    serve.add_argument(
        "--watch",
        type=float,
        default=None,
        metavar="SECONDS",
        help="re-index when files change, checking this often (default 60; 0: off)",
    )
    serve.set_defaults(func=cmd_serve)
    return parser


def _config_from(args: argparse.Namespace) -> Config:
    overrides: dict[str, object] = {}
    for name in ("max_section_tokens", "dense_model"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    for name in ("include", "exclude"):
        if getattr(args, name, None):
            overrides[name] = tuple(getattr(args, name))
    return Config.from_env(**overrides)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code. The one place errors become messages."""
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace, Config, TextIO], int] = args.func
    try:
        return func(args, _config_from(args), out)
    except ConfigError as exc:
        print(f"cortex: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CortexError as exc:
        print(f"cortex: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("cortex: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `cortex chunks . | head` closed our stdout; that is not an error.
        sys.stderr.close()
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
