"""The environment cortex runs git under: a workspace's own git configuration must not run
commands (a repository or an archive can be untrusted; ``core.fsmonitor`` in its
``.git/config`` ran on every ``git status`` cortex made), and git must not rewrite the
user's index or run their hooks for cortex's reads."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["git_overrides"]

# Settings given as ``-c`` would be (above every config file), through git's environment:
# each git process cortex starts takes them, however it is started.
_SAFE = (("core.fsmonitor", "false"), ("core.hooksPath", os.devnull))


def git_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables to add to ``environ`` (the process's by default) for a git process:
    ``_SAFE`` after any ``GIT_CONFIG_COUNT`` settings the caller's environment holds, and
    optional locks off (``git status`` would refresh ``.git/index``, running the user's
    ``post-index-change`` hook)."""
    env = os.environ if environ is None else environ
    try:
        start = max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        start = 0
    out = {"GIT_OPTIONAL_LOCKS": "0", "GIT_CONFIG_COUNT": str(start + len(_SAFE))}
    for i, (key, value) in enumerate(_SAFE, start=start):
        out[f"GIT_CONFIG_KEY_{i}"] = key
        out[f"GIT_CONFIG_VALUE_{i}"] = value
    return out
