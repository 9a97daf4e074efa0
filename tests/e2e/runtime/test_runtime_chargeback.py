"""Chargeback from the run: the GPU-hours `tenants report` gives equal the seconds the lane's pods ran.

Per stack (prod: whole H100s and A100s, MIG 1g.10gb and 3g.40gb slices under Kueue; dev: time-sliced
L4 shares, with the stack's `monitoring:` block switched on in a copy, as dev has none) the lane's
cluster runs Jobs of several tenants at once for stated times, each pod annotated with a GPU
utilisation. `tools/runtime_exporter.MetricsExporter` publishes the cluster as kube-state-metrics,
Kueue and the DCGM exporter would (`tools/runtime_metrics`); the monitoring lane's Prometheus
scrapes it and evaluates the stack's own rendered PrometheusRules, both every second; `tenants
report --step 1` then asks it for the period of the run. Its allocated GPU-hours, per cost centre,
tenant and class, must equal what the pods' lifecycles say they held (`PodLedger`: `startTime` to
`finishedAt`, devices weighted as the stack says: a MIG 1g.10gb 1/7, a 3g.40gb 3/7, an L4 share
1/4), and its used GPU-hours that times the pods' utilisation.

Tolerance, per pod and device-equivalent: `TOLERANCE_SECONDS`, what the sampling allows: the
exporter's refresh, one scrape and one rule evaluation after each change, one integration step,
one second for the API's whole-second timestamps. The CSV prints thousandths of an hour (3.6 s), so
the report's own queries are also asked unrounded: those are held to the tolerance, the CSV to them
within half its last digit.
"""

from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path

import pytest

from components.cli.main import main
from components.review import chargeback
from components.fleet import gpu_capacity as cap
from components.manifests import monitoring_rules as r
from components.manifests.meta import GPU_TAINT_TOLERATION, pool_label
from tests.e2e.runtime.runs import RuntimeJobs, timed_job
from tools import runtime_exporter as x
from tools.control_plane import REPO_ROOT
from tools.runtime import REQUIRED_ENV, running_runtime_stack
from tools.runtime_metrics import UTIL_ANNOTATION, ran_gpu_seconds

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

STEP_SECONDS = 1
TOLERANCE_SECONDS = x.REFRESH_SECONDS + 2 * x.INTERVAL_SECONDS + STEP_SECONDS + 1
REPORT_DIGIT_SECONDS = 0.0005 * 3600 + 1e-6   # half the CSV's last digit (0.001 h), and float noise
MIG_1G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"

# Per stack: the pool of a stack without queues (its pods select it), the Jobs (tenant, GPU class
# they run on, resources per pod, pods, seconds, GPU utilisation %), and what the docs' table says
# one device of each (class, resource) is of a GPU.
SCENARIOS = {
    "prod": {
        "pool": None,
        "jobs": [("llm-finetune", "h100", {cap.GPU: 4}, 2, 12, 80), ("eval", "a100", {cap.GPU: 2}, 1, 10, 50),
                 ("eval", "a100-mig", {MIG_1G: 7}, 1, 12, 60), ("eval", "a100-mig", {MIG_3G: 2}, 1, 8, 60)],
        "weights": {("h100", cap.GPU): 1, ("a100", cap.GPU): 1, ("a100-mig", MIG_1G): Fraction(1, 7),
                    ("a100-mig", MIG_3G): Fraction(3, 7)},
    },
    "dev": {
        "pool": "l4-shared",
        "jobs": [("eval", "l4", {cap.GPU: 1}, 2, 10, 40), ("llm-finetune", "l4", {cap.GPU: 1}, 2, 12, 70),
                 ("inference", "l4", {cap.GPU: 1}, 1, 12, 90)],
        "weights": {("l4", cap.GPU): Fraction(1, 4)},
    },
}
DEV_MONITORING = "    monitoring:\n      namespace: monitoring\n"


def _project(stack: str, root: Path) -> Path:
    """The example project; for dev a copy with monitoring on (the rules and dashboards rendered as prod's are)."""
    if stack != "dev":
        return REPO_ROOT
    import shutil

    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    path = root / "stacks" / "Pulumi.dev.yaml"
    text = path.read_text()
    anchor = "    tenants: [llm-finetune, inference, eval]\n"
    assert text.count(anchor) == 1 and "monitoring:\n" not in text.replace("      monitoring: [", "")
    path.write_text(text.replace(anchor, anchor + DEV_MONITORING))
    return root


