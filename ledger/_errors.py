"""The ledger's exception tree. Every failure the ledger reports on purpose is one of these::

    LedgerError
    ├── LedgerWriteError (OSError)              full disk, read-only file or file system,
    │                                           locked by another process for too long, I/O error
    ├── LedgerCorruptError (ValueError)         not a ledger, a record that does not decode,
    │                                           a blob whose bytes do not hash to its name
    ├── LedgerSchemaError                       a ledger of another schema version
    ├── LedgerNotFoundError (FileNotFoundError) no ledger at the path and ``create=False``
    ├── LedgerRotateError                       a rotation refused: nothing was moved
    └── BlobNotFoundError (LookupError)         no blob stored under that sha256

SQLite's errors are translated once, where the ledger calls SQLite (``ledger._sqlite``), with
``raise ... from exc``. ``ledger`` imports nothing internal, so the engine translates these
into its own tree at its boundary.

Mistakes in what a caller passes in (a malformed draft, feedback for an unknown turn) are
plain ``ValueError``: they are bugs in the caller, not states of the ledger.
"""

from __future__ import annotations

__all__ = [
    "BlobNotFoundError",
    "LedgerCorruptError",
    "LedgerError",
    "LedgerNotFoundError",
    "LedgerRotateError",
    "LedgerSchemaError",
    "LedgerWriteError",
]


class LedgerError(Exception):
    """Base of every error the ledger raises on purpose."""


class LedgerWriteError(LedgerError, OSError):
    """A write could not land; the message names the file and the cause.

    The record was not written (an append is all or nothing) and the ledger still reads.
    """


class LedgerCorruptError(LedgerError, ValueError):
    """The file is not a ledger, or stored bytes do not decode or hash as they should."""


class LedgerSchemaError(LedgerError):
    """The ledger was written by another schema version; the message says how to start anew."""


class LedgerNotFoundError(LedgerError, FileNotFoundError):
    """There is no ledger at the path and the caller asked not to create one."""


class LedgerRotateError(LedgerError):
    """``Ledger.rotate`` refused (a healthy ledger called broken, a broken one rotated as
    healthy, a name it would move a file to already taken); every file is where it was."""


class BlobNotFoundError(LedgerError, LookupError):
    """No text is stored under the requested sha256."""
