"""Keeping segments fresh: incremental updates in recoverable stages, immutable bases and
per-branch overlays (``Layers``), the writer lock, the state folder's manifest, what
``status`` and ``index`` report, and the survey behind ``cortex chunks``."""

from engine.index._forget import SegmentForget, forget_in_segment, matches_path, segment_dirs
from engine.index._layers import QUICK_FILES, Layers, OverlayInfo, RefreshTooFar
from engine.index._lock import WriterLock
from engine.index._manifest import MANIFEST_SCHEMA, Manifest, locate
from engine.index._memories import MEMORY_FILE
from engine.index._status import combined_report, status_of, tree_size
from engine.index._survey import Survey, survey
from engine.index._update import ensure_dense, update_segment

__all__ = [
    "MANIFEST_SCHEMA",
    "MEMORY_FILE",
    "QUICK_FILES",
    "Layers",
    "Manifest",
    "OverlayInfo",
    "RefreshTooFar",
    "SegmentForget",
    "Survey",
    "WriterLock",
    "combined_report",
    "ensure_dense",
    "forget_in_segment",
    "locate",
    "matches_path",
    "segment_dirs",
    "status_of",
    "survey",
    "tree_size",
    "update_segment",
]
