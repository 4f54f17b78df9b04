"""The ``cortex`` CLI on real temporary git repositories."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from engine import MANIFEST_SCHEMA
from engine.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main
from indexers import CHUNKER_VERSION


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
    (root / "app.py").write_text("def handler(event):\n    return event\n")
    (root / "README.md").write_text("# App\n\nIntro.\n\n## Usage\n\nRun it.\n")
    (root / ".env").write_text("TOKEN=secret\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (root / ".gitignore").write_text("ignored.py\n")
    (root / "ignored.py").write_text("x = 1\n")
    return root


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_chunks_lists_files_chunks_and_skips(tmp_path: Path) -> None:
    """The listing shows each file's chunks and each skip with its reason."""
    code, text = _run("chunks", str(_repo(tmp_path)))
    assert code == EXIT_OK
    assert "app.py  [python" in text and "function  handler" in text
    assert "Usage" in text  # a README heading section
    assert "skip  .env  secret" in text and "skip  logo.png  binary" in text
    assert "ignored.py" not in text
    assert "skipped:   2 files" in text


def test_chunks_json_lines(tmp_path: Path) -> None:
    """--json prints one JSON object per chunk and skip, then a summary."""
    code, text = _run("chunks", str(_repo(tmp_path)), "--json", "--text")
    assert code == EXIT_OK
    rows = [json.loads(line) for line in text.splitlines()]
    chunks = [r for r in rows if r["type"] == "chunk"]
    handler = next(r for r in chunks if r["symbol"] == "handler")
    assert handler["source_uri"] == "app.py#L1-L2"
    assert handler["text"] == "def handler(event):\n    return event"
    assert {r["reason"] for r in rows if r["type"] == "skip"} == {"secret", "binary"}
    summary = rows[-1]
    assert summary["type"] == "summary" and summary["files"] == 3
    assert summary["chunks"] == len(chunks)


def test_a_file_its_chunker_fails_on_is_windows_and_named(tmp_path: Path) -> None:
    """A file whose chunker fails (definitions nested past Python's stack) is indexed in
    line windows, and `chunks` and `index` name it with why, as text and JSON."""
    root = _repo(tmp_path)
    depth = 1500
    (root / "deep.cpp").write_text("namespace n {\n" * depth + "int f();\n" + "}\n" * depth)
    code, text = _run("chunks", str(root))
    assert code == EXIT_OK
    assert "deep.cpp  [cpp" in text
    assert "cut into line windows, its chunker failed: Recursion" in text
    assert "windows:   1 files cut into line windows" in text and "  deep.cpp: Recursion" in text
    code, text = _run("chunks", str(root), "--json", "--summary")
    assert json.loads(text.splitlines()[-1])["fallbacks"]["deep.cpp"].startswith("Recursion")
    old = os.environ.get("CORTEX_DENSE_MODEL")
    os.environ["CORTEX_DENSE_MODEL"] = "hash"
    try:
        code, text = _run("index", str(root))
        assert code == EXIT_OK and "  deep.cpp: RecursionError" in text
        code, text = _run("search", "handler", "--path", str(root), "--mode", "bm25")
        assert code == EXIT_OK and "app.py:1-2  handler" in text  # the run went on
    finally:
        if old is None:
            os.environ.pop("CORTEX_DENSE_MODEL")
        else:
            os.environ["CORTEX_DENSE_MODEL"] = old


def test_chunks_summary_only(tmp_path: Path) -> None:
    """--summary prints totals without per-chunk rows."""
    code, text = _run("chunks", str(_repo(tmp_path)), "--summary")
    assert code == EXIT_OK
    assert "handler" not in text and "3 files" in text


def test_chunks_exclude_and_max_tokens(tmp_path: Path) -> None:
    """--exclude skips matching files with a reason; --max-tokens is validated."""
    root = _repo(tmp_path)
    code, text = _run("chunks", str(root), "--exclude", "*.md")
    assert code == EXIT_OK and "skip  README.md  excluded" in text
    code, _ = _run("chunks", str(root), "--max-tokens", "3")
    assert code == EXIT_USAGE


