"""One writer at a time: an advisory ``flock`` on ``.cortex/lock``.

The kernel drops the lock when its holder dies (even ``kill -9``), so a crash never leaves a
stale lock. The file's text says who holds it, for the error the next writer sees. Readers
never take it.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from engine.core import IndexBusyError, IndexStateError
from engine.index._manifest import private_dir

__all__ = ["WriterLock"]


class WriterLock:
    """Exclusive, non-blocking writer lock for one index directory.

    >>> with WriterLock(Path("/tmp/x.lock")):  # doctest: +SKIP
    ...     ...  # write the index
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``IndexBusyError`` naming the holder."""
        try:
            private_dir(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise IndexStateError(
                f"cannot write the state folder {self.path.parent} ({exc.strerror or exc}): "
                "make it writable or set CORTEX_STATE_DIR to a folder that is"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode("utf-8", errors="replace").strip()
            os.close(fd)
            raise IndexBusyError(
                f"the index in {self.path.parent} is being updated by "
                f"{holder or 'another process'}; wait for it to finish or stop that process"
            ) from None
        since = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {since}".encode(), 0)
        self._fd = fd

    @staticmethod
    def holder(path: Path) -> str | None:
        """Who holds the lock at ``path`` now (its text, "another process" without one), or
        None when nobody does. A probe for an error message: it takes the lock shared for
        an instant, never waits, and creates nothing."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None  # no lock file: no writer ever ran here
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 256, 0).decode("utf-8", errors="replace").strip() or (
                "another process"
            )
        except OSError:
            return None
        finally:
            os.close(fd)  # closing drops a lock taken
        return None

    def release(self) -> None:
        """Give the lock back (the file stays; its text is stale but harmless)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
