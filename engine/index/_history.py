"""The co-change history each branch's Views read, kept in the branch's overlay folder.

``history.json`` holds ``overlays.read_history`` up to the checked-out commit. A refresh
(under the writer lock) writes it when HEAD moved; every process reads it again when the
file changes. An overlay written before histories existed is answered from git in memory
until its next refresh; a caller may supply a history instead (a tree exported without
its ``.git``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from indexers import secret_paths
from overlays import ChangeHistory, head_commit, read_history

__all__ = ["HISTORY_FILE", "Histories"]

HISTORY_FILE = "history.json"


class Histories:
    """Histories of one working tree's overlay folders, read once per change of the file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.supplied: ChangeHistory | None = None
        # Per overlay folder: (the file's stamp, the history read from it) or, without a
        # file yet, (None, the history read from git in memory).
        self._read: dict[Path, tuple[tuple[int, int] | None, ChangeHistory | None]] = {}

    def of(self, folder: Path) -> ChangeHistory | None:
        """The history the Views of the overlay in ``folder`` read: the supplied one, else
        the folder's file, else one read from git in memory. None outside git."""
        if self.supplied is not None:
            return self.supplied
        path = folder / HISTORY_FILE
        if path.exists():
            return self._stored(path)
        cached = self._read.get(path)
        if cached is None or cached[0] is not None:
            head = head_commit(self.root)
            found = read_history(self.root, head, hidden=secret_paths) if head else None
            cached = self._read[path] = (None, found)
        return cached[1]

    def write(self, folder: Path) -> None:
        """Read the history up to the checked-out commit into ``folder`` when it moved
        (``git log`` of 10,000 commits: well under a second; call under the writer lock).
        Up to HEAD, not the base: a branch's own commits count, and nothing after it does."""
        head = head_commit(self.root)
        if head is None:
            return
        path = folder / HISTORY_FILE
        held = self._stored(path)
        if held is not None and held.commit == head:
            return
        history = read_history(self.root, head, hidden=secret_paths) or ChangeHistory(commit=head)
        fd, tmp = tempfile.mkstemp(prefix=HISTORY_FILE, suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(history.to_json())
            Path(tmp).replace(path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise

    def forget(self, folder: Path | None = None) -> None:
        """Drop what was read (of ``folder``, or of every folder)."""
        if folder is None:
            self._read.clear()
        else:
            self._read = {k: v for k, v in self._read.items() if k.parent != folder}

    def _stored(self, path: Path) -> ChangeHistory | None:
        """The history in ``path``, read once per change of the file (None without one)."""
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        cached = self._read.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            history = ChangeHistory.from_json(path.read_text("utf-8"))
        except OSError:
            history = None
        self._read[path] = (stamp, history)
        return history
