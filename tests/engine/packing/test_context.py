"""build_context on a real indexed repository: budget, determinism, lanes, MMR, advisory."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import (
    Config,
    ConfigError,
    Lane,
    SessionState,
    SignalKind,
    TiktokenCounter,
    ToolSignal,
    Turn,
    UnknownReplayKeyError,
    Workspace,
)
from tests.engine.test_workspace import GIT_ENV, make_repo

COUNTER = TiktokenCounter()
CONFIG = Config(dense_model="hash")


def _add_module(root: Path, name: str, body: str) -> None:
    (root / name).write_text(body)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """An indexed repository with a near-duplicate pair and a parser module."""
    root = make_repo(tmp_path_factory.mktemp("ctx") / "repo", files=30)
    tokenizer = (
        "def tokenize_header(raw):\n"
        '    """Split a raw header into (name, value) pairs."""\n'
        "    pairs = []\n"
        "    for line in raw.splitlines():\n"
        "        name, _, value = line.partition(':')\n"
        "        pairs.append((name.strip(), value.strip()))\n"
        "    return pairs\n"
    )
    _add_module(root, "headers.py", tokenizer)
    _add_module(root, "headers_copy.py", tokenizer.replace("tokenize_header", "tokenize_header2"))
    _add_module(
        root,
        "parser.py",
        "class HeaderParser:\n"
        "    def parse(self, raw):\n"
        "        return dict(tokenize_header(raw))\n\n"
        "    def parse_strict(self, raw):\n"
        "        if not raw:\n"
        "            raise ValueError('empty header')\n"
        "        return self.parse(raw)\n",
    )
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-qm", "more"], cwd=root, check=True, env=GIT_ENV)
    workspace = Workspace.open(root, CONFIG)
    workspace.index()
    return workspace


_WORDS = st.sampled_from(
    ["header", "parse", "tokenize_header", "HeaderParser", "compute_3", "offset", "value",
     "register hook", "empty", "ValueError", "nothing_here", "strict", "README"]
)  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_WORDS, min_size=1, max_size=6), st.integers(min_value=120, max_value=3000))
def test_render_never_exceeds_budget(ws: Workspace, words: list[str], budget: int) -> None:
    """For any query and budget, the rendered prompt fits the budget (tiktoken count)."""
    query = " ".join(words)
    state = SessionState(recent_turns=(Turn("user", "earlier: " + query * 3),))
    pack = ws.build_context("Fix: " + query, query, state=state, budget_tokens=budget)
    assert COUNTER.count(pack.render()) == pack.tokens_used <= budget
    # Nothing left out "for budget" would have fitted in the room the pack left unused: a
    # snippet costs its text and a header naming it, its place and hash, with the label a
    # widened fragment carries (the pointer does not say whether it is one), up to 8 tokens
    # more or less (its number's digits, tokens merging at the edges). Found by hypothesis:
    # compute_26 with its neighbours, 30 tokens, left out with 74 to spare, cost 75.
    left = budget - pack.tokens_used
    # The first snippet also opens the evidence section: its heading costs tokens too.
    heading = 0 if pack.citations else COUNTER.count("## Evidence\n")
    for p in pack.reachable:
        if p.reason == "budget":
            label = p.title.split(":", 1)[1]
            header = (f"\n\n[1] {label} (with neighbours)\nSource: {p.source_uri}\n"
                      f"Hash: sha256:{'0' * 12}\n```python\n\n```")  # fmt: skip
            # At the band's edge (estimate + 8 == left) the renderer's exact top-up decided.
            assert p.tokens + COUNTER.count(header) + heading + 8 >= left, p


def test_identical_calls_identical_output(ws: Workspace) -> None:
    """Two identical calls (even from a fresh Workspace) give the same bytes and replay key."""
    args = ("Make HeaderParser.parse_strict accept empty headers", "parse_strict empty header")
    a = ws.build_context(*args, budget_tokens=1500)
    b = ws.build_context(*args, budget_tokens=1500)
    with Workspace.open(ws.root, CONFIG) as fresh:
        c = fresh.build_context(*args, budget_tokens=1500)
    assert a.render() == b.render() == c.render()
    assert a.replay_key == b.replay_key == c.replay_key
    assert a.replay_key != ws.build_context(*args, budget_tokens=1501).replay_key


def test_finds_the_definition_and_cites_it(ws: Workspace) -> None:
    """The section defining the named method is packed and cited with a hash and lines."""
    pack = ws.build_context("Fix parse_strict", "HeaderParser.parse_strict rejects empty input")
    first = pack.citations[0]
    assert first.symbol in ("HeaderParser.parse_strict", "HeaderParser.parse")
    assert any(s.symbol == "HeaderParser.parse_strict" for s in pack.citations)
    # Named once (the symbol), placed once (path and lines), with its hash.
    assert (f"[{first.id}] {first.symbol}\nSource: parser.py#L{first.span.start_line}-"
            f"L{first.span.end_line}\nHash: sha256:{first.sha256[:12]}\n") in pack.render()


def test_lane_order_and_caps(ws: Workspace) -> None:
    """Lanes come in order (instruction, goal, recent, evidence) and recent turns respect
    their cap, newest kept."""
    turns = tuple(Turn("user", f"turn {i}: " + "words " * 120) for i in range(6))
    pack = ws.build_context(
        "Fix the header parser", "tokenize_header", state=SessionState(recent_turns=turns),
        budget_tokens=2000,
    )  # fmt: skip
    lanes = [b.lane for b in pack.prompt_blocks]
    assert lanes[:3] == [Lane.INSTRUCTION, Lane.GOAL, Lane.RECENT]
    assert lanes.index(Lane.EVIDENCE) == 3
    recent = next(b for b in pack.prompt_blocks if b.lane is Lane.RECENT)
    assert recent.tokens <= 0.2 * 2000
    assert "turn 5:" in recent.text and "turn 0:" not in recent.text


def test_near_duplicates_not_both_packed(ws: Workspace) -> None:
    """Of two near-identical sections, one is packed while other relevant evidence fits."""
    pack = ws.build_context(
        "tokenize header pairs", "tokenize_header split raw header", budget_tokens=900
    )
    symbols = [s.symbol for s in pack.citations]
    assert not {"tokenize_header", "tokenize_header2"} <= set(symbols)
    assert any(s.startswith("HeaderParser") for s in symbols)


def test_left_out_evidence_is_reachable(ws: Workspace) -> None:
    """A small budget leaves evidence out as pointers with reasons, and says so."""
    pack = ws.build_context("compute offsets", "compute offset value", budget_tokens=400)
    assert pack.reachable and all(p.reason for p in pack.reachable)
    assert pack.omitted_tokens > 0
    assert "## Not shown" in pack.render()


def test_advisory_names_missing_code(ws: Workspace) -> None:
    """Asking about code that is not there says so and names it."""
    pack = ws.build_context("Fix FrobnicatorWidget", "FrobnicatorWidget.spin_up crashes")
    assert any("FrobnicatorWidget" in note for note in pack.advisory)


def test_tool_signal_grounding(ws: Workspace) -> None:
    """A traceback frame pulls in the section holding that line."""
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/home/ci/project/parser.py", line 7, in parse_strict\n'
        "ValueError: empty header\n"
    )
    pack = ws.build_context("Fix the crash", "crash", tool_signals=[ToolSignal(trace)])
    hit = next(s for s in pack.citations if s.symbol == "HeaderParser.parse_strict")
    assert "signal" in hit.reason_tag


def test_pasted_traceback_is_a_place(ws: Workspace) -> None:
    """A traceback pasted into the request itself pulls in the section holding that line,
    as its own ``place`` list and feature (a tool's ``signal`` stays the tool's)."""
    query = (
        "parse_strict crashes on an empty header:\n"
        '  File "/home/me/project/parser.py", line 7, in parse_strict\n'
        "ValueError: empty header\n"
    )
    ranked: list[Any] = []
    pack = ws.build_context("Fix the crash", query, explain=ranked)
    hit = next(s for s in pack.citations if s.symbol == "HeaderParser.parse_strict")
    assert "place" in hit.reason_tag and "signal" not in hit.reason_tag
    top = next(r for r in ranked if r.chunk.symbol == "HeaderParser.parse_strict")
    assert {c.feature: c.value for c in top.contributions}["place"] == 1.0
    plain = ws.build_context("Fix the crash", "parse_strict crashes on an empty header")
    assert all("place" not in s.reason_tag for s in plain.citations)


def test_installed_copy_frames_point_here_and_third_party_ones_do_not(ws: Workspace) -> None:
    """An IPython frame in this repository's installed copy (``site-packages/<repo path>``)
    is a place; a frame in another installed package whose file name this repository also
    has (``otherpkg/parser.py``) is not cut down to that bare name."""
    ours = (
        "parse_strict crashes on an empty header:\n"
        "File ~/venv/lib/python3.11/site-packages/parser.py:7, in HeaderParser.parse_strict(self)\n"
    )
    pack = ws.build_context("Fix the crash", ours)
    hit = next(s for s in pack.citations if s.symbol == "HeaderParser.parse_strict")
    assert "place" in hit.reason_tag
    theirs = (
        "parse_strict crashes on an empty header:\n"
        "File ~/venv/lib/python3.11/site-packages/otherpkg/parser.py:7, in other(self)\n"
    )
    pack = ws.build_context("Fix the crash", theirs)
    assert all("place" not in s.reason_tag for s in pack.citations)


def test_jvm_frames_match_by_their_package_path_only(tmp_path: Path) -> None:
    """A JVM frame of this repository's class is a tool signal on the line it names; a
    frame of a library class with the same file name (another package) is not."""
    root = make_repo(tmp_path / "repo", files=3)
    folder = root / "src" / "main" / "java" / "com" / "acme" / "util"
    folder.mkdir(parents=True)
    (folder / "Preconditions.java").write_text(
        "package com.acme.util;\n\npublic final class Preconditions {\n"
        "    public static void check(boolean ok) {\n"
        "        if (!ok) throw new IllegalStateException(\"bad state\");\n"
        "    }\n}\n"
    )
    with Workspace.open(root, CONFIG) as workspace:
        workspace.index()
        ours = "\tat com.acme.util.Preconditions.check(Preconditions.java:5)\n"
        pack = workspace.build_context("Fix the crash", "bad state",
                                       tool_signals=[ToolSignal(ours)])  # fmt: skip
        assert any("signal" in s.reason_tag and s.source_uri.startswith("src/main/java/com/acme")
                   for s in pack.citations)  # fmt: skip
        theirs = "\tat com.google.common.base.Preconditions.checkArgument(Preconditions.java:5)\n"
        pack = workspace.build_context("Fix the crash", "bad state",
                                       tool_signals=[ToolSignal(theirs)])  # fmt: skip
        assert all("signal" not in s.reason_tag for s in pack.citations)


def test_goal_larger_than_budget_is_an_error(ws: Workspace) -> None:
    """A goal that alone exceeds the budget fails loudly instead of being cut."""
    with pytest.raises(ConfigError, match="budget"):
        ws.build_context("word " * 500, "x", budget_tokens=100)


def test_feedback_drops_out_of_set_and_flags_stale(ws: Workspace, tmp_path: Path) -> None:
    """Out-of-set and malformed ids are dropped; an edited source makes a citation stale."""
    pack = ws.build_context("Fix parse_strict", "HeaderParser parse_strict", budget_tokens=1200)
    n = len(pack.citations)
    result = ws.feedback(pack.replay_key, [1, "[1]", n + 5, "[x]", "2"])
    assert result.valid == (1, 2) and result.dropped == (str(n + 5), "[x]")
    assert result.stale == ()
    target = next(s for s in pack.citations if s.source_uri.startswith("parser.py"))
    original = (ws.root / "parser.py").read_text()
    try:
        (ws.root / "parser.py").write_text(original.replace("raise ValueError", "raise KeyError"))
        again = ws.feedback(pack.replay_key, [target.id])
        assert again.stale == (target.id,)
    finally:
        (ws.root / "parser.py").write_text(original)
    with pytest.raises(UnknownReplayKeyError, match="unknown replay key"):
        ws.feedback("nope", [1])


def test_one_hop_expansion_pulls_in_a_callee(ws: Workspace) -> None:
    """With expansion on, the definition a top candidate calls becomes a candidate."""
    from dataclasses import replace

    from engine import ContextSettings, RecallSettings

    settings = ContextSettings(recall=replace(RecallSettings(), expand_from=5))
    ranked: list = []  # type: ignore[type-arg]
    ws.build_context("strict parsing", "parse_strict", explain=ranked, settings=settings,
                     record=False)  # fmt: skip
    assert any("expand" in s.reason for s in ranked if s.chunk.symbol == "tokenize_header")


def test_goal_is_searched_on_its_own(ws: Workspace) -> None:
    """A goal that differs from the request gets its own lists; one that repeats it does not."""
    ranked: list = []  # type: ignore[type-arg]
    ws.build_context("split a raw header into name value pairs", "parse_strict",
                     explain=ranked, record=False)  # fmt: skip
    tokenizer = [s for s in ranked if s.chunk.symbol == "tokenize_header"]
    assert tokenizer and "goal_bm25" in tokenizer[0].reason
    strict = [s for s in ranked if s.chunk.symbol.endswith("parse_strict")]
    assert strict and "bm25" in strict[0].reason.split("+")  # the request's own lists remain
    same: list = []  # type: ignore[type-arg]
    ws.build_context("parse_strict", "parse_strict", explain=same, record=False)
    assert same and not any("goal_" in s.reason for s in same)


def test_recall_reads_only_what_it_keeps(ws: Workspace) -> None:
    """Keeping the best k gives the head of the full fused list; an id whose chunk is
    missing is skipped and the next one takes its place."""
    from engine.core import RecallSettings
    from engine.retrieval import fuse_lists, recall

    view, _ = ws.view()
    full = recall(view, "parse header value", ["HeaderParser"], [], None, None, RecallSettings())
    head = recall(view, "parse header value", ["HeaderParser"], [], None, None, RecallSettings(),
                  keep=4)  # fmt: skip
    assert len(full) > 4
    assert [c.chunk.id for c in head] == [c.chunk.id for c in full[:4]]
    assert [c.fused for c in head] == [c.fused for c in full[:4]]
    lists = {"bm25": [("no-such-chunk", 9.0)] + [(c.chunk.id, 1.0) for c in full[:3]]}
    fused = fuse_lists(view, lists, RecallSettings(), keep=3)
    assert [c.chunk.id for c in fused] == [c.chunk.id for c in full[:3]]
    assert [c.ranks["bm25"] for c in fused] == [2, 3, 4]  # ranks keep the missing one's place


def test_a_long_report_reads_its_lists_deeper(ws: Workspace) -> None:
    """A request over MAX_INTENT_WORDS words reads its BM25 lists report_depth times as
    deep; a short question reads them as set."""
    from engine.core import RecallSettings
    from engine.retrieval import MAX_INTENT_WORDS, recall

    view, _ = ws.view()
    settings = RecallSettings(bm25_sections=1, pages=1, report_depth=3)
    question = "parse header value"
    report = question + " and more" * MAX_INTENT_WORDS

    def bm25_hits(query: str, s: RecallSettings) -> int:
        return sum("bm25" in c.ranks for c in recall(view, query, [], [], None, None, s))

    assert bm25_hits(question, settings) == 1
    assert bm25_hits(report, settings) == 3
    assert bm25_hits(report, replace(settings, report_depth=1)) == 1
    with pytest.raises(ConfigError, match="report_depth"):
        RecallSettings(report_depth=0)


def test_feedback_without_a_ledger_uses_recent_turns(tmp_path: Path) -> None:
    """With the ledger off, feedback checks citations against this process's recent turns."""
    root = make_repo(tmp_path / "repo")
    with Workspace.open(root, Config(dense_model="hash", ledger=False,
                                     state_dir=str(tmp_path / "state"))) as local:  # fmt: skip
        local.index()
        pack = local.build_context("Fix compute", "compute offset", budget_tokens=1500)
        assert pack.citations
        result = local.feedback(pack.replay_key, [1, len(pack.citations) + 3])
        assert result.valid == (1,) and result.dropped == (str(len(pack.citations) + 3),)
        with pytest.raises(UnknownReplayKeyError, match="not built in this process"):
            local.feedback("0" * 32, [1])


