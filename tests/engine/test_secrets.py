"""No credential found in a workspace, a goal or a tool output reaches a model or the disk:
not through search, a context, the ledger, or any file under the state dir."""

from __future__ import annotations

import sqlite3
import subprocess
import zipfile
import zlib
from contextlib import suppress
from pathlib import Path

from engine import Config, SessionState, ToolResult, Turn, Workspace
from tests.engine.test_workspace import GIT_ENV
from tests.indexers.secrets_corpus import corpus


def _all_state_bytes(state: Path) -> bytes:
    """Every byte under ``state``, and what its stores compress: each SQLite cell (zlib
    inflated where it is zlib: chunk texts, ledger blobs) and each member of a zip (.npz)."""
    out: list[bytes] = []
    for path in sorted(p for p in state.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        out.append(raw)
        if raw.startswith(b"SQLite format 3"):
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master "
                                                   "WHERE type = 'table'")]  # fmt: skip
                for table in tables:
                    with suppress(sqlite3.Error):
                        for row in db.execute(f'SELECT * FROM "{table}"'):
                            out.extend(_cell(v) for v in row)
            finally:
                db.close()
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                out.extend(z.read(name) for name in z.namelist())
    return b"\n".join(out)


def _cell(value: object) -> bytes:
    if isinstance(value, bytes):
        try:
            return zlib.decompress(value)
        except zlib.error:
            return value
    return str(value).encode()


def test_planted_secrets_reach_no_model_and_no_file(tmp_path: Path) -> None:
    """85 secrets of 17 kinds in ordinary files of a repository: after indexing, searching
    for them, packing a context about them, and feedback quoting one, none appears in any
    result, in the ledger or in any byte under the state dir."""
    root = tmp_path / "repo"
    files, planted = corpus()
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=T", *args], cwd=root,
                       check=True, capture_output=True, env=GIT_ENV)  # fmt: skip
    state = tmp_path / "state"
    leaked: list[str] = []
    with Workspace.open(root, Config(dense_model="hash", state_dir=str(state))) as ws:
        report = ws.index()
        assert sum(report.redactions.values()) >= len(planted)
        first = planted[0].value
        goal = f"S3 uploads fail with key {first}; use the credentials in settings"
        pack = ws.build_context(
            goal, "how are S3 uploads authenticated",
            tool_signals=[f"botocore error: InvalidAccessKeyId {first}"],
            state=SessionState(recent_turns=(Turn("user", f"my token is {planted[3].value}"),)),
        )  # fmt: skip
        ws.feedback(pack.replay_key, [1], [ToolResult("shell", False, f"echo {first}")])
        replay = ws.replay(pack.replay_key).text
        for p in planted:
            found = [h.chunk.text for h in ws.search(p.value, mode="bm25", k=5)]
            texts = [pack.render(), replay, *found]
            if any(p.value in t for t in texts):
                leaked.append(f"{p.kind}: returned")
    everything = _all_state_bytes(state)
    leaked += [f"{p.kind}: on disk" for p in planted if p.value.encode() in everything]
    assert not leaked, leaked
    assert "[REDACTED:" in pack.render()


def test_what_a_caller_names_is_redacted_too(tmp_path: Path) -> None:
    """Beside texts, the names and keys a caller sends are stored and shown: a feedback
    reason and a tool result's name, a session step's tool, a decision's evidence, a
    note's topic key; a session id holding a credential is refused. A token passed to a
    call in the code, and a tracked ``.env`` in the working-tree diff, reach nothing."""
    import pytest

    from engine import ConfigError

    gh = "ghp_" + "Ff6wR2mN5kL9pX3wT7yZ1aB4cD6eF0gH2jK5"
    slack = "xoxb-" + "2145678901-2145678901234-AbCd"
    root = tmp_path / "repo"
    root.mkdir()
    code = f'import github\n\n\ndef client():\n    return github.Github("{gh}")\n'
    (root / "hooks.py").write_text(code)
    (root / ".env").write_text(f"SLACK={slack}\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A", "-f"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=T", *args], cwd=root,
                       check=True, capture_output=True, env=GIT_ENV)  # fmt: skip
    (root / ".env").write_text(f"SLACK={slack}\nMORE=1\n")  # a tracked secret file, changed
    state = tmp_path / "state"
    with Workspace.open(root, Config(dense_model="hash", state_dir=str(state))) as ws:
        ws.index()
        session = ws.session("s1")
        session.add("tool", "ran it", tool=f"deploy --token {gh}")
        session.decide("use the client", rationale="it works", evidence=[f"token {gh}"])
        ws.memory.save("github client", what="how we connect", topic_key=f"gh/{gh}")
        pack = ws.build_context("Fix the github client", "github client",
                                state=SessionState(session="s1"))  # fmt: skip
        cited = pack.citations[0].id
        ws.feedback(pack.replay_key, [cited], [ToolResult(f"deploy --token {gh}", True, "ok")],
                    outcome="failure", reason=f"wrong token {gh}")  # fmt: skip
        shown = [pack.render(), ws.replay(pack.replay_key).text,
                 ws.bundle("Fix the github client").render()]  # fmt: skip
        with pytest.raises(ConfigError, match="credential"):
            ws.session(gh)
    assert "github.Github(" in pack.render() and "ran it" in pack.render()
    assert not [t for t in shown if gh in t or slack in t]
    everything = _all_state_bytes(state)
    assert gh.encode() not in everything and slack.encode() not in everything


