"""What the MCP server tells a model: its instructions and, for each tool, when to call it
and what its arguments mean (``build_mcp_server`` registers each tool with its text)."""

from engine.serve._once import MAX_KEY_CHARS

__all__ = [
    "BUILD_CONTEXT",
    "BUNDLE",
    "FEEDBACK",
    "INDEX",
    "INSTRUCTIONS",
    "LEARNED",
    "LEARNED_RESET",
    "MEMORY_ARCHIVE",
    "MEMORY_DELETE",
    "MEMORY_GET",
    "MEMORY_GRAPH",
    "MEMORY_RELATE",
    "MEMORY_SAVE",
    "MEMORY_SEARCH",
    "MEMORY_STATS",
    "MEMORY_TIMELINE",
    "ONCE",
    "REPLAY",
    "RESOLVE",
    "SEARCH",
    "SESSION_ADD",
    "SESSION_CHECKPOINT",
    "SESSION_COMPACT",
    "SESSION_DECIDE",
    "SESSION_END",
    "SESSION_LANE",
    "SESSION_SHOW",
    "STATUS",
]

INSTRUCTIONS = """\
cortex retrieves evidence from this repository under a hard token budget, with provenance.
Loop per step: build_context (goal, what this step needs, fresh tool output) -> read the
numbered evidence and cite what you use as [n] -> feedback (replay_key, the numbers you
cited). Use resolve to read a pointer the pack left out or to re-check a citation, search
for quick lookups, index after you edit files, replay to audit an earlier step. Keep a
session (session_add each step, state.session in build_context) and the prompt holds your
history too, compacted without losing errors, decisions or the steps behind them."""

BUILD_CONTEXT = """\
Get the evidence for your next step. Call at the start of each step of a coding task, and
again when the step changes or a tool shows a new error. Pass the task's goal (pinned
verbatim), the query (what this step needs), fresh tool output as tool_signals
(tracebacks, failing tests, compiler errors: they point retrieval at the right files),
optionally state (recent_turns [{role, text}], constraints, subgoals: pinned or shown
verbatim; session: a session id whose history lane the prompt then holds) and
budget_tokens (default 8000); goal and query each default to the other.
Returns a prompt with numbered evidence [1]..[n] that never exceeds the budget. Rely on it
and cite evidence as [n] wherever you use it; cite nothing else. If the advisory says
evidence is missing, call again with a sharper query, or resolve one of the pointers
listed as not shown. Then call feedback with the replay_key and the numbers you cited."""

FEEDBACK = """\
Report which evidence you used. Call once after acting on a build_context result: its
replay_key, the [n] numbers you cited (3 or "[3]"), optionally tool_results (what you ran:
a short string, or {name, ok, summary}) and how the step ended: outcome "success" or
"failure" (with a reason: "factual_error" or "wrong_assumption" when the cited evidence was
wrong, anything else when it was not); an outcome teaches this workspace's ranking. Numbers
that were not in that context are dropped and counted; cited evidence whose file changed
since is flagged stale: resolve it or build_context again before relying on it."""

BUNDLE = """\
Get your bearings at the start of a task, before the first build_context: the repository's
rules (AGENTS.md, CLAUDE.md, ...), pinned constraints and goals from saved notes, how the
most similar earlier tasks here ended and what they cited, and the code most relevant to
the goal. Pass the goal, optionally objects (paths or symbols you expect to touch), state
(build_context's: its constraints and subgoals are pinned first) and a budget (tokens,
default 3000, at most 4000). What did not fit is listed by uri (resolve it)."""

SEARCH = """\
Quick lookup of code and docs, without building a context: "where is X defined?", "which
files handle Y?". Ranked as build_context ranks its evidence; files=true ranks files, each
with its best sections. goal and tool_signals (optional) steer the ranking as they steer
build_context's; mode hybrid (default), bm25 (no dense channel) or dense (the dense
retriever alone); k results (1..100). Hits are not numbered evidence: do not cite them as
[n]; call build_context when you need citable evidence for a step."""

RESOLVE = """\
Read the exact lines behind a uri: a citation's or a left-out pointer's source (path#L10-L20,
path#L10 or a whole path, relative to the workspace). Pass proof {path, sha256} from a
citation (the Hash line a snippet shows is enough) to check that the file still says what
was cited. Text comes back only for an
indexed file inside the workspace whose lines exist and, with a proof, whose sha256 still
matches; otherwise only metadata with the reason (stale: call build_context again).
memory:N (a saved note) and session:ID#N (a step of a session, what [#N] points at) give
that record's text in full, no proof needed."""

REPLAY = """\
The exact prompt recorded under a replay_key, byte for byte: to audit an earlier step or
re-read its evidence with the same [n] numbers."""

