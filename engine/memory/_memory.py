"""``Memory``: the notes API every surface calls: save, search, get, timeline, relate,
graph, forget, archive, stats.

Progressive disclosure: ``search`` answers titles and previews of at most
``PREVIEW_CHARS`` characters (with the stale links and contradictions a reader must see),
``timeline`` the notes saved around one, ``get`` one note in full. Search is lexical
(SQLite FTS5's BM25 over the same code-aware terms the code index uses, each note indexed
with the words of its ``follows`` neighbours at a lower weight) plus dense (the
code embedder's vectors), fused by score and scaled by importance, a note whose title
holds a query word lifted (``_query.py``), each note lifted by how well its episode
matches (the notes saved in one stretch of time, ``_episodes.py``), the head of the list
spread over distinct episodes, the first places the most (``_recall.py``). A superseded
note is left out unless asked for; so are archived and deleted ones.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.core import (
    ConfigError,
    Edge,
    EdgeKind,
    MemoryStats,
    Note,
    NoteGraph,
    NoteHit,
    NoteType,
    NotFoundError,
    PayloadTooLargeError,
    SaveResult,
    Scope,
    body_text,
    check_items,
    check_k,
    parse_enum,
    preview,
)
from engine.memory._episodes import episode_of, episode_scores
from engine.memory._graph import relate, walk
from engine.memory._near import follows_neighbours, index_near
from engine.memory._observations import NoteStore, check_id
from engine.memory._query import lift_titled, query_words, titled
from engine.memory._recall import (
    EPISODE_PENALTY,
    HEAD_EPISODE_PENALTY,
    HEAD_PLACES,
    NEIGHBOUR_PENALTY,
    diversify,
    fuse,
    importance_score,
)

_SPREAD_KINDS = frozenset({EdgeKind.FOLLOWS, EdgeKind.RELATES_TO})

__all__ = [
    "EPISODE_LIFT",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "RECALL_DEPTH",
    "Memory",
    "MemoryItem",
    "NotePool",
    "recall_query",
]

MAX_K = 100  # search results at once; past this a caller wants get or timeline
MAX_QUERY_CHARS = 4_000  # a question, not a document
RECALL_DEPTH = 50  # candidates each retriever hands to fusion
_TIMELINE_MAX = 50  # notes either side of an anchor
# Recall spreads along sequence edges: an answer is often in the note after the one that
# matches the question's words, or the one after that (a question back, then the reply).
# The note that follows a hit (or relates to it) gets this share of the hit's score when
# that is more than its own, from the top ``SPREAD_FROM``, in ``SPREAD_STEPS`` passes.
# Passing scores backwards too changed nothing on the dev data, so a follows edge passes
# them forward only.
SPREAD = 0.8
SPREAD_STEPS = 2
SPREAD_FROM = 10
# A question's words spread over several notes of one episode point at that episode: each
# ranked note gains this share of the best note's score times its episode's BM25 over
# the best episode's (``_episodes.py``); a note's own match still leads.
EPISODE_LIFT = 0.25
DENSE_SHARE = 0.15  # the cosine's share of a fused score (the lexical score has the rest)
DIVERSE_POOL = 30  # the head of the ranking that ``diversify`` reorders (or k, if more)
LANE_MIN_COSINE = 0.5  # a note with no shared word joins the lane only this close
_OVERFETCH = 2  # lexical hits read per hit kept, before the visibility filter


@dataclass(frozen=True, slots=True)
class NotePool:
    """One query's candidates from both retrievers, before any filter: (note id, score)
    pairs of the text index and of the vectors, each best first."""

    query: str
    lexical: tuple[tuple[int, float], ...]
    dense: tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A recalled note as the memory lane shows it: full text and what to flag."""

    hit: NoteHit
    text: str

    @property
    def shown(self) -> str:
        """The note as a prompt shows it: its type and date, its text, then any code link
        that changed under it and the other side of any contradiction (never served as
        current without saying so)."""
        return self._shown(self.text or self.hit.title)

    @property
    def shown_short(self) -> str:
        """``shown`` with the preview for the text, saying where the whole note is."""
        return self._shown(f"{self.hit.preview}\n(shortened: resolve {self.hit.uri} for all)")

    def _shown(self, text: str) -> str:
        day = time.strftime("%Y-%m-%d", time.gmtime(self.hit.updated))
        lines = [f"({self.hit.type.value}, {day})", text]
        if self.hit.stale:
            lines.append("STALE: the code under " + ", ".join(self.hit.stale) + " changed "
                         "since this was saved; check it before relying on this note")  # fmt: skip
        for other, title in self.hit.contradicts:
            lines.append(f"CONTRADICTED by memory:{other} ({title}); the two disagree")
        return "\n".join(lines)