def test_missing_path_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist gives a message and exit code 1, not a traceback."""
    code, _ = _run("chunks", str(tmp_path / "nope"))
    assert code == EXIT_ERROR
    assert "no such file or directory" in capsys.readouterr().err


def test_console_script_runs(tmp_path: Path) -> None:
    """`python -m engine.cli` works as a process (what the console script calls)."""
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "chunks", str(_repo(tmp_path)), "--summary"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "chunks" in proc.stdout


def test_index_search_context_replay_ledger(tmp_path: Path) -> None:
    """The CLI round trip: index, search, context, replay (and --rebuild), ledger verify/log."""
    root = _repo(tmp_path)
    env = {"CORTEX_DENSE_MODEL": "hash"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        code, text = _run("index", str(root))
        assert code == EXIT_OK and "indexed" in text and "embeddings:" in text
        code, text = _run("search", "handler", "--path", str(root), "--mode", "bm25")
        assert code == EXIT_OK and "app.py:1-2  handler" in text
        code, text = _run("context", "what does handler return", "--path", str(root), "--json")
        body = json.loads(text)
        assert code == EXIT_OK and body["citations"][0]["title"] == "app.py:handler"
        code, text = _run("replay", body["replay_key"], "--path", str(root))
        assert code == EXIT_OK and text == body["render"]
        code, text = _run("replay", body["replay_key"], "--path", str(root), "--rebuild")
        assert code == EXIT_OK and text.startswith("no difference")
        code, text = _run("ledger", "verify", "--path", str(root))
        assert code == EXIT_OK and text.startswith("ok: 1 records")
        code, text = _run("ledger", "log", "--path", str(root))
        assert "turn" in text and body["replay_key"] in text
        code, head = _run("ledger", "head", "--path", str(root))
        assert code == EXIT_OK and head.startswith("1:") and len(head.strip()) == 66
        code, text = _run("ledger", "verify", "--path", str(root), "--anchor", head.strip())
        assert code == EXIT_OK and "anchor 1 matches" in text
        code, text = _run("ledger", "verify", "--path", str(root), "--anchor", "5:" + "0" * 64)
        assert code == EXIT_ERROR and "cut" in text
        code, text = _run("status", str(root))
        assert code == EXIT_OK and "up to date" in text
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An indexed repository with the hash embedder set in the environment."""
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    root = _repo(tmp_path)
    (root / "pkg").mkdir()
    (root / "pkg" / "util.py").write_text("def helper(x):\n    return x * 2\n")
    assert _run("index", str(root))[0] == EXIT_OK
    return root


def test_version_and_every_command_takes_path(capsys: pytest.CaptureFixture[str]) -> None:
    """``cortex --version`` names the release; every command accepts ``--path``."""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    shown = capsys.readouterr().out
    assert done.value.code == 0 and shown.startswith("cortex ")
    assert f"(chunker {CHUNKER_VERSION}, index layout {MANIFEST_SCHEMA})" in shown
    commands = ["chunks", "index", "search", "context", "feedback", "resolve", "replay",
                "ledger", "status", "gc", "mcp", "serve"]  # fmt: skip
    for command in commands:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--path PATH" in capsys.readouterr().out, command


