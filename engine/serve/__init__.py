"""The servers: one ``Service`` (a warm workspace with input limits and background
refreshes) that MCP (stdio, and streamable HTTP at ``/mcp``) and the JSON API under
``/v1`` translate to, the request readers every surface shares, and the one JSON encoding
of the contract records (``to_json``) that ``--json``, MCP and HTTP all print. The MCP SDK,
starlette and uvicorn are imported only when a server is built."""

from engine.core import unknown_replay_key, whole_number
from engine.serve._encode import (
    JSON,
    chunk_json,
    files_json,
    hits_json,
    note_json,
    notes_json,
    pack_json,
    to_json,
)
from engine.serve._http import (
    MAX_BODY_BYTES,
    MIN_TOKEN_CHARS,
    OPENAPI,
    TOKEN_ENV,
    build_app,
    read_token,
    serve,
)
from engine.serve._mcp import build_mcp_server, run_stdio
from engine.serve._requests import Proof, field, proof_of, state_of, strings, tool_results_of
from engine.serve._resolve import resolve_checked
from engine.serve._service import (
    MAX_BUDGET_TOKENS,
    MAX_K,
    MAX_TEXT_BYTES,
    REQUEST_TIMEOUT_S,
    WATCH_INTERVAL_S,
    Service,
    check_k,
    forget_json,
    learned_json,
    reset_json,
)

__all__ = [
    "JSON",
    "MAX_BODY_BYTES",
    "MAX_BUDGET_TOKENS",
    "MAX_K",
    "MAX_TEXT_BYTES",
    "MIN_TOKEN_CHARS",
    "OPENAPI",
    "REQUEST_TIMEOUT_S",
    "TOKEN_ENV",
    "WATCH_INTERVAL_S",
    "Proof",
    "Service",
    "build_app",
    "build_mcp_server",
    "check_k",
    "chunk_json",
    "field",
    "files_json",
    "forget_json",
    "hits_json",
    "learned_json",
    "note_json",
    "notes_json",
    "pack_json",
    "proof_of",
    "read_token",
    "reset_json",
    "resolve_checked",
    "run_stdio",
    "serve",
    "state_of",
    "strings",
    "to_json",
    "tool_results_of",
    "unknown_replay_key",
    "whole_number",
]
