"""No credential found in a workspace, a goal or a tool output reaches a model or the disk:
not through search, a context, the ledger, or any file under the state dir."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine import Config, SessionState, ToolResult, Turn, Workspace
from tests.engine.test_workspace import GIT_ENV
from tests.indexers.secrets_corpus import corpus


def _all_state_bytes(state: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file())


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
