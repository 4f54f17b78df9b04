"""What a session's runs tell: failure chains keyed by the run, each test's newest result."""

from __future__ import annotations

from engine.core import Step, StepRole
from engine.memory import Memo, digest_lines
from engine.memory._history import goal_lines
from engine.memory._runs import chains, run_key, verdicts
from indexers import TiktokenCounter

COUNTER = TiktokenCounter()
FAIL = (
    "<returncode>1</returncode>\n<output>\nFAILED pkg/test_mod.py::test_empty - ValueError\n"
    "FAILED pkg/test_mod.py::test_other - assert 0\n2 failed, 5 passed in 0.1s\n</output>"
)
QUIET_PASS = (
    "<returncode>0</returncode>\n<output>\npkg/test_mod.py .......  [100%]\n"
    "7 passed in 0.1s\n</output>"
)
EDIT = "THOUGHT: fix\n```bash\nsed -i 's/a/b/' pkg/mod.py\n```"
DONE = "<returncode>0</returncode>\n<output>\n</output>"


def _turn(cmd: str) -> str:
    return f"THOUGHT: run\n```bash\n{cmd}\n```"


def _items(*pairs: tuple[str, str]) -> list[Step]:
    """A session of (command, output) pairs after one user message."""
    items = [Step(1, StepRole.USER, "make the tests pass")]
    for cmd, out in pairs:
        items.append(Step(len(items) + 1, StepRole.ASSISTANT, cmd))
        items.append(Step(len(items) + 1, StepRole.TOOL, out, tool="bash"))
    return items


def _digest(items: list[Step]) -> str:
    return "\n".join(digest_lines(items, Memo(COUNTER)))


def test_a_quiet_pass_of_the_same_run_clears_its_failing_tests() -> None:
    """A failing run, an edit, the same run passing with only dots and a summary: the
    digest lists its tests as failed then passed, never as failing beside a passed chain."""
    run = _turn("pytest pkg/test_mod.py")
    digest = _digest(_items((run, FAIL), (EDIT, DONE), (run, QUIET_PASS)))
    assert "→ passed #7" in digest
    assert "tests failing" not in digest
    assert "pkg/test_mod.py::test_empty (#3→#7)" in digest
    assert "pkg/test_mod.py::test_other (#3→#7)" in digest


def test_a_quiet_pass_of_a_run_that_covers_the_tests_clears_them() -> None:
    """A pass of a wider pytest run (the whole directory, another spelling of the target)
    clears the tests under it; a pass of another file or of a -k selection does not."""
    failed = (_turn("pytest pkg/test_mod.py::test_empty pkg/test_mod.py::test_other"), FAIL)
    wide = _items(failed, (_turn("cd /testbed && python -m pytest /testbed/pkg -q"), QUIET_PASS))
    assert [v.passed_at for v in verdicts(wide, Memo(COUNTER))] == [5, 5]
    other = _items(failed, (_turn("pytest pkg/test_util.py"), QUIET_PASS))
    assert [v.passed_at for v in verdicts(other, Memo(COUNTER))] == [None, None]
    picked = _items(failed, (_turn("pytest pkg/test_mod.py -k empty"), QUIET_PASS))
    assert [v.passed_at for v in verdicts(picked, Memo(COUNTER))] == [None, None]


def test_the_newest_result_of_a_test_wins() -> None:
    """Failed, passed, failed again: the test is failing now, and the digest says it
    passed before; the L3 lesson says the run failed again."""
    run = _turn("python -m pytest pkg/test_mod.py")
    passed = "<returncode>0</returncode>\n<output>\nPASSED pkg/test_mod.py::test_empty\n</output>"
    items = _items((run, FAIL), (EDIT, DONE), (run, passed), (EDIT, DONE), (run, FAIL))
    digest = _digest(items)
    assert "tests failed then passed: pkg/test_mod.py::test_empty" not in digest
    assert "tests failing: pkg/test_mod.py::test_empty (#11, passed #7 before)" in digest
    goals = "\n".join(goal_lines(items, Memo(COUNTER)))
    assert "passed after #4, failed again #11" in goals


def test_chains_join_only_the_same_run() -> None:
    """A failure of one pytest target is not closed by a pass of another, whatever the two
    commands' first words share; spellings of one target are one run."""
    items = _items((_turn("python -m pytest pkg/test_mod.py"), FAIL),
                   (_turn("python -m pytest testing/test_other.py -q"), QUIET_PASS))  # fmt: skip
    (chain,) = chains(items, Memo(COUNTER))
    assert chain.key == "pytest pkg/test_mod.py" and chain.passed_at is None
    assert run_key("cd /testbed && pytest ./pkg/test_mod.py -q 2>&1 | tail") == chain.key
    assert run_key("python reproduce.py") != run_key("python other.py")


def test_a_search_that_finds_nothing_is_no_failure() -> None:
    """grep, diff, cmp, test and [ exiting 1 answer "no"; exit 2 (a missing file) and a
    pipeline ending in another program still fail."""
    none = "<returncode>1</returncode>\n<output>\n</output>"
    for cmd in ('grep -n "def evaluate_xfail" src/*.py', "diff a.py b.py", "cmp a b",
                "test -f x.py", "[ -f x.py ]", "cd src && git grep -n parse"):  # fmt: skip
        assert chains(_items((_turn(cmd), none)), Memo(COUNTER)) == [], cmd
    missing = "<returncode>2</returncode>\n<output>\ngrep: x.py: No such file\n</output>"
    assert chains(_items((_turn("grep -n a x.py"), missing)), Memo(COUNTER))
    assert chains(_items((_turn("grep -c a x.py | python check.py"), none)), Memo(COUNTER))
    assert "still failing" not in _digest(_items((_turn("grep -n zz pkg/mod.py"), none)))
