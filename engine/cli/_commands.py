"""The ``cortex`` commands: each parses nothing, calls the library, and prints.

Each ``cmd_*`` gets the parsed arguments, the configuration and the output stream, and
returns an exit code; errors propagate to ``main``, the one place they become messages.
``--json`` prints the one JSON encoding every surface shares (``engine.serve.to_json``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from engine import (
    Config,
    ConfigError,
    SearchHit,
    SessionState,
    ToolResult,
    ToolSignal,
    Turn,
    Workspace,
    survey,
    uri_path,
)
from engine.cli._args import write_json
from engine.cli._exit import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from engine.cli._text import render_index_report, render_status, render_summary, terminal_safe
from engine.serve import (
    Proof,
    check_k,
    chunk_json,
    files_json,
    hits_json,
    learned_json,
    reset_json,
    resolve_checked,
    to_json,
)
from indexers import ChunkedFile, Skipped
from ledger import JSON

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "cmd_chunks",
    "cmd_context",
    "cmd_feedback",
    "cmd_forget",
    "cmd_gc",
    "cmd_index",
    "cmd_learned",
    "cmd_mcp",
    "cmd_replay",
    "cmd_resolve",
    "cmd_search",
    "cmd_serve",
    "cmd_status",
]



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


def cmd_chunks(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """List the chunks of a file or tree, and what was skipped and why."""
    totals, items = survey(args.where, config)
    for item in _progress(items, enabled=sys.stderr.isatty() and not args.json):
        if args.json:
            if isinstance(item, Skipped):
                row = {"type": "skip", "path": item.path, "reason": item.reason.value,
                       "detail": item.detail}  # fmt: skip
                write_json(row, out)
            elif not args.summary:
                for c in item.chunks:
                    write_json({"type": "chunk", **chunk_json(c, text=args.text)}, out)
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
        if item.fallback:
            out.write(f"  cut into line windows, its chunker failed: {item.fallback}\n")
        for c in item.chunks:
            part = f" ({c.part}/{c.parts})" if c.parts > 1 else ""
            out.write(
                f"  {c.span!s:>11}  {c.kind.value:<9} {c.symbol or '-'}{part}  {c.tokens} tok\n"
            )
            if args.text:
                for line in c.text.split("\n"):
                    out.write(f"      | {line}\n")
    if args.json:
        summary = {
            "type": "summary",
            "root": str(totals.root),
            "files": totals.files,
            "chunks": totals.chunks,
            "tokens": totals.tokens,
            "bytes": totals.bytes,
            "skipped": dict(sorted(totals.skipped.items())),
            "languages": dict(sorted(totals.by_language.items())),
            "kinds": dict(sorted(totals.by_kind.items())),
            "redactions": dict(sorted(totals.redactions.items())),
            "fallbacks": dict(sorted(totals.fallbacks.items())),
            "seconds": round(totals.seconds, 3),
        }
        write_json(summary, out)
    else:
        render_summary(totals, out)
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
    with Workspace.open(args.where, config, check=not args.rebuild) as ws:
        bars = _Bars(enabled=sys.stderr.isatty() and not args.quiet)
        try:
            report = ws.index(progress=bars, rebuild=args.rebuild)
        finally:
            bars.end()
        if args.json:
            write_json(to_json(report), out)
        else:
            out.write(render_index_report(str(ws.root), report))
    return EXIT_OK


def _hit_line(hit: SearchHit, explain: bool) -> str:
    c = hit.chunk
    line = f"{c.path}:{c.span.start_line}-{c.span.end_line}  {c.symbol or c.kind.value}  " \
        f"{hit.score:.4f}"  # fmt: skip
    if explain:
        parts = ", ".join(f"{x.feature} {x.points:+.2f}" for x in hit.contributions if x.points)
        line += f"  ({hit.reason}: {parts})"
    return line


def cmd_search(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Search the index in the ranking build_context uses: sections (or, with --files,
    files with their best sections) with path:lines, symbol and score."""
    signals = [ToolSignal(s) for s in args.signal or ()]
    check_k(args.k)  # as the servers bound it
    with Workspace.open(args.where, config) as ws:
        if args.files:
            files = ws.search_files(args.query, goal=args.goal or "", tool_signals=signals,
                                    mode=args.mode, k=args.k)  # fmt: skip
        else:
            hits = ws.search(args.query, goal=args.goal or "", tool_signals=signals,
                             mode=args.mode, k=args.k)  # fmt: skip
    if args.files:
        if args.json:
            write_json(files_json(files), out)
            return EXIT_OK
        if not files:
            out.write("no results\n")
        for rank, f in enumerate(files, start=1):
            out.write(f"{rank:>3}. {f.path}  {f.score:.4f}\n")
            for hit in f.sections:
                out.write(f"       {_hit_line(hit, args.explain)}\n")
        return EXIT_OK
    if args.json:
        write_json(hits_json(hits), out)
        return EXIT_OK
    if not hits:
        out.write("no results\n")
    for rank, hit in enumerate(hits, start=1):
        out.write(f"{rank:>3}. {_hit_line(hit, args.explain)}\n")
        if args.text:
            for line in hit.chunk.text.split("\n"):
                out.write(f"       | {line}\n")
    return EXIT_OK