STATUS = """\
What is indexed (commit, files, chunks, embedding model), how many files changed since, and
the background refresh: running, and while it runs its progress (stage, done of total, eta_s:
the stage's seconds left). Call when answers look stale; if files changed, call index."""

ONCE = (
    f"1 to {MAX_KEY_CHARS} printable ASCII characters naming this write (a UUID): a retry "
    "with the same key, after a timeout, gets the first call's answer instead of a second "
    "step"
)

SESSION_ADD = """\
Journal one step of your session (pick any id and keep it for the task): role user (a
message), assistant (your turn), tool (a tool's output, with tool, exit_status or
is_error), changes or request. Pass the same id as state.session to build_context: its
prompt then holds the session's history, newest steps whole, older tool outputs masked to
what matters (errors, tests, paths), the oldest as a digest; each [#N] resolves in full
with resolve("session:ID#N")."""

SESSION_DECIDE = """\
Record a decision with its rationale and the evidence it rests on (citation numbers or
session refs), so later steps keep the why even after compaction."""

SESSION_SHOW = """\
A session's steps (role, tool, size), or one step in full with step=N: what a [#N] in the
history lane stands for, byte for byte as it was journaled."""

SESSION_LANE = """\
The history lane build_context would give the session's next turn at budget_tokens (its
room: 40% of the budget at most, less the goal), as text with the steps it compacted (each
resolves with resolve("session:ID#N")); goal and query (default: the goal) rank the older
lines it recalls. To see what your history costs before asking for a context. Journals
nothing."""

SESSION_COMPACT = """\
Compact the session up to step (default: the last) into budget_tokens: the goal and the
load_bearing steps stay whole, the rest become stubs of at most 50 tokens, and a
checkpoint is journaled. in_context: the steps your context holds now (default: all; the
goal stays pinned either way). Refuses (an error) rather than truncate when even the stubs do
not fit."""

SESSION_CHECKPOINT = """\
Journal a checkpoint of the session's working set at step, or with load=true read the
latest checkpoint at step (no step: the latest of all) back as written (to resume without
recomputing)."""

SESSION_END = """\
End the session: its summary (goal, decisions and why, failures and their fixes, files
changed; extracted from the steps, not generated) is saved as a memory note that later
sessions find with memory_search. Ending it again updates the same note."""

MEMORY_SAVE = """\
Save what you learned so a later session finds it: a decision and why, a bug's cause, a
pattern, a configuration fact, a constraint. title (one line) and type (decision, bugfix,
pattern, discovery, config, identity, constraint, goal, note); what / why / where /
learned as needed. Name code as `path:line`, a path or a `symbol`: links to the indexed
lines are kept and re-checked whenever the note is read (the first 32; the answer's
links_left_out and entities_left_out count what the caps left out). topic_key (e.g. "auth/refresh")
updates one note in place instead of adding another; scope personal keeps it to you.
Saving the same content again adds nothing."""

MEMORY_SEARCH = """\
Find saved notes: titles and <= 300-character previews, best first, each with any code link
that changed since (stale) and any note it contradicts. Call get for a note's full text and
timeline for what was saved around it. Superseded notes are left out unless
include_superseded."""

MEMORY_GET = """\
One saved note in full (id from memory_search or a memory:ID citation): its fields, its
code links re-checked now (stale ones named: check the code before relying on them), the
notes that supersede or contradict it, and its importance with the parts it comes from."""

MEMORY_TIMELINE = """\
The notes saved just before and after one (before / after: how many), oldest first."""

MEMORY_RELATE = """\
Link two notes: src -> dst as references, relates_to, follows, supersedes (dst is out of
date and leaves search) or contradicts (both are shown with the other side)."""

MEMORY_GRAPH = """\
The notes within depth (1-10) edges of one, either direction, and those edges (kinds:
only these edge kinds)."""

MEMORY_DELETE = """\
Delete a note: it is never returned again (hard=true also removes its text and edges from
the store's file)."""

MEMORY_STATS = """\
Counts of the notes you can see: live, deleted, superseded, edges, by type and scope."""

MEMORY_ARCHIVE = """\
Archive a note (out of search, timeline and prompts; get still finds it), or with
archived=false bring it back."""

LEARNED = """\
What this workspace learned from the outcomes given with feedback: the rerank offsets per
feature, the most salient files, folders, symbols and notes, and the state's digest."""

LEARNED_RESET = """\
Forget what outcomes taught this workspace (every user's): salience and rerank offsets
back to none, journaled with the reason; earlier turns still replay. Says what was forgotten."""

INDEX = """\
Refresh the index after you add, edit or delete files (build_context already shows your
uncommitted diff, but changed code is searchable only after a refresh). Runs in the
background while answers keep coming from the previous index, and answers at once: status
follows it (refresh.running, refresh.progress). wait=true blocks until done (a first index
of a large tree takes minutes; past 10 minutes it answers an error and the build goes on)."""
