"""Gating for the lanes that need real binaries (e2e, monitoring, the Pulumi engine).

Outside its make target a lane that cannot run reports every test skipped with the reason (what to
build or install); its make target sets `required_env=1`, so "cannot run" fails instead of passing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

TOOLS_DIR = Path(__file__).resolve().parent


def tool_versions() -> dict[str, str]:
    """The pinned versions of the lanes' Go binaries (`tools/versions.env`, also sourced by tools/*.sh).

    >>> tool_versions()["K8S_VERSION"].startswith("v1.")
    True
    """
    out: dict[str, str] = {}
    for line in (TOOLS_DIR / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip("\"'")
    return out


def gate_lane(items: list[pytest.Item], folder: Path, unavailable: Callable[[], str], required_env: str) -> None:
    """Skip (or, with `required_env`=1, refuse) the collected tests under `folder` when
    `unavailable()` gives a reason; it is asked only when such tests remain after -m/-k.

    >>> gate_lane([], Path("tests/e2e"), lambda: "no binaries", "GPU_TENANCY_E2E_REQUIRED")
    """
    ours = [it for it in items if folder in Path(str(it.path)).resolve().parents]
    if not ours:
        return
    reason = unavailable()
    if not reason:
        return
    if os.environ.get(required_env) == "1":
        raise pytest.UsageError(f"{required_env}=1 but the lane cannot run: {reason}")
    marker = pytest.mark.skip(reason=reason)
    for item in ours:
        item.add_marker(marker)
