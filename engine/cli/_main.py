"""The ``cortex`` command: a thin shell over the library.

Each command parses its arguments, calls the library, and renders; errors are mapped to a
message and an exit code in exactly one place, ``main``. Every command that reads a
workspace takes ``--path`` (and a positional path where it reads naturally); with neither,
the workspace is found by walking up from the current folder, as git finds its repository.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from engine import (
    DEFAULT_BUNDLE_BUDGET,
    Config,
    ConfigError,
    ConfigWarning,
    CortexError,
    SearchMode,
    Workspace,
)
from engine.cli._args import Parser, integer
from engine.cli._bundle import cmd_bundle
from engine.cli._commands import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    cmd_chunks,
    cmd_context,
    cmd_feedback,
    cmd_forget,
    cmd_gc,
    cmd_index,
    cmd_learned,
    cmd_mcp,
    cmd_replay,
    cmd_resolve,
    cmd_search,
    cmd_serve,
    cmd_status,
)
from engine.cli._ledger import LEDGER_ACTIONS, cmd_ledger
from engine.cli._memory import memory_commands
from engine.cli._session import cmd_session

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]

_WATCH_HELP = "re-index when files change, checking this often (default 60; 0: off)"
_TOOLS_HELP = ("the MCP tools: agent (default: context, sessions, memory save/search/get/"
               "timeline/relate/graph), admin (adds memory_delete, memory_stats, "
               "memory_archive, learned, learned_reset; on serve it also opens GET and DELETE "
               "/v1/learned), or tool names, comma-separated")  # fmt: skip


def _version() -> str:
    """The release, and what decides whether an index made by another one is rebuilt:
    the chunker's version and the state folder's layout (two builds of one release
    number can differ in them)."""
    from importlib.metadata import PackageNotFoundError, version

    from engine import MANIFEST_SCHEMA
    from indexers import CHUNKER_VERSION

    try:
        release = version("cortex-context")
    except PackageNotFoundError:  # run from a checkout that was never installed
        release = "unknown (not installed)"
    return f"{release} (chunker {CHUNKER_VERSION}, index layout {MANIFEST_SCHEMA})"


def _whose(parser: argparse.ArgumentParser) -> None:
    """--user / --all-users: whose turns an auditor's read returns (turns are read back
    per user, CORTEX_USER or the login name, by default)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--user", metavar="NAME",
                       help="read the turns NAME recorded (default: your own)")  # fmt: skip
    group.add_argument("--all-users", action="store_true",
                       help="read every user's turns (the latest under a key)")  # fmt: skip


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    func: Callable[[argparse.Namespace, Config, TextIO], int],
    *,
    positional: bool,
    json: bool = True,
) -> argparse.ArgumentParser:
    """A subcommand with its help from ``func``'s docstring, ``--path`` (and, where it reads
    naturally, an optional positional path) and ``--json``."""
    doc = func.__doc__ or ""
    parser = sub.add_parser(name, help=doc.split("\n", 1)[0], description=doc)
    if positional:
        parser.add_argument(
            "path", nargs="?", default=None, help="the workspace folder (default: found from .)"
        )
    parser.add_argument(
        "--path",
        dest="path_option",
        metavar="PATH",
        default=None,
        help="the workspace folder (default: the one holding the current folder)",
    )
    if json:
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=func)
    return parser


