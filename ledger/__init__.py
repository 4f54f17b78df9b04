"""The evidence ledger: every turn, and what followed it, in one hash-verified chain.

Records (turns, feedback, and journal entries for weight updates, compaction checkpoints
and salience) share one append-only chain in one SQLite file; each record's hash covers the
previous one, so ``Ledger.verify`` names the first record that was edited, deleted,
reordered or inserted. Snippet texts and rendered prompts are stored by sha256, so a turn
can be replayed without the workspace it came from. ``Ledger.rotate`` moves a ledger aside
(grown, or broken and kept as evidence) and starts a chain whose first record names it.

Plain records in, plain records out: this package imports nothing else from cortex, and
importing it opens no file.
"""

from ledger._blobs import PURGED_MARK
from ledger._codec import GENESIS_HASH
from ledger._cuts import cuts_problem, restore
from ledger._errors import (
    BlobNotFoundError,
    LedgerCorruptError,
    LedgerError,
    LedgerNotFoundError,
    LedgerRotateError,
    LedgerSchemaError,
    LedgerWriteError,
)
from ledger._records import (
    JSON,
    FeedbackDraft,
    FeedbackRecord,
    JournalEntry,
    PreviousLedger,
    Record,
    RecordKind,
    RotateReason,
    SnippetRef,
    ToolResult,
    TurnDraft,
    TurnRecord,
    VerifyReport,
)
from ledger._rotate import Rotation
from ledger._sqlite import FOLD_WAIT_S, SCHEMA_VERSION, OpenLock, fold_wal
from ledger._store import Ledger

__all__ = [
    "FOLD_WAIT_S",
    "GENESIS_HASH",
    "JSON",
    "PURGED_MARK",
    "SCHEMA_VERSION",
    "BlobNotFoundError",
    "FeedbackDraft",
    "FeedbackRecord",
    "JournalEntry",
    "Ledger",
    "LedgerCorruptError",
    "LedgerError",
    "LedgerNotFoundError",
    "LedgerRotateError",
    "LedgerSchemaError",
    "LedgerWriteError",
    "OpenLock",
    "PreviousLedger",
    "Record",
    "RecordKind",
    "RotateReason",
    "Rotation",
    "SnippetRef",
    "ToolResult",
    "TurnDraft",
    "TurnRecord",
    "VerifyReport",
    "cuts_problem",
    "fold_wal",
    "restore",
]
