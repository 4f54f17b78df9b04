"""Render: lanes of text in a fixed order, counted with the configured tokenizer.

The budget is checked on the final rendered text, headers included; if estimates
overshoot, the least useful part is shed and the text rendered again (the lowest-scored
evidence first, then the "not shown" note, diff hunks, the oldest turns), so
``count(render) <= budget`` always holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.core import (
    Block,
    ConfigError,
    ContextSettings,
    Lane,
    Pointer,
    Recalled,
    SessionState,
    Snippet,
    fence_for,
    inert,
    shown_name,
)
from engine.packing._select import Picked
from indexers import Chunk, Span, TokenCounter
from overlays import Hunk

__all__ = [
    "INSTRUCTION",
    "Lanes",
    "Rendered",
    "evidence_room",
    "fixed_lanes",
    "header_cost",
    "render",
    "request_words",
]

INSTRUCTION = (
    "You are working in a code repository. The numbered evidence below was retrieved for "
    "this request. Cite evidence by its number, like [2], wherever you rely on it, and cite "
    "nothing else. If the evidence is not enough, say what is missing."
)
_FENCES = {
    "python": "python", "javascript": "javascript", "typescript": "typescript", "tsx": "tsx",
    "go": "go", "rust": "rust", "java": "java", "c": "c", "cpp": "cpp", "shell": "sh",
    "json": "json", "yaml": "yaml", "toml": "toml", "html": "html", "css": "css",
    "sql": "sql", "markdown": "markdown", "rst": "rst", "php": "php", "ruby": "ruby",
    "csharp": "csharp", "kotlin": "kotlin", "swift": "swift", "lua": "lua", "scala": "scala",
    "elixir": "elixir", "erlang": "erlang", "perl": "perl", "zig": "zig", "haskell": "haskell",
    "r": "r", "dart": "dart", "jq": "jq", "ocaml": "ocaml", "fsharp": "fsharp",
    "clojure": "clojure", "julia": "julia", "nim": "nim", "groovy": "groovy",
    "powershell": "powershell", "lisp": "lisp", "tcl": "tcl", "fortran": "fortran",
    "objc": "objectivec", "asm": "asm", "cython": "cython", "protobuf": "protobuf",
    "graphql": "graphql", "solidity": "solidity", "nix": "nix", "hcl": "hcl", "vim": "vim",
    "cmake": "cmake", "vue": "vue",
}  # fmt: skip
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_Attempt = tuple[list[tuple[Lane, str]], str, int]  # a render's parts, text and tokens
_MIN_SNIPPET_OVERHEAD = 8  # a snippet costs at least its text and this much more
_OMITTED_LINE = 40  # tokens the "not shown" note may take, reserved before evidence


@dataclass(slots=True)
class Lanes:
    """The lanes before the evidence: fixed text, and the items that can be shed."""

    instruction: str
    goal: str
    recent: list[str]  # oldest first
    hunks: list[str]  # most relevant first
    history: str = ""  # a session's history lane, already fitted to its room (never shed)
    memory: tuple[Recalled, ...] = ()  # saved notes, fitted to their room, cited first


@dataclass(frozen=True, slots=True)
class Rendered:
    """The final text and what it holds."""

    blocks: tuple[Block, ...]
    citations: tuple[Snippet, ...]
    shown: tuple[Picked, ...]  # the evidence behind the citations, in citation order
    pointers: tuple[Pointer, ...]
    text: str
    tokens: int


def _goal_text(goal: str, state: SessionState) -> str:
    # A goal is often an issue pasted whole: its own "## Description" would read as a lane
    # of the prompt (and change the prompt's shape from one task to the next).
    parts = [inert(goal.strip())]
    if state.constraints:
        parts.append("Constraints:\n" + "\n".join(f"- {inert(c)}" for c in state.constraints))
    if state.subgoals:
        parts.append("Sub-goals:\n" + "\n".join(f"- {inert(g)}" for g in state.subgoals))
    return "## Goal\n" + "\n\n".join(parts)


def _fit_lines(items: Sequence[str], cap: int, counter: TokenCounter) -> list[str]:
    """As many whole items as fit in ``cap`` tokens, in order."""
    out, used = [], 0
    for item in items:
        cost = counter.count(item) + 1
        if used + cost > cap:
            continue
        out.append(item)
        used += cost
    return out


def fixed_lanes(
    goal: str,
    state: SessionState,
    diff: Sequence[Hunk],
    words: set[str],
    budget: int,
    counter: TokenCounter,
    settings: ContextSettings,
    history: str = "",
) -> Lanes:
    """The instruction, the goal (with constraints and sub-goals), the session's history
    lane (fitted by the caller), the last turns and the diff hunks that share most words
    with the request, each lane within its share of the budget. Raises ``ConfigError``
    when the instruction, goal and history alone do not fit."""
    goal_block = _goal_text(goal, state)
    fixed = counter.count("\n\n".join(t for t in (INSTRUCTION, goal_block, history) if t))
    if fixed > budget:
        raise ConfigError(
            f"budget of {budget} tokens cannot hold the instruction and the goal "
            f"({fixed} tokens); raise the budget or shorten the goal"
        )
    recent = [f"[{shown_name(str(t.role))}] {inert(t.text)}"
              for t in state.recent_turns[-settings.recent_turns :]]  # fmt: skip
    recent = list(
        reversed(_fit_lines(list(reversed(recent)), int(budget * settings.recent_share), counter))
    )
    ranked = sorted(
        diff, key=lambda h: (-sum(1 for w in _WORD.findall(h.text) if w.lower() in words), h.path)
    )
    hunks = _fit_lines([f"--- {shown_name(h.path)}\n{h.text}" for h in ranked],
                       int(budget * settings.diff_share), counter)  # fmt: skip
    return Lanes(INSTRUCTION, goal_block, recent, hunks, history)


def request_words(text: str) -> set[str]:
    """The lowercased words of ``text`` that rank diff hunks (three characters or more)."""
    return {w.lower() for w in _WORD.findall(text)}


def evidence_room(lanes: Lanes, budget: int, counter: TokenCounter) -> int:
    """Tokens left for evidence once the fixed lanes (and the "not shown" note) are in."""
    used = counter.count("\n\n".join(text for _, text in _parts(lanes, [], []))) + _OMITTED_LINE
    return max(0, budget - used)


def header_cost(chunk: Chunk, counter: TokenCounter, cache: dict[str, int]) -> int:
    """What a snippet's header and fences cost beside its text (estimated once per chunk;
    a narrowed or widened snippet's label costs ``LABEL_TOKENS`` of ``_select`` more)."""
    cost = cache.get(chunk.id)
    if cost is None:
        probe = _head(99, chunk, chunk.span, "")
        # + the hash line, fences and spacing, and a margin: text counted alone can take up to
        # ~7 tokens fewer than inside the prompt (tokens merge across its edges)
        cost = cache[chunk.id] = counter.count(probe) + 24
    return cost


