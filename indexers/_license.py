"""Licenses as SPDX ids: a file's own ``SPDX-License-Identifier``, else the nearest LICENSE.

Recognising a LICENSE file is done by a few phrases each well-known licence text contains;
anything unrecognised is ``NOASSERTION`` (SPDX's word for "we did not determine it"), never
a guess.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["NOASSERTION", "LicenseResolver", "license_from_header", "license_from_text"]

NOASSERTION = "NOASSERTION"
_HEADER_LINES = 30  # SPDX tags sit in the first comment block
_SPDX = re.compile(r"SPDX-License-Identifier:\s*([A-Za-z0-9.+\-() ]+?)\s*(?:\*/|-->|$)", re.M)
_LICENSE_FILES = (
    "LICENSE",
    "LICENSE.txt",
    "LICENSE.md",
    "LICENSE.rst",
    "LICENCE",
    "LICENCE.txt",
    "LICENCE.md",
    "COPYING",
    "COPYING.txt",
    "LICENSE-MIT",
    "LICENSE-APACHE",
)
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


class LicenseResolver:
    """Finds the licence of each file under ``root``: its header tag, else the nearest
    LICENSE file in its folder or an ancestor up to ``root`` (read once per folder)."""

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
        found = self._read_license(self._root / rel_dir if rel_dir else self._root)
        if found is None:
            if rel_dir:
                found = self._for_dir(rel_dir.rsplit("/", 1)[0] if "/" in rel_dir else "")
            else:
                found = NOASSERTION
        self._by_dir[rel_dir] = found
        return found

    @staticmethod
    def _read_license(folder: Path) -> str | None:
        for name in _LICENSE_FILES:
            candidate = folder / name
            try:
                if candidate.is_file():
                    return license_from_text(candidate.read_text("utf-8", errors="replace"))
            except OSError:
                continue
        return None
