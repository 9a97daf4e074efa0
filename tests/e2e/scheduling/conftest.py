"""The real scheduling lane: kube-scheduler and Kueue against the e2e control plane (the plane
itself is `tools.scheduling`; this file gates the lane and declares its fixtures).

Run with `make e2e-scheduling` (sets GPU_TENANCY_SCHEDULING_REQUIRED=1, so "cannot run"
fails instead of skipping).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from tools.control_plane import REPO_ROOT
from tools.lanes import gate_lane
from tools.scheduling import SchedulingStack, running_scheduling_stack, scheduling_unavailable_reason

_HERE = Path(__file__).resolve().parent
REQUIRED_ENV = "GPU_TENANCY_SCHEDULING_REQUIRED"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gate_lane(items, _HERE, scheduling_unavailable_reason, REQUIRED_ENV)


@pytest.fixture(scope="session")
def kueue_stack(e2e_summary: list[str]) -> Iterator[SchedulingStack]:
    """The example prod stack (scheduler: kueue) on a control plane with kube-scheduler and Kueue."""
    yield from running_scheduling_stack("prod", e2e_summary)


# A copy of the example where eval lends to a new tenant on the shared A100 pool: cohort `shared`
# for every prod tenant, eval's A100 quota lowered to 12 and `research` holding the other 8 (the
# pool holds 16 x overcommit 1.25 = 20), neither with a borrowingLimit.
RESEARCH = """apiVersion: gpu-tenancy.dev/v1alpha1
kind: Tenant
name: research
displayName: Research
costCenter: cc-9000
quota:
  cpu: {requests: "32", limits: "64"}
  memory: {requests: 128Gi, limits: 256Gi}
  gpu: {a100: 8}
gpu:
  classes: [a100]
"""


def write_borrowing_project(root: Path) -> Path:
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    stack = root / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    assert text.count("    scheduler: kueue\n") == 1
    stack.write_text(text.replace("    scheduler: kueue\n", "    scheduler: kueue\n    queues:\n      defaultCohort: shared\n"))
    eval_file = root / "tenants" / "eval.yaml"
    text = eval_file.read_text()
    assert text.count("      gpu: {a100: 20}\n") == 1
    eval_file.write_text(text.replace("      gpu: {a100: 20}\n", "      gpu: {a100: 12}\n"))
    (root / "tenants" / "research.yaml").write_text(RESEARCH)
    return root


@pytest.fixture(scope="session")
def borrowing_stack(e2e_summary: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulingStack]:
    root = write_borrowing_project(tmp_path_factory.mktemp("borrowing") / "project")
    yield from running_scheduling_stack("prod", e2e_summary, root, what="prod + cohort 'shared'")
