"""The bundle benchmark runs end to end at a small size (slow: kept out of the default run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.bench_bundle import main


@pytest.mark.slow
def test_bench_bundle_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """200 notes, 300 turns, 5 calls: a table row, and one render for one goal."""
    code = main(["--notes", "200", "--turns", "300", "--calls", "5", "--dense", "hash",
                 "--dir", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "| 200 | 300 | 30 | 5 |" in out
