"""The ``cortex`` command (``python -m engine.cli``): a thin shell over ``engine`` and
``engine.serve``; ``main`` maps errors to messages and exit codes in one place."""

import sys as _sys
import typing as _typing

from engine.cli._exit import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]


def main(argv: _typing.Sequence[str] | None = None, out: _typing.TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (``engine.cli._main.main``). The engine is
    imported here, so a Ctrl-C during its first half second is one line, not a traceback."""
    try:
        from engine.cli._main import main as run
    except KeyboardInterrupt:
        print("cortex: interrupted", file=_sys.stderr)
        return EXIT_INTERRUPTED
    return run(argv, out)
