"""``cortex memory …``: the notes an agent saved, from the shell.

Each command is a few lines over ``Workspace.memory``: ``save`` a note, ``search`` (titles
and previews), ``get`` one in full (its code links re-checked), ``timeline`` around one,
``relate`` two, ``graph`` around one, ``forget`` (``--hard``: the text leaves the file),
``archive``, ``stats``. ``--json`` prints the one JSON encoding.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

from engine import Config, EdgeKind, Note, NoteHit, NoteType, SaveResult, Workspace
from engine.cli._args import integer, write_json
from engine.cli._text import terminal_safe
from engine.serve import forget_json, notes_json, to_json

__all__ = ["cmd_memory", "memory_commands"]

EXIT_OK = 0
_KINDS = ", ".join(t.value for t in NoteType)
_EDGES = ", ".join(e.value for e in EdgeKind)


def memory_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``cortex memory save|search|get|timeline|relate|graph|forget|archive|stats``."""
    doc = cmd_memory.__doc__ or ""
    memory = sub.add_parser("memory", help=doc.split("\n", 1)[0], description=doc)
    actions = memory.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {
        "save": "save a note (same --topic-key: updated in place)",
        "search": "notes for a query: titles and previews, best first",
        "get": "one note in full, its code links re-checked",
        "timeline": "the notes saved around one",
        "relate": "link two notes: SRC KIND DST (e.g. 12 supersedes 7)",
        "graph": "the notes within --depth edges of one",
        "forget": "delete a note (--hard: its text leaves the store's file)",
        "archive": "take a note out of search and prompts (--undo: bring it back)",
        "stats": "counts of the notes you can see",
    }
    parsers = {}
    for name, text in helps.items():
        p = actions.add_parser(name, help=text, description=text)
        p.add_argument(
            "--path",
            dest="path_option",
            metavar="PATH",
            default=None,
            help="the workspace folder (default: the one holding the current folder)",
        )
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.set_defaults(func=cmd_memory)
        parsers[name] = p
    save = parsers["save"]
    save.add_argument("--title", required=True, help="one line")
    save.add_argument("--type", default="note", help=f"what kind: {_KINDS} (default note)")
    for field in ("what", "why", "where", "learned"):  # args.where is the workspace
        save.add_argument(f"--{field}", dest=f"{field}_", default="", help=f"the note's {field}")
    save.add_argument("--topic-key", default=None, metavar="KEY", help="update this topic")
    save.add_argument("--scope", default="project",
                      help="who sees it: project (default) or personal")  # fmt: skip
    save.add_argument("--created", default=None, type=_when, metavar="WHEN",
                      help="when it happened, for importing a dated history: seconds since "
                           "the epoch or an ISO 8601 time (default: now)")  # fmt: skip
    search = parsers["search"]
    search.add_argument("query")
    search.add_argument("-k", type=integer, default=10, help="how many (default 10)")
    search.add_argument("--type", action="append",
                        help=f"only this type ({_KINDS}); repeatable")  # fmt: skip
    search.add_argument("--include-superseded", action="store_true")
    for name in ("get", "timeline", "graph", "forget", "archive"):
        parsers[name].add_argument("id", help="a note id (or memory:ID)")
    parsers["timeline"].add_argument("--before", type=integer, default=5)
    parsers["timeline"].add_argument("--after", type=integer, default=5)
    relate = parsers["relate"]
    relate.add_argument("src")
    relate.add_argument("kind", help=_EDGES)
    relate.add_argument("dst")
    parsers["graph"].add_argument("--depth", type=integer, default=1, help="1-10 (default 1)")
    parsers["graph"].add_argument(
        "--kind", action="append", help=f"only edges of this kind ({_EDGES}); repeatable"
    )
    parsers["forget"].add_argument("--hard", action="store_true")
    parsers["archive"].add_argument("--undo", action="store_true")


def _listing(hits: Sequence[NoteHit], out: TextIO) -> None:
    if not hits:
        out.write("no notes\n")
    for h in hits:
        stale = f"  STALE: {', '.join(h.stale)}" if h.stale else ""
        against = "".join(f"  CONTRADICTS memory:{i}" for i, _ in h.contradicts)
        out.write(terminal_safe(
            f"memory:{h.id}  [{h.type.value}] {h.title}  ({h.score:.4f}){stale}"
            f"{against}\n    {h.preview}"
        ) + "\n")  # fmt: skip


