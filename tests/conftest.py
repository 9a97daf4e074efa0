"""Fixtures shared by the unit tests: a private, writable copy of the example project."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A tmp project holding copies of the example `tenants/` and `stacks/`, safe to mutate.

    Tests edit or replace files in it and run the loader or `tenants --root <copy>` on it.
    """
    root = tmp_path / "project"
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, root / part)
    return root
