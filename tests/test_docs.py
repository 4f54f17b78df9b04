"""The README documents every command, HTTP route and MCP tool (as sqlite-utils checks)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from engine.cli._main import _parser
from engine.serve import OPENAPI

README = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
TOOLS = ("build_context", "feedback", "search", "resolve", "replay", "status", "index",
         "memory_save", "memory_search", "memory_get", "memory_timeline", "memory_relate",
         "memory_graph", "memory_delete", "memory_stats", "memory_archive",
         "session_end", "learned")  # fmt: skip


def _commands() -> list[str]:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_in_the_readme(command: str) -> None:
    """Each ``cortex`` command appears in the README's command table."""
    assert f"`cortex {command}" in README


@pytest.mark.parametrize("route", sorted(OPENAPI["paths"]))
def test_every_http_route_is_in_the_readme(route: str) -> None:
    """Each HTTP route of the OpenAPI document is named in the README."""
    assert route.split("{")[0] in README


@pytest.mark.parametrize("tool", TOOLS)
def test_every_mcp_tool_is_in_the_readme(tool: str) -> None:
    """Each MCP tool is named in the README."""
    assert f"`{tool}`" in README