def test_advisory_says_what_is_true_of_a_name_used_and_of_a_tiny_budget(
    tmp_path: Path,
) -> None:
    """A name no section defines but one uses is not "not found", though sections matching
    its parts outrank that one; a budget no evidence fits says so, not that selection
    stopped at the relevance floor."""
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(6):
        (root / f"policy{i}.py").write_text(
            f"class RetryPolicy{i}:\n    '''Retry retry retry with backoff backoff.'''\n"
            f"    retry = 3\n    backoff = 2.0\n\n\nclass BackoffOptions{i}:\n"
            "    '''Backoff backoff options for retry.'''\n    backoff = 1.5\n"
        )  # fmt: skip
    (root / "dispatch.py").write_text(
        "def send(job):\n    delay = settings.retry_backoff * job.attempts\n    return delay\n"
    )
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True, env=GIT_ENV)
    with Workspace.open(root, Config(dense_model="hash", ledger=False)) as ws:
        ws.index()
        pack = ws.build_context("retry_backoff handler", budget_tokens=3000)
        assert not any("not found in the index" in note for note in pack.advisory)
        tiny = ws.build_context("RetryPolicy0 retry backoff", budget_tokens=90)
        assert not tiny.citations and tiny.reachable
        assert any("no evidence fits this budget" in note for note in tiny.advisory)
        assert not any("relevance floor" in note for note in tiny.advisory)


