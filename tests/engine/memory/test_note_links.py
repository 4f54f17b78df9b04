"""Code links on a real index: a note's symbols and places link to indexed lines, and after
a real patch exactly the links whose lines changed are flagged stale (moved code is not)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Workspace
from engine.core import Config, LinkState

CONFIG = Config(dense_model="hash", ledger=False)
NAMES = ("alpha", "beta", "gamma", "delta")


def _source(changed: frozenset[str], header: int) -> str:
    lines = [f"# header line {i}" for i in range(header)]
    for name in NAMES:
        value = f"{name}_new" if name in changed else name
        lines += [f"def {name}(x):", f'    """Return {name} of x."""',
                  f"    y = x + len('{value}')", "    return y", ""]  # fmt: skip
    return "\n".join(lines) + "\n"


def _patch(root: Path, new: str) -> None:
    """Apply the change as a unified diff with ``git apply`` (a real patch)."""
    old = (root / "mod.py").read_text()
    (root / "new.py").write_text(new)
    diff = subprocess.run(["git", "diff", "--no-index", "--", "mod.py", "new.py"], cwd=root,
                          capture_output=True, text=True, check=False).stdout  # fmt: skip
    (root / "new.py").unlink()
    diff = diff.replace("b/new.py", "b/mod.py")
    subprocess.run(["git", "apply", "-"], cwd=root, input=diff, text=True, check=True)
    assert (root / "mod.py").read_text() != old or not diff


_counter = iter(range(1 << 30))


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changed=st.frozensets(st.sampled_from(NAMES)), header=st.integers(0, 3))
def test_exactly_the_changed_links_are_stale(tmp_path: Path, changed: frozenset[str],
                                             header: int) -> None:  # fmt: skip
    """Links to the four functions; after a patch that edits some of them (and maybe adds
    lines above all of them), the stale links are exactly the edited functions'."""
    root = tmp_path / f"ws{next(_counter)}"
    root.mkdir()
    (root / "mod.py").write_text(_source(frozenset(), 0))
    with Workspace.open(root, CONFIG) as ws:
        ws.index()
        saved = ws.memory.save("the four helpers", "pattern",
                               what="see `alpha`, `beta`, `gamma` and `delta`")  # fmt: skip
        assert sorted(lk.entity for lk in saved.links) == sorted(NAMES)
        assert all(not c.stale for c in ws.memory.get(saved.id).links)
        if changed or header:
            _patch(root, _source(changed, header))
        note = ws.memory.get(saved.id)
        stale = {c.link.entity for c in note.links if c.stale}
        assert stale == set(changed)
        for c in note.links:
            if c.link.entity not in changed:
                assert c.state is (LinkState.MOVED if header else LinkState.CURRENT)
        [hit] = ws.memory.search("four helpers")
        assert set(hit.stale) == {c.link.uri for c in note.links if c.stale}


def test_places_and_paths_link_and_a_deleted_file_is_missing(tmp_path: Path) -> None:
    """``mod.py:6`` links the function around line 6; a bare path links the file; after the
    file is deleted both are flagged (missing)."""
    (tmp_path / "mod.py").write_text(_source(frozenset(), 0))
    with Workspace.open(tmp_path, CONFIG) as ws:
        ws.index()
        saved = ws.memory.save("beta lives at mod.py:7", what="and the module is mod.py")
        spans = {lk.entity: (lk.start_line, lk.end_line) for lk in saved.links}
        assert spans["mod.py:7"] == (6, 9) and spans["mod.py"][0] == 1
        assert "place:mod.py:7" in saved.entities
        (tmp_path / "mod.py").unlink()
        assert {c.state for c in ws.memory.get(saved.id).links} == {LinkState.MISSING}


def test_a_save_names_what_the_link_and_entity_caps_left_out(tmp_path: Path) -> None:
    """A note naming 40 functions (and so their file) keeps the first 32 of its 41 links and
    says 9 more were left out;
    one naming 70 URLs keeps 64 entities and says 6; a short note says nothing."""
    (tmp_path / "mod.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n"
                                             for i in range(40)))  # fmt: skip
    with Workspace.open(tmp_path, CONFIG) as ws:
        ws.index()
        places = " ".join(f"mod.py:{3 * i + 1}" for i in range(40))
        saved = ws.memory.save("every function", what=places)
        assert len(saved.links) == 32 and saved.links_left_out == 9
        assert saved.entities_left_out == 0
        urls = " ".join(f"https://example.com/page{i}" for i in range(70))
        wide = ws.memory.save("every page", what=urls)
        assert len(wide.entities) == 64 and wide.entities_left_out == 6
        assert wide.links_left_out == 0
        plain = ws.memory.save("one function", what="mod.py:1")
        assert (plain.entities_left_out, plain.links_left_out) == (0, 0)