def _parser() -> argparse.ArgumentParser:
    # Typed as the base: its sub-commands are Parsers too (argparse makes them of its class)
    parser: argparse.ArgumentParser = Parser(
        prog="cortex",
        description="Retrieval and context packing for code workspaces.",
    )
    parser.add_argument("--version", action="version", version=f"cortex {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    chunks = _command(sub, "chunks", cmd_chunks, positional=True)
    chunks.add_argument(
        "--summary", action="store_true", help="only the totals (and skips in --json)"
    )
    chunks.add_argument("--text", action="store_true", help="include each chunk's text")
    chunks.add_argument(
        "--max-tokens",
        type=integer,
        dest="max_section_tokens",
        help="split sections larger than this many tokens (default 512)",
    )
    chunks.add_argument(
        "--include", action="append", metavar="GLOB", help="only index matching paths (repeatable)"
    )
    chunks.add_argument(
        "--exclude", action="append", metavar="GLOB", help="skip matching paths (repeatable)"
    )

    index = _command(sub, "index", cmd_index, positional=True)
    index.add_argument("--rebuild", action="store_true",
                       help="build the index again from scratch, beside the one in use "
                            "(which answers until the new one is whole), then swap it in")
    index.add_argument(
        "--dense",
        dest="dense_model",
        metavar="MODEL",
        help="dense model: static (default), static-distilled, minilm, none, hash (tests), or a "
        "model name/path",
    )
    index.add_argument("--quiet", "-q", action="store_true", help="no progress bars")

    search = _command(sub, "search", cmd_search, positional=False)
    search.add_argument("query")
    search.add_argument("--goal", help="the task's goal: steers the ranking as in `context`")
    search.add_argument("--files", action="store_true", help="rank files, with their best sections")
    search.add_argument(
        "--mode",
        default=SearchMode.HYBRID.value,
        help="hybrid (default), bm25 (no dense channel), dense (the dense retriever alone)",
    )
    search.add_argument("-k", type=integer, default=10,
                        help="how many results (default 10, 1..100)")  # fmt: skip
    search.add_argument(
        "--signal", action="append", metavar="TEXT", help="tool output to ground on; repeatable"
    )
    search.add_argument("--text", action="store_true", help="show each section's text")
    search.add_argument("--explain", action="store_true", help="show each hit's features")
    search.add_argument("--dense", dest="dense_model", metavar="MODEL", help=argparse.SUPPRESS)

    context = _command(sub, "context", cmd_context, positional=False)
    context.add_argument("query", help="what the next step needs (also the goal by default)")
    context.add_argument(
        "--goal", help="the task's goal, pinned verbatim and searched too (default: the query)"
    )
    context.add_argument("--budget", type=integer, default=None,
                         help="token budget (default 8000, or CORTEX_BUDGET_TOKENS)")
    context.add_argument(
        "--signal",
        action="append",
        metavar="TEXT",
        help="tool output to ground on (traceback, failing test); repeatable",
    )
    context.add_argument(
        "--turn", action="append", metavar="ROLE:TEXT", help="a recent turn, shown verbatim"
    )
    context.add_argument(
        "--constraint", action="append", metavar="TEXT", help="a hard constraint, pinned"
    )
    context.add_argument(
        "--subgoal", action="append", metavar="TEXT", help="an active sub-goal, pinned"
    )
    context.add_argument("--index", action="store_true", help="refresh the index first")
    context.add_argument("--explain", action="store_true", help="show why each snippet was chosen")

    context.add_argument(
        "--session", default="", metavar="ID",
        help="a session id: its history lane goes in the context, and this request is journaled",
    )  # fmt: skip

    _session_commands(sub)
    memory_commands(sub)

    feedback = _command(sub, "feedback", cmd_feedback, positional=False)
    feedback.add_argument("key", help="the replay key of the context the model was given")
    feedback.add_argument("citations", nargs="*", help="the [n] the model cited (3 or [3])")
    feedback.add_argument("--outcome", help="how the step ended: success or failure (teaches "
                          "this workspace's ranking)")  # fmt: skip
    feedback.add_argument(
        "--reason", help="why it failed: factual_error or wrong_assumption blame the evidence"
    )
    feedback.add_argument(
        "--tool-result", action="append", metavar="TEXT", help="what a tool reported; repeatable"
    )

    bundle = _command(sub, "bundle", cmd_bundle, positional=False)
    bundle.add_argument("goal", help="what the task is")
    bundle.add_argument("--object", action="append", metavar="PATH_OR_SYMBOL",
                        help="a path or symbol the task will touch; repeatable")  # fmt: skip
    bundle.add_argument("--budget", type=integer, default=DEFAULT_BUNDLE_BUDGET,
                        help=f"tokens (default {DEFAULT_BUNDLE_BUDGET}, at most 4000)")  # fmt: skip
    bundle.add_argument("--constraint", action="append", metavar="TEXT",
                        help="a hard constraint of the session, pinned; repeatable")  # fmt: skip
    bundle.add_argument("--subgoal", action="append", metavar="TEXT",
                        help="an active goal of the session, pinned; repeatable")  # fmt: skip

    resolve = _command(sub, "resolve", cmd_resolve, positional=False)
    resolve.add_argument("uri", help="path#L10-L20, path#L10 or path, relative to the workspace; "
                         "memory:N (a note) or session:ID#N (a session step)")  # fmt: skip
    resolve.add_argument("--sha256", help="proof: the sha256 a citation carried (or the file's)")
    resolve.add_argument("--proof-path", help="the path the proof is for (default: the uri's path)")

    replay = _command(sub, "replay", cmd_replay, positional=False)
    replay.add_argument("key", help="a replay key from `cortex context` or the API")
    replay.add_argument(
        "--rebuild",
        action="store_true",
        help="re-run retrieval on the recorded inputs and show the difference",
    )
    _whose(replay)

    led = _command(sub, "ledger", cmd_ledger, positional=False, json=False)
    led.add_argument("action", choices=LEDGER_ACTIONS)
    led.add_argument("key", nargs="?", help="for show: a replay key")
    led.add_argument(
        "--anchor",
        metavar="SEQ:HASH",
        help="for verify and rotate: a head printed earlier (`ledger head`), kept outside the "
        "ledger; detects a chain cut at its tail and re-headed",
    )
    led.add_argument("--broken", action="store_true",
                     help="for rotate: the ledger fails its check; move it aside as evidence "
                     "(without it, rotate refuses a ledger that does not verify)")  # fmt: skip
    led.add_argument("--previous", action="store_true",
                     help="for verify: also check the file a rotated chain continues (its "
                     "size, sha256 and the head its first record names)")  # fmt: skip
    led.add_argument("-n", type=integer, default=20, help="for log: how many records (default 20)")
    _whose(led)

    status = _command(sub, "status", cmd_status, positional=True)
    status.add_argument("--fast", action="store_true", help="skip the walk that counts changes")

    learned = _command(sub, "learned", cmd_learned, positional=True)
    learned.add_argument("-k", type=integer, default=20, help="salient items shown (default 20)")
    learned.add_argument("--reset", action="store_true",
                         help="forget it all: salience and rerank offsets back to none, every "
                              "user's (journaled; earlier turns still replay)")  # fmt: skip
    learned.add_argument("--reason", metavar="TEXT", help="with --reset: why (journaled)")

    gc = _command(sub, "gc", cmd_gc, positional=True)
    gc.add_argument("--dry-run", action="store_true", help="only say what would be removed")

    forget = _command(sub, "forget", cmd_forget, positional=False)
    forget.add_argument(
        "--file", action="append", metavar="PATH",
        help="a file or folder to forget (repeatable); relative to the workspace",
    )  # fmt: skip
    forget.add_argument(
        "--text-from", metavar="FILE", default=None,
        help="forget every occurrence of the text in FILE (- reads standard input; one "
        "trailing newline is dropped); never give a secret as an argument",
    )  # fmt: skip
    forget.add_argument("--dry-run", action="store_true", help="only count what would go")

    mcp = _command(sub, "mcp", cmd_mcp, positional=True, json=False)
    mcp.add_argument("--watch", type=float, default=None, metavar="SECONDS", help=_WATCH_HELP)
    mcp.add_argument("--tools", default="agent", metavar="PROFILE", help=_TOOLS_HELP)

    serve = _command(sub, "serve", cmd_serve, positional=True, json=False)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=integer, default=8765,
                       help="port (default 8765; 0: any free)")  # fmt: skip
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        help="require the bearer token in this file (default: $CORTEX_TOKEN; none: no auth, "
        "loopback only); never on the command line, where `ps` shows it",
    )
    serve.add_argument("--watch", type=float, default=None, metavar="SECONDS", help=_WATCH_HELP)
    serve.add_argument("--tools", default="agent", metavar="PROFILE", help=_TOOLS_HELP)
    return parser


