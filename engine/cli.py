"""The ``cortex`` command: a thin shell over the library.

Each command parses its arguments, calls the library, and renders; errors are mapped to a
message and an exit code in exactly one place, ``main``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from engine._config import Config
from engine._errors import ConfigError, CortexError
from engine._survey import Survey, survey
from indexers import ChunkedFile, Skipped

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
        yield row


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
    return parser


def _config_from(args: argparse.Namespace) -> Config:
    overrides: dict[str, object] = {}
    for name in ("max_section_tokens",):
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
