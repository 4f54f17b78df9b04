"""Shared test switches: ``--update-goldens`` rewrites golden files instead of comparing;
with ``CI`` set, property tests draw the same examples on every run."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# A fresh clone has no example database, so a randomized property test could fail a
# submission on a draw nobody saw locally; CI draws a fixed set, local runs keep exploring
# (that is how the differential Markdown test found the empty list item bug).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite golden files from the current output instead of comparing",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    """Whether this run regenerates golden files."""
    return bool(request.config.getoption("--update-goldens"))
