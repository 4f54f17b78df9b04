"""eval.train_static's resumable teacher store: a damaged store is started over, not fatal."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eval.train_static import teacher_vectors


def test_a_damaged_teacher_store_starts_over(tmp_path: Path, capsys: object) -> None:
    """A store cut off mid-write (an old run killed while saving) is reported and ignored."""
    store = tmp_path / "teacher.npz"
    store.write_bytes(b"PK\x03\x04 not a whole zip file")
    vectors = teacher_vectors([], store)
    assert vectors.shape == (0, 384) and vectors.dtype == np.float32
    assert "unreadable" in capsys.readouterr().out  # type: ignore[attr-defined]
