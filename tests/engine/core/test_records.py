"""The planner contract's input records check what they are given when they are made."""

from __future__ import annotations

import pytest

from engine import ConfigError, SessionState, SignalKind, ToolSignal, Turn
from engine.core import StepRole, check_items


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


def test_one_string_where_a_list_goes_is_refused() -> None:
    """``SessionState(constraints="keep API")`` was eight one-letter constraints: one
    string (or bytes, or a mapping) for a list is a ConfigError naming the argument; a
    list is kept as a tuple, so the record stays hashable."""
    for name in ("constraints", "subgoals", "recent_turns"):
        with pytest.raises(ConfigError, match=f"{name} must be a list, not str"):
            SessionState(**{name: "keep the API"})  # type: ignore[arg-type]
    state = SessionState(constraints=["keep the API"], subgoals=["add a test"])  # type: ignore[arg-type]
    assert state.constraints == ("keep the API",) and state.subgoals == ("add a test",)
    assert hash(state) == hash(SessionState(("",)[:0], ("keep the API",), ("add a test",)))
    assert check_items("objects", None) == ()
    assert check_items("objects", (x for x in "ab")) == ("a", "b")
    for bad in ("ab", b"ab", {"a": 1}, 12):
        with pytest.raises(ConfigError, match="objects must be a list"):
            check_items("objects", bad)  # type: ignore[arg-type]


def test_turns_and_session_state_are_checked_as_session_add_checks_steps() -> None:
    """A turn's role is one ``Session.add`` takes and its text is text (``Turn("user",
    None)`` showed "[user] None" in the prompt); the state's constraints, sub-goals and
    session id are text and its turns are ``Turn`` records. Each is a ConfigError naming
    what is wrong, raised where the record is made."""
    assert Turn("user", "hi").role == "user" and Turn(StepRole.TOOL, "ok").role == "tool"
    with pytest.raises(ConfigError, match="unknown role 'bogus'; use user, assistant, tool"):
        Turn("bogus", "hi")
    with pytest.raises(ConfigError, match="unknown role"):
        Turn(None, "hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="turn text must be text, not NoneType"):
        Turn("user", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="recent_turns items must be Turn records, not str"):
        SessionState(recent_turns=("hi",))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="constraints items must be text, not NoneType"):
        SessionState(constraints=(None,))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="subgoals items must be text, not int"):
        SessionState(subgoals=(1,))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="session must be text, not NoneType"):
        SessionState(session=None)  # type: ignore[arg-type]


def test_recorded_inputs_read_back_with_the_roles_they_were_recorded_with() -> None:
    """Turns recorded before roles were checked (any role was taken) still read back, so
    feedback on those turns keeps working."""
    from engine.memory import Inputs

    old = Inputs("goal", "", (), SessionState(), 1000).to_json().replace(
        '"recent_turns":[]', '"recent_turns":[["system","be brief"]]')  # fmt: skip
    assert Inputs.from_json(old).state.recent_turns[0].role == "system"
