"""`tenants simulate` on a KAI stack (#37): the staging example (`scheduler: kai`) with `research`
(4 A100s) beside eval (tests/e2e/scheduling/kai.py `write_kai_borrowing_project`) at its base and
with research's quota cut to 2, each side replayed on a runtime plane of its own with the real KAI
Scheduler (pod-grouper, scheduler, binder) and kwok nodes.

KAI decides placement and quota in one step, so a job is admitted when KAI binds its first pod
(tools/simulation.py `KaiJobWatch`). research's pods are non-preemptible (the stack's default class
is above KAI's threshold), so they never go over their queue's quota: with 2, its second 2-GPU job
waits for the first (a job's duration), and the report calls out research's longer wait;
llm-finetune's job on its dedicated pool moves within the tolerance, and eval's two half-GPU shares
(`fraction`, bound once the GPU reservation stand-in publishes their GPU, about a second of wall
time after their creation, within KAI's stated reaction time) run together, as late on one side as
on the other, charged half a GPU each. (A KAI queue has one GPU
number for every class: eval's MIG slices count in it as compute slices, which is why the cut is
research's.) About 1.5 minutes warm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.simulate.report import compare
from components.simulate.trace import read_trace
from tests.e2e.scheduling.kai import require_kai, write_kai_borrowing_project
from tests.project_edits import replace_once
from tools.runtime import REQUIRED_ENV
from tools.simulation import Side, replay, tolerance

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "tests" / "fixtures" / "simulate" / "kai.yaml"
SPEED = 60
JOB_SECONDS = 600
TOLERANCE = tolerance("kai", SPEED)   # as `tenants simulate` states it for a KAI stack


def _project(root: Path, research_a100: int) -> Path:
    write_kai_borrowing_project(root)
    if research_a100 != 4:
        replace_once(root / "tenants" / "research.yaml", "  gpu: {a100: 4}\n", f"  gpu: {{a100: {research_a100}}}\n")
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    require_kai(REQUIRED_ENV)
    scratch = tmp_path_factory.mktemp("kai-simulate")
    roots = {"base": _project(scratch / "base", 4), "cut": _project(scratch / "cut", 2)}
    trace = read_trace(TRACE, load_environment(roots["base"], "staging"))
    outcomes = {name: replay("staging", Side(name, root), trace, SPEED) for name, root in roots.items()}
    return compare(outcomes["base"], outcomes["cut"], TOLERANCE, {"stack": "staging", "speed": SPEED})


def test_a_quota_cut_on_a_kai_queue_makes_its_own_wait_longer_and_nobody_elses(report):
    research = report["tenants"]["research"]
    assert research["base"]["admitted"] == research["change"]["admitted"] == 2, research
    assert research["base"]["wait_p95"] <= TOLERANCE.seconds, research
    assert TOLERANCE.same(research["change"]["wait_p95"], JOB_SECONDS), research   # the second waits for the first
    assert [f["tenant"] for f in report["findings"] if f["kind"] == "longer-wait"] == ["research"], report["findings"]
    for side in ("base", "change"):
        assert TOLERANCE.same_device_seconds(research[side]["gpu_hours"] * 3600, 4 * JOB_SECONDS, research[side]["devices"]), research
        assert research[side]["borrowed_hours"] == 0, research   # non-preemptible: never over its quota
    # eval's two half-GPU shares: bound together once their GPU's reservation pod runs (no later on
    # one side than the other), half a GPU each.
    shares = report["tenants"]["eval"]
    for side in ("base", "change"):
        assert shares[side]["admitted"] == 2 and shares[side]["wait_p95"] <= TOLERANCE.seconds, shares
        assert shares[side]["wait_p95"] - shares[side]["wait_p50"] <= TOLERANCE.seconds, shares   # together
        assert TOLERANCE.same_device_seconds(shares[side]["gpu_hours"] * 3600, 2 * 0.5 * JOB_SECONDS, 2), shares
    assert TOLERANCE.same(shares["base"]["wait_p95"], shares["change"]["wait_p95"]), shares
    assert [f for f in report["findings"] if f.get("tenant") == "eval"] == []
    finetune = report["tenants"]["llm-finetune"]
    assert finetune["base"]["admitted"] == finetune["change"]["admitted"] == 1
    assert TOLERANCE.same(finetune["base"]["wait_p95"], finetune["change"]["wait_p95"]), finetune
    assert [f for f in report["findings"] if f.get("tenant") == "llm-finetune"] == []
