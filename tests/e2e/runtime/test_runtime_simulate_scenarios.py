"""`tenants simulate`'s scenarios on the real components (#37): one base and two changes of the stack,
each replayed on a runtime plane of its own (kwok nodes, kube-scheduler, Kueue), the report built from
what those planes did.

The base is the prod example with `research` (A100 quota 8) beside eval (12) on the shared A100 pool,
no cohort; the trace (tests/fixtures/simulate/scenarios.yaml) has research ask for 12 GPUs at once.
* a cohort for every tenant: research borrows eval's idle quota, its third job no longer waits a
  job's duration, and the report calls the borrowing out; eval's figures stay;
* a new shared H100 pool no tenant may use: reported idle as a new pool, nobody's figures move
  (which is also the determinism check: the same jobs on two separate planes).
About 2.5 minutes warm: three planes of ~22 s, each replay 10-20 s at speed 60.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.simulate.report import Tolerance, compare
from components.simulate.trace import read_trace
from tests.e2e.scheduling.borrowing import SPARE_POOL, write_borrowing_project
from tools.simulation import WALL_LATENCY_SECONDS, Side, replay

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "tests" / "fixtures" / "simulate" / "scenarios.yaml"
SPEED = 60
JOB_SECONDS = 600
TOLERANCE = Tolerance(WALL_LATENCY_SECONDS * SPEED)   # as `tenants simulate` states it
COHORT = "    queues:\n      defaultCohort: shared\n"


def _base(root: Path) -> Path:
    """The borrowing copy of the example without its cohort."""
    write_borrowing_project(root)
    stack = root / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    assert text.count(COHORT) == 1
    stack.write_text(text.replace(COHORT, ""))
    return root


def _with_cohort(root: Path) -> Path:
    return write_borrowing_project(root)


def _with_idle_pool(root: Path) -> Path:
    _base(root)
    stack = root / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    anchor = "        migLayout: eval-mix\n"
    assert text.count(anchor) == 1
    stack.write_text(text.replace(anchor, anchor + SPARE_POOL))
    return root


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    """The measured Outcome of the base and of each change, by name."""
    scratch = tmp_path_factory.mktemp("scenarios")
    roots = {name: make(scratch / name) for name, make in
             (("base", _base), ("cohort", _with_cohort), ("idle-pool", _with_idle_pool))}
    trace = read_trace(TRACE, load_environment(roots["base"], "prod"))
    return {name: replay("prod", Side(name, root), trace, SPEED) for name, root in roots.items()}


def _report(outcomes: dict, change: str) -> dict:
    return compare(outcomes["base"], outcomes[change], TOLERANCE, {"stack": "prod", "speed": SPEED})


def _findings(report: dict, kind: str) -> list[dict]:
    return [f for f in report["findings"] if f["kind"] == kind]


def test_a_cohort_lets_research_borrow_and_its_wait_shrinks(outcomes):
    report = _report(outcomes, "cohort")
    research = report["tenants"]["research"]
    base, change = research["base"], research["change"]
    assert base["admitted"] == change["admitted"] == 3
    # Alone, its third job waits for one of the first two; in the cohort it borrows eval's idle 4.
    assert TOLERANCE.same(base["wait_p95"], JOB_SECONDS) and base["wait_p95"] > TOLERANCE.seconds, research
    assert change["wait_p95"] <= TOLERANCE.seconds, research
    assert base["borrowed_hours"] == 0 and change["borrowed_hours"] > 0, research
    borrowed_seconds = change["borrowed_hours"] * 3600
    assert TOLERANCE.same(borrowed_seconds, 4 * JOB_SECONDS), research   # 4 GPUs for one job's run
    assert [f["tenant"] for f in _findings(report, "borrowing-moved")] == ["research"]
    eval_ = report["tenants"]["eval"]
    assert TOLERANCE.same(eval_["base"]["wait_p95"], eval_["change"]["wait_p95"]), eval_
    assert [f for f in report["findings"] if f.get("tenant") == "eval"] == []


def test_a_pool_nobody_may_use_is_reported_idle_and_moves_nobody(outcomes):
    report = _report(outcomes, "idle-pool")
    assert report["pools"]["h100-spare"] == {"base": None, "change": 0.0}
    assert [f["pool"] for f in _findings(report, "idle-pool")] == ["h100-spare"]
    assert "new pool" in _findings(report, "idle-pool")[0]["text"]
    assert [f for f in report["findings"] if "tenant" in f] == []
    for pool, used in report["pools"].items():
        if pool != "h100-spare" and used["base"]:
            busy = [used[side] * report["span"] for side in ("base", "change")]   # device-seconds per device
            assert TOLERANCE.same(*busy), (pool, used)
    for tenant, sides in report["tenants"].items():
        assert sides["base"]["admitted"] == sides["change"]["admitted"] == sides["base"]["submitted"], tenant
        assert TOLERANCE.same_device_seconds(sides["base"]["gpu_hours"] * 3600, sides["change"]["gpu_hours"] * 3600,
                                             sides["base"]["devices"]), (tenant, sides)
