"""The planner contract's input records check what they are given when they are made."""

from __future__ import annotations

import pytest

from engine import ConfigError, SignalKind, ToolSignal


def test_a_tool_signal_kind_is_taken_as_its_string_value_or_refused() -> None:
    """``kind="traceback"`` is ``SignalKind.TRACEBACK``; an unknown kind is a ConfigError
    naming the kinds there are, raised where the signal is made (before any call records)."""
    signal = ToolSignal("ValueError: x", kind="traceback")
    assert signal.kind is SignalKind.TRACEBACK
    assert signal == ToolSignal("ValueError: x", SignalKind.TRACEBACK)
    assert ToolSignal("x").kind is SignalKind.TEXT
    with pytest.raises(ConfigError, match=r"unknown tool signal kind 'bogus'.*traceback"):
        ToolSignal("x", kind="bogus")
    with pytest.raises(ConfigError, match="tool signal kind"):
        ToolSignal("x", kind=None)  # type: ignore[arg-type]
