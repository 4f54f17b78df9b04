"""What a session's command runs tell: failure chains, and each test's latest result.

A run is a tool output and the command of the agent turn before it. Runs are told apart
by the command itself (``run_key``): whitespace collapsed, a leading ``cd DIR &&`` dropped,
and for pytest its targets and selection only, so ``python -m pytest a.py`` and
``pytest a.py -q`` are one run and ``pytest b.py`` another. A failure chain is a run that
failed, the edits after it, and the next run of the same key that passed. A search that
finds nothing (``grep``, ``diff``, ``cmp``, ``test``, ``[`` exiting 1) did not fail.

A test's result is its newest: a run that names it failing or passing (``FAILED id``,
``id PASSED``), or a clean pass (exit 0, nothing failing) of the run that last failed it
or of a pytest run whose targets cover it (plain pytest prints no id of a passing test).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from engine.core import Step, StepRole
from engine.memory._observe import Observation, one_line


class Memo(Protocol):
    """What runs read of ``engine.memory._history.Memo`` (which imports this module)."""

    def command(self, item: Step) -> str: ...

    def observe(self, item: Step) -> Observation: ...

__all__ = ["Chain", "Verdict", "chains", "run_key", "verdicts"]

_KEY_CHARS = 200  # a run's key past this is a script, not a command to tell apart
# Commands whose runs are remembered (``_run_of``): every digest of a session reads each of
# its commands again, and a lane builds several digests; a long session has fewer.
_RUNS_CACHED = 4096
_WHAT_CHARS = 120  # what failed, as a chain names it
_SEGMENT = re.compile(r"\s*(?:&&|\|\||[;|\n])\s*")  # the simple commands of a line
_CD = re.compile(r"^(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_ASSIGN = re.compile(r"^[A-Za-z_]\w*=")
# Commands whose exit status 1 is an answer, not a failure: no line matched, the files
# differ, the condition is false. (2 and up is still an error: a file that does not exist.)
_ANSWERS_WITH_1 = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep", "diff",
                             "cmp", "test", "[", "[["})  # fmt: skip
_PYTEST = re.compile(r"(?:^|/)py\.?test$")
_PYTHON = re.compile(r"python[\d.]*")
# pytest options that pick tests by something other than their path: a pass with one of
# them says nothing of the tests it did not pick.
_SELECTING = frozenset({"-k", "-m", "--lf", "--last-failed", "--ff", "--deselect", "--sw",
                        "--stepwise", "-x", "--exitfirst", "--maxfail"})  # fmt: skip
_VALUED = frozenset({"-k", "-m", "--deselect", "--maxfail"})  # the next word is its value
_PASS_SUMMARY = re.compile(r"\b\d+ passed\b")
_FAIL_SUMMARY = re.compile(r"\b\d+ (?:failed|errors?)\b")


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:  # an unbalanced quote: the words as they stand
        return segment.split()


def _program(words: Sequence[str]) -> tuple[str, int]:
    """The program a simple command runs (its basename) and where it is among ``words``
    (after ``VAR=value`` assignments, ``sudo``, ``env``, ``time``, ``python -m``)."""
    at = 0
    while at < len(words) and (_ASSIGN.match(words[at]) or words[at] in ("sudo", "env", "time")):
        at += 1
    if at >= len(words):
        return "", at
    name = words[at].rsplit("/", 1)[-1]
    if _PYTHON.fullmatch(name) and words[at + 1 : at + 2] == ["-m"] and at + 2 < len(words):
        return words[at + 2], at + 2
    if name == "git" and words[at + 1 : at + 2] == ["grep"]:
        return "grep", at + 1
    return name, at


@dataclass(frozen=True, slots=True)
class _Run:
    """A command as runs are told apart by: its key, and for pytest its targets."""

    key: str
    pytest: bool = False
    targets: tuple[str, ...] = ()
    selecting: bool = False  # pytest picked tests by something besides their paths
    last_program: str = ""  # the program whose exit status the run reports

    @classmethod
    def of(cls, command: str) -> _Run:
        flat = _CD.sub("", " ".join(command.split()))
        segments = [s for s in _SEGMENT.split(command.strip()) if s.strip()]
        last = _program(_words(segments[-1]))[0] if segments else ""
        for segment in segments:
            words = _words(segment)
            name, at = _program(words)
            if not _PYTEST.search(name):
                continue
            targets: list[str] = []
            picks: list[str] = []
            rest = iter(words[at + 1 :])
            for word in rest:
                option = word.split("=", 1)[0]
                if option in _SELECTING:
                    picks.append(word)
                    if option in _VALUED and "=" not in word:
                        picks.append(next(rest, ""))
                elif not word.startswith("-") and ("/" in word or ".py" in word):
                    targets.append(word.removeprefix("./"))
            key = " ".join(["pytest", *targets, *picks])
            return cls(key[:_KEY_CHARS], True, tuple(targets), bool(picks), last)
        return cls(flat[:_KEY_CHARS], last_program=last)

    def covers(self, test: str) -> bool:
        """Whether a clean pass of this run passed ``test`` (a pytest id)."""
        if not self.pytest or self.selecting:
            return False
        return not self.targets or any(_covers(t, test) for t in self.targets)


@lru_cache(maxsize=_RUNS_CACHED)
def _run_of(command: str) -> _Run:
    """``_Run.of(command)``, remembered: shell-splitting every command of every digest
    was most of the time a lane took to build (the run is frozen, so one is shared)."""
    return _Run.of(command)


def _covers(target: str, test: str) -> bool:
    """Whether a pytest target (a directory, a file, a ``file::name``) includes ``test``,
    the target relative to anywhere above the test's root (``/testbed/tests/a.py``)."""
    path, _, name = target.partition("::")
    test_path, _, test_name = test.partition("::")
    ours = [p for p in path.split("/") if p]
    theirs = [p for p in test_path.split("/") if p]
    if not ours:
        return False
    placed = any(ours[k:] == theirs[: len(ours) - k] for k in range(len(ours)))
    if not placed or (name and len(ours) > len(theirs)):
        return False
    if not name:
        return True
    return test_name == name or test_name.startswith((name + "::", name + "["))


