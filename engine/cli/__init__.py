"""The ``cortex`` command (``python -m engine.cli``): a thin shell over ``engine`` and
``engine.serve``; ``main`` maps errors to messages and exit codes in one place."""

from engine.cli._main import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, main

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]
