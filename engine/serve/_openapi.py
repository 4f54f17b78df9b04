"""The JSON API's OpenAPI document (served at ``/openapi.json``)."""

from __future__ import annotations

from typing import Any

# fmt: off
_ERR = {"$ref": "#/components/schemas/Error"}
_Q = {"in": "query", "schema": {"type": "string"}}
_OK = {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}
_ERRS = {str(c): {"description": d, "content": {"application/json": {"schema": _ERR}}}
         for c, d in ((400, "bad input"), (401, "missing or wrong token"),
                      (403, "an admin route this server does not offer"), (404, "unknown key"),
                      (408, "the body did not arrive in time"), (413, "body too large"),
                      (429, "feedback with an outcome over the attest rate: nothing recorded"),
                      (503, "index not ready, busy or unusable"),
                      (504, "timeout"))}


def _body(props: dict[str, object], required: list[str]) -> dict[str, object]:
    schema = {"type": "object", "properties": props, "required": required}
    return {"required": True, "content": {"application/json": {"schema": schema}}}


_STRS = {"type": "array", "items": {"type": "string"}}
_TURN = {"type": "object", "properties": {"role": {"type": "string"}, "text": {"type": "string"}},
         "required": ["role", "text"], "additionalProperties": False}
_STATE = {"type": "object", "additionalProperties": False,
          "properties": {"recent_turns": {"type": "array", "items": _TURN},
                         "constraints": _STRS, "subgoals": _STRS,
                         "session": {"type": "string"}}}
_SID = {"name": "session", "in": "path", "required": True, "schema": {"type": "string"}}
_ONCE = {"name": "Idempotency-Key", "in": "header", "required": False,
         "schema": {"type": "string", "minLength": 1, "maxLength": 255},
         "description": "retry with the same key and body: the first call's answer, once"}
_INTS = {"type": "array", "items": {"type": "integer"}}
_NID = {"name": "id", "in": "path", "required": True, "description": "12 or memory:12",
        "schema": {"type": "string", "pattern": "^(memory:)?[0-9]+$"}}
_NOTE_TYPES = ["decision", "bugfix", "pattern", "discovery", "config", "identity", "constraint",
               "goal", "note"]
_EDGE_KINDS = ["references", "relates_to", "follows", "supersedes", "contradicts"]
_PROOF = {"type": "object", "additionalProperties": False, "required": ["path", "sha256"],
          "properties": {"path": {"type": "string"}, "sha256": {"type": "string"}}}
OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "cortex", "version": "1",
             "description": "Budgeted, cited context for coding agents. MCP lives at /mcp."},
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {"Error": {"type": "object", "properties": {"error": {"type": "object",
                    "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}}},
    },
    "security": [{"bearer": []}],
    "paths": {
        "/v1/context": {"post": {
            "summary": "Build the context for the next step (render is the prompt text)",
            "requestBody": _body({"goal": {"type": "string"}, "query": {"type": "string"},
                                  "tool_signals": _STRS, "budget_tokens": {"type": "integer"},
                                  "state": _STATE}, []),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/feedback": {"post": {
            "summary": "Report the [n] citations the model used",
            "requestBody": _body({"replay_key": {"type": "string"},
                                  "model_citations": {"type": "array", "items": {}},
                                  "tool_results": {"type": "array", "items": {}},
                                  "outcome": {"type": "string"},
                                  "reason": {"type": "string"}}, ["replay_key"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/bundle": {"post": {
            "summary": "The cold-start bundle: pinned, earlier outcomes, code for the goal",
            "requestBody": _body({"goal": {"type": "string"}, "objects": _STRS,
                                  "budget": {"type": "integer"}, "state": _STATE}, ["goal"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/replay/{key}": {"get": {
            "summary": "The recorded prompt, byte for byte",
            "parameters": [{"name": "key", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/search": {"get": {
            "summary": "Sections (or files=1: files) in build_context's ranking; goal and "
                       "tool_signals (repeated) steer it as they steer a context",
            "parameters": [{"name": "q", **_Q, "required": True}, {"name": "goal", **_Q},
                           {"name": "files", **_Q},
                           {"name": "mode", "in": "query",
                            "schema": {"enum": ["bm25", "dense", "hybrid"]}},
                           {"name": "k", "in": "query", "schema": {"type": "integer"}},
                           {"name": "tool_signals", "in": "query", "schema": _STRS,
                            "style": "form", "explode": True}],
            "responses": {"200": _OK, **_ERRS}}, "post": {
            "summary": "The search tool's arguments as a body (tool signals too long for a "
                       "URL): sections, or files=true: files",
            "requestBody": _body({"query": {"type": "string"}, "goal": {"type": "string"},
                                  "mode": {"enum": ["bm25", "dense", "hybrid"]},
                                  "k": {"type": "integer"}, "files": {"type": "boolean"},
                                  "tool_signals": _STRS}, ["query"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/resolve": {"get": {
            "summary": "The text of path#Lstart-Lend, checked against an optional proof; "
                       "or of a note (memory:N) or a session step (session:ID#N)",
            "parameters": [{"name": "uri", **_Q, "required": True}, {"name": "path", **_Q},
                           {"name": "sha256", **_Q}],
            "responses": {"200": _OK, **_ERRS}}, "post": {
            "summary": "The text of path#Lstart-Lend, checked against an optional proof; "
                       "or of a note (memory:N) or a session step (session:ID#N)",
            "requestBody": _body({"uri": {"type": "string"}, "proof": _PROOF}, ["uri"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/status": {"get": {"summary": "What is indexed, how stale, and the background "
                                          "refresh: running, progress {stage, number, unit, "
                                          "done, total, elapsed_s, eta_s} while it runs",
                               "responses": {"200": _OK, **_ERRS}}},
        "/v1/index": {"post": {"summary": "Refresh the index in the background; wait=1 answers "
                                          "when it is done (up to 10 minutes, then 504 and the "
                                          "build goes on)",
                               "parameters": [{"name": "wait", **_Q}],
                               "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/steps": {"post": {
            "summary": "Journal one step of a session (role user, assistant, tool, changes, "
                       "request)",
            "parameters": [_SID, _ONCE],
            "requestBody": _body({"role": {"type": "string"}, "text": {"type": "string"},
                                  "tool": {"type": "string"}, "is_error": {"type": "boolean"},
                                  "exit_status": {"type": "integer"}}, ["role", "text"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/decisions": {"post": {
            "summary": "Record a decision, its rationale and the evidence it rests on",
            "parameters": [_SID, _ONCE],
            "requestBody": _body({"text": {"type": "string"}, "rationale": {"type": "string"},
                                  "evidence": {"type": "array", "items": {}}}, ["text"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}": {"get": {
            "summary": "A session's steps, or one step in full (step=N)",
            "parameters": [_SID, {"name": "step", "in": "query",
                                  "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/lane": {"get": {
            "summary": "The history lane a context of budget_tokens would give the session's "
                       "next turn, its recalled lines ranked by query (or goal); journals "
                       "nothing",
            "parameters": [_SID, {"name": "budget_tokens", "in": "query", "required": True,
                                  "schema": {"type": "integer"}},
                           {"name": "goal", **_Q}, {"name": "query", **_Q}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/compact": {"post": {
            "summary": "Compact into budget_tokens and journal a checkpoint (413 when even the "
                       "stubs do not fit)",
            "parameters": [_SID],
            "requestBody": _body({"load_bearing": _INTS, "budget_tokens": {"type": "integer"},
                                  "step": {"type": "integer"}, "in_context": _INTS}, []),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/checkpoint": {"post": {
            "summary": "Journal a checkpoint of the working set at step",
            "parameters": [_SID],
            "requestBody": _body({"step": {"type": "integer"},
                                  "budget_tokens": {"type": "integer"}}, ["step"]),
            "responses": {"200": _OK, **_ERRS}}, "get": {
            "summary": "The latest checkpoint of all, as written",
            "parameters": [_SID], "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/checkpoint/{step}": {"get": {
            "summary": "The latest checkpoint at step, as written",
            "parameters": [_SID, {"name": "step", "in": "path", "required": True,
                                  "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/end": {"post": {
            "summary": "Save the session's summary as a memory note (ending again updates it)",
            "parameters": [_SID],
            "requestBody": _body({"scope": {"enum": ["personal", "project"]}}, []),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory": {"post": {
            "summary": "Save a note (same topic_key: updated in place; same content: nothing "
                       "added)",
            "requestBody": _body({"title": {"type": "string"}, "type": {"enum": _NOTE_TYPES},
                                  "what": {"type": "string"}, "why": {"type": "string"},
                                  "where": {"type": "string"}, "learned": {"type": "string"},
                                  "topic_key": {"type": "string"},
                                  "scope": {"enum": ["project", "personal"]},
                                  "created": {"type": "number"}}, ["title"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/search": {"get": {
            "summary": "Notes for a query: titles and previews, best first",
            "parameters": [{"name": "q", **_Q, "required": True},
                           {"name": "k", "in": "query", "schema": {"type": "integer"}},
                           {"name": "types", **_Q}, {"name": "include_superseded", **_Q}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/stats": {"get": {
            "summary": "Counts of the notes you can see (admin profile: --tools admin; "
                       "403 admin_only otherwise)",
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}": {"get": {
            "summary": "One note in full, its code links re-checked",
            "parameters": [_NID], "responses": {"200": _OK, **_ERRS}}, "delete": {
            "summary": "Forget a note (hard=1: out of the file; admin profile: --tools admin; "
                       "403 admin_only otherwise)",
            "parameters": [_NID, {"name": "hard", **_Q}], "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}/archive": {"post": {
            "summary": "Take a note out of search and prompts (archived=false: bring it back; "
                       "admin profile: --tools admin; 403 admin_only otherwise)",
            "parameters": [_NID], "requestBody": _body({"archived": {"type": "boolean"}}, []),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}/timeline": {"get": {
            "summary": "The notes saved around one, oldest first",
            "parameters": [_NID, {"name": "before", "in": "query", "schema": {"type": "integer"}},
                           {"name": "after", "in": "query", "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}/edges": {"post": {
            "summary": "Link this note to dst (references, relates_to, follows, supersedes, "
                       "contradicts)",
            "parameters": [_NID],
            "requestBody": _body({"dst": {"type": "integer"}, "kind": {"enum": _EDGE_KINDS}},
                                 ["dst", "kind"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}/graph": {"get": {
            "summary": "The notes within depth (1-10) edges, and the edges",
            "parameters": [_NID, {"name": "depth", "in": "query", "schema": {"type": "integer"}},
                           {"name": "kinds", **_Q}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/learned": {"get": {
            "summary": "What outcomes taught: rerank offsets, the k most salient items "
                       "(admin profile: --tools admin; 403 admin_only otherwise)",
            "parameters": [{"name": "k", "in": "query", "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}},
            "delete": {
            "summary": "Forget what outcomes taught (salience and offsets, every user's; "
                       "journaled with the reason); says what was forgotten (admin profile)",
            "parameters": [{"name": "reason", **_Q}],
            "responses": {"200": _OK, **_ERRS}}},
        "/healthz": {"get": {"summary": "Liveness (no token needed)", "security": [],
                             "responses": {"200": _OK}}},
    },
}
# fmt: on
