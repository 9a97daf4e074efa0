"""Chargeback from ResourceClaims on real components (#38 item 3): the GPU-hours `tenants report` gives
for DRA claims equal the time the claims were allocated.

The DRA fixture stack (tests/fixtures/dra, in a copy with its `monitoring:` block on) runs on the
runtime lane: the real kube-apiserver, kube-scheduler and kube-controller-manager (its
resource-claim-controller) v1.37.2, kwok as the nodes' kubelet; ResourceSlices stand in for the
NVIDIA DRA driver (tests/e2e/scheduling/resource_slices.py). Three Jobs of one pod each, at once:

* vision's pod runs 12 s with its claim `train` (one B200 of b200-train);
* robotics' pod runs 10 s with its claim `sim` (two H100s of its dedicated h100-robotics);
* robotics' pod asks for `deviceclass.resource.kubernetes.io/h100.gpu.dra.dev: 1` and runs 8 s: the
  scheduler makes its claim (KEP-5004), the claim controller deletes it when the pod is done.

The real kube-scheduler allocates each claim on the ResourceSlices; when a pod is done the claim
controller releases its claim (deallocates `train` and `sim`, deletes the scheduler's). The test
watches the claims (every `POLL_SECONDS`): a claim's run is from the first time it is seen allocated
to the first time it is seen released. `tools/runtime_exporter` publishes the claims as
kube-state-metrics' `resourceclaims` and `resourceslices` collectors do, the monitoring lane's
Prometheus evaluates the stack's rendered rules, and `tenants report --step 1` must charge, per
tenant and class, each claim's devices times its run, within `TOLERANCE_SECONDS` per device: the
chargeback lane's tolerance (tests/e2e/runtime/test_runtime_chargeback.py) plus two polls.
"""

from __future__ import annotations

import math
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from components.manifests import monitoring_rules as r
from components.manifests.meta import GPU_TAINT_TOLERATION
from tests.e2e.runtime.test_runtime_chargeback import REPORT_DIGIT_SECONDS, STEP_SECONDS, _exact, _reported, _sampling
from tests.e2e.scheduling.resource_slices import publish_resource_slices
from tools import runtime_exporter as x
from tools.runtime import REQUIRED_ENV, run_for, running_runtime_stack

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra"
H100, B200 = "h100.gpu.dra.dev", "b200.gpu.dra.dev"
POLL_SECONDS = 0.2
TOLERANCE_SECONDS = x.REFRESH_SECONDS + 2 * x.INTERVAL_SECONDS + STEP_SECONDS + 1 + 2 * POLL_SECONDS
# (tenant, pool, claim name or None for an extended-resource pod, DeviceClass, devices, seconds)
RUNS = [("vision", "b200-train", "train", B200, 1, 12), ("robotics", "h100-robotics", "sim", H100, 2, 10),
        ("robotics", "h100-robotics", None, H100, 1, 8)]
GPU_CLASS = {B200: "b200", H100: "h100"}
COST_CENTER = {"vision": "cc-vision", "robotics": "cc-robotics"}


def _project(root: Path) -> Path:
    """A copy of the DRA fixture with monitoring on (the rules and dashboards rendered)."""
    shutil.copytree(FIXTURE, root)
    path = root / "stacks" / "Pulumi.dra.yaml"
    text = path.read_text()
    anchor = "    labelDomain: gpu.dra.dev\n"
    assert text.count(anchor) == 1 and "monitoring:" not in text
    path.write_text(text.replace(anchor, anchor + "    monitoring:\n      namespace: monitoring\n"))
    return root


@pytest.fixture(scope="module")
def charged(e2e_summary, tmp_path_factory):
    """(RuntimeStack, Prometheus) with the ResourceSlices published and the exporter serving the cluster."""
    reason = x.prometheus_unavailable_reason()
    if reason and os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("claims-chargeback")
    for applied in running_runtime_stack("dra", e2e_summary, _project(work / "project"), what="dra, claims chargeback"):
        publish_resource_slices(applied)
        groups = [g for rule in applied.of_kind("PrometheusRule") for g in rule["spec"]["groups"]]
        assert any(rule.get("record") == r.CLAIM_ALLOCATED_GPUS for g in groups for rule in g["rules"]), "no claim rules rendered"
        platform = applied.environment.platform
        with x.MetricsExporter(applied.plane.cp, platform.scheduler == "kueue", platform.monitoring.dcgm_label_prefix) as exporter:
            with x.prometheus(work / "prometheus", exporter.url, groups) as server:
                deadline = time.monotonic() + 30
                while not server.query(r.POOL_NODE):   # the slices scraped and the rules ran
                    assert time.monotonic() < deadline, server.log.read_text()[-3000:]
                    time.sleep(0.25)
                yield applied, server


