"""The network dataplane lane (`make e2e-network`): NetworkPolicies enforced on packets.

Each example stack's Namespaces and NetworkPolicies go to the real API server of the e2e lane
(`tools/control_plane.py`), the Kubernetes SIG Network reference agent `kube-network-policies`
(`tools/kube-network-policies`, built by `tools/build.sh network`) watches them, and every cell
(source, destination, protocol, port) of `plan.py` is probed through network namespaces
(`dataplane.py`) and compared with the project's evaluator (`tests/manifests/network_reachability.py`).

Every test module here sets `pytestmark = pytest.mark.network`; the other lanes leave them out.
Outside `make e2e-network` a lane that cannot run (not root, a command, the agent or a kernel
feature missing) is skipped with the reason; `make e2e-network` sets
GPU_TENANCY_NETWORK_REQUIRED=1, which turns that skip into an error.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.network.dataplane import agent_binary, kernel_unavailable_reason
from tools.control_plane import BIN_DIR, ControlPlane, lane_unavailable_reason
from tools.lanes import gate_lane

_HERE = Path(__file__).resolve().parent
NETWORK_MARKER = "network: enforces NetworkPolicies on packets with kube-network-policies (make e2e-network)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", NETWORK_MARKER)


def _reason() -> str:
    control_plane = lane_unavailable_reason()
    if control_plane:
        return control_plane
    if not os.access(agent_binary(), os.X_OK):
        hint = "" if shutil.which("go") else " (and install Go >= 1.26 first)"
        return (f"network dataplane lane: {agent_binary()} not built; run `make e2e-network` or "
                f"`tools/build.sh network`{hint}, ~6 min cold")
    return kernel_unavailable_reason()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gate_lane(items, _HERE, _reason, "GPU_TENANCY_NETWORK_REQUIRED")


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    """A control plane of the e2e lane's making, for this lane alone: it deletes every pod and
    NetworkPolicy between stacks, which must not touch the stacks other e2e tests applied."""
    workdir = Path(tempfile.mkdtemp(prefix="gpu-tenancy-network-"))
    cp = ControlPlane(BIN_DIR, workdir)
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()
        shutil.rmtree(workdir, ignore_errors=True)
