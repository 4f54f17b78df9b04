"""The LoCoMo harness's reading of a session's date."""

from __future__ import annotations

from eval.locomo import session_time


def test_a_session_date_reads_as_utc() -> None:
    """LoCoMo's session dates parse to epoch seconds (UTC); another form is no time."""
    assert session_time("1:56 pm on 8 May, 2023") == 1_683_554_160.0
    assert session_time("sometime in May") is None
