"""NVIDIA's own config parsers, for the tests of the configs gpu-tenancy writes for them.

`tools/nvidia-validators` (a Go program built against the device plugin's `api/config/v1` and
mig-parted's `api/spec/v1` from `../shared/src`) is built by `tools/build.sh validators` into
`$GPU_TENANCY_CACHE_DIR/nvidia-validators/` (tools/README.md). `make lint` builds it and sets
``GPU_TENANCY_VALIDATORS_REQUIRED=1``, which turns "cannot run" (no Go, no C compiler, no
`../shared`) into a collection error; elsewhere these tests are skipped with the reason
(``GPU_TENANCY_VALIDATORS_BUILD=1`` lets pytest build it). ``GPU_TENANCY_VALIDATORS_BIN_DIR``
points at one exact binary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.lanes import gate_lane

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_SRC = REPO_ROOT.parent / "shared" / "src"
_HERE = Path(__file__).resolve().parent


def bin_dir() -> Path:
    override = os.environ.get("GPU_TENANCY_VALIDATORS_BIN_DIR")
    if override:
        return Path(override)
    return Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache") / "nvidia-validators"


def _built() -> bool:
    return os.access(bin_dir() / "nvidia-validators", os.X_OK)


def lane_unavailable_reason(build: bool = False) -> str:
    if _built():
        return ""
    where = f"nvidia-validators not built in {bin_dir()}"
    if not (SHARED_SRC / "k8s-device-plugin" / "go.mod").exists() or not (SHARED_SRC / "mig-parted" / "go.mod").exists():
        return f"{where}, and NVIDIA's sources are not in {SHARED_SRC} (../shared beside the checkout) to build it from"
    if shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists():
        return f"{where}, and `go` is not on PATH to build it: install Go >= 1.26, then run `make lint`"
    if build:
        rc = subprocess.call(["bash", str(REPO_ROOT / "tools" / "build.sh"), "validators"], stdout=sys.stderr)
        return "" if rc == 0 and _built() else f"`tools/build.sh validators` failed (exit {rc}); see its output above"
    return f"{where}: run `make lint` (or `tools/build.sh validators`), or set GPU_TENANCY_VALIDATORS_BUILD=1 to build from pytest"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    build = os.environ.get("GPU_TENANCY_VALIDATORS_BUILD") == "1"
    gate_lane(items, _HERE, lambda: lane_unavailable_reason(build=build), "GPU_TENANCY_VALIDATORS_REQUIRED")


class NvidiaValidators:
    """Runs `nvidia-validators`: `accepts` returns what upstream parsed, `refusal` why it refused."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def run(self, parser: str, config: Path, *selected: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.binary), parser, str(config), *selected], capture_output=True, text=True)

    def accepts(self, parser: str, config: Path, *selected: str) -> dict:
        """`parser` is `device-plugin` or `mig-parted`; `selected` names mig-configs to look up."""
        done = self.run(parser, config, *selected)
        assert done.returncode == 0, f"{parser} refused {config.name}:\n{done.stderr}\n--- the config ---\n{config.read_text()}"
        return json.loads(done.stdout)

    def refusal(self, parser: str, config: Path, *selected: str) -> str:
        done = self.run(parser, config, *selected)
        assert done.returncode == 1, f"{parser} did not refuse {config.name} (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        return done.stderr


@pytest.fixture(scope="session")
def nvidia() -> NvidiaValidators:
    return NvidiaValidators(bin_dir() / "nvidia-validators")
