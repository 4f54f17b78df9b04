"""The DATA skip: large literal tables are left out of the walk, code and prose never are."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from indexers import _sniff, _walk
from indexers._literals import literal_share
from indexers._walk import Skipped, SkipReason, WalkOptions, walk

BIG = _sniff._DATA_MIN_BYTES  # every table below is made just past this


def _repeat(row: str, head: str = "", tail: str = "") -> str:
    """``row.format(i)`` repeated until the text is past the size the DATA rule looks at."""
    rows, size, i = [head], len(head) + len(tail), 0
    while size <= BIG:
        line = row.format(i)
        rows.append(line)
        size += len(line)
        i += 1
    return "".join(rows) + tail


def _verdicts(
    root: Path, files: dict[str, str], options: WalkOptions | None = None
) -> dict[str, SkipReason | None]:
    """Plant ``files`` under ``root`` and walk it: each path's skip reason, None if indexed."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    out: dict[str, SkipReason | None] = {}
    for item in walk(root, options or WalkOptions(use_git=False)):
        out[item.path] = item.reason if isinstance(item, Skipped) else None
    return out


PY_TABLE = _repeat("    0x{0:05X}: ('L', 'LATIN LETTER {0}', 1.5e3),\n", "TABLE = {\n", "}\n")
JS_TABLE = _repeat('  {{ id: {0}, name: "emoji_{0}", code: 0x1F{0:03X}, wide: true }},\n',
                   "export const EMOJI = [\n", "];\n")  # fmt: skip
C_TABLE = _repeat(
    "    {0}, {0}, 0x{0:02X}, 0x00, /* row {0} */\n", "static const int T[] = {\n", "};\n"
)
JSON_DUMP = _repeat('  "key_{0}": [{0}, "value {0}", null],\n', "{\n", '  "end": 0\n}\n')
CSV_NUMBERS = _repeat("{0},{0}.5,-{0}e3\n")


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("unicode/table.py", PY_TABLE),
        ("web/emoji.js", JS_TABLE),
        ("src/table.c", C_TABLE),
        ("fixtures/dump.json", JSON_DUMP),
        ("bench/points.csv", CSV_NUMBERS),
    ],
)
def test_large_literal_tables_skipped_as_data(tmp_path: Path, path: str, text: str) -> None:
    """Literal tables of any language past the size limit are DATA, with a one-line detail."""
    [item] = list(walk(_plant(tmp_path, path, text)))
    assert isinstance(item, Skipped) and item.reason is SkipReason.DATA
    assert "of lines only literals" in item.detail and "KiB" in item.detail


def _plant(root: Path, rel: str, text: str) -> Path:
    """Write ``text`` at ``root/rel`` and return its path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_code_prose_and_small_tables_kept(tmp_path: Path) -> None:
    """Big code, big prose, a table with real code beside it, and a small table are indexed."""
    code = _repeat("def f_{0}(x):\n    return g(x, {0}, 'label {0}')\n\n")
    prose = _repeat("The {0}th paragraph explains how retries back off, in words.\n\n")
    mixed = _repeat("    ({0}, 'kw_{0}'),\n    ({0}, 'kw_{0}b'),\n    ({0}, 'kw_{0}c'),\n"
                    "    pick(WORDS, {0}),\n", "WORDS = [\n", "]\n")  # fmt: skip
    small = PY_TABLE[: BIG // 2] + "}\n"
    verdicts = _verdicts(
        tmp_path, {"code.py": code, "README.md": prose, "lexer.py": mixed, "small.py": small}
    )
    assert verdicts == {"code.py": None, "README.md": None, "lexer.py": None, "small.py": None}


def test_include_glob_forces_past_data(tmp_path: Path) -> None:
    """A file an include glob names is indexed even when it is a table."""
    verdicts = _verdicts(
        tmp_path, {"table.py": PY_TABLE}, WalkOptions(use_git=False, include=("table.py",))
    )
    assert verdicts == {"table.py": None}


def test_literal_share_counts_lines() -> None:
    """Literal-only lines count as data, lines with code identifiers as code, the rest not."""
    assert literal_share(b'A = {\n  "a": 1,\n  b: null,\n  0x2: "c",\n}\n') == 0.75
    assert literal_share(b"x = compute(1)\ny = other(2)\n") == 0.0
    assert literal_share(b"\n}\n# only a comment\n") == 0.0


def _stdlib_big_modules() -> list[Path]:
    """The standard library's modules the DATA rule looks at (by size)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(
        p
        for p in root.rglob("*.py")
        if "site-packages" not in p.parts and BIG <= p.stat().st_size <= _walk._MAX_FILE_BYTES
    )


def test_no_ordinary_stdlib_module_is_data() -> None:
    """Of the standard library's big modules only pydoc's help-text table is taken for data."""
    root = Path(sysconfig.get_paths()["stdlib"])
    data = [
        p.relative_to(root).as_posix()
        for p in _stdlib_big_modules()
        if literal_share(p.read_bytes()) >= _sniff._DATA_MIN_SHARE
    ]
    assert set(data) <= {"pydoc_data/topics.py"}
