"""`tenants simulate`'s dedicated-pool scenario on the real components (#37): making a pool dedicated
shows the other teams' longer waits.

The base is the prod example in one cohort (tests/e2e/scheduling/borrowing.py) with two shared
8-GPU H100 pools, h100-lab and h100-pub, and two tenants holding 4 H100s each: 8 GPUs are spare,
held by the spare cohort on both pools. The trace (tests/fixtures/simulate/dedicated.yaml) has
alpha run one 4-GPU job and beta three at once: on the base beta borrows the spare and none of its
jobs waits. The change dedicates h100-lab to alpha: its spare is alpha's alone, beta can borrow only
on h100-pub, so its third job waits for one of the others (a job's duration) and the report says so;
alpha's wait stays (on the base one of its job and beta's second borrows on h100-pub, whichever
Kueue admits second, so alpha's borrowing may be reported as moved). Each side is replayed on a runtime plane of its own (kwok nodes,
kube-scheduler, Kueue); about 1.5 minutes warm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.simulate.report import Tolerance, compare
from components.simulate.trace import read_trace
from tests.e2e.scheduling.borrowing import write_borrowing_project
from tests.project_edits import replace_once
from tools.simulation import WALL_LATENCY_SECONDS, Side, replay

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "tests" / "fixtures" / "simulate" / "dedicated.yaml"
SPEED = 60
JOB_SECONDS = 600
TOLERANCE = Tolerance(WALL_LATENCY_SECONDS * SPEED)
POOLS = """      h100-lab:
        gpuClass: h100
        gpusPerNode: 8
        nodes: [gpu-h100-09]
      h100-pub:
        gpuClass: h100
        gpusPerNode: 8
        nodes: [gpu-h100-10]
"""
TENANT = """apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: {name}
displayName: {name}
costCenter: cc-9100
quota:
  cpu: {{requests: "16", limits: "32"}}
  memory: {{requests: 64Gi, limits: 128Gi}}
  gpu: {{h100: 4}}
gpu:
  classes: [h100]
"""


def _base(root: Path) -> Path:
    write_borrowing_project(root)
    anchor = "        migLayout: eval-mix\n"
    replace_once(root / "stacks" / "Pulumi.prod.yaml", anchor, anchor + POOLS)
    for name in ("alpha", "beta"):
        (root / "tenants" / f"{name}.yaml").write_text(TENANT.format(name=name))
    return root


def _dedicated(root: Path) -> Path:
    _base(root)
    replace_once(root / "tenants" / "alpha.yaml", "  classes: [h100]\n", "  classes: [h100]\n  dedicatedPools: [h100-lab]\n")
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    scratch = tmp_path_factory.mktemp("dedicated")
    roots = {name: make(scratch / name) for name, make in (("base", _base), ("dedicated", _dedicated))}
    trace = read_trace(TRACE, load_environment(roots["base"], "prod"))
    outcomes = {name: replay("prod", Side(name, root), trace, SPEED) for name, root in roots.items()}
    return compare(outcomes["base"], outcomes["dedicated"], TOLERANCE, {"stack": "prod", "speed": SPEED})


def test_dedicating_the_pool_others_borrow_on_makes_their_wait_longer(report):
    beta, alpha = report["tenants"]["beta"], report["tenants"]["alpha"]
    assert beta["base"]["admitted"] == beta["change"]["admitted"] == 3, beta
    assert beta["base"]["wait_p95"] <= TOLERANCE.seconds and beta["base"]["borrowed_hours"] > 0, beta
    assert TOLERANCE.same(beta["change"]["wait_p95"], JOB_SECONDS), beta   # its third job waits for one of the others
    longer = [f for f in report["findings"] if f["kind"] == "longer-wait"]
    assert [f["tenant"] for f in longer] == ["beta"], report["findings"]
    assert TOLERANCE.same(alpha["base"]["wait_p95"], alpha["change"]["wait_p95"]), alpha
    assert alpha["base"]["admitted"] == alpha["change"]["admitted"] == 1
    # On the base, whether alpha's job or beta's second takes h100-lab first is Kueue's order of the
    # moment (the other borrows on h100-pub): alpha's borrowing may move, its wait may not.
    assert [f["kind"] for f in report["findings"] if f.get("tenant") == "alpha"] in ([], ["borrowing-moved"]), report["findings"]
