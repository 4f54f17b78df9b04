"""``Learning``: what a workspace learns from outcomes and reads back: attests (feedback
with an outcome), the salience state folded from the ledger, the outcomes tier's index of
earlier intents, and the cold-start bundle that trims every tier under one budget."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

from engine._workspace._index import Indexer
from engine._workspace._notes import Notes
from engine._workspace._search import Ranker
from engine._workspace._state import State, scrub
from engine.core import (
    MAX_BUNDLE_BUDGET,
    MIN_BUDGET_TOKENS,
    PINNED_FLOOR,
    Bundle,
    BundleItem,
    Config,
    ConfigError,
    ContextSettings,
    FeedbackResult,
    FileRanking,
    IndexNotBuiltError,
    IndexStateError,
    Learned,
    LedgerStateError,
    MemoryStateError,
    NoteType,
    Outcome,
    PastOutcome,
    SearchMode,
    SessionState,
    Tier,
    check_items,
    check_k,
    check_state,
    check_text,
)
from engine.memory import (
    LEARN_POOL,
    CitedRef,
    FeatureRow,
    Inputs,
    OutcomeIndex,
    RecentFeatures,
    SalienceState,
    SalienceTables,
    TokenBucket,
    check_attest,
    check_citations,
    cited_keys,
    ema_step,
    item_changes,
    name_text,
    recall_query,
    rules_sections,
    salience_path,
    split_rows,
    weights_payload,
)
from engine.packing import Request, fit_bundle, retrieve
from engine.retrieval import LEARNED_FEATURES, Scored, file_hits, ranked_hits
from indexers import MemoCounter, sha256_text
from ledger import JSON, ToolResult

MAX_OUTCOMES = 10  # earlier intents one outcomes call may list
# The cold-start bundle's tiers before the trim: enough candidates of each that the trim
# by salience has a choice, few enough that a bundle stays a fast read.
_BUNDLE_OBJECTS = 64  # paths or symbols one bundle call may name
_PINNED_NOTES = 8  # identity, constraint and goal notes
_BUNDLE_OUTCOMES = 3  # the 1-3 earlier intents
_BUNDLE_CITED = 8  # cited uris shown per earlier intent
_INTENT_CHARS = 300  # an earlier intent's text as the bundle shows it
_BUNDLE_SECTIONS = 8  # code sections for the goal and objects
_BUNDLE_NOTES = 4  # saved notes for the goal
_BUNDLE_RECALL = 40  # sections recalled per retriever and reranked for a bundle
_BUNDLE_PAGES = 8  # pages whose best sections a bundle's recall pulls in
_OUTCOME_FILES = 20  # the request's best files an earlier intent's citations are matched to
# Threads that read a bundle's notes beside its code ranking: one per bundle served at once
# (a server answers a few together); started on first use and kept, as a thread's start
# is a noticeable share of a bundle.
_NOTE_READERS = 4


class Learning:
    """Learning from outcomes, and the reads that use what was learned."""

    def __init__(self, state: State, indexer: Indexer, ranker: Ranker, notes: Notes) -> None:
        self._state = state
        self._indexer = indexer
        self._ranker = ranker
        self._notes = notes
        self._features = RecentFeatures()  # each recent turn's candidates, for learning
        self._attests = TokenBucket()  # per (actor, intent)
        self._once = threading.Lock()  # an attest's check for an earlier one, and its record
        self._salience: SalienceState | None = None  # the fold as of the ledger's head
        self._outcomes: OutcomeIndex | None = None  # earlier attested intents
        self._purge = 0  # the newest purge when the outcomes index was read
        # Which ledger file the two folds above read: a rotation starts them over.
        self._folded: tuple[int, int] | None = None
        self._counts: MemoCounter | None = None  # the bundle's: most items come back
        self._readers: ThreadPoolExecutor | None = None  # a bundle's notes, beside its code

    def close(self) -> None:
        """Stop the bundle's note readers (a later bundle starts them again)."""
        with self._state.lazy:
            readers, self._readers = self._readers, None
        if readers is not None:
            readers.shutdown(wait=True)

    def remember(self, replay_key: str, scored: Sequence[Scored]) -> None:
        """Keep a turn's best candidates, for an outcome that may follow."""
        self._features.remember(replay_key, feature_rows(scored))

    def attest(self, replay_key: str, model_citations: Sequence[int | str],
               tool_results: Sequence[ToolResult | str], outcome: str,
               reason: str | None) -> FeedbackResult:  # fmt: skip
        """Feedback with an outcome: checked, rate-limited, then the feedback record and
        the attest/weights pair; the salience tables catch up last."""
        state = self._state
        if not state.config.ledger:
            raise ConfigError("learning from outcomes journals every update: turn the ledger "
                              "on (ledger = true) or give feedback without an outcome")  # fmt: skip
        journal = state.journal
        turn = state.turn(replay_key)
        inputs = Inputs.from_json(journal.text(turn.inputs_sha256))
        intent = (inputs.query or inputs.goal).strip()
        checked, reason = check_attest(outcome, reason, intent, len(model_citations))
        reason = scrub(reason) if reason else reason  # free text: stored, shown by bundle
        refs = CitedRef.of_turn(turn)
        result = check_citations(replay_key, refs, model_citations, self._notes.still_matches)
        if not result.valid:
            raise ConfigError(f"an outcome needs at least one citation of the turn's "
                              f"evidence [1..{len(refs)}]; none of {list(result.dropped)} "
                              "is one")  # fmt: skip
        # One outcome a turn teaches, once: a retried call finds the first one (the check
        # and the records are one step, in this process and across those on this ledger).
        with self._once, journal.learning():
            if given := journal.attested(turn.turn_id):
                outcome_given, cited_given = given
                if outcome_given == checked.value and sorted(cited_given) == sorted(result.valid):
                    return replace(result, repeated=True)
                raise ConfigError(
                    f"this turn's outcome was given already ({outcome_given}, citing "
                    f"{list(cited_given)}): an outcome teaches once a turn; give more "
                    "feedback without an outcome"
                )
            # Taken, not checked: of concurrent attests only those with a token write anything.
            self._attests.take((journal.user, sha256_text(intent)))
            state.record_feedback(turn, result, tool_results, checked.value)
            by_id = {r.local_id: r for r in refs}
            live = [by_id[n] for n in result.valid if n not in result.stale]
            rows = self._features.get(replay_key)
            if rows is None:
                rows = self._rows_again(inputs)
            changes = item_changes(checked, reason, cited_keys(rows, live))
            code = [r for r in live if not r.source_uri.startswith("memory:")]
            hit, missed = split_rows(rows, code)
            salience = self._salience_state()
            settings = state.config.learn_settings()
            after, skipped = ema_step(salience.weights, hit, missed, checked, reason, settings)
            attest: dict[str, JSON] = {
                "user": journal.user,
                "intent": sha256_text(intent),
                "outcome": checked.value,
                "cited": list(result.valid),
                "dropped": len(result.dropped),
                "stale": list(result.stale),
                "items": [[k, dc, da] for k, dc, da in changes],
            }
            texts = name_text(attest, "reason", reason)  # by sha256: forget can cut it
            weights = weights_payload(salience.weights, after, settings.rate, skipped)
            try:
                journal.append_pair(turn.turn_id, attest, weights, texts)
            except LedgerStateError as exc:
                raise LedgerStateError(
                    f"feedback was recorded but not learned from: {exc}"
                ) from exc
        tables = SalienceTables(self._salience_path)
        # A cache of the journal: when it lags, reads fold the records it lacks.
        with suppress(MemoryStateError):
            tables.catch_up(journal.learning_records(tables.load().seq))
        notes = [int(r.source_uri.removeprefix("memory:")) for r in live
                 if r.source_uri.startswith("memory:")]  # fmt: skip
        if checked is Outcome.SUCCESS and notes:  # a note that helped was used: an access
            with suppress(MemoryStateError, ValueError):
                self._notes.memory.store.touch(notes)
        return result

    def _rows_again(self, inputs: Inputs) -> tuple[FeatureRow, ...]:
        """A recorded turn's candidates ranked again (when this process did not build it)."""
        state = self._state
        view, _ = self._indexer.view()
        embedder = state.embedder
        if embedder is not None and not view.has_dense(embedder.model_id):
            embedder = None
        request = Request.parse(inputs.goal, inputs.query, inputs.tool_signals)
        settings = inputs.settings or state.config.context_settings()  # as the turn ran
        scored = retrieve(view, request, embedder, state.cache if embedder is not None else None,
                          settings)  # fmt: skip
        return feature_rows(scored)

    @property
    def _salience_path(self) -> Path:
        """The salience tables, beside the ledger they fold (one per ledger)."""
        return salience_path(self._state.ledger_path)

    def _salience_state(self) -> SalienceState:
        """The fold of every attest/weights pair in the ledger (the tables plus what they
        lack, folded in memory): a pure read, kept while the ledger's head stays put."""
        state = self._state
        if not state.config.ledger or not state.has_journal():
            return SalienceState()
        head = state.journal.head()[0]
        self._follow(state.journal.file_id())
        cached = self._salience
        if cached is not None and cached.seq == head:
            return cached
        tables = SalienceTables(self._salience_path)
        base = cached if cached is not None and cached.seq <= head else tables.load()
        if base.seq > head:  # tables from another ledger: fold from empty
            base = SalienceState()
        folded = tables.state(state.journal.learning_records(base.seq), base)
        folded.seq = head
        self._salience = folded
        return folded

    def _follow(self, ledger_file: tuple[int, int] | None) -> None:
        """Forget the folds of another ledger file (the ledger was rotated, here or by
        another process): its seqs are not this chain's."""
        with self._state.lazy:
            if ledger_file != self._folded:
                self._salience, self._outcomes, self._folded = None, None, ledger_file

    def learned(self) -> Learned:
        """What this workspace learned from outcomes (see ``Workspace.learned``)."""
        return self._salience_state().learned()

    def reset(self, reason: str | None) -> Learned:
        """Forget what outcomes taught (see ``Workspace.reset_learned``): one attest/weights
        pair, journaled like an outcome's, that folds every item's citations to zero and
        the offsets to none. Returns the state it forgot; records nothing when that is
        empty."""
        if reason is not None:
            if not isinstance(reason, str):
                raise ConfigError(f"reason must be a string, not {type(reason).__name__}")
            check_text("reason", reason)
        state = self._state
        if not state.config.ledger or not state.has_journal():
            return Learned()
        journal = state.journal
        settings = state.config.learn_settings()
        with self._once:  # not between an attest's check and its record
            before = self._salience_state()
            forgotten = before.learned()
            if not forgotten:
                return forgotten
            attest: dict[str, JSON] = {
                "user": journal.user,
                "reset": True,
                "items": [[k, -i.citations, 0] for k, i in sorted(before.items.items())
                          if i.citations],
            }
            texts = name_text(attest, "reason", scrub(reason) if reason else None)
            weights = weights_payload(before.weights, {}, settings.rate, False)
            journal.append_pair(None, attest, weights, texts)
        tables = SalienceTables(self._salience_path)
        with suppress(MemoryStateError):  # a cache of the journal, as after an attest
            tables.catch_up(journal.learning_records(tables.load().seq))
        return forgotten

    def outcomes(self, goal: str, query: str, k: int) -> list[PastOutcome]:
        """The outcomes tier (see ``Workspace.outcomes``)."""
        check_k(k, MAX_OUTCOMES)
        text = (query or goal).strip()
        if not text:
            raise ConfigError("outcomes needs a goal or a query")
        index = self._outcome_index()
        if index is None:
            return []
        try:
            ranked = self._ranker.ranked(text, goal, None, SearchMode.HYBRID, None, self.learned)
            top = [f.path for f in file_hits(ranked, _OUTCOME_FILES, self._file_ranking())]
        except (IndexNotBuiltError, IndexStateError):
            top = []
        return index.rank(text, top, k, exclude=text)

    def _file_ranking(self) -> FileRanking:
        return FileRanking(self._state.config.file_ranking)

    def _outcome_index(self) -> OutcomeIndex | None:
        """The earlier attested intents, caught up with the ledger (None without one)."""
        state = self._state
        if not state.config.ledger or not state.has_journal():
            return None
        self._follow(state.journal.file_id())
        purge = state.journal.last_purge()
        with state.lazy:
            if purge != self._purge:  # a forget (here or in another process) cut texts
                self._outcomes, self._purge = None, purge
            if self._outcomes is None:
                from engine.segment import code_terms

                self._outcomes = OutcomeIndex(code_terms)
        self._outcomes.update(state.journal)
        return self._outcomes

    def bundle(
        self, goal: str, objects: Sequence[str] | None, budget: int, session: SessionState | None
    ) -> Bundle:
        """The cold-start bundle for ``goal`` (see ``Workspace.bundle``)."""
        started = time.perf_counter()
        check_text("goal", goal)
        if not goal.strip():
            raise ConfigError("bundle needs a goal")
        if type(budget) is not int or not MIN_BUDGET_TOKENS <= budget <= MAX_BUNDLE_BUDGET:
            raise ConfigError(f"budget must be between {MIN_BUDGET_TOKENS} and "
                              f"{MAX_BUNDLE_BUDGET:,}, got {budget!r}")  # fmt: skip
        given = check_items("objects", objects, _BUNDLE_OBJECTS)
        wanted = [o.strip() for o in given if check_text("objects", o).strip()]
        if session is not None:
            check_state(session)  # the request limits build_context's state has
        goal = scrub(goal)
        session = session or SessionState()
        items: list[BundleItem] = []
        for n, text in enumerate(session.constraints, start=1):
            items.append(BundleItem(Tier.PINNED, f"state:constraint/{n}", "constraint",
                                    scrub(text), 1.0))  # fmt: skip
        for n, text in enumerate(session.subgoals, start=1):
            items.append(BundleItem(Tier.PINNED, f"state:goal/{n}", "active goal",
                                    scrub(text), 0.95))  # fmt: skip
        # The notes are read on a thread of their own while this one ranks the code: the
        # text index's BM25 and git's status for the View both wait outside the GIL.
        notes = self._read_notes(goal) if self._notes.exists() else None
        try:
            code = self._code_items(goal, wanted)
        finally:  # the notes' error first, as when they were read first
            pinned_notes, frame_notes = notes.result() if notes is not None else ((), ())
        items.extend(pinned_notes)
        items.extend(code)
        items.extend(frame_notes)
        kept, overflow, text, tokens = fit_bundle(goal, items, budget, self._bundle_counter())
        latency = round((time.perf_counter() - started) * 1000, 3)
        return Bundle(goal, budget, kept, overflow, tokens, text, latency)

    def _read_notes(self, goal: str) -> Future[tuple[list[BundleItem], list[BundleItem]]]:
        """``_notes_for(goal)`` started on a note reader (``result`` waits for it, and
        raises in the caller what it raised)."""
        with self._state.lazy:
            if self._readers is None:
                self._readers = ThreadPoolExecutor(_NOTE_READERS, "cortex-bundle-notes")
            return self._readers.submit(self._notes_for, goal)

    def _notes_for(self, goal: str) -> tuple[list[BundleItem], list[BundleItem]]:
        """The saved notes a bundle shows: (pinned identity, constraint and goal notes,
        frame-relevant notes), both ranked from one read of the goal's candidates."""
        memory = self._notes.memory
        goal = recall_query(goal)  # a pasted issue: its leading part, as the memory lane reads
        pool = memory.pool(goal)
        kinds = (NoteType.IDENTITY, NoteType.CONSTRAINT, NoteType.GOAL)
        pinned = []
        # The bundle shows no link's state (a lane or ``get`` re-checks them): none read.
        for hit in memory.search(goal, _PINNED_NOTES, types=kinds, check_links=False,
                                 pool=pool):  # fmt: skip
            sal = max(PINNED_FLOOR, 0.7 + 0.2 * hit.importance)
            title = f"{hit.type.value}: {hit.title}"
            pinned.append(BundleItem(Tier.PINNED, hit.uri, title, hit.preview, sal))
        # Previews: the bundle names the note (resolve it for the whole); the full text
        # with every link re-checked is the memory lane's, at a context's cost.
        frame = []
        for hit in memory.search(goal, _BUNDLE_NOTES, check_links=False, pool=pool):
            sal = 0.3 + 0.2 * hit.importance
            frame.append(BundleItem(Tier.FRAME, hit.uri, hit.title, hit.preview, sal))
        return pinned, frame

    def _code_items(self, goal: str, wanted: Sequence[str]) -> list[BundleItem]:
        """The rules files (pinned), the earlier outcomes and the code sections for the
        goal and the objects it names, in that order: all from one ranking."""
        items: list[BundleItem] = []
        learned = self.learned()
        for uri, title, text in rules_sections(self._state.root, goal):
            boost = learned.salience.get(f"file:{uri.split('#', 1)[0]}", 0.0)
            sal = PINNED_FLOOR + 0.1 * (1 + boost)
            items.append(BundleItem(Tier.PINNED, uri, title, text, sal))
        ask = " ".join([goal, *wanted])
        try:  # one ranking serves the frame tier and the outcomes tier's file match
            scored = self._ranker.ranked(ask, goal, None, SearchMode.HYBRID,
                                         _bundle_settings(self._state.config),
                                         self.learned)  # fmt: skip
        except (IndexNotBuiltError, IndexStateError):
            scored = []
        index = self._outcome_index()
        past: list[PastOutcome] = []
        if index is not None:
            top_files = [f.path for f in file_hits(scored, _OUTCOME_FILES, self._file_ranking())]
            past = index.rank(ask, top_files, _BUNDLE_OUTCOMES, exclude=ask)
        top = max((p.score for p in past), default=1.0) or 1.0
        for p in sorted(past, key=lambda p: (p.time, p.turn_id), reverse=True):
            end = p.outcome + (f" ({p.reason})" if p.reason else "")
            cited = ", ".join(p.cited[:_BUNDLE_CITED]) or "nothing"
            said = " ".join(p.intent.split())[:_INTENT_CHARS]
            sal = 0.4 + 0.25 * p.score / top
            items.append(BundleItem(Tier.OUTCOMES, f"outcome:{p.turn_id}", f"{end}, {p.time}",
                                    f"{said}\ncited: {cited}", sal))  # fmt: skip
        hits = ranked_hits(scored, _BUNDLE_SECTIONS)
        best = max((h.score for h in hits), default=1.0) or 1.0
        named = set(wanted)
        for h in hits:
            c = h.chunk
            asked = c.path in named or c.symbol in named or c.symbol.rsplit(".", 1)[-1] in named
            uri = f"{c.path}#L{c.span.start_line}-L{c.span.end_line}"
            sal = min(0.69, 0.6 * max(0.0, h.score) / best + (0.09 if asked else 0.0))
            items.append(BundleItem(Tier.FRAME, uri, f"{c.path} {c.symbol}".strip(), c.text, sal))
        return items

    def _bundle_counter(self) -> MemoCounter:
        """The token counter bundles fit with: the configured one, remembering the counts
        of the items (pinned notes, rules files, sections) that come back call after call."""
        with self._state.lazy:
            if self._counts is None:
                self._counts = MemoCounter(self._state.counter)
            return self._counts


def _bundle_settings(config: Config) -> ContextSettings:
    """The ranking a bundle reads: build_context's, over a narrower net (a handful of
    sections to start from, not a context's evidence), so a bundle stays a quick read."""
    base = config.context_settings()
    recall = replace(base.recall, bm25_sections=_BUNDLE_RECALL, dense_sections=_BUNDLE_RECALL,
                     pages=_BUNDLE_PAGES)  # fmt: skip
    return replace(base, recall=recall, rerank_depth=_BUNDLE_RECALL)


def feature_rows(scored: Sequence[Scored]) -> tuple[FeatureRow, ...]:
    """The best candidates' rerank features (without the learned ones), for learning."""
    return tuple(
        FeatureRow(s.chunk.path, s.chunk.span.start_line, s.chunk.span.end_line, s.chunk.symbol,
                   tuple((c.feature, c.value) for c in s.contributions
                         if c.feature not in LEARNED_FEATURES), rank)
        for rank, s in enumerate(scored[:LEARN_POOL])
    )  # fmt: skip