def test_a_note_is_cited_by_its_uri_and_only_ascii_digits_are_numbers(ws: Workspace) -> None:
    """`"memory:N"`, the Source a note's item shows, was dropped; `"٣"` counted as [3]."""
    saved = ws.memory.save("parse_strict raises on a bad header", "bugfix",
                           what="HeaderParser parse_strict raises ValueError")  # fmt: skip
    pack = ws.build_context("Fix parse_strict", "HeaderParser parse_strict", budget_tokens=1200)
    note = next(s for s in pack.citations if s.source_uri == f"memory:{saved.id}")
    result = ws.feedback(pack.replay_key, [f"memory:{saved.id}", "٣", "memory:999"])
    assert result.valid == (note.id,) and result.dropped == ("٣", "memory:999")


def test_a_tool_signal_kind_given_as_a_string_packs_as_the_enum_does(ws: Workspace) -> None:
    """``ToolSignal(text, kind="traceback")``, as most callers write it, packs exactly as
    ``SignalKind.TRACEBACK`` does (it crashed deep in packing)."""
    trace = 'File "/home/ci/project/parser.py", line 7, in parse_strict\nValueError: empty'
    as_text = ws.build_context("Fix the crash", tool_signals=[ToolSignal(trace, "traceback")],
                               record=False)  # fmt: skip
    as_enum = ws.build_context("Fix the crash", record=False,
                               tool_signals=[ToolSignal(trace, SignalKind.TRACEBACK)])  # fmt: skip
    assert as_text.render() == as_enum.render() and as_text.replay_key == as_enum.replay_key


def test_a_method_asked_for_by_its_class_and_name_is_not_called_missing(tmp_path: Path) -> None:
    """A section defines its bare name (``get_records``): an agent asking for
    ``LogCaptureFixture.get_records`` was told it is "not found in the index" while its
    definition sat in the packed evidence (a real pytest session, stop 46's review)."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "capture.py").write_text(
        "class LogCaptureFixture:\n    '''Access to captured log records.'''\n\n"
        "    def get_records(self, when):\n        '''Records of one phase.'''\n"
        "        return self._item.stash[when]\n"
    )
    (root / "other.py").write_text("def unrelated():\n    return 1\n")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True, env=GIT_ENV)
    with Workspace.open(root, Config(dense_model="hash", ledger=False)) as ws:
        ws.index()
        pack = ws.build_context("`LogCaptureFixture.get_records` returns stale records",
                                budget_tokens=3000)  # fmt: skip
        assert not any("not found in the index" in note for note in pack.advisory)
        assert not any("weak evidence" in note for note in pack.advisory)
        missing = ws.build_context("`LogCaptureFixture.get_rekords` is wrong", budget_tokens=3000)
        assert any("not found in the index: LogCaptureFixture.get_rekords" in note
                   for note in missing.advisory)  # fmt: skip
