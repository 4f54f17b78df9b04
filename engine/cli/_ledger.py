"""``cortex ledger``: verify the chain, list and show records, print the head, rotate."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from engine import Config, ConfigError, Workspace
from engine.cli._exit import EXIT_ERROR, EXIT_OK
from engine.serve import to_json, unknown_replay_key, whole_number
from ledger import FeedbackRecord, Rotation, TurnRecord, VerifyReport

__all__ = ["LEDGER_ACTIONS", "cmd_ledger"]

LEDGER_ACTIONS = ("verify", "log", "show", "head", "rotate")


def cmd_ledger(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Read the evidence ledger: verify the chain, list recent records, show a turn;
    rotate it (move it aside and start a chain that names it)."""
    if args.broken and args.action != "rotate":
        raise ConfigError("--broken is for `ledger rotate`")
    if args.previous and args.action != "verify":
        raise ConfigError("--previous is for `ledger verify`")
    with Workspace.open(args.where, config, check=False) as ws:  # the ledger, not the index
        journal = ws.recorded_journal()
        if args.action == "head":
            count, last = journal.head()
            out.write(f"{count}:{last}\n")
            return EXIT_OK
        if args.action == "verify":
            anchor = _anchor(args.anchor) if args.anchor else None
            report = journal.verify(blobs=True, anchor=anchor, previous=args.previous)
            return _print_verify(report, anchor, args.previous, out)
        if args.action == "rotate":
            anchor = _anchor(args.anchor) if args.anchor else None
            _print_rotation(journal.rotate(broken=args.broken, anchor=anchor), out)
            return EXIT_OK
        if args.action == "log":
            for record in journal.log(args.n, user=args.user, all_users=args.all_users):
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
        if not args.key:
            raise ConfigError("ledger show needs a replay key")
        turn = journal.find(args.key, user=args.user, all_users=args.all_users)
        if turn is None:
            raise unknown_replay_key(args.key, recorded_by=journal.recorder(args.key) or "")
        # The turn, then what was said of it later: its own model_citations are those given
        # with the turn (none, as build_context records it); feedback comes after.
        body = {**to_json(turn), "later": [to_json(r) for r in journal.later(turn.turn_id)]}
        out.write(json.dumps(body, indent=2) + "\n")
    return EXIT_OK


def _print_verify(
    report: VerifyReport, anchor: tuple[int, str] | None, previous: bool, out: TextIO
) -> int:
    if report.ok:
        kept = f"; anchor {anchor[0]} matches" if anchor else ""
        purged = f"; {report.purged:,} texts purged by forget" if report.purged else ""
        out.write(f"ok: {report.checked:,} records, chain and stored texts intact{purged}{kept}"
                  f"{_continues(report, checked=previous)}\n")  # fmt: skip
        return EXIT_OK
    where = "" if report.first_bad_seq is None else (
        f" at record {report.first_bad_seq} (turn {report.first_bad_turn})")  # fmt: skip
    out.write(f"BROKEN{where}: {report.reason}\n")
    return EXIT_ERROR


def _continues(report: VerifyReport, *, checked: bool) -> str:
    """What a rotated chain continues, as its first record names it."""
    if report.previous is None:
        return ""
    return f"; {report.previous.said()}" + ("; that file matches it" if checked else "")


def _print_rotation(rotation: Rotation, out: TextIO) -> None:
    previous, first = rotation.previous, rotation.first
    out.write("moved aside, read-only:\n")
    for src, dst in rotation.moved:
        out.write(f"  {src} -> {dst}\n")
    out.write(f"  {previous.size:,} bytes, sha256 {previous.sha256}\n")
    if previous.verified:
        out.write(f"old head: {previous.seq}:{previous.hash} (the chain verified)\n")
    else:
        out.write(f"old head: {previous.seq}:{previous.hash}, the last record that verifies "
                  f"(BROKEN: {previous.problem})\n")  # fmt: skip
    out.write(f"new ledger: record {first.seq} ({first.kind.value}, {first.time}) "
              f"{previous.said()}\n"
              f"new head: {first.seq}:{first.record_hash}\n")  # fmt: skip


def _anchor(raw: str) -> tuple[int, str]:
    seq, _, digest = raw.strip().partition(":")
    try:
        number = whole_number("SEQ", seq)
    except ConfigError:
        number = -1
    if number < 0 or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ConfigError(f"--anchor takes SEQ:HASH as `cortex ledger head` prints it, got {raw!r}")
    return number, digest
