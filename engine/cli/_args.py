"""Argument parsing the command line shares: the parser, number arguments, the JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import NoReturn, TextIO

from engine import ConfigError
from engine.cli._exit import EXIT_USAGE
from engine.serve import whole_number

__all__ = ["Parser", "integer", "write_json"]


class _NotANumber(argparse.ArgumentTypeError):
    """A number argument that is no number: the parser says which argument, in one line."""

    def __init__(self, raw: str) -> None:
        super().__init__(raw)
        self.raw = raw


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose bad values are one line, as every other cortex
    error is: ``cortex: -k must be a whole number (digits 0-9), got 'abc'`` where argparse
    printed its usage block and named the value "the value". Choices are left to the
    library, so a bad one is its message on every surface. A malformed command line
    (a missing or unknown argument) keeps argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        failed = sys.exc_info()[1]  # called from argparse's ``except ArgumentError``
        if isinstance(failed, argparse.ArgumentError) and isinstance(
            failed.__context__, _NotANumber
        ):
            try:
                whole_number(failed.argument_name or "the value", failed.__context__.raw.strip(),
                             signed=True)  # fmt: skip
            except ConfigError as exc:
                self.exit(EXIT_USAGE, f"cortex: {exc}\n")
        super().error(message)


def integer(raw: str) -> int:
    """``type=`` for a number argument: ASCII digits, with a sign (``int`` reads ``٣`` as 3
    and ``str.isdigit`` passes ``²``); each value's range is checked where it is used, with
    the message every surface gives."""
    try:
        return whole_number("the value", raw.strip(), signed=True)
    except ConfigError:
        raise _NotANumber(raw) from None


def write_json(body: Mapping[str, object], out: TextIO) -> None:
    """One record as one line of JSON (every command's ``--json``): a script reads one
    document per line, whichever command printed it."""
    out.write(json.dumps(body) + "\n")