def _session_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``cortex session add|decide|show|compact|checkpoint|hook|end``."""
    doc = cmd_session.__doc__ or ""
    session = sub.add_parser("session", help=doc.split("\n", 1)[0], description=doc)
    actions = session.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {
        "add": "journal one step (TEXT - reads standard input)",
        "decide": "journal a decision, its rationale and evidence",
        "show": "the steps, one step in full (--step), or the history lane a context of BUDGET "
                "tokens would hold (--lane BUDGET [--goal G] [--query Q])",
        "compact": "compact into --budget tokens and journal a checkpoint",
        "checkpoint": "journal a checkpoint at STEP, or --load the one there (no STEP: the latest)",
        "hook": "add a Claude Code hook payload (standard input) to its session",
        "end": "save the session's summary as a memory note (ending again updates it)",
    }
    parsers = {}
    for name, text in helps.items():
        p = actions.add_parser(name, help=text, description=text)
        p.add_argument("--path", dest="path_option", metavar="PATH", default=None,
                       help="the workspace folder (default: the one holding the current "
                       "folder; for hook, the payload's cwd)")  # fmt: skip
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        if name != "hook":
            p.add_argument("--session", required=True, metavar="ID", help="the session id")
        p.set_defaults(func=cmd_session)
        parsers[name] = p
    add = parsers["add"]
    add.add_argument("--role", required=True,
                     help="user, assistant, tool, changes or request")  # fmt: skip
    add.add_argument("--tool", metavar="NAME", help="the tool that printed TEXT")
    add.add_argument("--error", action="store_true", help="the tool reported an error")
    add.add_argument("--exit-status", type=integer, metavar="N", help="the tool's exit status")
    add.add_argument("text", help="the step's text, or - to read standard input")
    decide = parsers["decide"]
    decide.add_argument("text", help="what was decided")
    decide.add_argument("--rationale", help="why")
    decide.add_argument("--evidence", action="append", metavar="ID",
                        help="a citation number or session:ID#N; repeatable")  # fmt: skip
    show = parsers["show"]
    show.add_argument("--step", type=integer, metavar="N", help="one step, in full")
    show.add_argument("--lane", type=integer, metavar="BUDGET",
                      help="the history lane a context of BUDGET tokens would hold (its room: "
                      "40%% of BUDGET at most, less the goal)")  # fmt: skip
    show.add_argument("--goal", default="", help="with --lane: the context's goal")
    show.add_argument("--query", default="",
                      help="with --lane: the request that ranks recalled lines (default: "
                      "the goal)")  # fmt: skip
    show.set_defaults(options={"budget_tokens": "--lane"})  # the lane's budget
    compact = parsers["compact"]
    compact.add_argument("--load-bearing", type=integer, action="append", metavar="N",
                         help="a step kept whole; repeatable")  # fmt: skip
    compact.add_argument("--budget", type=integer, default=4000, help="tokens (default 4000)")
    compact.add_argument("--step", type=integer, metavar="N", help="up to this step (default: all)")
    compact.add_argument("--in-context", type=integer, action="append", metavar="N",
                         help="a step the planner's context holds; repeatable (default: "
                         "all; the goal stays pinned)")  # fmt: skip
    checkpoint = parsers["checkpoint"]
    checkpoint.add_argument("step", type=integer, nargs="?", default=None,
                            help="the step to checkpoint at (with --load, the step whose "
                            "checkpoint to read; default: the latest checkpoint)")  # fmt: skip
    checkpoint.add_argument("--load", action="store_true", help="read the checkpoint back")
    checkpoint.add_argument("--budget", type=integer, default=4000, help="tokens (default 4000)")
    parsers["end"].add_argument(
        "--scope", default="personal", help="who sees the note: personal (default) or project"
    )


def _config_from(args: argparse.Namespace) -> Config:
    overrides: dict[str, object] = {}
    for name in ("max_section_tokens", "dense_model"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    for name in ("include", "exclude"):
        if getattr(args, name, None):
            overrides[name] = tuple(getattr(args, name))
    return Config.from_env(**overrides)


def _where(args: argparse.Namespace, config: Config) -> Path:
    """The folder a command reads: the positional path or ``--path`` (not both), else the
    workspace found from the current folder (``chunks`` reads the current folder itself)."""
    given = [p for p in (getattr(args, "path", None), args.path_option) if p is not None]
    if len(given) == 2 and Path(given[0]).resolve() != Path(given[1]).resolve():
        raise ConfigError(f"two paths given ({given[0]} and --path {given[1]}); give one")
    if given:
        return Path(given[0])
    if args.func is cmd_chunks:
        return Path()
    return Workspace.find(Path.cwd(), config)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code. The one place errors become messages: a
    ``ConfigError`` (bad arguments or configuration) exits 2, like argparse's own usage
    errors; any other ``CortexError`` exits 1; both print one line on stderr."""
    out = out or sys.stdout
    # What cortex writes (indexed code, prompts, the ledger) is its user's alone: files
    # 0600 and folders 0700 whatever the shell's umask allows others.
    os.umask(os.umask(0o077) | 0o077)
    given = list(sys.argv[1:] if argv is None else argv)
    bad = next((a for a in given if any(0xD800 <= ord(c) <= 0xDFFF for c in a)), None)
    if bad is not None:  # bytes that are not UTF-8 (the OS hands them over as surrogates)
        shown = bad.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        print(f"cortex: an argument is not valid UTF-8: {shown!r}", file=sys.stderr)
        return EXIT_USAGE
    # Claude Code reads a hook's exit 2 as "block this prompt (or tool call)": whatever
    # goes wrong in `cortex session hook` (a payload it does not take, a bad setting) is
    # an error (1) that never stops the user's agent.
    hook = given[:2] == ["session", "hook"]
    usage = EXIT_ERROR if hook else EXIT_USAGE
    try:
        args = _parser().parse_args(given)
    except SystemExit as exc:
        if hook and exc.code == EXIT_USAGE:
            return usage
        raise
    func: Callable[[argparse.Namespace, Config, TextIO], int] = args.func
    with warnings.catch_warnings():
        warnings.showwarning = _one_line
        return _run(func, args, out, usage)