@pytest.fixture(scope="module", params=sorted(SCENARIOS, reverse=True))
def charged(request, e2e_summary, tmp_path_factory):
    """(stack name, RuntimeStack, Prometheus) with the exporter serving the stack's cluster."""
    reason = x.prometheus_unavailable_reason()
    if reason and os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)
    stack = request.param
    work = tmp_path_factory.mktemp(f"chargeback-{stack}")
    for applied in running_runtime_stack(stack, e2e_summary, _project(stack, work / "project"), what=f"{stack}, chargeback"):
        platform = applied.environment.platform
        groups = [g for rule in applied.of_kind("PrometheusRule") for g in rule["spec"]["groups"]]
        assert groups, f"{stack} renders no PrometheusRule"
        with x.MetricsExporter(applied.plane.cp, platform.scheduler == "kueue", platform.monitoring.dcgm_label_prefix) as exporter:
            with x.prometheus(work / "prometheus", exporter.url, groups) as server:
                deadline = time.monotonic() + 30
                while not server.query(r.NAMESPACE_TENANT):   # the rules ran on a scrape
                    assert time.monotonic() < deadline, server.log.read_text()[-3000:]
                    time.sleep(0.25)
                yield stack, applied, server


def _submit(jobs: RuntimeJobs, platform, stack: str) -> list[tuple[str, str, int]]:
    """The scenario's Jobs, submitted at once: (tenant, Job, pods) each."""
    pool = SCENARIOS[stack]["pool"]
    # No Kueue flavor adds placement on a stack without queues: the pods select the pool and tolerate its taint.
    placement = {"queue": None, "node_selector": {pool_label(platform): pool}, "tolerations": [dict(GPU_TAINT_TOLERATION)]} if pool else {}
    submitted = []
    for tenant, _, resources, pods, seconds, util in SCENARIOS[stack]["jobs"]:
        body = timed_job(resources, seconds, parallelism=pods, **placement)
        body["spec"]["template"]["metadata"]["annotations"][UTIL_ANNOTATION] = str(util)
        submitted.append((tenant, jobs.submit(tenant, body), pods))
    return submitted


def _held(stack: str) -> dict[tuple[str, str], int]:
    """Devices each tenant holds per resource while every Job runs."""
    out: dict[tuple[str, str], int] = {}
    for tenant, _, resources, pods, _, _ in SCENARIOS[stack]["jobs"]:
        for resource, count in resources.items():
            out[(tenant, resource)] = out.get((tenant, resource), 0) + count * pods
    return out


Rows = dict[tuple[str, str, str], tuple[float, float]]


def _reported(server: x.Prometheus, start: float, end: float, out: Path, capsys) -> Rows:
    """`tenants report --step 1 --format csv` for the period: (allocated, used) GPU-hours per (cost centre, tenant, class)."""
    iso = [datetime.fromtimestamp(t, timezone.utc).isoformat() for t in (start, end)]
    code = main(["report", "--prometheus", server.url, "--from", iso[0], "--to", iso[1], "--step", str(STEP_SECONDS),
                 "--format", "csv", "--out", str(out)])
    assert (code, capsys.readouterr().err) == (0, "")
    return {(row["cost_center"], row["tenant"], row["gpu_class"]): (float(row["allocated_gpu_hours"]), float(row["used_gpu_hours"] or 0))
            for row in csv.DictReader(out.read_text().splitlines())}


def _exact(server: x.Prometheus, start: float, end: float) -> Rows:
    """The report's own queries, unrounded (the CSV prints thousandths of an hour, 3.6 s)."""
    period = (datetime.fromtimestamp(start, timezone.utc), datetime.fromtimestamp(end, timezone.utc))
    answers = {name: server.query(expr, at=end) for name, expr in chargeback.period_queries(*period, STEP_SECONDS).items()}
    return {(row.cost_center, row.tenant, row.gpu_class): (row.allocated_gpu_hours, row.used_gpu_hours or 0.0)
            for row in chargeback.chargeback_rows(answers)}


def _wait_until(predicate, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.25)
    return value


def _namespaces(cp) -> list[dict]:
    from kubernetes import client

    return [cp.api_client.sanitize_for_serialization(ns) for ns in client.CoreV1Api(cp.api_client).list_namespace().items]


def _sampling(server: x.Prometheus, start: float, end: float) -> str:
    """How the sampling went over the period: failed scrapes of the exporter (each a gap), missed rule evaluations."""
    period = f"{round(end - start)}s"

    def value(expr: str) -> float:
        return sum(float(s["value"][1]) for s in server.query(expr, at=end))

    scrapes = value(f'count_over_time(up{{job="runtime-exporters"}}[{period}])')
    failed = scrapes - value(f'sum_over_time(up{{job="runtime-exporters"}}[{period}])')
    missed = value(f"increase(prometheus_rule_group_iterations_missed_total[{period}])")
    slowest = value(f'max_over_time(scrape_duration_seconds{{job="runtime-exporters"}}[{period}])')
    return f"{scrapes:.0f} scrapes ({failed:.0f} failed, slowest {slowest:.2f} s), {missed:.0f} rule evaluations missed"


