"""``cortex mcp``: the planner contract as MCP tools over stdio (see ``Service``).

The MCP SDK is imported inside ``build_mcp_server``, so importing this module loads none of it.
"""

# No ``from __future__ import annotations`` here: the SDK reads each tool function's
# annotations when the tool is registered, and some of them are names local to the builder.
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from engine.core import DEFAULT_BUNDLE_BUDGET, Config, ConfigError, CortexError
from engine.serve._encode import JSON, files_json, hits_json, notes_json, to_json
from engine.serve._mcp_docs import (
    BUILD_CONTEXT,
    BUNDLE,
    FEEDBACK,
    INDEX,
    INSTRUCTIONS,
    LEARNED,
    LEARNED_RESET,
    MEMORY_ARCHIVE,
    MEMORY_DELETE,
    MEMORY_GET,
    MEMORY_GRAPH,
    MEMORY_RELATE,
    MEMORY_SAVE,
    MEMORY_SEARCH,
    MEMORY_STATS,
    MEMORY_TIMELINE,
    ONCE,
    REPLAY,
    RESOLVE,
    SEARCH,
    SESSION_ADD,
    SESSION_CHECKPOINT,
    SESSION_COMPACT,
    SESSION_DECIDE,
    SESSION_END,
    SESSION_LANE,
    SESSION_SHOW,
    STATUS,
)
from engine.serve._once import MAX_KEY_CHARS, once_key
from engine.serve._progress import StageProgress
from engine.serve._requests import (
    evidence_of,
    proof_of,
    refusal,
    state_of,
    steps_of,
    tool_results_of,
)
from engine.serve._service import REQUEST_TIMEOUT_S, WATCH_INTERVAL_S, Service
from ledger import PURGED_MARK

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["ADMIN_TOOLS", "AGENT_MEMORY_TOOLS", "PROFILES", "build_mcp_server", "not_offered",
           "run_stdio", "tool_names"]  # fmt: skip

_T = TypeVar("_T")
NoteKind = Literal["decision", "bugfix", "pattern", "discovery", "config", "identity",
                   "constraint", "goal", "note"]  # fmt: skip
EdgeName = Literal["references", "relates_to", "follows", "supersedes", "contradicts"]
ModeName = Literal["bm25", "dense", "hybrid"]
RoleName = Literal["user", "assistant", "tool", "changes", "request"]
Scopes = Literal["project", "personal"]


def _choices(kind: object) -> dict[str, Any]:
    """The JSON schema of a string that is one of ``kind``'s (a ``Literal``'s) values."""
    return {"type": "string", "enum": list(get_args(kind))}


# Memory tools by profile: an agent saves, finds and links notes; deleting, archiving and
# counting are an administrator's (a model's tool call should not erase what it learned).
AGENT_MEMORY_TOOLS = ("memory_save", "memory_search", "memory_get", "memory_timeline",
                      "memory_relate", "memory_graph")  # fmt: skip
ADMIN_TOOLS = ("memory_delete", "memory_stats", "memory_archive", "learned", "learned_reset")
_BASE_TOOLS = ("build_context", "feedback", "bundle", "search", "resolve", "replay", "status",
               "index", "session_add", "session_decide", "session_show", "session_lane",
               "session_compact", "session_checkpoint", "session_end")  # fmt: skip
PROFILES = {
    "agent": (*_BASE_TOOLS, *AGENT_MEMORY_TOOLS),
    "admin": (*_BASE_TOOLS, *AGENT_MEMORY_TOOLS, *ADMIN_TOOLS),
}


def tool_names(tools: str) -> tuple[str, ...]:
    """The tools a ``--tools`` value names: a profile (agent, admin) or tool names,
    comma-separated; ``ConfigError`` for an unknown one."""
    known = PROFILES["admin"]
    names: list[str] = []
    for part in (p.strip() for p in tools.split(",")):
        if part in PROFILES:
            names += PROFILES[part]
        elif part in known:
            names.append(part)
        else:
            raise ConfigError(f"unknown tool or profile {part!r}; use agent, admin or tool "
                              f"names: {', '.join(known)}")  # fmt: skip
    return tuple(dict.fromkeys(names))