def _label(chunk: Chunk) -> str:
    """What a snippet's header calls it: its symbol (with the part when split), or for a
    section without one its file's name; the path and lines follow on the ``Source`` line."""
    if not chunk.symbol:
        return shown_name(chunk.path.rsplit("/", 1)[-1])
    return shown_name(chunk.title.removeprefix(f"{chunk.path}:"))  # the symbol and its part


def _head(n: int, chunk: Chunk, span: Span, label: str) -> str:
    """A snippet's first two lines: its number and label, then where it is (``path#La-Lb``:
    the path and the lines each said once)."""
    where = f"{shown_name(chunk.path)}#L{span.start_line}-L{span.end_line}"
    return f"[{n}] {_label(chunk)}{label}\nSource: {where}\n"


def _snippet_text(n: int, p: Picked) -> str:
    chunk = p.scored.chunk
    fence = fence_for(p.text)
    label = " (narrowed)" if p.narrowed else " (with neighbours)" if p.widened else ""
    return (
        f"{_head(n, chunk, p.span, label)}"
        f"Hash: sha256:{p.sha256[:12]}\n{fence}{_FENCES.get(chunk.language, '')}\n{p.text}\n{fence}"
    )


def _note_text(n: int, r: Recalled) -> str:
    return f"[{n}] {shown_name(r.title)}\nSource: {r.uri}\n{inert(r.text)}"


def _parts(
    lanes: Lanes, evidence: Sequence[Picked], omitted: Sequence[Pointer]
) -> list[tuple[Lane, str]]:
    out = [(Lane.INSTRUCTION, lanes.instruction), (Lane.GOAL, lanes.goal)]
    if lanes.history:
        out.append((Lane.HISTORY, lanes.history))
    if lanes.recent:
        out.append((Lane.RECENT, "## Recent turns\n" + "\n\n".join(lanes.recent)))
    if lanes.hunks:
        hunks = "\n".join(lanes.hunks)
        fence = fence_for(hunks)  # a hunk's own ``` line must not close the lane's fence
        out.append((Lane.DIFF, f"## Working-tree diff\n{fence}diff\n{hunks}\n{fence}"))
    if lanes.memory:
        notes = "\n\n".join(_note_text(n, r) for n, r in enumerate(lanes.memory, start=1))
        out.append((Lane.MEMORY, "## Memory\n" + notes))
    if evidence:
        first = len(lanes.memory) + 1
        body = "\n\n".join(_snippet_text(n, p) for n, p in enumerate(evidence, start=first))
        out.append((Lane.EVIDENCE, "## Evidence\n" + body))
    if omitted:
        tokens = sum(p.tokens for p in omitted)
        out.append((Lane.OMITTED, f"## Not shown\n{len(omitted)} more sections "
                    f"(~{tokens:,} tokens) were found but left out; they are listed "
                    "with their sources in this context's pointers."))  # fmt: skip
    return out