def _run_scenario(stack: str, applied, server: x.Prometheus, tmp_path: Path, capsys) -> tuple[list, Rows, Rows, str]:
    """Run the stack's Jobs at once to their end; (their pods' runs, the report's rows, the unrounded rows, the sampling)."""
    jobs = RuntimeJobs(applied)   # no cleanup: the stack is this test's alone and stops after it
    start = math.floor(time.time()) - 1
    submitted = _submit(jobs, applied.environment.platform, stack)
    for tenant, name, pods in submitted:
        jobs.wait_pod_phase(tenant, name, "Running", pods)
    # While they run, the quota used the rules read is the namespaces' (kube_resourcequota as published).
    for (tenant, resource), count in _held(stack).items():
        quota = f'{r.QUOTA_USED}{{tenant="{tenant}", resource="{r.sanitize(resource)}"}}'
        _wait_until(lambda: [s for s in server.query(quota) if float(s["value"][1]) == count],
                    f"{quota} == {count}: {server.query(quota)}", timeout=10)
    for tenant, name, _ in submitted:
        jobs.wait_complete(tenant, name)
    _wait_until(lambda: not server.query(r.TENANT_ALLOCATED_GPUS), "every pod's GPUs released in Prometheus")
    end = math.ceil(time.time()) + 1
    time.sleep(end - time.time() + x.INTERVAL_SECONDS)   # the period's last second recorded
    ours = {(tenant, name) for tenant, name, _ in submitted}
    runs = [run for run in applied.ledger.runs() if (run.namespace, run.name.rsplit("-", 1)[0]) in ours]
    assert len(runs) == sum(pods for *_, pods in submitted) and all(run.seconds > 0 for run in runs), runs
    return (runs, _reported(server, start, end, tmp_path / "report.csv", capsys), _exact(server, start, end),
            _sampling(server, start, end))


def test_tenants_report_charges_the_gpu_seconds_the_pods_ran(charged, e2e_summary, tmp_path, capsys):
    stack, applied, server = charged
    platform = applied.environment.platform
    fractions = r.device_gpu_fractions(platform)
    assert {key: fractions[key] for key in SCENARIOS[stack]["weights"]} == SCENARIOS[stack]["weights"]
    runs, reported, exact, sampling = _run_scenario(stack, applied, server, tmp_path, capsys)

    namespaces = _namespaces(applied.plane.cp)
    class_of = {node: platform.node_pools[pool].gpu_class for node, pool in applied.node_pool.items()}
    ran = ran_gpu_seconds(runs, namespaces, class_of, fractions)
    # Device-equivalents held per row: the GPU-seconds of the same pods had each run one second.
    devices = ran_gpu_seconds([replace(run, end=run.start + timedelta(seconds=1)) for run in runs], namespaces, class_of, fractions)
    util = {(tenant, gpu_class): pct / 100 for tenant, gpu_class, *_, pct in SCENARIOS[stack]["jobs"]}
    assert set(reported) == set(exact) == set(ran) and {key[1:] for key in ran} == set(util), (reported, exact, ran)
    lines = [f"chargeback from the run ({stack}): GPU-seconds per cost centre/tenant/class: ran (pods' start to finish, "
             f"weighted) vs Prometheus (the report's query; the report's CSV), allocated and used; +- {TOLERANCE_SECONDS:g} s "
             f"per device-equivalent; {sampling}"]
    for key, seconds in ran.items():
        (allocated, used), (csv_allocated, csv_used) = ((h * 3600 for h in row) for row in (exact[key], reported[key]))
        tolerance, share = devices[key] * TOLERANCE_SECONDS, util[key[1:]]
        lines.append(f"  {'/'.join(key)}: allocated ran {seconds:.1f} vs {allocated:.1f} (csv {csv_allocated:.1f}); "
                     f"used {seconds * share:.1f} vs {used:.1f} (csv {csv_used:.1f}); +- {tolerance:.1f}")
        assert abs(allocated - seconds) <= tolerance and abs(used - seconds * share) <= tolerance * share, lines
        assert abs(csv_allocated - allocated) <= REPORT_DIGIT_SECONDS and abs(csv_used - used) <= REPORT_DIGIT_SECONDS, lines
    e2e_summary.extend(lines)