def test_the_workspace_is_found_from_a_sub_folder(
    indexed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a sub-folder with no path, commands use the repository's index (as git
    finds its repository), not a new one in the sub-folder."""
    monkeypatch.chdir(indexed / "pkg")
    code, text = _run("search", "helper", "--mode", "bm25")
    assert code == EXIT_OK and "pkg/util.py:1-2  helper" in text
    code, text = _run("status", "--fast")
    assert code == EXIT_OK and str(indexed) in text
    assert not (indexed / "pkg" / ".cortex").exists()


def test_feedback_resolve_and_replay_commands(indexed: Path) -> None:
    """context --json, then feedback on its key, resolve with its citation's proof, and
    replay --json: the CLI speaks the same records as the servers."""
    code, text = _run("context", "what does handler return", "--path", str(indexed), "--json")
    pack = json.loads(text)
    cite = pack["citations"][0]
    code, text = _run("feedback", pack["replay_key"], "1", "[7]", "--outcome", "success",
                      "--path", str(indexed), "--json")  # fmt: skip
    expected = {"replay_key": pack["replay_key"], "valid": [1], "dropped": ["[7]"], "stale": [],
                "repeated": False}
    assert code == EXIT_OK and json.loads(text) == expected
    code, text = _run("resolve", cite["source_uri"], "--sha256", cite["sha256"],
                      "--path", str(indexed))  # fmt: skip
    assert code == EXIT_OK and text.startswith("def handler(event):")
    code, text = _run("resolve", cite["source_uri"], "--sha256", "0" * 64, "--path", str(indexed))
    assert code == EXIT_ERROR and text.startswith("no text")
    code, text = _run("resolve", cite["source_uri"], "--sha256", "0" * 64, "--path", str(indexed),
                      "--json")  # fmt: skip
    assert code == EXIT_ERROR and json.loads(text)["verified"] is False  # as in text mode
    code, text = _run("replay", pack["replay_key"], "--path", str(indexed), "--json")
    assert code == EXIT_OK and json.loads(text)["text"] == pack["render"]


def test_replay_refuses_a_tampered_ledger(
    indexed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A turn edited to name another turn's prompt, or a prompt swapped for a forged
    ``purged`` row, is refused by replay and ledger show (exit 1, one line that says the
    ledger was altered and to run verify), never printed."""
    keys = []
    for query in ("what does handler return", "helper doubles"):
        code, text = _run("context", query, "--path", str(indexed), "--json")
        keys.append(json.loads(text)["replay_key"])
    db = indexed / ".cortex" / "ledger.sqlite"
    with sqlite3.connect(db, isolation_level=None) as conn:
        first, second = (json.loads(conn.execute(
            "SELECT payload FROM records WHERE replay_key = ?", (k,)).fetchone()[0])
            for k in keys)  # fmt: skip
        first["render_sha256"] = second["render_sha256"]
        conn.execute("UPDATE records SET payload = ? WHERE replay_key = ?",
                     (json.dumps(first, sort_keys=True, separators=(",", ":")).encode(), keys[0]))
        forged = b"FORGED PROMPT"
        conn.execute("DELETE FROM blobs WHERE sha256 = ?", (second["render_sha256"],))
        conn.execute("INSERT INTO purged VALUES (?, 1, ?, ?)", (second["render_sha256"],
                     hashlib.sha256(forged).hexdigest(), zlib.compress(forged)))  # fmt: skip
    capsys.readouterr()
    for argv in (("replay", keys[0]), ("ledger", "show", keys[0]), ("replay", keys[1])):
        code, text = _run(*argv, "--path", str(indexed))
        err = capsys.readouterr().err
        assert code == EXIT_ERROR and not text and err.count("\n") == 1, argv
        assert "altered" in err and "cortex ledger verify" in err and "FORGED" not in err