def _note(note: Note, out: TextIO) -> None:
    day = time.strftime("%Y-%m-%d %H:%M", time.gmtime(note.updated))
    key = f", topic {note.topic_key} rev {note.revision}" if note.topic_key else ""
    parts = [
        f"memory:{note.id}  [{note.type.value}, {note.scope.value}{key}"
        f"{', archived' if note.archived else ''}] {note.title}\n"
        f"updated {day}, read {note.access_count} times, importance "
        f"{note.importance.score:.3f} ("
        + ", ".join(f"{n} {v:.2f}x{w}" for n, v, w in note.importance.parts)
        + ")\n"
    ]
    if note.text:
        parts.append(note.text + "\n")
    for c in note.links:
        now = f" -> {c.now}" if c.now else ""
        parts.append(f"  link {c.link.entity}: {c.link.uri} {c.state.value}{now}\n")
    parts += [f"  superseded by memory:{i}\n" for i in note.superseded_by]
    parts += [f"  contradicted by memory:{i} ({title})\n" for i, title in note.contradicts]
    out.write(terminal_safe("".join(parts)))


def _when(text: str) -> float:
    """``--created``: seconds since the epoch, or an ISO 8601 time (UTC when it names no
    zone)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (seconds since the epoch or ISO 8601, e.g. 2026-05-01T14:30)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _left_out(saved: SaveResult) -> str:
    """A line naming what the entity and link caps left out of a save, or ""."""
    counts = ((saved.entities_left_out, "entities"), (saved.links_left_out, "code links"))
    parts = [f"{n} more {what}" for n, what in counts if n]
    return ("\n  left out: " + ", ".join(parts) + " (a note keeps the first it names)"
            if parts else "")  # fmt: skip


def cmd_memory(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Notes an agent saved: save, search, get, timeline, relate, graph, forget, archive, stats."""
    with Workspace.open(args.where, config) as ws:
        m = ws.memory
        if args.action == "save":
            saved = m.save(
                args.title,
                args.type,
                what=args.what_,
                why=args.why_,
                where=args.where_,
                learned=args.learned_,
                topic_key=args.topic_key,
                scope=args.scope,
                created=args.created,
            )
            if args.json:
                write_json(to_json(saved), out)
            else:
                out.write(
                    f"memory:{saved.id} {saved.action.value} (revision {saved.revision})"
                    + "".join(f"\n  link {lk.entity}: {lk.uri}" for lk in saved.links)
                    + _left_out(saved)
                    + "\n"
                )
        elif args.action in ("search", "timeline"):
            hits = (
                m.search(
                    args.query,
                    args.k,
                    types=args.type or (),
                    include_superseded=args.include_superseded,
                )
                if args.action == "search"
                else m.timeline(args.id, args.before, args.after)
            )
            write_json(notes_json(hits), out) if args.json else _listing(hits, out)
        elif args.action in ("get", "archive"):
            note = m.get(args.id) if args.action == "get" else m.archive(args.id, not args.undo)
            write_json(to_json(note), out) if args.json else _note(note, out)
        elif args.action == "relate":
            edge = m.relate(args.src, args.dst, args.kind)
            if args.json:
                write_json(to_json(edge), out)
            else:
                out.write(f"memory:{edge.src} {edge.kind.value} memory:{edge.dst}\n")
        elif args.action == "graph":
            graph = m.graph(args.id, args.depth, args.kind or ())
            if args.json:
                write_json(to_json(graph), out)
            else:
                for n in graph.nodes:
                    out.write(f"{'  ' * n.depth}memory:{n.id} [{n.type.value}] {n.title}\n")
                for e in graph.edges:
                    out.write(f"  memory:{e.src} {e.kind.value} memory:{e.dst}\n")
        elif args.action == "forget":
            body = forget_json(ws, args.id, hard=args.hard)  # as HTTP and MCP answer it
            done = bool(body["forgotten"])
            write_json(body, out) if args.json else out.write(
                f"memory:{body['id']} {'forgotten' if done else 'was already forgotten'}"
                f"{' (removed from the file)' if args.hard and done else ''}\n"
            )
        else:
            stats = m.stats()
            if args.json:
                write_json(to_json(stats), out)
            else:
                kinds = ", ".join(f"{t} {n}" for t, n in stats.by_type) or "none"
                out.write(
                    f"{stats.path}: {stats.notes} notes ({kinds}), {stats.deleted} "
                    f"deleted, {stats.superseded} superseded, {stats.archived} archived, "
                    f"{stats.edges} edges\n"
                )
    return EXIT_OK
