"""A session's items and how each is shown at each level of the history lane.

An ``Step`` is one journaled step: a user message, the agent's turn, a tool's output, an
explicit decision, a build_context request, or the files the working tree changed. The
lane shows an item at one of four levels:

- L0 verbatim (``verbatim_lines``);
- L1 masked (``stub_lines``): what later steps need from it, see ``engine.memory._observe``;
- L2 digested (``digest_lines`` over a run of items): decisions with their evidence,
  failure chains, files changed, tests that failed and later passed, open questions, the
  names the steps used;
- L3 goals and lessons (``goal_lines``).

Every level but L0 names each step it covers by ``[#N]``, which resolves to the original.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from engine.core import Step, StepRole, inert
from engine.memory._observe import Observation, command_of, names_in, observe, one_line
from engine.memory._runs import chains, verdicts
from engine.memory._terminal import terminal_text
from indexers import TokenCounter

__all__ = [
    "VERBATIM_CHARS",
    "Memo",
    "changed_paths",
    "changes_text",
    "digest_lines",
    "goal_lines",
    "short_form",
    "stub_lines",
    "verbatim_lines",
]

# A text longer than this is never shown whole and never counted token by token (a 50 MB
# log would take seconds): no budget cortex accepts (200k tokens) holds it anyway.
VERBATIM_CHARS = 400_000
_THOUGHT_CHARS = 80  # an agent turn's stub keeps the start of its reasoning
_PASSED_SHOWN = 12  # passing test ids a stub names (failing ones: all)
_LOCATIONS = 12  # path:line locations a stub names (files: all it saw, up to the cap)
_QUESTIONS = 3  # open questions a digest keeps (the latest)
_KEY_SHOWN = 80  # characters of a failed command a chain line shows
# A stub's files line: as many names as fit in this many characters (a build log names
# thousands of files; the first ones and their count are what a later step uses).
_FILES_CHARS = 240
_RUNS_KEPT = 4096  # digests memoised per session before the cache starts again
_QUESTION = re.compile(r"[^.!?\n]{12,200}\?")


@dataclass(slots=True)
class Memo:
    """Facts and token counts already computed, by item and by line (a pure cache: the
    same inputs give the same lane with or without it)."""

    counter: TokenCounter
    observations: dict[Step, Observation] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    blocks: dict[tuple[str, Step], tuple[list[str], int]] = field(default_factory=dict)
    commands: dict[Step, str] = field(default_factory=dict)
    said: dict[Step, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    runs: dict[tuple[str, Step, Step, int], tuple[list[str], int]] = field(default_factory=dict)
    lines: dict[Step, object] = field(default_factory=dict)  # the lane's recallable lines
    views: dict[Step, Step] = field(default_factory=dict)

    def shown(self, item: Step) -> Step:
        """The item with its text as a terminal shows it (``terminal_text``): what every
        level of the lane observes and shows; ``[#N]`` still resolves to the stored text
        (memoised)."""
        found = self.views.get(item)
        if found is None:
            text = terminal_text(item.text)
            found = item if text is item.text else replace(item, text=text)
            self.views[item] = self.views[found] = found
        return found

    def text(self, item: Step) -> str:
        """The item's text as a terminal shows it (memoised)."""
        return self.shown(item).text

    def command(self, item: Step) -> str:
        """The shell command of an agent's turn, or "" (memoised)."""
        found = self.commands.get(item)
        if found is None:
            found = self.commands[item] = command_of(self.text(item))
        return found

    def names(self, item: Step) -> tuple[tuple[str, ...], ...]:
        """(paths, test ids, exception names, symbols) in the item's whole text (memoised)."""
        found = self.said.get(item)
        if found is None:
            found = self.said[item] = names_in(self.text(item))
        return found

    def run(self, kind: str, items: Sequence[Step]) -> tuple[list[str], int]:
        """A run of items as a ``digest`` or as ``goals`` and lessons, and its cost
        (memoised by the run's first and last item and its length)."""
        if not items:
            return [], 0
        key = (kind, items[0], items[-1], len(items))
        found = self.runs.get(key)
        if found is None:
            if len(self.runs) >= _RUNS_KEPT:
                self.runs.clear()
            lines = digest_lines(items, self) if kind == "digest" else goal_lines(items, self)
            # Steps' text must not forge the frame; the first line is the run's own header.
            lines = lines[:1] + [inert(ln) for ln in lines[1:]]
            found = self.runs[key] = (lines, self.cost(lines))
        return found

    def block(self, kind: str, item: Step) -> tuple[list[str], int]:
        """An item's lines at one level (``verbatim``, ``stub``, ``short``, ``questions``)
        and their cost (memoised)."""
        key = (kind, item)
        found = self.blocks.get(key)
        if found is None:
            item = self.shown(item)
            if kind == "verbatim":
                lines = verbatim_lines(item)
            elif kind == "stub":
                lines = stub_lines(item, self)
            elif kind == "short":
                lines = [short_form(item, self)]
            else:
                text = _thought(item.text) if item.role is StepRole.ASSISTANT else item.text
                lines = [f"{q.strip()} [{item.ref}]" for q in _QUESTION.findall(text)]
            # Steps' text must not forge the frame; a block's first line is its own label
            # (``[#N tool …]``), but a question starts with the step's words.
            first = 0 if kind == "questions" else 1
            lines = lines[:first] + [inert(ln) for ln in lines[first:]]
            found = self.blocks[key] = (lines, self.cost(lines))
        return found

    def observe(self, item: Step) -> Observation:
        """The item's facts (a tool output's, or an agent turn's command's)."""
        found = self.observations.get(item)
        if found is None:
            text = self.text(item)
            if item.role is StepRole.ASSISTANT:
                text = command_of(text) or text
            found = observe(text, item.exit_status)
            if item.is_error and not found.exit_status and not found.failed:
                found = _errored(found)
            self.observations[item] = found
        return found

    def count(self, line: str) -> int:
        """Tokens of one line (memoised)."""
        n = self.tokens.get(line)
        if n is None:
            n = self.tokens[line] = self.counter.count(line)
        return n

    def cost(self, lines: Iterable[str]) -> int:
        """Tokens of lines joined by newlines (each newline counted as one)."""
        return sum(self.count(ln) + 1 for ln in lines)

    def item_tokens(self, item: Step) -> int:
        """Tokens of the item's whole text (memoised by text); a text over
        ``VERBATIM_CHARS`` is estimated at one token per 4 bytes, never counted."""
        if len(item.text) > VERBATIM_CHARS:
            return len(item.text.encode("utf-8", "replace")) // 4
        return self.count(self.text(item))


# A ``changes`` step with no path: the working tree went back to clean.
_CLEAN = "working tree clean"

def _errored(found: Observation) -> Observation:
    """An observation of an output its tool flagged as an error (exit status unknown)."""
    return replace(found, exit_status=1 if found.exit_status is None else found.exit_status)


def _thought(text: str) -> str:
    """An agent turn's reasoning without its command block and the THOUGHT label."""
    body = re.sub(r"```.*?(```|$)", " ", text, flags=re.DOTALL)
    body = re.sub(r"^\s*THOUGHT:\s*", "", body)
    return one_line(body, _THOUGHT_CHARS)


def _label(item: Step, obs: Observation | None) -> str:
    if item.role is StepRole.TOOL:
        status = "" if obs is None or obs.exit_status is None else f" exit {obs.exit_status}"
        error = " error" if item.is_error and not status else ""
        return f"{item.ref} tool {item.tool or 'output'}{status}{error}"
    return f"{item.ref} {item.role.value}"


def verbatim_lines(item: Step) -> list[str]:
    """L0: the item in full under its label (callers check ``VERBATIM_CHARS`` first)."""
    head = f"[{item.ref}] {item.role.value}"
    if item.role is StepRole.TOOL:
        head = f"[{_label(item, None)}]" + (
            f" exit {item.exit_status}" if item.exit_status is not None else ""
        )
    if item.role is StepRole.DECISION:
        return [_decision(item)]
    if item.role is StepRole.CHANGES and not item.text.strip():
        return [f"{head}: {_CLEAN}"]
    return [head, *item.text.splitlines()]


def _decision(item: Step) -> str:
    why = f" — because {one_line(terminal_text(item.rationale))}" if item.rationale else ""
    ev = f" (evidence: {', '.join(item.evidence)})" if item.evidence else ""
    return f"[{item.ref}] decision: {one_line(item.text)}{why}{ev}"


def short_form(item: Step, memo: Memo) -> str:
    """One line that stands for the item: what compact keeps of a stubbed item."""
    item = memo.shown(item)
    if item.role is StepRole.DECISION:
        return _decision(item)
    if item.role is StepRole.ASSISTANT:
        cmd = command_of(item.text).splitlines()
        run = f" $ {one_line(cmd[0], 120)}" if cmd else ""
        return f"[{item.ref}] assistant: {_thought(item.text)}{run}"
    if item.role is StepRole.TOOL:
        obs = memo.observe(item)
        what = obs.errors[0] if obs.errors else (obs.last[-1] if obs.last else "")
        return f"[{_label(item, obs)}] {obs.lines} lines: {one_line(what, 120)}"
    what = item.text if item.text.strip() or item.role is not StepRole.CHANGES else _CLEAN
    return f"[{item.ref}] {item.role.value}: {one_line(what, _THOUGHT_CHARS)}"


def stub_lines(item: Step, memo: Memo, extra: Sequence[str] = ()) -> list[str]:
    """L1: a tool output masked to what later steps need (first and last lines, error
    lines, the last traceback whole, paths, tests, symbols), plus ``extra`` lines of it
    chosen by the caller; any other item as its short form."""
    item = memo.shown(item)
    if item.role is not StepRole.TOOL:
        short = short_form(item, memo)
        if item.role is not StepRole.ASSISTANT:
            return [short]
        # The names a command used (files it ran or wrote, tests) outlive its short form.
        obs = memo.observe(item)
        paths, tests, errors, _ = memo.names(item)
        said = dict.fromkeys((*obs.files, *paths, *tests, *obs.failed_tests, *errors))
        names = [n for n in said if n not in short]
        return [short, "  names: " + ", ".join(names)] if names else [short]
    obs = memo.observe(item)
    tokens = memo.item_tokens(item)
    lines = [f"[{_label(item, obs)}] {obs.lines} lines, {tokens:,} tokens, masked"]
    shown: set[str] = set()

    def add(line: str, mark: str = "  ") -> None:
        if line not in shown:
            shown.add(line)
            lines.append(mark + line)

    for ln in obs.first:
        add(ln)
    for ln in obs.errors:
        add(ln, "! ")
    for ln in extra:
        add(ln, "~ ")
    for ln in obs.traceback:
        add(ln)
    for ln in obs.last:
        add(ln)
    facts = []
    if obs.failed_tests:
        facts.append("failed: " + ", ".join(obs.failed_tests))
    if obs.passed_tests:
        more = len(obs.passed_tests) - _PASSED_SHOWN
        facts.append("passed: " + ", ".join(obs.passed_tests[:_PASSED_SHOWN])
                     + (f" and {more} more" if more > 0 else ""))  # fmt: skip
    raised = [e for e in obs.exceptions if not any(e in ln for ln in shown)]
    if raised:
        facts.append("raised: " + ", ".join(raised))
    if obs.files:
        facts.append("files: " + _bounded(obs.files, _FILES_CHARS))
    located = [p for p in obs.paths if p.rsplit(":", 1)[-1].isdigit()][:_LOCATIONS]
    if located:
        facts.append("at: " + ", ".join(located))
    if obs.symbols:
        facts.append("defines: " + ", ".join(obs.symbols))
    if not obs.scanned_all:
        facts.append("huge: scanned at head and tail, and between for error lines")
    lines.extend(f"  {' '.join(f.split())}" for f in facts)  # bounded by counts, never cut
    return lines


def _bounded(names: Sequence[str], chars: int) -> str:
    """``names`` joined by commas, as many as fit in ``chars`` (always the first), then how
    many more there are."""
    shown: list[str] = []
    used = 0
    for name in names:
        if shown and used + len(name) + 2 > chars:
            return ", ".join(shown) + f" and {len(names) - len(shown)} more"
        shown.append(name)
        used += len(name) + 2
    return ", ".join(shown)


def _names(items: Sequence[Step], memo: Memo) -> tuple[list[str], list[str], list[str], list[str]]:
    paths: dict[str, None] = {}
    tests: dict[str, None] = {}
    errors: dict[str, None] = {}
    symbols: dict[str, None] = {}
    for item in items:
        obs = memo.observe(item)
        said: tuple[tuple[str, ...], ...] = ((), (), ())
        if item.role is StepRole.ASSISTANT:  # the names its reasoning used, not only its command
            said = memo.names(item)[:3]
        for p in (*obs.files, *said[0]):
            paths.setdefault(p)
        for t in (*obs.failed_tests, *obs.passed_tests, *said[1]):
            tests.setdefault(t)
        for e in (*obs.exceptions, *said[2]):
            errors.setdefault(e)
        for s in obs.symbols:
            symbols.setdefault(s)
    return list(paths), list(tests), list(errors), list(symbols)


def digest_lines(items: Sequence[Step], memo: Memo) -> list[str]:
    """L2: a digest of a run of items (extracted, not generated), each fact with the steps
    it came from."""
    if not items:
        return []
    first, last = items[0].step, items[-1].step
    out = [f"Digest of #{first}-#{last}:"]
    for item in items:
        if item.role is StepRole.DECISION:
            out.append("- " + _decision(memo.shown(item)))
        elif item.role is StepRole.USER:
            out.append(f"- [{item.ref}] user: {one_line(memo.text(item), _THOUGHT_CHARS)}")
    for chain in chains(items, memo):
        tried = (
            f" → edits {', '.join(f'#{s}' for s in chain.attempts[:6])}" if chain.attempts else ""
        )
        end = f" → passed #{chain.passed_at}" if chain.passed_at else " → still failing"
        out.append(f"- failed #{chain.failed_at} `{one_line(chain.key, _KEY_SHOWN)}`: "
                   f"{chain.what}{tried}{end}")  # fmt: skip
    changed: dict[str, list[int]] = {}
    for item in items:
        if item.role in (StepRole.ASSISTANT, StepRole.CHANGES):
            wrote = (memo.observe(item).writes if item.role is StepRole.ASSISTANT
                     else changed_paths(item.text))  # fmt: skip
            for path in wrote:
                changed.setdefault(path, []).append(item.step)
    if changed:
        where = {p: ", ".join(f"#{s}" for s in steps[:4]) for p, steps in changed.items()}
        out.append("- files changed: " + ", ".join(f"{p} ({w})" for p, w in where.items()))
    results = verdicts(items, memo)
    fixed = [f"{v.test} (#{v.failed_at}→#{v.passed_at})" for v in results if v.passed_at]
    if fixed:
        out.append("- tests failed then passed: " + ", ".join(fixed))
    still = [f"{v.test} (#{v.failed_at}" + (f", passed #{v.passed_before} before)"
             if v.passed_before else ")") for v in results if not v.passed_at]  # fmt: skip
    if still:
        out.append("- tests failing: " + ", ".join(still))
    questions = [
        q
        for item in items
        if item.role in (StepRole.USER, StepRole.ASSISTANT)
        for q in memo.block("questions", item)[0]
    ]
    if questions:
        out.append("- open questions: " + " ".join(questions[-_QUESTIONS:]))
    paths, tests, errors, symbols = _names(items, memo)
    for label, seen in (("paths", paths), ("tests", tests), ("errors", errors),
                        ("symbols", symbols)):  # fmt: skip
        if seen:
            out.append(f"- {label}: {', '.join(seen)}")
    return out


def changes_text(paths: Iterable[str]) -> str:
    """A ``changes`` step's text: the paths, sorted, shell-quoted where they need it (a
    space in a path would split it)."""
    return shlex.join(sorted(set(paths)))


def changed_paths(text: str) -> tuple[str, ...]:
    """The paths of a ``changes`` step's text (``changes_text``; older steps joined plain
    paths with spaces, which read the same)."""
    try:
        return tuple(shlex.split(text))
    except ValueError:  # an unbalanced quote in an older step's path
        return tuple(text.split())


def goal_lines(items: Sequence[Step], memo: Memo) -> list[str]:
    """L3: the oldest items as goals (user messages), decisions and lessons (failure
    chains that ended in a pass)."""
    if not items:
        return []
    out = [f"Goals and lessons of #{items[0].step}-#{items[-1].step}:"]
    for item in items:
        if item.role is StepRole.USER:
            out.append(f"- goal [{item.ref}]: {one_line(memo.text(item), _THOUGHT_CHARS)}")
        elif item.role is StepRole.DECISION:
            out.append("- " + _decision(memo.shown(item)))
    found = chains(items, memo)
    for at, chain in enumerate(found):
        if chain.passed_at is not None:
            after = ", ".join(f"#{s}" for s in chain.attempts[:4]) or "a retry"
            again = next((c.failed_at for c in found[at + 1 :] if c.key == chain.key), None)
            later = f", failed again #{again}" if again else ""
            out.append(f"- lesson #{chain.failed_at}→#{chain.passed_at}: "
                       f"`{one_line(chain.key, _KEY_SHOWN)}` failed ({chain.what}), passed "
                       f"after {after}{later}")  # fmt: skip
    return out
