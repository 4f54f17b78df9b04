"""eval.trajectories on a tiny made-up trajectory: probes found, every strategy scored, the
lanes within budget and deterministic, refusals only where impossible."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from engine.memory import LaneSettings
from eval.trajectories import lane_settings, load, main, refusals, run
from indexers import TiktokenCounter

CODE = "    value = compute_the_thing(alpha, beta, gamma)"


def _trajectory(path: Path) -> Path:
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "<pr_description>compute_the_thing is wrong</pr_description>"},
    ]
    for i in range(14):
        messages.append({"role": "assistant",
                         "content": f"THOUGHT: look {i}\n```bash\nsed -n '1,40p' pkg/mod.py\n```"})
        out = "\n".join(f"line {i}.{j} of the module text" for j in range(40))
        if i == 1:
            out += f"\ndef compute_the_thing(alpha, beta, gamma):\n{CODE}\n"
        messages.append({"role": "user",
                         "content": f"<returncode>0</returncode>\n<output>\n{out}\n</output>"})
    messages.append({"role": "assistant", "content": "THOUGHT: fix compute_the_thing with "
                     f"alpha\n```bash\ncat > pkg/mod.py <<'EOF'\n{CODE}\nEOF\n```"})
    row = {"instance_id": "x__y-1", "repo": "x/y", "resolved": True, "exit_status": "ok",
           "submission": "diff --git a/pkg/mod.py b/pkg/mod.py\n", "fail_to_pass":
           ["tests/test_mod.py::test_thing"], "messages": messages}
    target = path / "t.jsonl.gz"
    with gzip.open(target, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    return path


def test_every_strategy_is_scored_within_budget(tmp_path: Path) -> None:
    """The copied line is probed; cortex's lanes fit and repeat byte for byte."""
    trajs = list(load(str(_trajectory(tmp_path))))
    scores, checks = run(trajs, [1000], LaneSettings(), TiktokenCounter())
    assert set(scores) == {"cortex", "truncate", "mask10", "keep3"}
    assert scores["cortex"][1000].verbatim.trials >= 1
    # The agent's previous command and its output are probed at every step after the first
    # exchange; the 40-line outputs fit 1000 tokens, so truncation keeps both each time.
    truncate = scores["truncate"][1000]
    assert truncate.command.trials == truncate.output.trials == 14
    assert truncate.command.hits == truncate.output.hits == 14
    assert checks["same_bytes"] == checks["lanes"] > 0 and checks["over_budget"] == 0
    bad, refused_bad, _, refused_ok = refusals(TiktokenCounter(), trajs)
    assert refused_bad == bad and refused_ok == 0


def test_main_prints_the_table(tmp_path: Path) -> None:
    """The script runs end to end on a folder of trajectories."""
    assert main(["--data", str(_trajectory(tmp_path)), "--budgets", "1000",
                 "--timing-steps", "10"]) == 0


def test_lane_variants_are_fields_with_their_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--lane FIELD=VALUE`` sets a LaneSettings field (typed as its default); an unknown
    field or a bad value is exit 2 naming it, before any work."""
    assert lane_settings(["recent_turns=4", "recall_share = 0.5"]) == LaneSettings(
        recent_turns=4, recall_share=0.5)  # fmt: skip
    with pytest.raises(ValueError, match="not FIELD=VALUE with a field of: recent_turns"):
        lane_settings(["bogus=1"])
    with pytest.raises(ValueError, match="recent_turns takes an int, not 'x'"):
        lane_settings(["recent_turns=x"])
    data = str(_trajectory(tmp_path))
    assert main(["--data", data, "--lane", "recent_share"]) == 2
    assert "--lane: 'recent_share' is not FIELD=VALUE" in capsys.readouterr().err
    assert main(["--data", data, "--budgets", "1000", "--timing-steps", "0",
                 "--lane", "recent_turns=4"]) == 0
    assert "cortex lane: recent_turns=4" in capsys.readouterr().out
