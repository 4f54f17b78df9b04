"""Masking keeps what later steps need: exit status, errors, tests, paths, tracebacks."""

from __future__ import annotations

from engine.memory import command_of, names_in, observe
from engine.memory._observe import drafts_of

PYTEST = """<returncode>1</returncode>
<output>
============================= test session starts ==============================
collected 3 items

tests/test_a.py::test_ok PASSED
tests/test_a.py::test_bad[x-1] FAILED

Traceback (most recent call last):
  File "src/pkg/mod.py", line 12, in parse
    raise ValueError("empty header")
ValueError: empty header
FAILED tests/test_a.py::test_bad[x-1] - ValueError: empty header
========================= 1 failed, 1 passed in 0.10s ==========================
</output>"""


def test_a_failing_run_keeps_status_tests_paths_and_traceback() -> None:
    """A pytest failure yields its exit status, failed and passed ids, the exception, the
    traceback whole and file:line paths."""
    obs = observe(PYTEST)
    assert obs.exit_status == 1 and obs.failed
    assert obs.failed_tests == ("tests/test_a.py::test_bad[x-1]",)
    assert obs.passed_tests == ("tests/test_a.py::test_ok",)
    assert "ValueError" in obs.exceptions
    assert obs.traceback[0].startswith("Traceback")
    assert obs.traceback[-1] == "ValueError: empty header"
    assert "src/pkg/mod.py:12" in obs.paths


def test_a_huge_output_is_scanned_at_head_and_tail() -> None:
    """A 3 MB log is read at both ends, and the error at its end is kept."""
    text = "x" * 80 + "\n"
    big = text * 40_000 + "RuntimeError: at the end\n"
    obs = observe(big, exit_status=2)
    assert not obs.scanned_all and obs.exit_status == 2
    assert "RuntimeError" in obs.exceptions


def test_commands_and_names() -> None:
    """The command is the last bash block; names are paths, test ids, exceptions, symbols."""
    turn = "THOUGHT: look\n\n```bash\nsed -i 's/a/b/' src/x.py\n```"
    assert command_of(turn) == "sed -i 's/a/b/' src/x.py"
    assert observe(command_of(turn)).writes == ("src/x.py",)
    paths, tests, errors, symbols = names_in("def run():\n t/test_x.py::test_y KeyError")
    assert "t/test_x.py" in paths and tests == ("t/test_x.py::test_y",)
    assert errors == ("KeyError",) and symbols == ("run",)


def test_the_status_tag_is_no_first_line() -> None:
    """The harness's ``<returncode>`` tag gives the exit status and is not kept as a line."""
    obs = observe("<returncode>0</returncode>\n<output>\nhello world\n</output>")
    assert obs.exit_status == 0 and obs.first == ("hello world",)


def test_a_quoted_python_block_before_the_bash_block_is_not_the_command() -> None:
    """A python block quoted before the bash block: the command is the bash block, never
    the prose between the two (the python block's closing fence opens nothing)."""
    turn = (
        "THOUGHT: the function reads\n\n```python\ndef f(x):\n    return x\n```\n\n"
        "So I will patch it.\n\n```bash\nsed -i 's/x/y/' src/f.py\n```\n"
    )
    assert command_of(turn) == "sed -i 's/x/y/' src/f.py"
    assert observe(command_of(turn)).writes == ("src/f.py",)


def test_which_fenced_block_is_the_command() -> None:
    """A shell-tagged block wins over a later untagged one; an untagged block counts when
    no block is tagged as a shell; a block in another language alone is no command; a
    block left open runs to the end."""
    assert command_of("```bash\nls\n```\nthen\n```\noutput\n```") == "ls"
    assert command_of("look:\n```\ngrep -n x a.py\n```") == "grep -n x a.py"
    assert command_of("```python\nprint(1)\n```") == ""
    assert command_of("```bash\npytest -x tests/") == "pytest -x tests/"
    assert command_of("````bash\necho '```'\n````") == "echo '```'"


def test_drafts_are_every_fenced_block_but_the_command() -> None:
    """A turn's drafts are its other fenced blocks (code it quotes or drafts, a second
    shell block), in order, never the command; a turn with a command alone has none."""
    turn = (
        "THOUGHT: it reads\n```python\ndef f(x):\n    return x\n```\nand I tried\n"
        "```bash\nls src\n```\nSo:\n```bash\nsed -i 's/x/y/' src/f.py\n```\n"
    )
    assert drafts_of(turn) == "def f(x):\n    return x\nls src"
    assert drafts_of("THOUGHT: look\n```bash\nls\n```") == ""
    assert drafts_of("no code at all") == ""


def test_colour_codes_and_progress_lines_are_read_as_a_terminal_shows_them() -> None:
    """pytest's colours do not hide failing and passing ids; CRLF and a carriage-return
    progress bar are one line each in their last state."""
    red, green, off = "\x1b[31m", "\x1b[32m", "\x1b[0m"
    coloured = (f"{red}FAILED{off} pkg/t.py::test_a - ValueError\n"
                f"pkg/t.py::test_b {green}PASSED{off}\n{red}=== 1 failed ==={off}\n")  # fmt: skip
    obs = observe(coloured, 1)
    assert obs.failed_tests == ("pkg/t.py::test_a",) and obs.passed_tests == ("pkg/t.py::test_b",)
    assert not any("\x1b" in ln for ln in (*obs.errors, *obs.last))
    bar = "".join(f"\rDownloading {i}%" for i in range(101)) + "\r\nERROR: could not install\r\n"
    obs = observe(bar, 1)
    assert obs.lines == 3 and obs.first == ("Downloading 100%", "ERROR: could not install")


def test_an_error_in_the_middle_of_a_huge_log_is_found() -> None:
    """A 6 MB build log whose one error sits in its middle, beyond the head and tail scans:
    the error line and its file:line are kept."""
    body = "".join(f"compiling module_{i}.c ... ok\n" for i in range(100_000))
    half = body.rfind("\n", 0, len(body) // 2) + 1
    log = body[:half] + "src/core/io.c:812: error: 'fd' undeclared\n" + body[half:]
    obs = observe(log, exit_status=2)
    assert not obs.scanned_all
    assert "src/core/io.c:812: error: 'fd' undeclared" in obs.errors
    assert "src/core/io.c:812" in obs.paths