def test_errors_are_one_line_with_the_right_exit_code(
    indexed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown replay key and a damaged ledger exit 1 with one line; a bad argument
    value exits 2."""
    capsys.readouterr()
    code, _ = _run("replay", "0" * 32, "--path", str(indexed))
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and err.count("\n") == 1 and "unknown replay key" in err
    (indexed / ".cortex" / "ledger.sqlite").write_bytes(b"not a database, just bytes" * 100)
    code, _ = _run("ledger", "verify", "--path", str(indexed))
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and err.count("\n") == 1 and "ledger" in err
    code, _ = _run("context", "handler", "--budget", "10", "--path", str(indexed))
    assert code == EXIT_USAGE and "budget" in capsys.readouterr().err


def test_reading_commands_create_no_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ledger verify|log|show|head and replay on a folder never indexed answer one line,
    exit 1, and leave the folder as it was (it can still be indexed)."""
    root = _repo(tmp_path)
    before = sorted(p.name for p in root.iterdir())
    for argv in (["ledger", "verify"], ["ledger", "log"], ["ledger", "head"],
                 ["ledger", "show", "0" * 32], ["replay", "0" * 32]):  # fmt: skip
        code, _ = _run(*argv, "--path", str(root))
        err = capsys.readouterr().err
        assert code == EXIT_ERROR and err.count("\n") == 1, (argv, err)
    assert sorted(p.name for p in root.iterdir()) == before


def test_state_is_its_users_alone(tmp_path: Path) -> None:
    """After index and context through the CLI, the state folder and every folder in it are
    0700 and every file 0600, whatever the umask."""
    root = _repo(tmp_path)
    env = {**os.environ, "CORTEX_DENSE_MODEL": "hash"}
    ask = ["context", "what does handler return", "--path", str(root)]
    for argv in (["index", str(root)], ask):
        subprocess.run([sys.executable, "-m", "engine.cli", *argv], env=env, check=True,
                       capture_output=True, preexec_fn=lambda: os.umask(0o022))  # fmt: skip
    state = root / ".cortex"
    modes = {p: p.stat().st_mode & 0o777 for p in [state, *state.rglob("*")]}
    assert all(m == (0o700 if p.is_dir() else 0o600) for p, m in modes.items()), modes


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["search", "\udcff\udcfe abc"], "not valid UTF-8"),
        (["search", ""], "needs a query"),
        (["context", "fix it", "--budget", "0"], "--budget must be a whole number within"),
        (["context", "fix it", "--budget", "999999999"], "--budget must be"),
        (["session", "compact", "--session", "s", "--budget", "10"], "--budget must be"),
        (["bundle", "fix it", "--budget", "9000"], "--budget must be between 64 and 4,000"),
        (["ledger", "verify", "--anchor", "nonsense"], "SEQ:HASH"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    """Bad input on the command line: one line on stderr naming it, exit 2, no traceback."""
    root = _repo(tmp_path)
    os.environ["CORTEX_DENSE_MODEL"] = "hash"
    try:
        _run("index", str(root))
        _run("context", "what does handler return", "--path", str(root))
        capsys.readouterr()
        code, _ = _run(*argv, "--path", str(root))
    finally:
        os.environ.pop("CORTEX_DENSE_MODEL", None)
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.count("\n") == 1 and says in err, err


def test_bad_values_are_the_librarys_one_line(
    indexed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad choice or number is one line with the message the library, MCP and HTTP
    give, naming the option (argparse printed its usage block, its own wording, and named
    a number "the value"); a malformed command line keeps argparse's usage."""
    at = ["--path", str(indexed)]
    code, text = _run("context", "what does handler return", *at, "--json")
    key = json.loads(text)["replay_key"]
    assert _run("session", "add", "--session", "s", "--role", "user", "fix it", *at)[0] == 0
    for title in ("one", "two"):
        assert _run("memory", "save", "--title", title, *at)[0] == 0
    capsys.readouterr()
    cases = [
        (["search", "fix it", "-k", "abc"], "-k must be a whole number (digits 0-9), got 'abc'"),
        (["context", "fix it", "--budget", "٣"], "--budget must be a whole number (digits 0-9)"),
        (["session", "checkpoint", "--session", "s", "x"], "step must be a whole number"),
        (["session", "checkpoint", "--session", "s"], "session checkpoint needs the STEP"),
        (["search", "fix it", "--mode", "bogus"], "unknown search mode 'bogus'; use hybrid"),
        (["feedback", key, "1", "--outcome", "bogus"], "unknown outcome 'bogus'; use success"),
        (["session", "add", "--session", "s", "--role", "bogus", "hi"], "unknown role 'bogus'"),
        (["session", "end", "--session", "s", "--scope", "bogus"], "unknown scope 'bogus'"),
        (["memory", "save", "--title", "t", "--type", "bogus"], "unknown note type 'bogus'"),
        (["memory", "save", "--title", "t", "--scope", "team"], "unknown scope 'team'"),
        (["memory", "search", "t", "--type", "bogus"], "unknown note type 'bogus'"),
        (["memory", "relate", "1", "bogus", "2"], "unknown edge kind 'bogus'"),
        (["memory", "graph", "1", "--kind", "bogus"], "unknown edge kind 'bogus'"),
    ]  # fmt: skip
    for argv, says in cases:
        try:
            code = main([*argv, *at], out=io.StringIO())
        except SystemExit as exc:  # argparse's exit, as the console script sees it
            code = exc.code
        err = capsys.readouterr().err
        assert code == EXIT_USAGE and err.count("\n") == 1, (argv, err)
        assert err.startswith(f"cortex: {says}"), (argv, err)
    with pytest.raises(SystemExit):
        main(["search", "--bogus-option", "x"])
    assert "usage: cortex" in capsys.readouterr().err


def test_bundle_command(indexed: Path) -> None:
    """cortex bundle prints the bundle's text; --json gives the one record shape."""
    code, text = _run("bundle", "what does handler return", "--budget", "600",
                      "--path", str(indexed), "--json")  # fmt: skip
    body = json.loads(text)
    assert code == EXIT_OK and body["tokens_used"] <= 600 and body["budget"] == 600
    code, text = _run("bundle", "what does handler return", "--path", str(indexed))
    assert code == EXIT_OK and text.startswith("# Start here: what does handler return")
    code, _ = _run("bundle", "x", "--budget", "9000", "--path", str(indexed))
    assert code != EXIT_OK
    code, text = _run("bundle", "what does handler return", "--constraint", "keep the API",
                      "--subgoal", "fix the handler", "--path", str(indexed), "--json")  # fmt: skip
    pinned = {i["uri"]: i["text"] for i in json.loads(text)["items"] if i["tier"] == "pinned"}
    assert pinned == {"state:constraint/1": "keep the API", "state:goal/1": "fix the handler"}


def test_every_json_output_is_one_line(indexed: Path) -> None:
    """--json is one JSON document on one line for every command (sessions and memory
    printed indented JSON, context and search one line): a script reads one per line."""
    at = ["--path", str(indexed)]
    runs = [
        ["context", "what does handler return"],
        ["session", "add", "--session", "s", "--role", "user", "fix the handler ü"],
        ["session", "decide", "--session", "s", "keep it"],
        ["session", "show", "--session", "s"],
        ["session", "show", "--session", "s", "--step", "1"],
        ["session", "compact", "--session", "s"],
        ["session", "checkpoint", "--session", "s", "2", "--load"],
        ["session", "checkpoint", "--session", "s", "--load"],  # the latest one
        ["memory", "save", "--title", "Handlers return the event ü"],
        ["memory", "search", "handlers"],
        ["memory", "get", "1"],
        ["memory", "stats"],
        ["session", "end", "--session", "s"],
    ]
    for argv in runs:
        code, text = _run(*argv, *at, "--json")
        assert code == EXIT_OK and text.count("\n") == 1, (argv, text)
        json.loads(text)


_NO_OVERRIDE = ["--inh-caps=-dac_override,-dac_read_search",
                "--bounding-set=-dac_override,-dac_read_search"]  # fmt: skip


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
    reason="needs root and setpriv to read a copy as a user without write permission",
)
def test_a_read_only_copy_can_be_audited(tmp_path: Path) -> None:
    """An auditor's read-only copy of a workspace: replay gives the same bytes, the ledger
    verifies and lists; feedback says it is read-only and nothing is written (every one
    of them said the ledger could not be opened)."""
    import shutil

    root = _repo(tmp_path)
    assert _run("index", str(root))[0] == EXIT_OK
    code, text = _run("context", "handler event", "--path", str(root), "--json")
    assert code == EXIT_OK
    key = json.loads(text)["replay_key"]
    code, prompt = _run("replay", key, "--path", str(root))
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    subprocess.run(["chmod", "-R", "a-w", str(copy)], check=True)
    before = sorted((p, p.stat().st_mtime_ns) for p in copy.rglob("*"))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["/usr/bin/setpriv", *_NO_OVERRIDE, sys.executable, "-m",
                               "engine.cli", *argv, "--path", str(copy)], cwd=Path.cwd(),
                              capture_output=True, text=True)  # fmt: skip

    try:
        replayed = run("replay", key)
        assert replayed.returncode == EXIT_OK and replayed.stdout == prompt
        verified = run("ledger", "verify")
        assert verified.returncode == EXIT_OK and "intact" in verified.stdout
        assert key in run("ledger", "log").stdout
        refused = run("feedback", key, "1")
        assert refused.returncode == EXIT_ERROR and "read-only" in refused.stderr
        # What needs to write says so, and never advises moving a sound store aside.
        for argv in (("memory", "search", "handler"), ("search", "handler"), ("status",)):
            said = run(*argv)
            assert said.returncode == EXIT_ERROR, argv
            assert "writ" in said.stderr and "move it aside" not in said.stderr, said.stderr
        assert sorted((p, p.stat().st_mtime_ns) for p in copy.rglob("*")) == before
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(copy)], check=True)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
    reason="needs root and setpriv to read a copy as a user without write permission",
)
def test_a_read_only_copy_with_its_write_ahead_log_can_be_audited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy taken while the ledger was open (its -wal holding the newest turn) in a folder
    the auditor cannot write: replay and verify read it, the newest turn included (it said
    "unable to open database file")."""
    import shutil

    from engine import Config, Workspace

    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    root = _repo(tmp_path)
    copy = tmp_path / "copy"
    with Workspace.open(root, Config(dense_model="hash")) as ws:
        ws.index()
        pack = ws.build_context("what does handler return")
        assert (root / ".cortex" / "ledger.sqlite-wal").stat().st_size > 0
        # The database and its log, as copied from a live workspace (its -shm is
        # the live process's shared memory, of no use to a copy).
        shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns("*-shm"))
    subprocess.run(["chmod", "-R", "a-w", str(copy)], check=True)
    try:
        asked = ((("replay", pack.replay_key), pack.render()), (("ledger", "verify"), "ok"))
        for argv, says in asked:
            done = subprocess.run(["/usr/bin/setpriv", *_NO_OVERRIDE, sys.executable, "-m",
                                   "engine.cli", *argv, "--path", str(copy)],
                                  capture_output=True, text=True)  # fmt: skip
            assert done.returncode == EXIT_OK and done.stdout.startswith(says), done.stderr
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(copy)], check=True)


@pytest.mark.parametrize(
    ("env", "code", "said"),
    [
        ({"CORTEX_ENCODING": "nope"}, EXIT_USAGE, "CORTEX_ENCODING: encoding must be a tiktoken"),
        ({"CORTEX_DENSE_MODEL": "xyz"}, EXIT_ERROR, "(CORTEX_DENSE_MODEL or --dense)"),
        ({"CORTEX_DENSE_MODEL": "static", "CORTEX_MODEL_CACHE_DIR": "/proc/nope"}, EXIT_ERROR,
         "set CORTEX_MODEL_CACHE_DIR"),
        ({"CORTEX_EMBEDDING_CACHE": "/proc/nope/x.sqlite"}, EXIT_ERROR,
         "set CORTEX_EMBEDDING_CACHE"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_line_naming_it(
    indexed: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str], code: int, said: str,
) -> None:  # fmt: skip
    """A bad encoding, an unknown model, an unwritable model or vector cache printed a
    Python traceback (or named no setting); each is now one `cortex:` line naming it."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _run("search", "handler", "--path", str(indexed))[0] == code
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and err.count("\n") == 1, err


