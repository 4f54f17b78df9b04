"""Licenses as SPDX ids: a file's own ``SPDX-License-Identifier``, else the nearest folder
that declares one, in a package manifest or a licence file.

A folder declares its licence by the ``license`` field of ``package.json``, ``Cargo.toml`` or
``pyproject.toml`` (an SPDX expression its authors wrote, so it wins), else by licence files
(``LICENSE``, ``license.md``, ``LICENSE-MIT``, ``COPYING.LESSER`` …), each recognised by a few
phrases every copy of that licence text contains. Several ``LICENSE-*`` texts side by side are
alternatives (``Apache-2.0 OR MIT``, as Rust crates ship them); an LGPL text beside the GPL
text it amends is the LGPL. Anything unrecognised is ``NOASSERTION`` (SPDX's word for "we did
not determine it"), never a guess.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

__all__ = [
    "NOASSERTION",
    "LicenseResolver",
    "is_license_source",
    "license_from_header",
    "license_from_text",
    "spdx_expression",
]

NOASSERTION = "NOASSERTION"
_HEADER_LINES = 30  # SPDX tags sit in the first comment block
_SPDX = re.compile(r"SPDX-License-Identifier:\s*([A-Za-z0-9.+\-() ]+?)\s*(?:\*/|-->|$)", re.M)
# A licence file's name, any case, after a documentation extension is taken off: `LICENSE`,
# `licence`, `LICENSE-MIT`, `LICENSE_APACHE`, `LICENSE.BSD`, `COPYING3`, `COPYING.LESSER`. A
# lower-case extension after the word is a program (`license.py`), not a licence.
_LICENSE_NAME = re.compile(
    r"(?P<word>[Ll][Ii][Cc][Ee][Nn][CcSs][Ee]|[Cc][Oo][Pp][Yy][Ii][Nn][Gg])\d*"
    r"(?P<suffix>(?:[-_][A-Za-z0-9]+)*(?:\.[A-Z0-9][A-Za-z0-9]*)?)"
)
_DOC_EXTENSIONS = (".txt", ".text", ".md", ".markdown", ".rst", ".adoc", ".org", ".html")
_MAX_LICENSE_BYTES = 256 * 1024  # the longest licence texts (GPL, MPL) are under 40 KiB
_MAX_MANIFEST_BYTES = 1 << 20  # a manifest past this is not one a person wrote
# SPDX expression tokens: ids (`MIT`, `GPL-2.0+`, `LicenseRef-x`), operators, parentheses.
_SPDX_TOKEN = re.compile(r"\s*(\(|\)|[A-Za-z0-9.+:\-]+)")
_SPDX_ID = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9.\-]*\+?|(DocumentRef-[A-Za-z0-9.\-]+:)?LicenseRef-[A-Za-z0-9.\-]+"
)
# Words a manifest puts in its licence field that name no licence (npm's "UNLICENSED").
_NOT_LICENSES = frozenset({"UNLICENSED", "NONE", "SEE", "PROPRIETARY"})
# (SPDX id, phrases that must all appear, case-insensitive, white space folded). Order
# matters: more specific texts first (LGPL before GPL, BSD-3 before BSD-2).
_SIGNATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Apache-2.0", ("apache license", "version 2.0")),
    ("MPL-2.0", ("mozilla public license", "2.0")),
    ("AGPL-3.0-only", ("gnu affero general public license", "version 3")),
    ("LGPL-3.0-only", ("gnu lesser general public license", "version 3")),
    ("LGPL-2.1-only", ("gnu lesser general public license", "version 2.1")),
    ("GPL-3.0-only", ("gnu general public license", "version 3")),
    ("GPL-2.0-only", ("gnu general public license", "version 2")),
    (
        "BSD-3-Clause",
        ("redistribution and use in source and binary forms", "neither the name"),
    ),
    ("BSD-2-Clause", ("redistribution and use in source and binary forms",)),
    ("MIT", ("permission is hereby granted, free of charge", "the above copyright notice")),
    ("ISC", ("permission to use, copy, modify, and/or distribute this software",)),
    ("Unlicense", ("this is free and unencumbered software released into the public domain",)),
    ("PSF-2.0", ("python software foundation license",)),
    ("BSL-1.0", ("boost software license",)),
    ("Zlib", ("this software is provided 'as-is'", "altered source versions must be plainly")),
)


_MANIFESTS = ("package.json", "Cargo.toml", "pyproject.toml")


def is_license_source(path: str) -> bool:
    """Whether the file at ``path`` can declare its folder's licence: a package manifest
    or a licence text (``LICENSE``, ``COPYING.md``, ``LICENSE-MIT``)."""
    name = path.rsplit("/", 1)[-1]
    if name in _MANIFESTS:
        return True
    lower = name.lower()
    for ext in _DOC_EXTENSIONS:
        if lower.endswith(ext) and len(name) > len(ext):
            name = name[: -len(ext)]
            break
    return _LICENSE_NAME.fullmatch(name) is not None


def license_from_header(text: str) -> str | None:
    """The SPDX expression of an ``SPDX-License-Identifier`` tag near the top, if any."""
    head = "\n".join(text.split("\n", _HEADER_LINES)[:_HEADER_LINES])
    match = _SPDX.search(head)
    return match.group(1).strip() if match else None


def license_from_text(text: str) -> str:
    """The SPDX id of a licence text, or ``NOASSERTION``."""
    tagged = license_from_header(text)
    if tagged:
        return tagged
    folded = " ".join(text.lower().split())
    for spdx, phrases in _SIGNATURES:
        if all(p in folded for p in phrases):
            return spdx
    return NOASSERTION


def spdx_expression(raw: str) -> str | None:
    """``raw`` with its white space folded when it is an SPDX licence expression, else None.

    >>> spdx_expression("MIT OR Apache-2.0"), spdx_expression("SEE LICENSE IN LICENSE.txt")
    ('MIT OR Apache-2.0', None)
    """
    text = " ".join(raw.split())
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        match = _SPDX_TOKEN.match(text, pos)
        if match is None:
            return None
        tokens.append(match.group(1))
        pos = match.end()

    def is_id(token: str) -> bool:
        upper = token.upper()
        return (
            _SPDX_ID.fullmatch(token) is not None
            and upper not in ("AND", "OR", "WITH")
            and upper not in _NOT_LICENSES
        )

    def term(i: int) -> int | None:
        if i >= len(tokens):
            return None
        if tokens[i] == "(":
            j = expression(i + 1)
            return j + 1 if j is not None and j < len(tokens) and tokens[j] == ")" else None
        if not is_id(tokens[i]):
            return None
        if i + 1 < len(tokens) and tokens[i + 1].upper() == "WITH":
            return i + 3 if i + 2 < len(tokens) and is_id(tokens[i + 2]) else None
        return i + 1

    def expression(i: int) -> int | None:
        j = term(i)
        while j is not None and j < len(tokens) and tokens[j].upper() in ("AND", "OR"):
            j = term(j + 1)
        return j

    return text if tokens and expression(0) == len(tokens) else None


def _field(data: object, *keys: str) -> object:
    """``data[k1][k2]…`` through nested tables, or None where a level is missing."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _read(path: Path, limit: int) -> bytes | None:
    try:
        with path.open("rb") as handle:
            return handle.read(limit)
    except OSError:  # missing, a folder, unreadable: this folder does not declare by it
        return None


