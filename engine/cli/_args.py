"""Argument types the command line shares."""

from __future__ import annotations

import argparse

from engine import ConfigError
from engine.serve import whole_number

__all__ = ["integer"]


def integer(raw: str) -> int:
    """``type=`` for a number argument: ASCII digits, with a sign (``int`` reads ``٣`` as 3
    and ``str.isdigit`` passes ``²``); each value's range is checked where it is used, with
    the message every surface gives."""
    try:
        return whole_number("the value", raw.strip(), signed=True)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
