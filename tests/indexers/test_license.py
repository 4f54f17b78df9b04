"""Licences: SPDX tags, licence files by any usual name, and manifests' licence fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexers._license import NOASSERTION, LicenseResolver, spdx_expression

MIT = (
    "Copyright (c) 2024 Someone\n\nPermission is hereby granted, free of charge, to any person"
    " obtaining a copy\nof this software ...\n\nThe above copyright notice and this permission"
    " notice shall be included\n"
)
APACHE = "                                 Apache License\n                           Version 2.0"
GPL3 = "                    GNU GENERAL PUBLIC LICENSE\n                       Version 3"
LGPL3 = "                   GNU LESSER GENERAL PUBLIC LICENSE\n                       Version 3"


def _tree(root: Path, files: dict[str, str]) -> LicenseResolver:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return LicenseResolver(root)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"license": MIT}, "MIT"),
        ({"License.md": MIT}, "MIT"),
        ({"LICENSE-MIT": MIT, "LICENSE-APACHE": APACHE}, "Apache-2.0 OR MIT"),
        ({"LICENSE": "Dual licensed, see the files below.", "LICENSE-MIT": MIT,
          "LICENSE-APACHE": APACHE}, "Apache-2.0 OR MIT"),
        ({"COPYING": GPL3}, "GPL-3.0-only"),
        ({"COPYING": GPL3, "COPYING.LESSER": LGPL3}, "LGPL-3.0-only"),
        ({"COPYING.txt": MIT}, "MIT"),
        ({"LICENSE": MIT, "COPYING": GPL3}, "MIT"),
        ({"LICENSE": "All rights reserved."}, NOASSERTION),
        ({"license.py": APACHE}, NOASSERTION),  # a program about licences is not one
    ],
)  # fmt: skip
def test_licence_files_by_any_usual_name(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    """Lowercase, suffixed and COPYING* licence files are read; dual files join with OR."""
    assert _tree(tmp_path, files).for_file("src/a.py", "x = 1\n") == expected


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"package.json": '{"name": "x", "license": "ISC"}'}, "ISC"),
        ({"package.json": '{"license": {"type": "MIT"}}'}, "MIT"),
        ({"package.json": '{"licenses": [{"type": "MIT"}, {"type": "GPL-2.0"}]}'},
         "MIT OR GPL-2.0"),
        ({"Cargo.toml": '[package]\nname = "x"\nlicense = "MIT OR Apache-2.0"\n'},
         "MIT OR Apache-2.0"),
        ({"Cargo.toml": '[package]\nlicense = "MIT/Apache-2.0"\n'}, "MIT OR Apache-2.0"),
        ({"pyproject.toml": '[project]\nname = "x"\nlicense = "BSD-3-Clause"\n'},
         "BSD-3-Clause"),
        ({"pyproject.toml": '[project]\nlicense = {text = "Apache-2.0"}\n'}, "Apache-2.0"),
        ({"pyproject.toml": '[project]\nlicense = {file = "docs/TERMS"}\n', "docs/TERMS": MIT},
         "MIT"),
        ({"pyproject.toml": '[tool.poetry]\nlicense = "GPL-3.0-or-later"\n'},
         "GPL-3.0-or-later"),
        # A declared expression beats text recognition (which cannot tell "-or-later").
        ({"pyproject.toml": '[project]\nlicense = "GPL-3.0-or-later"\n', "COPYING": GPL3},
         "GPL-3.0-or-later"),
        ({"package.json": '{"license": "UNLICENSED"}', "LICENSE": MIT}, "MIT"),
        ({"package.json": '{"license": "SEE LICENSE IN TERMS.md"}'}, NOASSERTION),
        ({"package.json": "{not json", "LICENSE": MIT}, "MIT"),
        ({"Cargo.toml": "[package\nlicense = 'MIT'"}, NOASSERTION),
    ],
)  # fmt: skip
def test_manifest_licence_fields(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    """package.json, Cargo.toml and pyproject.toml declare a licence by an SPDX field."""
    assert _tree(tmp_path, files).for_file("a.py", "x = 1\n") == expected


def test_nearest_folder_declares(tmp_path: Path) -> None:
    """A package's own manifest wins over the root licence; one without a field inherits it."""
    resolver = _tree(
        tmp_path,
        {
            "LICENSE": MIT,
            "packages/gpl/package.json": '{"license": "GPL-3.0-only"}',
            "packages/plain/package.json": '{"name": "plain"}',
        },
    )
    assert resolver.for_file("packages/gpl/src/a.js", "") == "GPL-3.0-only"
    assert resolver.for_file("packages/plain/src/a.js", "") == "MIT"
    assert resolver.for_file("src/a.js", "// SPDX-License-Identifier: Apache-2.0\n") == "Apache-2.0"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("MIT", "MIT"),
        ("  MIT   OR\nApache-2.0 ", "MIT OR Apache-2.0"),
        ("(MIT OR Apache-2.0) AND BSD-3-Clause", "(MIT OR Apache-2.0) AND BSD-3-Clause"),
        ("GPL-2.0+ WITH Classpath-exception-2.0", "GPL-2.0+ WITH Classpath-exception-2.0"),
        ("LicenseRef-Proprietary", "LicenseRef-Proprietary"),
        ("MIT License", None),
        ("MIT OR", None),
        ("(MIT", None),
        ("UNLICENSED", None),
        ("", None),
    ],
)
def test_spdx_expression_syntax(raw: str, expected: str | None) -> None:
    """Only well-formed SPDX expressions are taken from a manifest."""
    assert spdx_expression(raw) == expected


def test_cargo_workspace_licence_is_inherited(tmp_path: Path) -> None:
    """A crate with ``license.workspace = true`` has its workspace's ``[workspace.package]``
    licence (the nearest Cargo.toml above with a ``[workspace]``, or its own)."""
    resolver = _tree(
        tmp_path,
        {
            "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\n\n'
            '[workspace.package]\nlicense = "Apache-2.0 OR MIT"\n',
            "crates/foo/Cargo.toml": '[package]\nname = "foo"\nlicense.workspace = true\n',
            "crates/bar/Cargo.toml": '[package]\nname = "bar"\nlicense = "MIT"\n',
            "app/Cargo.toml": "[package]\nlicense.workspace = true\n\n"
            '[workspace]\n\n[workspace.package]\nlicense = "ISC"\n',
        },
    )
    assert resolver.for_file("crates/foo/src/lib.rs", "") == "Apache-2.0 OR MIT"
    assert resolver.for_file("crates/bar/src/lib.rs", "") == "MIT"
    assert resolver.for_file("app/src/main.rs", "") == "ISC"