class LicenseResolver:
    """Finds the licence of each file under ``root``: its header tag, else what the nearest
    folder (its own, then each ancestor up to ``root``) declares, read once per folder."""

    def __init__(self, root: Path) -> None:
        self._root = root.resolve() if root.is_dir() else root.resolve().parent
        self._by_dir: dict[str, str] = {}

    def for_file(self, rel_path: str, text: str) -> str:
        """The SPDX id for the workspace-relative ``rel_path`` whose content is ``text``."""
        tagged = license_from_header(text)
        if tagged:
            return tagged
        parent = rel_path.rsplit("/", 1)[0] if "/" in rel_path else ""
        return self._for_dir(parent)

    def _for_dir(self, rel_dir: str) -> str:
        cached = self._by_dir.get(rel_dir)
        if cached is not None:
            return cached
        folder = self._root / rel_dir if rel_dir else self._root
        found = self._from_manifests(folder) or self._from_files(folder)
        if found is None:
            if rel_dir:
                found = self._for_dir(rel_dir.rsplit("/", 1)[0] if "/" in rel_dir else "")
            else:
                found = NOASSERTION
        self._by_dir[rel_dir] = found
        return found

    def _from_manifests(self, folder: Path) -> str | None:
        """The ``license`` field of the folder's package manifest, if it is SPDX."""
        for name in _MANIFESTS:
            raw = _read(folder / name, _MAX_MANIFEST_BYTES)
            if raw is None:
                continue
            try:
                text = raw.decode("utf-8")
                data: object = json.loads(text) if name.endswith(".json") else tomllib.loads(text)
            except ValueError:  # undecodable or malformed: it declares nothing we can read
                continue
            if name == "package.json":
                found = self._npm(data)
            elif name == "Cargo.toml":
                found = self._cargo(data, folder)
            else:
                found = self._pyproject(data, folder)
            if found:
                return found
        return None

    def _cargo(self, data: object, folder: Path) -> str | None:
        value = _field(data, "package", "license")
        if _field(value, "workspace") is True:  # `license.workspace = true`: the workspace's
            if isinstance(data, dict) and "workspace" in data:  # a root package: its own
                value = _field(data, "workspace", "package", "license")
            else:
                value = self._cargo_workspace_license(folder)
        # `MIT/Apache-2.0`: old Cargo's OR
        return self._spdx(value.replace("/", " OR ") if isinstance(value, str) else None)

    def _cargo_workspace_license(self, folder: Path) -> object:
        """``[workspace.package] license`` of the workspace a crate inherits from: the
        nearest folder above it, up to the root, whose Cargo.toml has a ``[workspace]``
        (above, so a change there reaches the crate's files as any folder's licence does)."""
        while folder != self._root and folder.is_relative_to(self._root):
            folder = folder.parent
            raw = _read(folder / "Cargo.toml", _MAX_MANIFEST_BYTES)
            try:
                data = tomllib.loads(raw.decode("utf-8")) if raw is not None else None
            except ValueError:
                continue
            if isinstance(data, dict) and "workspace" in data:
                return _field(data, "workspace", "package", "license")
        return None

    @staticmethod
    def _spdx(value: object) -> str | None:
        return spdx_expression(value) if isinstance(value, str) else None

    def _npm(self, data: object) -> str | None:
        value = _field(data, "license")
        if isinstance(value, dict):  # the deprecated {"type": "MIT", "url": …}
            value = value.get("type")
        found = self._spdx(value)
        listed = _field(data, "licenses")  # deprecated: [{"type": …}, …], any one applies
        if found is None and isinstance(listed, list):
            ids = [self._spdx(_field(item, "type")) for item in listed]
            if ids and all(ids):
                found = " OR ".join(_grouped(i) for i in ids if i)
        return found

    def _pyproject(self, data: object, folder: Path) -> str | None:
        value = _field(data, "project", "license")
        if isinstance(value, dict):  # PEP 621 tables: {text = "MIT"} or {file = "LICENSE"}
            text, file = value.get("text"), value.get("file")
            if isinstance(text, str):
                found = spdx_expression(text) or license_from_text(text)
                return None if found == NOASSERTION else found
            if isinstance(file, str):
                path = (folder / file).resolve()
                raw = _read(path, _MAX_LICENSE_BYTES) if path.is_relative_to(self._root) else None
                found = license_from_text(raw.decode("utf-8", "replace")) if raw else NOASSERTION
                return None if found == NOASSERTION else found
            return None
        return self._spdx(value) or self._spdx(_field(data, "tool", "poetry", "license"))

    @staticmethod
    def _from_files(folder: Path) -> str | None:
        """What the folder's licence files say; None when it has none."""
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return None
        ranked: list[tuple[int, str]] = []
        for entry in entries:
            stem = entry.name
            lower = stem.lower()
            for ext in _DOC_EXTENSIONS:
                if lower.endswith(ext) and len(stem) > len(ext):
                    stem = stem[: -len(ext)]
                    break
            match = _LICENSE_NAME.fullmatch(stem)
            if match is None:
                continue
            try:
                if not entry.is_file():
                    continue
            except OSError:
                continue
            rank = 0 if match["word"].upper().startswith("LICEN") else 2
            raw = _read(Path(entry.path), _MAX_LICENSE_BYTES)
            if raw is not None:
                found = license_from_text(raw.decode("utf-8", errors="replace"))
                ranked.append((rank + (1 if match["suffix"] else 0), found))
        if not ranked:
            return None
        known = [(rank, spdx) for rank, spdx in ranked if spdx != NOASSERTION]
        if any(spdx.startswith("LGPL-") for _, spdx in known):
            known = [(rank, spdx) for rank, spdx in known if not spdx.startswith("GPL-")]
        if not known:
            return NOASSERTION
        best = min(rank for rank, _ in known)
        return " OR ".join(sorted({_grouped(spdx) for rank, spdx in known if rank == best}))


def _grouped(expression: str) -> str:
    """An expression as one operand of ``OR``: parenthesised when it has operators."""
    return f"({expression})" if " " in expression else expression