def run_key(command: str) -> str:
    """The key runs of ``command`` are chained by (see the module's docstring).

    >>> run_key("cd /testbed && python -m pytest tests/a.py -q")
    'pytest tests/a.py'
    """
    return _Run.of(command).key


@dataclass(slots=True)
class Chain:
    """A failure and what followed it, until the same run passed."""

    key: str
    failed_at: int
    what: str
    attempts: list[int] = field(default_factory=list)
    passed_at: int | None = None


@dataclass(slots=True)
class Verdict:
    """A test's newest result: failing since ``failed_at`` (``passed_at`` None), or passed
    at ``passed_at`` after failing; ``passed_before``: a pass before its failing streak (a
    regression)."""

    test: str
    failed_at: int
    passed_at: int | None = None
    passed_before: int | None = None
    key: str = ""  # the run that last failed it


def _answered(run: _Run, obs: Observation) -> bool:
    """Whether a non-zero exit is the program's answer (no match), not a failure."""
    return (obs.exit_status == 1 and run.last_program in _ANSWERS_WITH_1
            and not obs.failed_tests and not obs.traceback)  # fmt: skip


def _clean_pass(obs: Observation) -> bool:
    """Whether an output is a run that passed: exit 0 (or, with no status, a pytest summary
    of passes and nothing failed), no failing test, no traceback."""
    if obs.failed:
        return False
    if obs.exit_status == 0:
        return True
    said = " ".join(obs.last)
    return bool(_PASS_SUMMARY.search(said)) and not _FAIL_SUMMARY.search(said)


def _runs(items: Sequence[Step], memo: Memo) -> list[tuple[Step, _Run, bool]]:
    """In order: each agent turn that writes files (an edit; its run's key is ""), and
    each tool output with the run it answers (its tool's name when no command came before)
    and whether it failed."""
    out: list[tuple[Step, _Run, bool]] = []
    run = _Run("")
    for item in items:
        if item.role is StepRole.ASSISTANT:
            cmd = memo.command(item)
            run = _run_of(cmd) if cmd else _Run("")
            if memo.observe(item).writes:
                out.append((item, _Run(""), False))
        elif item.role is StepRole.TOOL:
            here = run if run.key else _Run(item.tool or "output")
            obs = memo.observe(item)
            out.append((item, here, obs.failed and not _answered(here, obs)))
    return out


def chains(items: Sequence[Step], memo: Memo) -> list[Chain]:
    """Failure chains: a run that failed, the edits after it, the same run that passed."""
    open_: dict[str, Chain] = {}
    order: list[Chain] = []
    for item, run, failed in _runs(items, memo):
        if item.role is StepRole.ASSISTANT:  # an edit: an attempt at every open chain
            for chain in open_.values():
                chain.attempts.append(item.step)
            continue
        obs = memo.observe(item)
        if failed:
            if run.key not in open_:
                what = (obs.traceback[-1] if obs.traceback else
                        obs.errors[0] if obs.errors else f"exit {obs.exit_status}")  # fmt: skip
                open_[run.key] = Chain(run.key, item.step, one_line(what, _WHAT_CHARS))
                order.append(open_[run.key])
        elif run.key in open_:
            open_.pop(run.key).passed_at = item.step
    return order


def verdicts(items: Sequence[Step], memo: Memo) -> list[Verdict]:
    """The newest result of every test the items saw fail, in the order they first failed."""
    results: dict[str, Verdict] = {}
    for item, run, failed in _runs(items, memo):
        if item.role is not StepRole.TOOL:
            continue
        obs = memo.observe(item)
        for t in obs.failed_tests:
            seen = results.get(t)
            if seen is None:
                results[t] = Verdict(t, item.step, key=run.key)
            elif seen.passed_at is not None:  # it passed, and fails again
                seen.failed_at, seen.passed_before = item.step, seen.passed_at
                seen.passed_at, seen.key = None, run.key
            else:
                seen.key = run.key
        passed = set(obs.passed_tests)
        clean = not failed and _clean_pass(obs)
        for result in results.values():
            if result.passed_at is not None or result.test in obs.failed_tests:
                continue
            if result.test in passed or (
                clean and (result.key == run.key or run.covers(result.test))
            ):
                result.passed_at = item.step
    return list(results.values())
