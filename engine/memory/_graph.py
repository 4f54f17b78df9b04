"""Typed edges between notes and walks over them.

``relate`` adds one edge (references, relates_to, follows, supersedes, contradicts)
between two live notes this caller can see; a note cannot relate to itself and
``supersedes`` refuses a cycle (a cycle would hide every note on it). ``walk`` returns the
notes within 1-10 edges of one, either direction; a deleted note ends a path.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core import (
    MAX_DEPTH,
    ConfigError,
    Edge,
    EdgeKind,
    GraphNode,
    NoteGraph,
    NoteType,
    NotFoundError,
    check_items,
    parse_enum,
)
from engine.memory._near import index_near
from engine.memory._observations import NoteStore, check_id

__all__ = ["relate", "walk"]


def relate(store: NoteStore, src: int | str, dst: int | str, kind: EdgeKind | str) -> Edge:
    """Add the edge ``src`` —kind→ ``dst`` between two live notes (once; again is a
    no-op). A note cannot relate to itself, and ``supersedes`` refuses a cycle."""
    edge = parse_enum(EdgeKind, kind, "edge kind")
    src, dst = check_id(src), check_id(dst)
    if src == dst:
        raise ConfigError(f"a note cannot {edge.value} itself ({src})")
    found = store.rows([src, dst])
    for end, name in ((src, "source"), (dst, "target")):
        if end not in found:
            raise NotFoundError(f"the {name} note {end} does not exist here or was deleted")
    if edge is EdgeKind.SUPERSEDES and _reaches(store, dst, src):
        raise ConfigError(
            f"note {dst} already supersedes note {src} (directly or "
            "through others): a supersedes cycle would hide both"
        )
    now = store.clock()
    with store.write() as db:
        added = db.execute(
            "INSERT OR IGNORE INTO edges VALUES (?, ?, ?, ?)", (src, dst, edge.value, now)
        ).rowcount
        if added and edge is EdgeKind.FOLLOWS:  # each end is indexed with the other's words
            index_near(db, [src, dst])
        row = db.execute(
            "SELECT created FROM edges WHERE src = ? AND dst = ? AND kind = ?",
            (src, dst, edge.value),
        ).fetchone()
    return Edge(src, dst, edge, row[0])


def _reaches(store: NoteStore, start: int, goal: int) -> bool:
    """Whether ``start`` supersedes ``goal`` through a chain of supersedes edges."""
    seen, frontier = {start}, [start]
    while frontier:
        marks = ",".join("?" * len(frontier))
        rows = store.read(
            f"SELECT dst FROM edges WHERE kind = 'supersedes' AND src IN ({marks})", frontier
        )
        frontier = [r[0] for r in rows if r[0] not in seen]
        if goal in frontier:
            return True
        seen.update(frontier)
    return False


def walk(
    store: NoteStore, note_id: int | str, depth: int = 1, kinds: Sequence[EdgeKind | str] = ()
) -> NoteGraph:
    """The notes within ``depth`` (1-10) edges of ``note_id``, either direction, over
    edges of ``kinds`` (default: all); deleted notes end a path."""
    note_id = check_id(note_id)
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise ConfigError(f"depth must be between 1 and {MAX_DEPTH}, got {depth!r}")
    allowed = {parse_enum(EdgeKind, k, "edge kind") for k in check_items("kinds", kinds)}
    allowed = allowed or set(EdgeKind)
    root = store.rows([note_id]).get(note_id)
    if root is None:
        raise NotFoundError(f"no note {note_id} here (for this project and user)")
    found = {note_id: 0}
    edges: dict[tuple[int, int, str], Edge] = {}
    frontier = [note_id]
    for level in range(1, depth + 1):
        touching = [e for e in store.edges_of(frontier) if e.kind in allowed]
        ends = sorted({e.src for e in touching} | {e.dst for e in touching})
        live = store.rows(ends)
        frontier = []
        for e in touching:
            if e.src in live and e.dst in live:
                edges[(e.src, e.dst, e.kind.value)] = e
                for end in (e.src, e.dst):
                    if end not in found:
                        found[end] = level
                        frontier.append(end)
        if not frontier:
            break
    rows = store.rows(sorted(found))
    nodes = tuple(
        GraphNode(i, rows[i][3], NoteType(rows[i][1]), d)
        for i, d in sorted(found.items(), key=lambda p: (p[1], p[0]))
    )
    return NoteGraph(note_id, depth, nodes, tuple(edges[k] for k in sorted(edges)))