def render(
    lanes: Lanes,
    picked: Sequence[Picked],
    pointers: Sequence[Pointer],
    budget: int,
    counter: TokenCounter,
    spare: Sequence[Picked] = (),
) -> Rendered:
    """The prompt: evidence shown best first (by rerank score, then id) whatever order it
    was chosen in, numbered [1..n]; parts shed until the whole text fits ``budget``. Then
    ``spare`` evidence (left out for budget under the per-snippet estimates, best first)
    is added while the whole text, counted exactly, still fits."""
    chosen = sorted(picked, key=_best_first)
    left = list(pointers)
    recent, hunks = list(lanes.recent), list(lanes.hunks)
    notes = list(lanes.memory)
    show_omitted = True
    shed: list[Picked] = []

    def attempt(shown: list[Picked], omitted: list[Pointer]) -> _Attempt:
        now = Lanes(lanes.instruction, lanes.goal, recent, hunks, lanes.history, tuple(notes))
        parts = _parts(now, shown, omitted if show_omitted else [])
        text = "\n\n".join(body for _, body in parts) + "\n"
        return parts, text, counter.count(text)

    while True:
        parts, text, total = attempt(chosen, left)
        if total <= budget:
            break
        if chosen:
            dropped = min(chosen, key=lambda p: (p.scored.score, p.scored.chunk.id))
            chosen.remove(dropped)
            shed.append(dropped)
            chunk = dropped.scored.chunk
            score = round(dropped.scored.score, 6)
            left.insert(0, Pointer(chunk.source_uri, chunk.title, dropped.tokens, score, "budget"))
        elif show_omitted and left:
            show_omitted = False
        elif hunks:
            hunks.pop()
        elif recent:
            recent.pop(0)
        elif notes:
            notes.pop()
        else:  # instruction + goal alone were checked to fit; unreachable in practice
            raise ConfigError(f"budget of {budget} tokens is too small for this request")
    # What was shed may fit once the parts after it were shed too; then the spare.
    for extra in sorted(shed, key=_best_first) + list(spare):
        uri = extra.scored.chunk.source_uri
        at = next((i for i, p in enumerate(left) if p.source_uri == uri and p.reason == "budget"),
                  None)  # fmt: skip
        if at is None or extra.tokens + _MIN_SNIPPET_OVERHEAD > budget - total:
            continue
        trial, trial_left = sorted([*chosen, extra], key=_best_first), left[:at] + left[at + 1 :]
        tried = attempt(trial, trial_left)
        if tried[2] <= budget:
            chosen, left, (parts, text, total) = trial, trial_left, tried
    blocks = tuple(Block(lane, body, counter.count(body)) for lane, body in parts)
    recalled = tuple(_recalled(n, r) for n, r in enumerate(notes, start=1))
    citations = recalled + tuple(_snippet(n, p) for n, p in enumerate(chosen, len(notes) + 1))
    return Rendered(blocks, citations, tuple(chosen), tuple(left), text, total)


def _best_first(p: Picked) -> tuple[float, str]:
    return (-p.scored.score, p.scored.chunk.id)


def _recalled(n: int, r: Recalled) -> Snippet:
    """A memory-lane note as a citation: its uri, its shown text and that text's sha256."""
    span = Span(1, r.text.count("\n") + 1)
    return Snippet(n, r.uri, r.title, "", r.uri, span, r.sha256, "", r.tokens, r.score,
                   "memory", r.text)  # fmt: skip


def _snippet(n: int, p: Picked) -> Snippet:
    chunk = p.scored.chunk
    return Snippet(
        id=n,
        chunk_id=chunk.id,
        title=chunk.title,
        symbol=chunk.symbol,
        source_uri=f"{chunk.path}#L{p.span.start_line}-L{p.span.end_line}",
        span=p.span,
        sha256=p.sha256,
        license=chunk.license,
        approx_tokens=p.tokens,
        fused_score=round(p.scored.score, 6),
        reason_tag=p.scored.reason
        + ("+narrowed" if p.narrowed else "+neighbours" if p.widened else ""),
        text=p.text,
        contributions=p.scored.contributions,
    )