def _job(stack, tenant: str, pool: str, seconds: float, claim: str | None, device_class: str, devices: int) -> dict:
    domain = stack.environment.platform.label_domain
    limits = {"cpu": "100m", "memory": "128Mi"}
    container = {"name": "main", "image": "registry.invalid/cuda:12",
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                 "resources": {"limits": limits}}
    spec = {"automountServiceAccountToken": False, "containers": [container], "nodeSelector": {f"{domain}/pool": pool},
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "tolerations": [dict(GPU_TAINT_TOLERATION),
                            {"key": f"{domain}/tenant", "operator": "Equal", "value": tenant, "effect": "NoSchedule"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}
    if claim:
        container["resources"]["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    else:
        limits[f"deviceclass.resource.kubernetes.io/{device_class}"] = str(devices)
    # kwok completes only a Job's pods (its pod-complete Stage selects them by owner).
    name = f"e2e-claims-{uuid.uuid4().hex[:8]}"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {
        "backoffLimit": 0, "template": {"metadata": {"annotations": run_for(seconds)}, "spec": spec}}}


def _claims_of(custom, namespace: str, job: str, claim: str | None) -> list[dict]:
    """The run's claim: the named one, or the one the scheduler made for the Job's pod (owned by it)."""
    claims = custom.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")["items"]
    if claim:
        return [c for c in claims if c["metadata"]["name"] == claim]
    return [c for c in claims if any(o.get("kind") == "Pod" and o.get("name", "").startswith(f"{job}-")
                                     for o in c["metadata"].get("ownerReferences", []))]


def _watch_claims(stack, started: list[tuple[str, str, str | None]], timeout: float = 90) -> list[tuple[float, float]]:
    """Per run (tenant, Job, claim), (first seen allocated, first seen released) in Unix seconds, polling every POLL_SECONDS."""
    custom = client.CustomObjectsApi(stack.plane.cp.api_client)
    windows: list[list[float | None]] = [[None, None] for _ in started]
    deadline = time.monotonic() + timeout
    while not all(end for _, end in windows):
        assert time.monotonic() < deadline, f"claims not all released: {windows}"
        now = time.time()
        for window, (tenant, job, claim) in zip(windows, started):
            allocated = any((c.get("status") or {}).get("allocation") for c in _claims_of(custom, tenant, job, claim))
            if allocated and window[0] is None:
                window[0] = now
            elif not allocated and window[0] is not None and window[1] is None:
                window[1] = now
        time.sleep(POLL_SECONDS)
    return [(start, end) for start, end in windows]


def test_tenants_report_charges_the_time_the_claims_were_allocated(charged, e2e_summary, tmp_path, capsys):
    applied, server = charged
    cp = applied.plane.cp
    custom, batch = client.CustomObjectsApi(cp.api_client), client.BatchV1Api(cp.api_client)
    start = math.floor(time.time()) - 1
    started = []
    for tenant, pool, claim, device_class, devices, seconds in RUNS:
        if claim:
            custom.create_namespaced_custom_object("resource.k8s.io", "v1", tenant, "resourceclaims", {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class, "count": devices}}]}}})
        job = _job(applied, tenant, pool, seconds, claim, device_class, devices)
        batch.create_namespaced_job(tenant, job)
        started.append((tenant, job["metadata"]["name"], claim))
    windows = _watch_claims(applied, started)
    _wait_gone(server)
    end = math.ceil(time.time()) + 1
    time.sleep(end - time.time() + x.INTERVAL_SECONDS)   # the period's last second recorded
    expected: dict[tuple[str, str, str], float] = {}
    devices_of: dict[tuple[str, str, str], int] = {}
    for (tenant, _, _, device_class, devices, _), (allocated, released) in zip(RUNS, windows):
        key = (COST_CENTER[tenant], tenant, GPU_CLASS[device_class])
        expected[key] = expected.get(key, 0.0) + devices * (released - allocated)
        devices_of[key] = devices_of.get(key, 0) + devices
    reported, exact = _reported(server, start, end, tmp_path / "report.csv", capsys), _exact(server, start, end)
    lines = [f"claims chargeback (dra): GPU-seconds per cost centre/tenant/class: claims allocated (seen every {POLL_SECONDS:g} s) "
             f"vs Prometheus (the report's query; its CSV); +- {TOLERANCE_SECONDS:g} s per device; {_sampling(server, start, end)}"]
    lines += [f"  run {tenant}/{claim or 'extended resource'} ({devices} x {GPU_CLASS[dc]}, pod {seconds} s): allocated "
              f"{released - allocated:.1f} s" for (tenant, _, claim, dc, devices, seconds), (allocated, released) in zip(RUNS, windows)]
    assert set(reported) == set(exact) == set(expected), (reported, exact, expected)
    for key, seconds in expected.items():
        charged_seconds, csv_seconds = exact[key][0] * 3600, reported[key][0] * 3600
        tolerance = devices_of[key] * TOLERANCE_SECONDS
        lines.append(f"  {'/'.join(key)}: allocated {seconds:.1f} vs {charged_seconds:.1f} (csv {csv_seconds:.1f}); +- {tolerance:.1f}")
        assert abs(charged_seconds - seconds) <= tolerance, lines
        assert abs(csv_seconds - charged_seconds) <= REPORT_DIGIT_SECONDS, lines
    # kube-state-metrics' resourceclaims/resourceslices collectors list resource.k8s.io/v1beta1: say whether this API server serves it.
    groups = {g.name: [v.version for v in g.versions] for g in client.ApisApi(cp.api_client).get_api_versions().groups}
    lines.append(f"  resource.k8s.io versions served: {', '.join(groups.get('resource.k8s.io', []))}")
    e2e_summary.extend(lines)


def _wait_gone(server: x.Prometheus, timeout: float = 30) -> None:
    """Until Prometheus holds no claim's GPUs (the released claims' series gone stale)."""
    deadline = time.monotonic() + timeout
    while server.query(r.CLAIM_ALLOCATED_GPUS):
        assert time.monotonic() < deadline, f"claims still charged: {server.query(r.CLAIM_ALLOCATED_GPUS)}"
        time.sleep(0.25)
