"""Per-branch copy-on-write overlays over a shared base index.

So far: the git facts the engine records with an index (``head_commit``). The diff against
a base commit and the View composition come with the overlays work.
"""

from overlays._git import Hunk, git_tracks, head_commit, working_diff

__all__ = ["Hunk", "git_tracks", "head_commit", "working_diff"]