def not_offered(name: str, kind: str = "tool") -> str:
    """What a call of a known tool (or its HTTP route) this server does not offer is told:
    which ``--tools`` offers it (MCP said only "Unknown tool", HTTP a bare 404 or 405)."""
    if name in ADMIN_TOOLS:
        return (f"{name} is an admin {kind}, which this server does not offer: start it with "
                f"--tools admin (or name {name})")  # fmt: skip
    return (f"{name} is a {kind} this server does not offer: start it with --tools agent "
            f"(or name {name})")  # fmt: skip


def build_mcp_server(service: Service, tools: str = "agent") -> "MCPServer":
    """The MCP server: the tools of ``tools`` (a profile or tool names, see ``tool_names``)
    over ``service``, each describing when to call it."""
    enabled = tool_names(tools)
    from typing import Annotated, NotRequired

    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import ConfigDict, Field, Strict, ValidationError, WithJsonSchema, with_config
    from typing_extensions import TypedDict

    # Unknown keys inside an object argument are refused too (pydantic would drop them).
    strict = with_config(ConfigDict(extra="forbid"))
    # Scalars as their JSON types, as HTTP and the library take them: pydantic's lax mode
    # would read "2000" as a budget, true as citation 1 and as an exit status, 1.0 as 1.
    # (Type names, local so that importing this module loads no pydantic.)
    Int = Annotated[int, Strict()]  # noqa: N806
    Bool = Annotated[bool, Strict()]  # noqa: N806
    Seconds = Annotated[float, Strict()]  # noqa: N806  (an int is a number of seconds too)
    Str = Annotated[str, Strict()]  # noqa: N806
    NoteId = Int | Str  # noqa: N806  (12, or a "memory:12" citation)
    # Choices: strings whose schema lists the choices but which the library checks (not
    # the validator), so a bad value is the library's message on every surface.
    SearchMode = Annotated[str, Strict(), WithJsonSchema(_choices(ModeName))]  # noqa: N806
    Role = Annotated[str, Strict(), WithJsonSchema(_choices(RoleName))]  # noqa: N806
    Kind = Annotated[str, Strict(), WithJsonSchema(_choices(NoteKind))]  # noqa: N806
    Edge = Annotated[str, Strict(), WithJsonSchema(_choices(EdgeName))]  # noqa: N806
    ScopeName = Annotated[str, Strict(), WithJsonSchema(_choices(Scopes))]  # noqa: N806

    @strict
    class ToolResultIn(TypedDict):
        name: str
        ok: Bool
        summary: NotRequired[str]  # as HTTP takes it: "" when absent

    @strict
    class ProofIn(TypedDict):
        path: str
        sha256: str

    @strict
    class TurnIn(TypedDict):
        role: str
        text: str

    @strict
    class StateIn(TypedDict, total=False):
        recent_turns: list[TurnIn]
        constraints: list[str]
        subgoals: list[str]
        session: str

    class StrictServer(MCPServer):
        """Refuses arguments a tool does not take, as HTTP refuses unknown fields (the SDK
        would drop them silently: a misspelt ``budget_token`` would mean the default)."""

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tools = {t.name: t for t in await self.list_tools()}
            if name not in tools and name in PROFILES["admin"]:  # known, left out by --tools
                raise ToolError(not_offered(name))
            if name in tools:
                known = set(tools[name].input_schema.get("properties", {}))
                if unknown := sorted(set(arguments) - known):
                    raise ToolError(f"unknown field(s): {', '.join(unknown)}; {name} takes "
                                    + ", ".join(sorted(known)))  # fmt: skip
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError:
                raise
            except ToolError as exc:  # the SDK's "Error executing tool X: ..." around ours
                cause = exc.__cause__
                if isinstance(cause, ValidationError):  # one line, as HTTP says it
                    raise ToolError(refusal(arguments, cause.errors())) from None
                if isinstance(cause, ToolError):  # a CortexError's message, as HTTP gives it
                    raise ToolError(str(cause)) from cause.__cause__
                raise

    server: MCPServer = StrictServer("cortex", instructions=INSTRUCTIONS, log_level="WARNING")
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    erases = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

    async def run(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await run_once(None, fn, *args, **kwargs)

    async def run_once(
        once: tuple[str, str | None, dict[str, Any]] | None,
        fn: Callable[..., _T],
        *args: Any,
        **kwargs: Any,
    ) -> _T:
        """``Service.call_once`` (``call`` without a key), its errors as tool errors;
        ``once`` = (scope, the caller's idempotency key, what the call asked), read here so
        that a bad key is a tool error too (it was an unexpected one, with a traceback)."""
        key = None
        try:
            key = None if once is None else once_key(*once)
            return await service.call_once(key, fn, *args, **kwargs)
        except CortexError as exc:
            raise ToolError(str(exc)) from exc
        except TimeoutError as exc:
            retry = ": retry with the same idempotency_key to get its answer" if key else ""
            raise ToolError(f"timed out after {REQUEST_TIMEOUT_S:.0f} s; the call goes on and "
                            f"a write may still land{retry}") from exc  # fmt: skip

    # The key's length in the schema, as OpenAPI gives the header's; checked by ``check_key``
    # (not the validator), so a bad key gets HTTP's message.
    key_len: dict[str, Any] = {"minLength": 1, "maxLength": MAX_KEY_CHARS}

    def result(body: dict[str, JSON], *texts: str) -> CallToolResult:
        blocks = [TextContent(text=t) for t in texts or (json.dumps(body, indent=2),)]
        return CallToolResult(content=list(blocks), structured_content=body)

    @server.tool(description=BUILD_CONTEXT, annotations=writes)
    async def build_context(
        goal: Annotated[str, Field(description="the task's goal, pinned verbatim")] = "",
        query: Annotated[str, Field(description="what this step needs (default: goal)")] = "",
        tool_signals: Annotated[
            list[str], Field(description="fresh tool output: tracebacks, failing tests")
        ] = [],  # noqa: B006  (pydantic copies defaults; the schema shows [])
        budget_tokens: Annotated[Int | None, Field(description="token budget")] = None,
        state: Annotated[
            StateIn | None, Field(description="recent turns, constraints and sub-goals")
        ] = None,
    ) -> CallToolResult:
        pack = await run(lambda: service.context(goal, query, tool_signals, budget_tokens,
                                                 state_of(state)))  # fmt: skip
        body = to_json(pack)
        left = f"; {len(pack.reachable)} pointers not shown (~{pack.omitted_tokens} tokens)"
        note = "".join(f"\nadvisory: {a}" for a in pack.advisory)
        footer = (
            f"replay_key: {pack.replay_key}\ntokens: {pack.tokens_used}/{pack.budget_tokens}, "
            f"{len(pack.citations)} citations{left}{note}\nAfter acting, call feedback with "
            f"replay_key {pack.replay_key} and the [n] numbers you cited."
        )
        return result(body, pack.render(), footer)

    @server.tool(description=FEEDBACK, annotations=writes)
    async def feedback(
        replay_key: str,
        model_citations: Annotated[
            list[Int | Str], Field(description="the [n] you cited (none: the model cited nothing)")
        ] = [],  # noqa: B006
        tool_results: list[str | ToolResultIn] = [],  # noqa: B006
        outcome: str | None = None,
        reason: str | None = None,
    ) -> CallToolResult:
        results = tool_results_of  # decoded on the pool, so a bad one is a tool error
        fb = await run(lambda: service.feedback(
            replay_key, model_citations, results(tool_results), outcome, reason))  # fmt: skip
        body = to_json(fb)
        text = f"recorded: valid {list(fb.valid)}, dropped {list(fb.dropped)}, " \
            f"stale {list(fb.stale)}"  # fmt: skip
        return result(body, text)

    @server.tool(description=BUNDLE, annotations=reads)
    async def bundle(
        goal: str,
        objects: Annotated[list[str], Field(description="paths or symbols")] = [],  # noqa: B006
        budget: Int = DEFAULT_BUNDLE_BUDGET,
        state: Annotated[
            StateIn | None, Field(description="build_context's state: constraints and subgoals")
        ] = None,
    ) -> CallToolResult:
        found = await run(lambda: service.bundle(goal, objects, budget, state_of(state)))
        left = f"\n{len(found.overflow)} left out: " + ", ".join(found.overflow[:8]) \
            if found.overflow else ""  # fmt: skip
        return result(to_json(found), found.render(),
                      f"tokens: {found.tokens_used}/{found.budget}{left}")  # fmt: skip

    @server.tool(description=SEARCH, annotations=reads)
    async def search(
        query: str,
        mode: SearchMode = "hybrid",
        k: Int = 10,
        files: Annotated[Bool, Field(description="rank files, with their best sections")] = False,
        goal: Annotated[str, Field(description="the task's goal, steers the ranking")] = "",
        tool_signals: Annotated[
            list[str], Field(description="fresh tool output, steers the ranking")
        ] = [],  # noqa: B006
    ) -> CallToolResult:
        if files:
            ranked = await run(service.search_files, query, mode, k, goal, tool_signals)
            text = "\n".join(f"{n}. {f.path}  ({f.score:.3f}): "
                             + ", ".join(h.chunk.title for h in f.sections)
                             for n, f in enumerate(ranked, start=1)) or "no results"  # fmt: skip
            return result(files_json(ranked), text)
        hits = await run(service.search, query, mode, k, goal, tool_signals)
        text = "\n\n".join(f"{n}. {h.chunk.title}  ({h.chunk.source_uri})\n{h.chunk.text}"
                           for n, h in enumerate(hits, start=1)) or "no results"  # fmt: skip
        return result(hits_json(hits), text)

    @server.tool(description=RESOLVE, annotations=reads)
    async def resolve(uri: str, proof: ProofIn | None = None) -> CallToolResult:
        body = await run(lambda: service.resolve(uri, proof_of(proof)))
        text = body["text"]
        return result(body, text if isinstance(text, str) else f"no text: {body['reason']}")

    @server.tool(description=REPLAY, annotations=reads)
    async def replay(replay_key: str) -> CallToolResult:
        rec = await run(service.replay, replay_key)
        # The text stays the first block, byte for byte; a purge is said beside it, as
        # structured content's purged says it (a model reads only the text).
        purged = ("purged: forget removed parts of this prompt from the ledger; they read "
                  f"{PURGED_MARK} above",) if rec.purged else ()  # fmt: skip
        return result(to_json(rec), rec.text, *purged)

    @server.tool(description=STATUS, annotations=reads)
    async def status() -> CallToolResult:
        return result(await run(service.status))

    @server.tool(description=SESSION_ADD, annotations=writes)
    async def session_add(
        session: Annotated[str, Field(description="the session id you chose")],
        role: Role,
        text: str,
        tool: Annotated[str | None, Field(description="the tool's name")] = None,
        is_error: Bool | None = None,
        exit_status: Int | None = None,
        idempotency_key: Annotated[
            str | None, Field(description=ONCE, json_schema_extra=key_len)
        ] = None,
    ) -> CallToolResult:
        asked = {"role": role, "text": text, "tool": tool, "is_error": is_error,
                 "exit_status": exit_status}  # fmt: skip
        step = await run_once((f"mcp session_add {session}", idempotency_key, asked),
                              service.session_add, session, role, text, tool, is_error,
                              exit_status)  # fmt: skip
        return result(to_json(step), f"session {session}: step {step.step} ({step.role.value})")

    @server.tool(description=SESSION_DECIDE, annotations=writes)
    async def session_decide(
        session: str,
        text: Annotated[str, Field(description="what was decided")],
        rationale: Annotated[str, Field(description="why")] = "",
        evidence: Annotated[
            list[Int | Str], Field(description="citation numbers or session:ID#N refs")
        ] = [],  # noqa: B006
        idempotency_key: Annotated[
            str | None, Field(description=ONCE, json_schema_extra=key_len)
        ] = None,
    ) -> CallToolResult:
        cited = evidence_of  # decoded on the pool, so a bad one is a tool error
        asked = {"text": text, "rationale": rationale, "evidence": evidence}
        step = await run_once((f"mcp session_decide {session}", idempotency_key, asked),
                              lambda: service.session_decide(session, text, rationale,
                                                             cited(evidence)))  # fmt: skip
        return result(to_json(step), f"session {session}: decision at step {step.step}")

    @server.tool(description=SESSION_SHOW, annotations=reads)
    async def session_show(session: str, step: Int | None = None) -> CallToolResult:
        body = await run(service.session_show, session, step)
        text = body.get("text")
        return result(body, *((text,) if isinstance(text, str) else ()))

    @server.tool(description=SESSION_LANE, annotations=reads)
    async def session_lane(
        session: str,
        budget_tokens: Annotated[Int, Field(description="the context's budget")],
        goal: Annotated[str, Field(description="the context's goal")] = "",
        query: Annotated[str, Field(description="ranks recalled lines (default: goal)")] = "",
    ) -> CallToolResult:
        lane = await run(service.session_lane, session, budget_tokens, goal, query)
        return result(to_json(lane), lane.text)

    @server.tool(description=SESSION_COMPACT, annotations=writes)
    async def session_compact(
        session: str,
        load_bearing: Annotated[list[Int], Field(description="kept whole")] = [],  # noqa: B006
        budget_tokens: Int = 4000,
        step: Int | None = None,
        in_context: Annotated[
            list[Int] | None, Field(description="the steps your context holds (default: all)")
        ] = None,
    ) -> CallToolResult:
        steps = steps_of
        held = None if in_context is None else steps(in_context, "in_context")
        done = await run(lambda: service.session_compact(session, steps(load_bearing),
                                                         budget_tokens, step, held))  # fmt: skip
        return result(to_json(done))

    @server.tool(description=SESSION_CHECKPOINT, annotations=writes)
    async def session_checkpoint(
        session: str,
        step: Annotated[Int | None, Field(description="required unless load")] = None,
        load: Bool = False,
        budget_tokens: Int = 4000,
    ) -> CallToolResult:
        done = await run(
            lambda: service.session_checkpoint(
                session, step, load=load, budget_tokens=budget_tokens
            )
        )
        return result(to_json(done))

    @server.tool(description=SESSION_END, annotations=writes)
    async def session_end(
        session: str,
        scope: Annotated[str, Field(description="personal (default) or project")] = "personal",
    ) -> CallToolResult:
        return result(to_json(await run(service.session_end, session, scope)))

    @server.tool(description=INDEX, annotations=writes)
    async def index(
        ctx: Context,
        wait: Annotated[Bool, Field(description="block until the refresh is done")] = False,
    ) -> CallToolResult:
        async def told(shown: StageProgress) -> None:  # MCP progress: it only ever grows
            part = shown.done / shown.total if shown.total else 0.0
            await ctx.report_progress(shown.number - 1 + min(part, 1.0), None, shown.line())

        try:  # not `run`: a wait outlasts its time limit (a first build takes minutes)
            return result(await service.index(wait=wait, told=told))
        except (CortexError, TimeoutError) as exc:
            raise ToolError(str(exc)) from exc

    def listing(body: dict[str, JSON]) -> str:
        notes = body["notes"]
        assert isinstance(notes, list)
        lines = []
        for n in notes:
            assert isinstance(n, dict)
            flags = " STALE: " + ", ".join(map(str, n["stale"])) if n["stale"] else ""  # type: ignore[arg-type]
            lines.append(f"{n['uri']} [{n['type']}] {n['title']}{flags}\n  {n['preview']}")
        return "\n".join(lines) or "no notes"

    @server.tool(description=MEMORY_SAVE, annotations=writes)
    async def memory_save(
        title: str,
        type: Kind = "note",
        what: str = "",
        why: str = "",
        where: str = "",
        learned: str = "",
        topic_key: Annotated[str | None, Field(description="same key: update in place")] = None,
        scope: ScopeName = "project",
        created: Annotated[Seconds | None, Field(description="when it happened, seconds since "
                           "the epoch, for importing a dated history (default: now)")] = None,
    ) -> CallToolResult:
        saved = await run(service.memory_save, title, type, what, why, where, learned,
                          topic_key, scope, created)  # fmt: skip
        text = f"memory:{saved.id} {saved.action.value} (revision {saved.revision})"
        return result(to_json(saved), text)

    @server.tool(description=MEMORY_SEARCH, annotations=reads)
    async def memory_search(
        query: str,
        k: Int = 10,
        types: list[Kind] = [],  # noqa: B006
        include_superseded: Bool = False,
    ) -> CallToolResult:
        body = notes_json(await run(service.memory_search, query, k, types, include_superseded))
        return result(body, listing(body))

    @server.tool(description=MEMORY_GET, annotations=reads)
    async def memory_get(id: NoteId) -> CallToolResult:
        note = await run(service.memory_get, id)
        stale = "".join(f"\nSTALE: {u}" for u in note.stale)
        return result(to_json(note), f"memory:{note.id} [{note.type.value}] {note.title}\n"
                      f"{note.text}{stale}")  # fmt: skip

    @server.tool(description=MEMORY_TIMELINE, annotations=reads)
    async def memory_timeline(id: NoteId, before: Int = 5, after: Int = 5) -> CallToolResult:
        body = notes_json(await run(service.memory_timeline, id, before, after))
        return result(body, listing(body))

    @server.tool(description=MEMORY_RELATE, annotations=writes)
    async def memory_relate(src: NoteId, dst: NoteId, kind: Edge) -> CallToolResult:
        edge = await run(service.memory_relate, src, dst, kind)
        return result(to_json(edge), f"memory:{edge.src} {edge.kind.value} memory:{edge.dst}")

    @server.tool(description=MEMORY_GRAPH, annotations=reads)
    async def memory_graph(
        id: NoteId, depth: Int = 1, kinds: list[Edge] = []  # noqa: B006
    ) -> CallToolResult:
        return result(to_json(await run(service.memory_graph, id, depth, kinds)))

    @server.tool(description=MEMORY_DELETE, annotations=erases)
    async def memory_delete(id: NoteId, hard: Bool = False) -> CallToolResult:
        return result(await run(service.memory_forget, id, hard))

    @server.tool(description=MEMORY_STATS, annotations=reads)
    async def memory_stats() -> CallToolResult:
        return result(to_json(await run(service.memory_stats)))

    @server.tool(description=MEMORY_ARCHIVE, annotations=writes)
    async def memory_archive(id: NoteId, archived: Bool = True) -> CallToolResult:
        return result(to_json(await run(service.memory_archive, id, archived)))

    @server.tool(description=LEARNED, annotations=reads)
    async def learned(k: Int = 20) -> CallToolResult:
        return result(await run(service.learned, k))

    @server.tool(description=LEARNED_RESET, annotations=erases)
    async def learned_reset(reason: str = "") -> CallToolResult:
        return result(await run(service.learned_reset, reason))

    for name in PROFILES["admin"]:
        if name not in enabled:
            server.remove_tool(name)
    return server


def run_stdio(path: str | Path, config: Config, *, watch: float | None = None,
              tools: str = "agent") -> None:  # fmt: skip
    """Serve ``path`` over MCP stdio until the client closes the pipe (``watch``: seconds
    between checks for changed files, None for ``WATCH_INTERVAL_S``, 0 for never;
    ``tools``: a profile or tool names, see ``tool_names``)."""
    import anyio

    tool_names(tools)  # an unknown name fails before the workspace is opened
    service = Service.open(path, config, watch=WATCH_INTERVAL_S if watch is None else watch)
    try:
        anyio.run(build_mcp_server(service, tools).run_stdio_async)
    finally:
        service.close()