def _one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
              file: TextIO | None = None, line: str | None = None) -> None:  # fmt: skip
    """cortex's own warnings as one ``cortex: warning:`` line; others as Python prints them."""
    if issubclass(category, ConfigWarning):
        print(f"cortex: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


# The library's (and the servers') names of what the CLI takes as an option of another name:
# "budget_tokens must be …" named a parameter `cortex context` does not have.
_OPTIONS = {"budget_tokens": "--budget", "budget": "--budget", "tool_signals": "--signal",
            "tool_results": "--tool-result", "objects": "--object", "constraints": "--constraint",
            "subgoals": "--subgoal", "load_bearing": "--load-bearing",
            "in_context": "--in-context"}  # fmt: skip


def _as_option(message: str, args: argparse.Namespace) -> str:
    """A message that starts by naming a parameter, naming the CLI's option for it (a
    command's own ``options`` first: ``session show`` takes the lane's budget as --lane)."""
    name, space, rest = message.partition(" ")
    options = {**_OPTIONS, **getattr(args, "options", {})}
    return f"{options[name]} {rest}" if space and name in options else message


def _run(func: Callable[[argparse.Namespace, Config, TextIO], int], args: argparse.Namespace,
         out: TextIO, usage: int) -> int:  # fmt: skip
    try:
        config = _config_from(args)
        args.where = _where(args, config)
        return func(args, config, out)
    except ConfigError as exc:
        print(f"cortex: {_as_option(str(exc), args)}", file=sys.stderr)
        return usage
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
