"""A planner's session as records: its steps, and what compaction keeps of them.

A ``Step`` is one journaled step (a user message, the model's turn, a tool's output, a
decision, a build_context request, the files changed between turns); ``compact`` answers
a ``Compaction`` (steps kept whole, ``Stub`` records for the rest) in a ``Checkpoint``'s
canonical encoding, which reloads as written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.core._errors import ConfigError

__all__ = ["Checkpoint", "Compaction", "Step", "StepRole", "Stub", "step_role"]


class StepRole(StrEnum):
    """What a session step is."""

    USER = "user"  # a user's message (the first one is the session's goal)
    ASSISTANT = "assistant"  # the model's turn (reasoning and the command it ran)
    TOOL = "tool"  # a tool's output
    DECISION = "decision"  # an explicit decision, with its rationale and evidence
    REQUEST = "request"  # a build_context request and what its pack cited
    CHANGES = "changes"  # files the working tree changed between turns


def step_role(role: object) -> StepRole:
    """``role`` (a ``StepRole`` or its value) as the role of a step ``Session.add`` journals
    or of a ``Turn`` a planner passes: any but ``decision``, which goes through
    ``Session.decide`` with its rationale."""
    if role == StepRole.DECISION:
        raise ConfigError("record decisions with decide(text, rationale, evidence)")
    if isinstance(role, str) and role in {r.value for r in StepRole}:
        return StepRole(role)
    raise ConfigError(f"unknown role {role!r}; use user, assistant, tool, request or changes")


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a session, as journaled (``text`` already redacted)."""

    step: int
    role: StepRole
    text: str
    tool: str = ""
    is_error: bool | None = None
    exit_status: int | None = None
    rationale: str = ""  # decisions: why
    evidence: tuple[str, ...] = ()  # decisions: the evidence ids or refs it rests on

    @property
    def ref(self) -> str:
        """How the lane names this step."""
        return f"#{self.step}"


@dataclass(frozen=True, slots=True)
class Stub:
    """What stands for a compacted item: its ref, a short form, and how much it mattered."""

    ref: str  # "session:ID#N": resolves to the original
    short_form: str
    salience: float


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A compaction's result in its canonical encoding (``encoded``, hashed by ``sha256``)."""

    session: str
    step: int
    encoded: str
    sha256: str

    @classmethod
    def of(cls, body: dict[str, Any]) -> Checkpoint:
        """The checkpoint of a canonical body."""
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return cls(str(body["session"]), int(body["step"]), encoded,
                   hashlib.sha256(encoded.encode("utf-8")).hexdigest())  # fmt: skip


@dataclass(frozen=True, slots=True)
class Compaction:
    """``compact``'s answer: steps kept whole, stubs for the rest, tokens, the checkpoint."""

    session: str
    step: int
    budget: int
    kept: tuple[int, ...]
    stubs: tuple[Stub, ...]
    tokens: int
    checkpoint: Checkpoint

    @classmethod
    def decode(cls, encoded: str) -> Compaction:
        """A compaction from its checkpoint's encoding (no recomputation)."""
        body = json.loads(encoded)
        stubs = tuple(Stub(s["ref"], s["short_form"], float(s["salience"])) for s in body["stubs"])
        return cls(body["session"], int(body["step"]), int(body["budget"]),
                   tuple(int(k) for k in body["kept"]), stubs, int(body["tokens"]),
                   Checkpoint.of(body))  # fmt: skip
