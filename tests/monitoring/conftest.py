"""The monitoring lane: the generated rules and dashboards against the real `promtool` and `prometheus`.

Both binaries are built from the pinned Prometheus Go module by `tools/build.sh monitoring` into
`$GPU_TENANCY_CACHE_DIR/prometheus/<PROMETHEUS_VERSION>/` (see tools/README.md). `make e2e-monitoring`
builds them and sets ``GPU_TENANCY_MONITORING_REQUIRED=1``, which turns "cannot run" into a
collection error; elsewhere the lane is skipped with the reason (``GPU_TENANCY_MONITORING_BUILD=1``
lets pytest build them). ``GPU_TENANCY_PROM_BIN_DIR`` points at one exact binary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.lanes import gate_lane, tool_versions

from components.fleet.environment import Environment
from components.load import load_environment

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_DIR = REPO_ROOT / "tools"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BINARIES = ("promtool", "prometheus")


PROMETHEUS_VERSION = tool_versions()["PROMETHEUS_VERSION"]


def bin_dir() -> Path:
    override = os.environ.get("GPU_TENANCY_PROM_BIN_DIR")
    if override:
        return Path(override)
    cache = Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")
    return cache / "prometheus" / PROMETHEUS_VERSION


def _missing() -> list[str]:
    return [b for b in BINARIES if not os.access(bin_dir() / b, os.X_OK)]


def lane_unavailable_reason(build: bool = False) -> str:
    missing = _missing()
    if not missing:
        return ""
    listed = ", ".join(missing)
    if shutil.which("go") is None:
        return (
            f"monitoring lane: {listed} not found in {bin_dir()} and `go` is not on PATH to build them. "
            "Install Go >= 1.26.7, then run `make e2e-monitoring` (or `tools/build.sh monitoring`)."
        )
    if build:
        rc = subprocess.call(["bash", str(TOOLS_DIR / "build.sh"), "monitoring"], stdout=sys.stderr)
        if rc == 0 and not _missing():
            return ""
        return f"monitoring lane: `tools/build.sh monitoring` failed (exit {rc}); see its output above"
    return (
        f"monitoring lane: {listed} not built in {bin_dir()}. Run `make e2e-monitoring` (or "
        "`tools/build.sh monitoring`), or set GPU_TENANCY_MONITORING_BUILD=1 to build from pytest."
    )


_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    build = os.environ.get("GPU_TENANCY_MONITORING_BUILD") == "1"
    gate_lane(items, _HERE, lambda: lane_unavailable_reason(build=build), "GPU_TENANCY_MONITORING_REQUIRED")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return bin_dir() / "promtool"


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    return bin_dir() / "prometheus"


@pytest.fixture(scope="session")
def lab() -> Environment:
    """The fixture stack: tests/monitoring/fixtures (stack `lab`, tenants alpha and beta)."""
    return load_environment(FIXTURES, "lab")
