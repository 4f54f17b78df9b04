"""``cortex bundle``: the cold-start bundle for a goal (a thin call of ``Workspace.bundle``)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from engine import Config, SessionState, Workspace
from engine.cli._args import write_json
from engine.serve import to_json

__all__ = ["cmd_bundle"]


def cmd_bundle(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Print the cold-start bundle for a goal: the repository's rules and pinned notes, how
    similar earlier tasks ended, and the code to start from, within --budget tokens."""
    state = SessionState(constraints=args.constraint or (), subgoals=args.subgoal or ())
    with Workspace.open(args.where, config) as ws:
        found = ws.bundle(args.goal, args.object or [], args.budget, state=state)
    if args.json:
        write_json(to_json(found), out)
        return 0
    out.write(found.render())
    sys.stderr.write(
        f"-- {found.tokens_used:,}/{found.budget:,} tokens, {len(found.items)} items, "
        f"{len(found.overflow)} left out, {found.latency_ms:.0f} ms\n"
    )
    for uri in found.overflow:
        sys.stderr.write(f"-- left out: {uri}\n")
    return 0
