"""What a note search looks for: the query's words, and which candidates are about them.

- **Words** (``query_words``): the query's code-aware terms, once each, without the function
  words of a question ("what did she ..."), which match nearly every note; never dropped
  from what is indexed, and kept when nothing else is left.
- **Titles** (``titled``, ``lift_titled``): a note whose title holds a query word is about
  what the query names (a title is the note's own summary: its subject, who said it, when),
  and counts ``1 + TITLE_LIFT`` of its score. BM25 alone cannot say so for a common word:
  FTS5 weighs a word held by half the notes or more by nothing at all (its idf,
  ``log((N - n + 0.5) / (n + 0.5))``, floors at zero there), so a name that titles half a
  store's notes, say one of the two people in a conversation, adds nothing to the notes
  titled by it; the lift gives back what the title says, as one factor, whatever the word's
  frequency.

::

    query_words(code_terms, "What did Ann decide about retries?")  # ['ann', 'decide', ...]
    lift_titled([(1, 1.0), (2, 0.9)], {2})   # [(2, 1.26), (1, 1.0)]
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from engine.memory._observations import NoteStore

__all__ = ["MAX_QUERY_WORDS", "STOP", "TITLE_LIFT", "lift_titled", "query_words", "titled"]

MAX_QUERY_WORDS = 64  # terms one search looks for: a question, not a document
# A note titled by a query word counts this much more: about as much as a title match of a
# rare word adds in BM25 for a typical question (two or three matched words), so it orders
# notes that match alike, and never lifts a note that matches nothing else over one that
# matches the query's content.
TITLE_LIFT = 0.4
# Function words of a question: dropped from a search as long as a word is left.
# fmt: off
STOP = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if",
    "in", "is", "it", "its", "of", "on", "or", "she", "that", "the", "their", "them", "they",
    "this", "to", "was", "were", "what", "when", "where", "which", "who", "whom", "why",
    "will", "with", "would", "you", "your",
))
# fmt: on


def query_words(terms: Callable[[str], str], query: str) -> list[str]:
    """The terms a search looks for: ``query``'s terms (``terms``: the store's tokenizer),
    once each, without its function words (unless nothing else is left)."""
    words = list(dict.fromkeys(terms(query).split()))
    return ([w for w in words if w not in STOP] or words)[:MAX_QUERY_WORDS]


def titled(store: NoteStore, words: Sequence[str], ids: Collection[int]) -> set[int]:
    """Those of ``ids`` whose title holds one of ``words`` (as the text index matches a
    word: stemmed, so "retry" finds "Retries ...")."""
    if not words or not ids:
        return set()
    # One read of every title that holds a word, then kept to ``ids``: a rowid list in the
    # query would run the match once per id.
    match = "{title} : (" + " OR ".join(f'"{w}"' for w in words) + ")"
    held = store.read(
        "SELECT group_concat(rowid) FROM notes_fts WHERE notes_fts MATCH ?", (match,)
    )[0][0]
    return set(map(int, held.split(","))) & set(ids) if held else set()


def lift_titled(
    scored: Sequence[tuple[int, float]], lifted: Collection[int]
) -> list[tuple[int, float]]:
    """``scored`` with each note in ``lifted`` at ``1 + TITLE_LIFT`` of its score, best
    first (ties by id)."""
    out = [(i, s * (1.0 + TITLE_LIFT) if i in lifted else s) for i, s in scored]
    return sorted(out, key=lambda p: (-p[1], p[0]))
