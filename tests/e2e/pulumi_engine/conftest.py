"""The real-engine lane (`make e2e-pulumi`): fixtures and the "can it run?" check.

Every test module here sets `pytestmark = pytest.mark.pulumi`; `make test` and `make e2e`
leave them out (`-m "not pulumi"`). They need, besides the control-plane binaries of tests/e2e, the
Pulumi CLI and the Kubernetes provider built by `tools/build.sh pulumi pulumi-resource-kubernetes`.
Outside `make e2e-pulumi` a missing binary skips them with the reason; `make e2e-pulumi` sets
GPU_TENANCY_PULUMI_REQUIRED=1, which turns that skip into an error.
"""

from __future__ import annotations

import os

# The Automation API runs gRPC in this process, and the control planes are started afterwards with
# fork + exec. gRPC's fork support restarts its poller thread in the child, where closing the
# inherited descriptors before exec makes it abort (etcd "exited" with SIGABRT). Off, before grpc loads.
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tools.lanes import gate_lane

from tools.engine import (
    Engine,
    LocalCluster,
    OPERATIONS,
    copy_project,
    missing_pulumi_tools,
    pulumi_bin_dirs,
)

_HERE = Path(__file__).resolve().parent
PULUMI_MARKER = "pulumi: runs the real Pulumi engine on a local control plane (make e2e-pulumi)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", PULUMI_MARKER)


def _reason() -> str:
    missing = missing_pulumi_tools()
    if not missing:
        return ""
    dirs = pulumi_bin_dirs()
    where = ", ".join(f"{m} in {dirs[m]}" for m in missing)
    if shutil.which("go") is None:
        return (f"real-engine lane: {where} not built and `go` is not on PATH. Install Go >= 1.26, "
                "then run `make e2e-pulumi` (builds the Pulumi CLI and provider: 52 and 71 min cold measured on a loaded 2-core machine, seconds warm).")
    return f"real-engine lane: {where} not built. Run `make e2e-pulumi` (or `tools/build.sh pulumi pulumi-resource-kubernetes`)."


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gate_lane(items, _HERE, _reason, "GPU_TENANCY_PULUMI_REQUIRED")


class Scenario:
    """A project copy, a fresh control plane prepared for `stack`, and the engine on that stack. With
    `fixture` (a folder of `stacks/` and `tenants/`), those files replace the example's in the copy."""

    def __init__(self, root: Path, stack: str, fixture: Path | None = None) -> None:
        self.root = root
        self.project = copy_project(root / "project")
        for part in ("stacks", "tenants") if fixture is not None else ():
            shutil.rmtree(self.project / part)
            shutil.copytree(fixture / part, self.project / part)
        self.stack = stack
        self.cluster = LocalCluster(root / "cluster", self.project, stack).start()
        self.engine = Engine(self.project, stack, root / "state", self.cluster.kubeconfig)

    @property
    def api(self) -> Any:
        return self.cluster.api_client

    def tenant_file(self, name: str) -> Path:
        return self.project / "tenants" / f"{name}.yaml"

    def stop(self) -> None:
        self.cluster.stop()


@pytest.fixture(scope="module")
def scenario_factory(e2e_summary: list[str]) -> Iterator[Callable[[str], Scenario]]:
    """Module-scoped: scenarios of one test module share nothing with other modules."""
    made: list[Scenario] = []
    keep = os.environ.get("GPU_TENANCY_E2E_KEEP") == "1"
    roots: list[Path] = []

    def make(stack: str, fixture: Path | None = None) -> Scenario:
        root = Path(tempfile.mkdtemp(prefix=f"gpu-tenancy-pulumi-{stack}-"))
        roots.append(root)
        s = Scenario(root, stack, fixture)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()
    for root in roots:
        if keep:
            print(f"\n[e2e-pulumi] kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def timed(e2e_summary: list[str], request: pytest.FixtureRequest) -> Callable[[str, Callable[[], Any]], Any]:
    """timed(label, fn): run fn and add its wall time to the lane summary."""

    def run(label: str, fn: Callable[[], Any]) -> Any:
        start = time.monotonic()
        out = fn()
        e2e_summary.append(f"{request.node.name}: {label} {time.monotonic() - start:.1f}s")
        return out

    return run


def _changes(counts: dict[str, int] | None) -> str:
    if counts is None:
        return "failed as expected"
    moved = {op: n for op, n in counts.items() if op not in ("same", "read") and n}
    return " ".join(f"{op} {n}" for op, n in sorted(moved.items())) or "no change"


@pytest.fixture(autouse=True)
def engine_operations(request: pytest.FixtureRequest, e2e_summary: list[str]) -> Iterator[None]:
    """After each scenario, one summary line with the engine operations it ran and their changes."""
    start = len(OPERATIONS)
    yield
    ran = OPERATIONS[start:]
    if ran:
        e2e_summary.append(f"scenario {request.node.name}: {len(ran)} engine operation{'s' * (len(ran) > 1)}: "
                           + "; ".join(f"{op} {stack} ({_changes(counts)})" for op, stack, counts in ran))