def test_the_ledger_of_an_older_index_layout_still_verifies_and_replays(tmp_path: Path) -> None:
    """After an upgrade to a new index layout, `ledger verify` and `replay` refused until
    the index was rebuilt, though the ledger had not changed (and an auditor's read-only
    copy cannot be rebuilt). They read the ledger alone; what needs the index still says
    to rebuild."""
    root = _repo(tmp_path)
    assert _run("index", str(root))[0] == EXIT_OK
    code, text = _run("context", "handler event", "--path", str(root), "--json")
    key = json.loads(text)["replay_key"]
    code, prompt = _run("replay", key, "--path", str(root))
    manifest = root / ".cortex" / "manifest.json"
    body = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**body, "schema": body["schema"] - 1}))
    assert _run("replay", key, "--path", str(root)) == (EXIT_OK, prompt)
    code, text = _run("ledger", "verify", "--path", str(root))
    assert code == EXIT_OK and "intact" in text
    assert _run("search", "handler", "--path", str(root))[0] == EXIT_ERROR


def test_ledger_show_lists_what_was_said_of_the_turn_later(indexed: Path) -> None:
    """`ledger show KEY` printed the turn's own `model_citations: []` for a turn with
    feedback: what came after it (feedback, attest, weights) was not shown."""
    code, text = _run("context", "what does handler return", "--path", str(indexed), "--json")
    key = json.loads(text)["replay_key"]
    assert _run("feedback", key, "1", "--outcome", "success", "--path", str(indexed))[0] == 0
    code, text = _run("ledger", "show", key, "--path", str(indexed))
    later = json.loads(text)["later"]
    assert code == EXIT_OK and later[0]["cited"] == [1] and later[0]["outcome"] == "success"
    assert [r.get("kind") for r in later[1:]] == ["salience", "weights"]


