"""The ``cortex`` command's exit codes (apart, so its start can use them before it imports
the engine)."""

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_ERROR = 1  # a CortexError: bad workspace, unreadable state, unknown replay key
EXIT_USAGE = 2  # argparse's own code for bad arguments; ConfigError uses it too
EXIT_INTERRUPTED = 130