def test_a_credential_in_a_file_or_folder_name_reaches_nothing(tmp_path: Path) -> None:
    """A folder named after an AWS key and a file after a GitHub token, committed: both are
    skipped under their redacted names, and neither token reaches an answer, the co-change
    history or any byte under the state dir."""
    aws, gh = "AKIA" + "Z7QK3M2XW9PLR4TB", "ghp_" + "Q8vR2mN5kL9pX3wT7yZ1aB4cD6eF0gH2jK5m"
    root = tmp_path / "repo"
    (root / "src" / aws).mkdir(parents=True)
    (root / "src" / aws / "loader.py").write_text("def load_config():\n    return {}\n")
    (root / "src" / f"{gh}.py").write_text("def token_helper():\n    return 1\n")
    (root / "src" / "app.py").write_text("def main():\n    return load_config()\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=T", *args], cwd=root,
                       check=True, capture_output=True, env=GIT_ENV)  # fmt: skip
    state = tmp_path / "state"
    with Workspace.open(root, Config(dense_model="hash", state_dir=str(state))) as ws:
        report = ws.index()
        assert report.skipped.get("secret") == 2
        shown = [ws.build_context("load_config main", budget_tokens=2000).render(),
                 *(h.chunk.source_uri for h in ws.search("load_config token_helper", k=20))]
    assert not [t for t in shown if aws in t or gh in t]
    everything = _all_state_bytes(state)
    assert aws.encode() not in everything and gh.encode() not in everything


def test_a_credential_named_file_changed_in_the_tree_shows_in_no_diff(tmp_path: Path) -> None:
    """The same files edited in the working tree: the diff lane leaves them out as the
    index does (their names were printed in its '--- path' lines and stored)."""
    gh = "ghp_" + "Bw8Xq3Zp7Rk2Nm5Vt9Yb4Hc1Jd6Fs0Ge3Ub9"
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / f"{gh}.py").write_text("def token_helper():\n    return 1\n")
    (root / "src" / "app.py").write_text("def main():\n    return token_helper()\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=T", *args], cwd=root,
                       check=True, capture_output=True, env=GIT_ENV)  # fmt: skip
    for name in (f"{gh}.py", "app.py"):
        path = root / "src" / name
        path.write_text(path.read_text() + "# edited\n")
    state = tmp_path / "state"
    with Workspace.open(root, Config(dense_model="hash", state_dir=str(state))) as ws:
        ws.index()
        shown = ws.build_context("token_helper main", budget_tokens=2000).render()
    assert "--- src/app.py" in shown and gh not in shown
    assert gh.encode() not in _all_state_bytes(state)


def test_an_unquoted_assignment_in_free_text_reaches_nothing(tmp_path: Path) -> None:
    """`export AWS_SECRET_ACCESS_KEY=…` and `DB_PASSWORD=…` written without quotes, as agents
    paste them, went into a note, the memory lane, a tool result in the ledger, a goal and
    an indexed Markdown file in clear: the keyword plugin wants quotes outside config files."""
    aws = "Zq7vN2pXr9LmT4kW8sYb3HcJ6fDa1GeUoQiR5tVy"
    db = "Xk29fjQ8zLp3Qa"
    line = f"CI needs: export AWS_SECRET_ACCESS_KEY={aws} and DB_PASSWORD={db}"
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "deploy.md").write_text(f"# Deploy to staging\n\n{line}\n")
    (root / "deploy.py").write_text("def deploy(password):\n    return password\n")
    state = tmp_path / "state"
    with Workspace.open(root, Config(dense_model="hash", state_dir=str(state))) as ws:
        ws.index()
        ws.memory.save("staging credentials", "config", what=line)
        pack = ws.build_context(f"deploy to staging; {line}", "deploy staging credentials")
        ws.feedback(pack.replay_key, [1], [ToolResult("shell", True, f"$ {line}\nok")])
        found = [h.chunk.text for h in ws.search("deploy staging")]
        shown = [pack.render(), ws.replay(pack.replay_key).text, ws.memory.get(1).what, *found]
    assert "CI needs: export AWS_SECRET_ACCESS_KEY=[REDACTED:" in shown[2]
    assert "DB_PASSWORD=[REDACTED:" in shown[2]
    assert not [t for t in shown if aws in t or db in t]
    everything = _all_state_bytes(state)
    assert aws.encode() not in everything and db.encode() not in everything