def test_ctrl_c_while_the_engine_loads_is_one_line() -> None:
    """A Ctrl-C in a command's first half second (the engine's imports) printed a traceback
    (stop 43's review): the console script imports nothing heavy; ``main`` imports the
    engine and says `interrupted`, exit 130, as it does later."""
    code = (
        "import sys\n"
        "class Stop:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'engine.cli._main':\n"
        "            raise KeyboardInterrupt\n"
        "from engine.cli import main\n"
        "assert 'engine._workspace' not in sys.modules\n"
        "sys.meta_path.insert(0, Stop())\n"
        "sys.exit(main(['--version']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 130 and proc.stderr == "cortex: interrupted\n", proc.stderr


def test_replay_of_a_purged_turn_says_so(indexed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In text mode, replaying a turn a forget altered says so on stderr (the prompt's own
    text may hold "[PURGED]"); an untouched turn replays silently."""
    code, text = _run("context", "what does helper return", "--path", str(indexed), "--json")
    key = json.loads(text)["replay_key"]
    capsys.readouterr()
    assert _run("replay", key, "--path", str(indexed))[0] == EXIT_OK
    assert capsys.readouterr().err == ""
    assert _run("forget", "--file", "pkg/util.py", "--path", str(indexed))[0] == EXIT_OK
    capsys.readouterr()
    code, prompt = _run("replay", key, "--path", str(indexed))
    assert code == EXIT_OK and "[PURGED]" in prompt
    assert "altered this prompt" in capsys.readouterr().err


def test_memory_save_says_what_the_entity_cap_left_out(indexed: Path) -> None:
    """A note naming 70 URLs: the save's line says 6 more entities were left out, and
    ``--json`` carries the count; a plain note's save has no such line."""
    at = ["--path", str(indexed)]
    urls = " ".join(f"https://example.com/page{i}" for i in range(70))
    code, text = _run("memory", "save", "--title", "pages", "--what", urls, *at)
    assert code == 0 and "left out: 6 more entities (a note keeps the first it names)" in text
    code, text = _run("memory", "save", "--title", "more pages", "--what", urls, *at, "--json")
    assert code == 0 and json.loads(text)["entities_left_out"] == 6
    code, text = _run("memory", "save", "--title", "plain", *at)
    assert code == 0 and "left out" not in text
