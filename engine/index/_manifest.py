"""The state folder's manifest: which layout wrote it, checked before anything is read.

``<state>/manifest.json`` holds the layout number; an old or foreign layout gets an error
that names the command that rebuilds it. The state folder also gets a ``.gitignore`` so a
``git add -A`` never commits the index (a later checkout would then delete it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from engine.core import IndexSchemaError

__all__ = ["MANIFEST_SCHEMA", "Manifest", "locate"]

MANIFEST_SCHEMA = 2  # 2: bases + per-branch overlays (1 had one segment)


class Manifest:
    """The manifest of one state folder."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / "manifest.json"

    def exists(self) -> bool:
        """Whether a manifest was written (the folder was indexed at least once)."""
        return self.path.exists()

    def check(self) -> None:
        """Raise ``IndexSchemaError`` unless the folder is absent, empty, or of this layout."""
        if not self.path.exists():
            if self.state_dir.exists() and any(self.state_dir.iterdir()):
                raise IndexSchemaError(
                    f"{self.state_dir} exists but is not a cortex index (no manifest.json); "
                    "move it away or set CORTEX_STATE_DIR"
                )
            return
        try:
            manifest = json.loads(self.path.read_text("utf-8"))
            schema = int(manifest["schema"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexSchemaError(
                f"{self.path} is unreadable ({exc}); rebuild with `cortex index --rebuild`"
            ) from exc
        if schema != MANIFEST_SCHEMA:
            raise IndexSchemaError(
                f"{self.state_dir} was written with layout {schema}, this cortex uses "
                f"{MANIFEST_SCHEMA}; rebuild with `cortex index --rebuild`"
            )

    def write(self) -> None:
        """Create the folder and write this layout's manifest (atomically)."""
        private_dir(self.state_dir)
        (self.state_dir / ".gitignore").write_text("# written by cortex\n*\n", "utf-8")
        body = {"schema": MANIFEST_SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=2) + "\n", "utf-8")
        tmp.replace(self.path)


def locate(start: Path, state_dir: str) -> Path:
    """The workspace a command run in ``start`` means, found as git finds its repository:
    the nearest folder at or above ``start`` that holds an index (``state_dir`` with a
    manifest) or is the top of a git work tree; ``start`` itself when there is none."""
    start = start.resolve()
    relative = not Path(state_dir).expanduser().is_absolute()
    for folder in (start, *start.parents):
        if relative and (folder / state_dir / "manifest.json").is_file():
            return folder
        if (folder / ".git").exists():  # a folder, or a file in worktrees and submodules
            return folder
    return start


def private_dir(path: Path) -> None:
    """Create ``path`` (and its parents) if missing; a folder created here is readable by
    its owner only (0700): it holds indexed code and the prompts a model saw."""
    if path.is_dir():
        return
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
