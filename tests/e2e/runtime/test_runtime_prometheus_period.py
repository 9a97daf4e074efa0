"""`tenants simulate --from-prometheus` on a real run: a period read back from Prometheus is the trace
that ran, and replays to the same admissions.

On the prod example's runtime plane (kwok nodes, kube-scheduler, Kueue) the Jobs of `RAN` are
submitted at their times, as the replay submits a trace's jobs (`tools.simulation.job_body`, speed
1: a trace second is a wall second): whole H100s, A100s (the second eval A100 Job does not fit
eval's quota of 20 beside the first, so it waits for it), MIG slices, a training-priority Job
(the others get the stack's default class, which the trace leaves unnamed).
`tools/runtime_exporter.MetricsExporter` publishes the cluster as kube-state-metrics would, Job
series included; the monitoring lane's Prometheus scrapes it every second; `read_period` (the
command's own HTTP shell and `components.simulate.period`) reads the period back. The trace must
name the same tenants, GPUs, pods, priorities and Jobs, with submit offsets within `SUBMIT_SECONDS`
(whole-second creation times, the submitter's own delay) and durations within `DURATION_SECONDS` of
what ran (whole-second start and completion times, and the components' reaction between a pod's
start and the Job's: `simulation.WALL_LATENCY_SECONDS`). A Job still queued at the end is left out
and said; one still running at the end comes back as running until then (its duration a lower
bound), and said. Then the read trace is replayed on a fresh plane (`simulation.replay`) and admits
as many Jobs as ran. About 2 minutes warm: two planes, ~20 s of Jobs each.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import pytest

from components.cli.diff import read_period
from components.simulate.trace import Trace, TraceJob
from components.spec.problems import InvalidInput
from tools import runtime_exporter as x
from tools import simulation
from tools.control_plane import REPO_ROOT
from tools.runtime import REQUIRED_ENV, running_runtime_stack

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

SUBMIT_SECONDS = 2.0
DURATION_SECONDS = simulation.WALL_LATENCY_SECONDS + 1   # + the whole-second timestamps
RAN = Trace(jobs=[
    TraceJob(tenant="llm-finetune", submit=0, gpu="h100", count=8, pods=2, duration=8, priority="training", name="train"),
    TraceJob(tenant="eval", submit=0, gpu="a100", count=4, pods=2, duration=6, name="sweep-a"),
    TraceJob(tenant="inference", submit=1, gpu="h100", count=2, duration=5, name="serve"),
    TraceJob(tenant="eval", submit=2, gpu="a100", count=8, pods=2, duration=6, name="sweep-b"),
    TraceJob(tenant="eval", submit=3, gpu="1g.10gb", count=7, duration=5, name="probe"),
])
# Submitted last and larger than eval's A100 quota: never admitted, so never started, left out.
NEVER = TraceJob(tenant="eval", submit=4, gpu="a100", count=8, pods=4, duration=5, name="too-big")
# Still running when the period is read (the plane is stopped long before it would end).
LONG = TraceJob(tenant="inference", submit=4, gpu="h100", count=4, duration=600, name="long-serve")
RUNNING_NOTE = "1 Job(s) replayed as running until --until, where they still ran (their durations a lower bound)"


def _submit(applied, jobs: list[TraceJob]) -> float:
    """Create each Job at its submit time (wall seconds from the start); returns the start (Unix seconds)."""
    from kubernetes import client as k8s_client

    batch = k8s_client.BatchV1Api(applied.plane.cp.api_client)
    queues = simulation.queues_of(applied.objects)
    start = time.time()
    for index, job in enumerate(jobs):
        time.sleep(max(0.0, start + job.submit - time.time()))
        namespace, queue = queues[job.tenant]
        batch.create_namespaced_job(namespace, simulation.job_body(job, index, queue, applied.environment, 1.0))
    return start


def _read_back(server, applied, since: float, expected: int, timeout: float = 60) -> tuple[Trace, list[str]]:
    """The period read from Prometheus once it holds the `expected` completed Jobs and `LONG`
    running (scrapes lag a second)."""
    begin, deadline = datetime.fromtimestamp(int(since), timezone.utc), time.monotonic() + timeout
    while True:
        try:
            trace, notes = read_period(server.url, applied.environment, begin, datetime.now(timezone.utc))
        except InvalidInput:   # no Job scraped yet; at the deadline the error is the test's
            if time.monotonic() > deadline:
                raise
        else:
            if (len(trace.jobs) >= expected + 1 and RUNNING_NOTE in notes) or time.monotonic() > deadline:
                return trace, notes
        time.sleep(1)


@pytest.fixture(scope="module")
def period(e2e_summary, tmp_path_factory) -> tuple[Trace, list[str], float]:
    """(the trace read back, its notes, the period's start) of `RAN` run on prod's runtime plane; the plane is stopped after."""
    reason = x.prometheus_unavailable_reason()
    if reason and os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("period")
    read = None
    for applied in running_runtime_stack("prod", e2e_summary, REPO_ROOT, what="prod, a period read back from Prometheus"):
        with x.MetricsExporter(applied.plane.cp, kueue=True) as exporter, x.prometheus(work / "prometheus", exporter.url, []) as server:
            start = _submit(applied, [*RAN.jobs, LONG, NEVER])
            read = (*_read_back(server, applied, start, len(RAN.jobs)), start)
    assert read is not None
    e2e_summary.extend(f"period read back: {j.name} {j.tenant} submit {j.submit:.0f}s duration {j.duration:.0f}s "
                       f"{j.pods}x{j.count} {j.gpu}" for j in read[0].jobs)
    return read


def test_the_period_read_back_is_the_trace_that_ran(period):
    trace, _, start = period
    by_name = {job.name: job for job in trace.jobs}
    assert sorted(by_name) == sorted(job.name for job in [*RAN.jobs, LONG]), trace
    offset = start - int(start)   # the period starts at the whole second before the first submission
    for ran in RAN.jobs:
        read = by_name[ran.name]
        assert (read.tenant, read.gpu, read.count, read.pods, read.priority) == (ran.tenant, ran.gpu, ran.count, ran.pods, ran.priority)
        assert abs(read.submit - (ran.submit + offset)) <= SUBMIT_SECONDS, (ran, read)
        assert abs(read.duration - ran.duration) <= DURATION_SECONDS, (ran, read)   # its run, not its wait


def test_a_job_still_queued_at_the_end_is_left_out_and_said(period):
    trace, notes, _ = period
    assert NEVER.name not in {job.name for job in trace.jobs}
    assert notes[0] == "1 Job(s) left out: never started in the period (still queued at --until: no duration to replay)"


def test_a_job_still_running_at_the_end_comes_back_running_until_then_and_said(period):
    trace, notes, start = period
    read = next(job for job in trace.jobs if job.name == LONG.name)
    assert (read.tenant, read.gpu, read.count, read.pods) == (LONG.tenant, LONG.gpu, LONG.count, LONG.pods)
    # From its start to the moment the period was read: far short of its 600 s, never above it.
    assert 1 <= read.duration < LONG.duration / 10, read
    assert notes[1:] == [RUNNING_NOTE], notes


def test_the_period_replays_to_the_same_admissions(period):
    trace, _, _ = period
    outcome = simulation.replay("prod", simulation.Side("period", REPO_ROOT), trace, speed=1.0)
    admitted = [job for job in outcome.jobs if job.admitted is not None]
    assert len(admitted) == len(RAN.jobs) + 1, outcome.jobs   # LONG too, for the part of it the period saw
