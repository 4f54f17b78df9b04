"""The lane reads and shows a step's text as a terminal shows it; the store keeps it whole."""

from __future__ import annotations

import random
from pathlib import Path

from engine.core import Step, StepRole
from engine.memory import Journal, Memo, Session, stub_lines
from engine.memory._terminal import terminal_text
from indexers import TiktokenCounter

COUNTER = TiktokenCounter()
RED, OFF = "\x1b[31m", "\x1b[0m"


def test_terminal_text_strips_escapes_and_controls_and_folds_overwrites() -> None:
    """Colours, window titles, a bell, carriage-return overwrites and overstrikes go;
    newlines and tabs stay; text with none of them is returned as is."""
    assert terminal_text("\x1b[1;31mFAILED\x1b[0m a\tb\n") == "FAILED a\tb\n"
    assert terminal_text("\x1b]0;title\x07done\x07\n") == "done\n"
    assert terminal_text("12%\r100%\r\nabc\rX\n") == "100%\nXbc\n"
    assert terminal_text("N\bNAME\x0c\n") == "NAME\n"
    plain = "nothing to change here\n\twith a tab\n"
    assert terminal_text(plain) is plain


def test_binary_output_is_one_line_that_counts_it() -> None:
    """Random bytes decoded with replacement characters become one line that says how many
    lines were binary, while the text lines around them stay."""
    rng = random.Random(1)
    blob = bytes(rng.getrandbits(8) for _ in range(20_000)).decode("utf-8", "replace")
    shown = terminal_text("header line\n" + blob.replace("\x00", "") + "\nexit: done\n")
    lines = shown.splitlines()
    assert lines[0] == "header line" and lines[-1] == "exit: done"
    assert len(lines) == 3 and lines[1].startswith("[binary output: ")
    assert "café" in terminal_text("café and caf\ufffd\n")  # one bad character is no binary


def test_the_lane_shows_the_terminal_view_and_resolve_the_stored_text(tmp_path: Path) -> None:
    """A coloured pytest output is stored as written (resolve gives the escapes back), while
    the lane names its failing test, from its own step, with no escape in it."""
    s = Session(Journal(tmp_path / "ledger.sqlite", "ann"), "s1", COUNTER)
    s.add("user", "fix parse_strict")
    coloured = f"{RED}FAILED{OFF} pkg/t.py::test_a - ValueError\r\n{RED}1 failed{OFF}\r\n"
    s.add("tool", coloured, tool="pytest", exit_status=1)
    for i in range(8):
        s.add("tool", f"unrelated output {i} " * 30, tool="bash", exit_status=0)
    assert s.step(2).text == coloured
    lane = s.lane(300).text
    assert "\x1b" not in lane and "\r" not in lane
    assert "pkg/t.py::test_a (#2)" in lane


def test_a_credential_split_by_colour_codes_is_redacted(tmp_path: Path) -> None:
    """A token whose halves a colour code separates would appear whole in the lane: it is
    redacted before it is stored."""
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    s = Session(Journal(tmp_path / "ledger.sqlite", "ann"), "s1", COUNTER)
    s.add("tool", f"export GITHUB_TOKEN={token[:10]}{RED}{token[10:]}{OFF}\n")
    assert token not in terminal_text(s.step(1).text)
    assert token not in s.lane(500).text


def test_a_binary_outputs_stub_shows_no_garbage() -> None:
    """A binary tool output's stub holds its label and the line that counts the binary
    lines, not replacement characters or control bytes."""
    rng = random.Random(2)
    blob = bytes(rng.getrandbits(8) for _ in range(50_000)).decode("utf-8", "replace")
    item = Step(2, StepRole.TOOL, blob.replace("\x00", ""), tool="cat", exit_status=0)
    lines = stub_lines(item, Memo(COUNTER))
    assert "\ufffd" not in "\n".join(lines) and "[binary output: " in lines[1]