class Memory:
    """The notes of one project as one user sees them (see the module docstring)."""

    def __init__(self, store: NoteStore) -> None:
        self.store = store

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    # -- write ---------------------------------------------------------------------------

    def save(
        self,
        title: str,
        type: NoteType | str = NoteType.NOTE,
        *,
        what: str = "",
        why: str = "",
        where: str = "",
        learned: str = "",
        topic_key: str | None = None,
        scope: Scope | str = Scope.PROJECT,
        created: float | None = None,
    ) -> SaveResult:
        """Save a note (see ``NoteStore.save``); ``created``: when it was made, for a
        caller importing a history, e.g. ``save(title, what=turn, created=turn_time)``."""
        return self.store.save(
            title,
            type,
            what=what,
            why=why,
            where=where,
            learned=learned,
            topic_key=topic_key,
            scope=scope,
            created=created,
        )

    def relate(self, src: int | str, dst: int | str, kind: EdgeKind | str) -> Edge:
        """Add the edge ``src`` —kind→ ``dst`` between two live notes (once; again is a
        no-op). A note cannot relate to itself, and ``supersedes`` refuses a cycle."""
        return relate(self.store, src, dst, kind)

    def forget(self, note_id: int | str, *, hard: bool = False) -> bool:
        """Soft-delete a note (it is never returned again); ``hard``: remove its row, text
        and edges from the file (freed pages zeroed). False when it was already gone."""
        note_id = check_id(note_id)
        now = self.store.clock()
        with self.store.write() as db:
            owner = (
                "project = ? AND (scope = 'project' OR owner = ?)",
                (self.store.project, self.store.user),
            )
            row = db.execute(
                f"SELECT deleted FROM notes WHERE id = ? AND {owner[0]}", (note_id, *owner[1])
            ).fetchone()
            if row is None or (row[0] is not None and not hard):
                if row is None:
                    raise NotFoundError(f"no note {note_id} here (for this project and user)")
                return False
            seq = self.store.seq(db)
            # Its neighbours stop being found by its words (``index_near``).
            beside = follows_neighbours(db, note_id)
            if hard:
                db.execute("PRAGMA secure_delete = ON")
                db.execute("DELETE FROM notes WHERE id = ?", (note_id,))
                db.execute("DELETE FROM notes_fts WHERE rowid = ?", (note_id,))
                db.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (note_id, note_id))
                db.execute("UPDATE meta SET value = value WHERE key = 'seq'")
            else:
                db.execute(
                    "UPDATE notes SET deleted = ?, seq = ? WHERE id = ?", (now, seq, note_id)
                )
            index_near(db, [note_id, *beside] if not hard else beside)
        if hard:
            self.store.dropped(note_id)
        return True

    def archive(self, note_id: int | str, archived: bool = True) -> Note:
        """Archive a note (``get`` still finds it; search, timeline and the lane do not),
        or bring it back."""
        note_id = check_id(note_id)
        if note_id not in self.store.rows([note_id]):
            raise NotFoundError(f"no note {note_id} here (for this project and user)")
        with self.store.write() as db:
            db.execute("UPDATE notes SET archived = ? WHERE id = ?", (int(archived), note_id))
        return self.store.get(note_id, touch=False)

    # -- read ----------------------------------------------------------------------------

    def get(self, note_id: int | str) -> Note:
        """One note in full, its code links re-checked (stale ones named); an access."""
        return self.store.get(note_id)

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        types: Sequence[NoteType | str] = (),
        include_superseded: bool = False,
        check_links: bool = True,
        pool: NotePool | None = None,
    ) -> list[NoteHit]:
        """The ``k`` notes that best match ``query``: titles, previews, scores, and the
        links that went stale and the contradictions of each (``pool``: ``query``'s
        candidates from ``pool``, read once for several searches of one query)."""
        ranked = self.recall(
            query, k, types=types, include_superseded=include_superseded, pool=pool
        )
        return self._hits([i for i, _ in ranked], dict(ranked), check_links)

    def pool(self, query: str) -> NotePool:
        """The candidates both retrievers find for ``query`` before any filter: what every
        search of ``query`` ranks from, so searches that differ only in their filters (the
        note types, k) read the text index and the vectors once."""
        _check_query(query)
        return self._pool(query, lexical=True, dense=True)

    def _pool(
        self, query: str, *, lexical: bool, dense: bool, depth: int = RECALL_DEPTH
    ) -> NotePool:
        lex = self._lexical(query, depth) if lexical else []
        vectors = self.store.vectors() if dense else None
        near: list[tuple[int, float]] = []
        if vectors is not None and self.store.embedder is not None:
            near = vectors.nearest(self.store.embedder.embed_query(query), None, depth)
        return NotePool(query, tuple(lex), tuple(near))

    def recall(
        self,
        query: str,
        k: int = 10,
        *,
        types: Sequence[NoteType | str] = (),
        include_superseded: bool = False,
        lexical: bool = True,
        dense: bool = True,
        pool: NotePool | None = None,
    ) -> list[tuple[int, float]]:
        """(note id, fused score) of the ``k`` best notes for ``query``, best first
        (``pool``: ``query``'s candidates, already read)."""
        _check_query(query)
        check_k(k, MAX_K)  # the one wording of k on every surface
        kinds = {parse_enum(NoteType, t, "note type").value for t in check_items("types", types)}
        if pool is not None and pool.query != query:
            raise ConfigError("a note pool serves searches of the query it was read for")
        if pool is None:
            pool = self._pool(query, lexical=lexical, dense=dense)
        lex = list(pool.lexical) if lexical else []
        near = list(pool.dense) if dense else []
        ids = sorted({i for i, _ in lex} | {i for i, _ in near})
        facts = self.store.facts(ids)
        hidden = set() if include_superseded else self.store.superseded(ids)
        keep = {i for i, f in facts.items() if i not in hidden and (not kinds or f[0] in kinds)}
        weights = self._importance({i: facts[i] for i in keep})
        # The cosine keeps its share when no note shares a word with the query: each list
        # is divided by its best, so a share of 1 gave the nearest note, however far, a
        # full score.
        scored = fuse(lex, near, DENSE_SHARE, weights)
        scored = lift_titled(scored, titled(self.store, self._words(query), [i for i, _ in scored]))
        scored = self._spread(scored, keep, not include_superseded, kinds)
        of: dict[int, int] = {}
        if scored:
            by_id, sizes = self.store.episodes()
            if len(sizes) > 1:  # one episode tells nothing apart
                of = {i: e for i, _ in scored if (e := episode_of(by_id, i)) is not None}
                if lex:
                    scored = self._lift(query, scored, of, by_id, sizes)
        # A note neither retriever scored (no shared word, no positive cosine) is no match.
        return [p for p in self._diverse(scored, max(k, DIVERSE_POOL), of) if p[1] > 0][:k]

    def _lift(
        self,
        query: str,
        scored: list[tuple[int, float]],
        of: dict[int, int],
        by_id: npt.NDArray[np.int64],
        sizes: list[int],
    ) -> list[tuple[int, float]]:
        """Each note's score plus ``EPISODE_LIFT`` of the best one's, times how well its
        episode (``of``) matches ``query`` against the best-matching episode."""
        if EPISODE_LIFT <= 0:
            return scored
        matches = {}
        for w in self._words(query):  # a note's own words: its neighbours' are not its episode's
            held = self.store.read(
                "SELECT group_concat(rowid) FROM notes_fts WHERE notes_fts MATCH ?",
                (f'{{title body}} : "{w}"',),
            )[0][0]
            if held:
                matches[w] = np.array(held.split(","), dtype=np.int64)
        fit = episode_scores(matches, by_id, sizes)
        if not fit:
            return scored
        share = EPISODE_LIFT * scored[0][1] / max(fit.values())
        lifted = [(i, s + share * fit.get(of.get(i, -1), 0.0)) for i, s in scored]
        return sorted(lifted, key=lambda p: (-p[1], p[0]))

    def _diverse(
        self, scored: list[tuple[int, float]], pool: int, of: dict[int, int]
    ) -> list[tuple[int, float]]:
        """The first ``pool`` notes spread over distinct stretches: follows neighbours
        and episodes (see ``diversify``)."""
        head = scored[:pool]
        beside: dict[int, set[int]] = {}
        for e in self.store.edges_of([i for i, _ in head]):
            if e.kind is EdgeKind.FOLLOWS:
                beside.setdefault(e.src, set()).add(e.dst)
                beside.setdefault(e.dst, set()).add(e.src)
        episodes = {i: of[i] for i, _ in head if i in of}
        if not beside and not episodes:
            return scored
        spread = diversify(head, beside, NEIGHBOUR_PENALTY, episodes, EPISODE_PENALTY,
                           head=HEAD_PLACES, head_episode_penalty=HEAD_EPISODE_PENALTY)  # fmt: skip
        return spread + scored[pool:]

    def _spread(
        self,
        scored: list[tuple[int, float]],
        keep: set[int],
        superseded_out: bool,
        kinds: set[str],
    ) -> list[tuple[int, float]]:
        """Scores passed along edges: the note that ``follows`` a strong hit (the answer
        after its question), or ``relates_to`` it, gets ``SPREAD`` of that hit's score when
        that is more than its own; ``SPREAD_STEPS`` times, so the reply two notes on gets
        ``SPREAD`` squared. A note passed to must be one the caller may rank (visible, not
        archived, not superseded unless asked for, of the asked ``kinds``)."""
        if SPREAD <= 0:
            return scored
        allowed = set(keep)
        for _ in range(SPREAD_STEPS):
            top = dict(scored[:SPREAD_FROM])
            near = [e for e in self.store.edges_of(sorted(top)) if e.kind in _SPREAD_KINDS]
            if not near:
                break
            ends = ({e.src for e in near} | {e.dst for e in near}) - allowed
            facts = self.store.facts(sorted(ends))
            fresh = {i for i, f in facts.items() if not kinds or f[0] in kinds}
            if superseded_out:
                fresh -= self.store.superseded(sorted(fresh))
            allowed |= fresh
            score = dict(scored)
            for e in near:
                # A follows edge passes forward only (the note after a hit); relates_to
                # both ways.
                pairs = [(e.dst, e.src)]
                if e.kind is EdgeKind.RELATES_TO:
                    pairs.append((e.src, e.dst))
                for a, b in pairs:
                    if a in top and b in allowed:
                        score[b] = max(score.get(b, 0.0), SPREAD * top[a])
            scored = sorted(score.items(), key=lambda p: (-p[1], p[0]))
        return scored

    def _words(self, query: str) -> list[str]:
        """The terms a search looks for (``query_words``)."""
        return query_words(self.store.terms, query)

    def _lexical(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(note id, BM25 score) of the best ``depth`` visible notes for ``query``."""
        words = self._words(query)
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        # The text index alone ranks (FTS5's rank: BM25 with the title counted twice); the
        # caller keeps what this user may see. A store shared by many projects is read
        # again with the filter when the first read leaves too few of this project's.
        rows = self.store.read(
            "SELECT rowid, rank FROM notes_fts WHERE notes_fts MATCH ? ORDER BY rank, rowid "
            "LIMIT ?",
            (match, depth * _OVERFETCH),
        )
        found = [(r[0], -r[1]) for r in rows]  # FTS5's rank is the BM25 score negated
        seen = self.store.visible_ids([i for i, _ in found])
        mine = [(i, s) for i, s in found if i in seen]
        if len(mine) < depth and len(found) == depth * _OVERFETCH:
            cond, args = self.store.visible()
            rows = self.store.read(
                "SELECT notes_fts.rowid, notes_fts.rank FROM notes_fts JOIN notes ON notes.id = "
                f"notes_fts.rowid WHERE notes_fts MATCH ? AND {cond} ORDER BY "
                "notes_fts.rank, notes.id LIMIT ?",
                (match, *args, depth),
            )
            mine = [(r[0], -r[1]) for r in rows]
        return mine[:depth]

    def _importance(self, facts: dict[int, tuple[str, float, float, int]]) -> dict[int, float]:
        incoming = self.store.incoming(sorted(facts))
        now = self.store.clock()
        return {
            i: importance_score(kind, count, accessed, created, incoming.get(i, 0), now)
            for i, (kind, created, accessed, count) in facts.items()
        }

    def _hits(self, ids: Sequence[int], scores: dict[int, float], check: bool) -> list[NoteHit]:
        rows = self.store.rows(list(ids))
        incoming = self.store.incoming(list(ids))
        against = self.store.contradictions(list(ids))
        files: dict[str, str | None] = {}
        now = self.store.clock()
        hits = []
        for i in ids:
            if i not in rows:
                continue
            note = self.store.note(rows[i], incoming.get(i, 0), files, now, check)
            stale = note.stale
            hits.append(
                NoteHit(
                    note.id,
                    note.title,
                    note.type,
                    note.scope,
                    preview(
                        " · ".join(f for f in (note.what, note.why, note.where, note.learned) if f)
                        or note.title
                    ),
                    round(scores.get(i, 0.0), 6),
                    note.importance.score,
                    note.updated,
                    stale,
                    against.get(i, ()),
                )
            )
        return hits

    def items(self, query: str, k: int) -> list[MemoryItem]:
        """The ``k`` best notes for ``query`` with their full text, for the memory lane:
        only notes that share a word with the query (or whose ``follows`` neighbour does),
        or whose vector is close to it
        (``LANE_MIN_COSINE``), so an unrelated store adds nothing to a prompt."""
        pool = self.pool(query)  # one text search and one embedding serve both reads
        ranked = self.recall(query, k, pool=pool)
        near = pool.dense[:k]
        if k > RECALL_DEPTH:  # deeper than a pool reads
            near = self._pool(query, lexical=False, dense=True, depth=k).dense
        related = {i for i, _ in pool.lexical} | {i for i, c in near if c >= LANE_MIN_COSINE}
        ranked = [(i, s) for i, s in ranked if i in related]
        hits = self._hits([i for i, _ in ranked], dict(ranked), True)
        rows = self.store.rows([h.id for h in hits])
        return [MemoryItem(h, body_text(*rows[h.id][4:8])) for h in hits if h.id in rows]

    def item(self, note_id: int | str) -> MemoryItem:
        """One note as the lane would show it now (not counted as an access)."""
        note_id = check_id(note_id)
        hits = self._hits([note_id], {}, True)
        if not hits:
            raise NotFoundError(f"no note {note_id} here (for this project and user)")
        row = self.store.rows([note_id])[note_id]
        return MemoryItem(hits[0], body_text(*row[4:8]))

    def timeline(self, note_id: int | str, before: int = 5, after: int = 5) -> list[NoteHit]:
        """The notes saved just before and after ``note_id`` (and it), oldest first."""
        note_id = check_id(note_id)
        for n, name in ((before, "before"), (after, "after")):
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _TIMELINE_MAX:
                raise ConfigError(f"{name} must be between 0 and {_TIMELINE_MAX}, got {n!r}")
        anchor = self.store.rows([note_id]).get(note_id)
        if anchor is None:
            raise NotFoundError(f"no note {note_id} here (for this project and user)")
        created = anchor[12]
        cond, args = self.store.visible()
        cond += " AND notes.archived = 0"
        older = self.store.read(
            f"SELECT id FROM notes WHERE {cond} AND (created < ? OR (created = ? AND id < ?)) "
            "ORDER BY created DESC, id DESC LIMIT ?",
            (*args, created, created, note_id, before),
        )
        newer = self.store.read(
            f"SELECT id FROM notes WHERE {cond} AND (created > ? OR (created = ? AND id > ?)) "
            "ORDER BY created, id LIMIT ?",
            (*args, created, created, note_id, after),
        )
        ids = [r[0] for r in reversed(older)] + [note_id] + [r[0] for r in newer]
        return self._hits(ids, {}, True)

    def graph(
        self, note_id: int | str, depth: int = 1, kinds: Sequence[EdgeKind | str] = ()
    ) -> NoteGraph:
        """The notes within ``depth`` (1-10) edges of ``note_id``, either direction, over
        edges of ``kinds`` (default: all); deleted notes end a path."""
        return walk(self.store, note_id, depth, kinds)

    def stats(self) -> MemoryStats:
        """Counts of what this caller can see."""
        cond, args = self.store.visible()
        owner = "project = ? AND (scope = 'project' OR owner = ?)"
        live = self.store.read(f"SELECT count(*) FROM notes WHERE {cond}", args)[0][0]
        gone = self.store.read(
            f"SELECT count(*) FROM notes WHERE {owner} AND deleted IS NOT NULL", args
        )[0][0]
        by_type = self.store.read(
            f"SELECT type, count(*) FROM notes WHERE {cond} GROUP BY type ORDER BY type", args
        )
        by_scope = self.store.read(
            f"SELECT scope, count(*) FROM notes WHERE {cond} GROUP BY scope ORDER BY scope", args
        )
        edges = self.store.read(
            f"SELECT count(*) FROM edges e JOIN notes ON notes.id = e.src WHERE {cond}", args
        )[0][0]
        archived = self.store.read(
            f"SELECT count(*) FROM notes WHERE {cond} AND notes.archived != 0", args
        )[0][0]
        model = self.store.embedder.model_id if self.store.embedder is not None else ""
        return MemoryStats(
            str(self.store.path),
            live,
            gone,
            len(self.store.superseded()),
            edges,
            archived,
            tuple((t, n) for t, n in by_type),
            tuple((s, n) for s, n in by_scope),
            model,
        )


def recall_query(text: str) -> str:
    """What a lane's read of saved notes searches for ``text`` (a goal or query up to
    ``MAX_TEXT_BYTES``, a pasted issue): ``text`` itself, or past ``MAX_QUERY_CHARS`` its
    leading part, ending at a whole word. The code lane's lexical search keeps a long
    request's first terms the same way; a lane never fails a context for its length."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    text = text.lstrip()
    head = text[:MAX_QUERY_CHARS]
    if len(text) > MAX_QUERY_CHARS and not text[MAX_QUERY_CHARS].isspace():
        head = re.sub(r"\S+\Z", "", head) or head  # a word cut in two is left out
    return head


def _check_query(query: str) -> None:
    """A search's query: some text, at most ``MAX_QUERY_CHARS`` characters."""
    if not isinstance(query, str) or not query.strip():
        raise ConfigError("a memory search needs a query")
    if len(query) > MAX_QUERY_CHARS:
        raise PayloadTooLargeError(
            f"the query has {len(query):,} characters; at most {MAX_QUERY_CHARS:,}"
        )