def cmd_status(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Say what is indexed (base, this branch's overlay, files, model) and how stale it is."""
    with Workspace.open(args.where, config) as ws:
        st = ws.status(check_files=not args.fast)
    if args.json:
        write_json(to_json(st), out)
        return EXIT_OK
    out.write(render_status(st, walked=not args.fast))
    return EXIT_OK


def cmd_learned(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Show what outcomes taught this workspace: rerank offsets and the most salient items
    (``--reset``: forget them, journaled with ``--reason``)."""
    if args.reason is not None and not args.reset:
        raise ConfigError("--reason goes with --reset")
    with Workspace.open(args.where, config) as ws:
        if args.reset:
            return _reset_learned(reset_json(ws, args.reason or ""), args.json, out)
        body = learned_json(ws, args.k)
    if args.json:
        write_json(body, out)
        return EXIT_OK
    if not body["digest"]:
        out.write("nothing learned yet: give feedback with an outcome (success or failure)\n")
        return EXIT_OK
    weights = body["weights"]
    assert isinstance(weights, dict) and isinstance(body["salience"], list)
    moved = ", ".join(f"{name} {value:+.3f}" for name, value in weights.items()) or "none"
    shown = len(body["salience"])
    out.write(f"learned state {body['digest']}: rerank offsets {moved}\n"
              f"{body['items']:,} salient items; the {shown} strongest:\n")  # fmt: skip
    for row in body["salience"]:
        assert isinstance(row, dict)
        out.write(f"  {row['salience']:.3f}  {terminal_safe(str(row['item']))}\n")
    return EXIT_OK


def _reset_learned(body: dict[str, JSON], as_json: bool, out: TextIO) -> int:
    if as_json:
        write_json(body, out)
    elif not body["reset"]:
        out.write("nothing learned yet: nothing to reset\n")
    else:
        weights = body["weights"]
        assert isinstance(weights, dict)
        out.write(f"reset learned state {body['digest_before']}: forgot {body['items']:,} "
                  f"salient items and {len(weights)} rerank offsets (journaled in the "
                  "ledger; earlier turns still replay)\n")  # fmt: skip
    return EXIT_OK


def cmd_forget(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Remove files' or a string's stored text from the indexes, the vector cache and the
    ledger (the chain still verifies; replay shows [PURGED] where it was)."""
    text = _forget_text(args.text_from) if args.text_from else None
    with Workspace.open(args.where, config) as ws:
        bars = _Bars(enabled=sys.stderr.isatty() and not args.json)
        try:
            report = ws.forget(args.file or (), text, dry_run=args.dry_run, progress=bars)
        finally:
            bars.end()
    if args.json:  # left_on_disk non-empty: not done, whatever else it removed
        write_json(to_json(report), out)
        return EXIT_ERROR if report.left_on_disk else EXIT_OK
    verb = "would remove" if report.dry_run else "removed"
    for path in report.files:
        out.write(f"{verb} {path}\n")
    for path in report.touched:
        out.write(f"{verb} the sections holding the text in {path}\n")
    out.write(
        f"{verb} {report.chunks:,} chunks in {report.segments} index segment(s), "
        f"{report.vectors:,} cached vectors, {report.ledger_texts:,} ledger texts "
        f"({report.ledger_turns:,} turns), {report.notes:,} memory notes\n"
    )
    if report.remote_points:
        out.write(
            f"{verb} {report.remote_points:,} points from the Qdrant collection's layers "
            "(every workspace's; each writes its files again at its next index)\n"
        )
    if report.ledger_chained:
        seqs = ", ".join(str(n) for n in report.chained_seqs)
        out.write(
            f"warning: {report.ledger_chained} ledger record(s) (seq {seqs}) hold the text "
            "inside their own hashed record (a tool's name, a decision's evidence; a failure "
            "reason, a decision's rationale or a tool result recorded before such texts "
            "were stored apart); the chain cannot be rewritten without breaking "
            "verification, so they stay\n"
        )
    if report.left_on_disk:
        out.write(
            "error: another process is reading " + ", ".join(report.left_on_disk) + ", so "
            "old pages of the file still hold the removed bytes; stop it (a running "
            "`cortex serve`) and run this forget again to clear them\n"
        )
        return EXIT_ERROR
    if report.still_present:
        out.write(
            "warning: still in the working tree (indexed again when changed; delete it "
            "there, or keep the files out with CORTEX_EXCLUDE): "
            + ", ".join(report.still_present)
            + "\n"
        )
    return EXIT_OK


def _forget_text(source: str) -> str:
    """The text to forget, from standard input (``-``) or a file: never from argv, where
    ``ps`` and shell history would keep it. One trailing newline is dropped."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the text to forget from {source}: {exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"the text to forget ({source}) is not UTF-8") from None
    return text[:-1] if text.endswith("\n") else text


def cmd_gc(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Remove the overlays of branches and working trees that no longer exist, and the bases
    no overlay uses any more."""
    with Workspace.open(args.where, config) as ws:
        report = ws.gc(dry_run=args.dry_run)
    if args.json:
        write_json(to_json(report), out)
        return EXIT_OK
    verb = "would remove" if args.dry_run else "removed"
    for overlay in report.overlays:
        out.write(f"{verb} overlay {overlay}\n")
    for base in report.bases:
        out.write(f"{verb} base {base[:12]}\n")
    for layer in report.layers:
        out.write(f"{verb} qdrant layer {layer}\n")
    layers = f" and {len(report.layers)} qdrant layers" if report.layers else ""
    about = "about " if args.dry_run and report.layers else ""
    out.write(
        f"{verb} {len(report.overlays)} overlays and {len(report.bases)} bases{layers}: "
        f"{about}{report.freed_bytes / 1e6:.1f} MB\n"
    )
    return EXIT_OK


def _state(args: argparse.Namespace) -> SessionState | None:
    turns: list[Turn] = []
    for raw in args.turn or ():
        role, sep, text = raw.partition(":")
        if not sep or not role.strip():
            raise ConfigError(f"--turn takes ROLE:TEXT (e.g. user:fix the parser), got {raw!r}")
        turns.append(Turn(role.strip(), text.strip()))
    if not (turns or args.constraint or args.subgoal or args.session):
        return None
    return SessionState(tuple(turns), tuple(args.constraint or ()), tuple(args.subgoal or ()),
                        args.session)  # fmt: skip


def cmd_context(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Build the packed context for a request and print it (what a model would get)."""
    with Workspace.open(args.where, config) as ws:
        if args.index:
            ws.index()
        pack = ws.build_context(
            args.goal or "",
            args.query,
            tool_signals=[ToolSignal(s) for s in args.signal or ()],
            state=_state(args),
            budget_tokens=args.budget,
        )
    if args.json:
        write_json(to_json(pack), out)
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


def cmd_feedback(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Report which [n] of a recorded context the model cited (and how the step ended)."""
    results: list[ToolResult | str] = list(args.tool_result or ())
    with Workspace.open(args.where, config) as ws:
        fb = ws.feedback(args.key, args.citations, results, args.outcome, args.reason)
    if args.json:
        write_json(to_json(fb), out)
        return EXIT_OK
    if fb.repeated:
        out.write(f"repeated: this turn's {args.outcome} was learned from before; nothing "
                  f"recorded (valid {list(fb.valid)})\n")  # fmt: skip
        return EXIT_OK
    out.write(f"recorded: valid {list(fb.valid)}, dropped {list(fb.dropped)}, "
              f"stale {list(fb.stale)}\n")  # fmt: skip
    return EXIT_OK


def cmd_resolve(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Print the indexed lines behind a uri (path#L10-L20) for a caller holding their sha256.

    Exits 1 when a proof was given and no text came back (with --json too)."""
    proof = (
        Proof(args.proof_path or uri_path(args.uri), args.sha256) if args.sha256 else None
    )
    with Workspace.open(args.where, config) as ws:
        body = resolve_checked(ws, args.uri, proof)
    text = body.get("text")
    # Whatever the format: a script reading --json tells a failed proof by the exit code.
    done = EXIT_ERROR if args.sha256 and not isinstance(text, str) else EXIT_OK
    if args.json:
        write_json(body, out)
        return done
    if isinstance(text, str):
        out.write(text + "\n")
        return done
    out.write(f"no text: {body.get('reason')}\n")
    if body.get("sha256"):
        out.write(f"sha256 {body['sha256']}, {body.get('tokens')} tokens, "
                  f"lines {body.get('start_line')}-{body.get('end_line')}\n")  # fmt: skip
    return done


def cmd_replay(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Print the exact prompt recorded under a replay key (--rebuild: and today's diff)."""
    # The ledger alone answers a replay: an index of an older layout (an auditor's copy
    # cannot be rebuilt) is checked only when --rebuild retrieves again.
    with Workspace.open(args.where, config, check=args.rebuild) as ws:
        replay = ws.replay(args.key, rebuild=args.rebuild, user=args.user,
                           all_users=args.all_users)  # fmt: skip
    if args.json:
        write_json(to_json(replay), out)
    elif args.rebuild:
        out.write(replay.diff or "no difference: retrieval gives the same context today\n")
    else:
        out.write(replay.text)
    if replay.purged and not args.json:  # the text may hold "[PURGED]" of its own
        sys.stderr.write("cortex: a purge record (`cortex forget`) altered this prompt: the "
                         "parts marked [PURGED] were removed, so it is not byte for byte what "
                         "the model saw\n")  # fmt: skip
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Serve the workspace to IDE agents over MCP (stdio): context, feedback, replay, ..."""
    from engine.serve import run_stdio

    run_stdio(args.where, config, watch=args.watch, tools=args.tools)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Serve the workspace over HTTP: MCP at /mcp and a JSON API under /v1."""
    from engine.serve import read_token, serve

    token = read_token(args.token_file) if args.token_file else None
    serve(
        args.where,
        config,
        host=args.host,
        port=args.port,
        token=token,
        watch=args.watch,
        tools=args.tools,
    )
    return EXIT_OK
