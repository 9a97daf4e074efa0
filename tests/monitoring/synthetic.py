"""Synthetic exporter data for the monitoring lane: one source for `promtool test rules`, the
OpenMetrics backfill of the real Prometheus, and the dashboard pictures in docs/.

Three hours (181 one-minute samples, t = 0m..180m) of what kube-state-metrics, the DCGM exporter and
Kueue would publish for the fixture stack `tests/monitoring/fixtures` (3 H100 nodes h1..h3, one MIG
node m1 sliced all-1g.10gb; tenants alpha and beta, beta with an extra namespace beta-data):

=================  ======  =====  ==========================  =========================
pod                node    GPUs   activity                    notes
=================  ======  =====  ==========================  =========================
alpha/train-0      h1      8      0.9 (GR_ENGINE_ACTIVE)
alpha/train-1      h2      8      80 % (only DCGM_FI_DEV_GPU_UTIL: the fallback)
alpha/notebook     h3      1      0.01 from t=0               idle: GpuAllocatedIdle at 2h
alpha/train-2      -       2      -                           unscheduled: pending alert at 30m
beta/serve         h3      4      0.5
beta-data/mig-job  m1      3 MIG  0.6 per 1g.10gb instance
beta-data/burst    m1      2 MIG  0.3 per instance            Running 30m..89m, then Succeeded
=================  ======  =====  ==========================  =========================

Cost centres (namespace label gpu-tenancy.dev/cost-center): alpha cc-1, beta and beta-data cc-2.

Quota (kube_resourcequota tenant-quota): alpha uses 19 of 20 nvidia.com/gpu (95 %: near-quota
fires at 15m), beta 4 of 5 (80 %: does not); beta-data's MIG slices 3 of 7, 5 while the burst runs. Node h3's allocatable GPUs drop to 0 at 2h10m
(quotas 25 > 16 x 1.25: GpuQuotaOverCapacity at 2h20m). m1's nvidia.com/mig.config.state turns
`failed` at 1h (alert at 1h15m). Kueue: beta has 2 workloads pending throughout (alert at 30m),
alpha 1 for 20 minutes only; admission waits per minute: alpha 5 in (5s,10s] and 5 in (30s,60s],
beta 4 in (60s,300s] -> p50/p95 alpha 10 s / 57 s, beta 180 s / 288 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

STEPS = 181  # samples at t = 0, 1, ..., 180 minutes
STEP_SECONDS = 60
DOMAIN_CLASS_LABEL = "label_gpu_example_com_gpu_class"
TENANT_LABEL = "label_gpu_tenancy_dev_tenant"
COST_CENTER_LABEL = "label_gpu_tenancy_dev_cost_center"
MIG_STATE_LABEL = "label_nvidia_com_mig_config_state"
KSM = {"job": "kube-state-metrics", "instance": "ksm:8080"}
MIB = 1048576

Value = Optional[float]


@dataclass(frozen=True)
class Series:
    name: str
    labels: dict[str, str]
    values: tuple[Value, ...]  # one per minute; None = no sample

    def selector(self) -> str:
        inner = ", ".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{inner}}}"


def constant(value: float, start: int = 0, end: int = STEPS) -> tuple[Value, ...]:
    """`value` for minutes start..end-1, no sample elsewhere."""
    return tuple(value if start <= i < end else None for i in range(STEPS))


def counter(per_minute: float) -> tuple[Value, ...]:
    return tuple(per_minute * i for i in range(STEPS))


# The burst pod runs from minute 30 to 89 (an hour) and stays listed as Succeeded afterwards, as
# kube-state-metrics keeps finished pods; its devices stop reporting when it ends.
BURST_START, BURST_END = 30, 90
BURST_PHASES = tuple(None if i < BURST_START else "Running" if i < BURST_END else "Succeeded" for i in range(STEPS))
BURST_QUOTA_USED = tuple(5.0 if BURST_START <= i < BURST_END else 3.0 for i in range(STEPS))


def series() -> list[Series]:
    out: list[Series] = []

    def add(name: str, labels: dict[str, str], values: tuple[Value, ...]) -> None:
        out.append(Series(name, labels, values))

    # kube-state-metrics: namespaces and nodes with the allow-listed labels we set.
    for namespace, tenant, cost_center in (("alpha", "alpha", "cc-1"), ("beta", "beta", "cc-2"), ("beta-data", "beta", "cc-2"),
                                           ("kube-system", "", "")):
        labels = {**KSM, "namespace": namespace}
        if tenant:
            labels[TENANT_LABEL] = tenant
            labels[COST_CENTER_LABEL] = cost_center
        add("kube_namespace_labels", labels, constant(1))
    for node in ("h1", "h2", "h3"):
        add("kube_node_labels", {**KSM, "node": node, DOMAIN_CLASS_LABEL: "h100"}, constant(1))
        add("kube_node_status_allocatable", {**KSM, "node": node, "resource": "nvidia_com_gpu", "unit": "integer"},
            constant(8) if node != "h3" else tuple(8.0 if i < 130 else 0.0 for i in range(STEPS)))
    m1 = {**KSM, "node": "m1", DOMAIN_CLASS_LABEL: "a100-mig"}
    add("kube_node_labels", {**m1, MIG_STATE_LABEL: "success"}, constant(1, end=60))
    add("kube_node_labels", {**m1, MIG_STATE_LABEL: "failed"}, constant(1, start=60))
    add("kube_node_status_allocatable", {**KSM, "node": "m1", "resource": "nvidia_com_mig_1g_10gb", "unit": "integer"}, constant(56))

    # Pods: GPU requests (node "" = not scheduled) and phase.
    pods = [
        ("alpha", "train-0", "h1", "nvidia_com_gpu", 8, "Running"),
        ("alpha", "train-1", "h2", "nvidia_com_gpu", 8, "Running"),
        ("alpha", "notebook", "h3", "nvidia_com_gpu", 1, "Running"),
        ("alpha", "train-2", "", "nvidia_com_gpu", 2, "Pending"),
        ("beta", "serve", "h3", "nvidia_com_gpu", 4, "Running"),
        ("beta-data", "mig-job", "m1", "nvidia_com_mig_1g_10gb", 3, "Running"),
        ("alpha", "done", "h1", "nvidia_com_gpu", 8, "Succeeded"),  # finished: must not count
        ("beta-data", "burst", "m1", "nvidia_com_mig_1g_10gb", 2, BURST_PHASES),
    ]
    for namespace, pod, node, resource, count, phase in pods:
        labels = {**KSM, "namespace": namespace, "pod": pod, "container": "main", "uid": f"uid-{pod}"}
        request = {**labels, "resource": resource, "unit": "integer"}
        if node:
            request["node"] = node
        phases = phase if isinstance(phase, tuple) else (phase,) * STEPS
        created = next(i for i, p in enumerate(phases) if p)
        add("kube_pod_container_resource_requests", request, constant(count, start=created))
        for candidate in ("Pending", "Running", "Succeeded"):
            add("kube_pod_status_phase", {**KSM, "namespace": namespace, "pod": pod, "uid": f"uid-{pod}", "phase": candidate},
                tuple(None if p is None else float(p == candidate) for p in phases))

    # ResourceQuota tenant-quota per namespace (used counts pending pods too, as the API server does).
    quotas = [
        ("alpha", "nvidia.com/gpu", 20, 19), ("alpha", "nvidia.com/mig-1g.10gb", 0, 0),
        ("beta", "nvidia.com/gpu", 5, 4), ("beta", "nvidia.com/mig-1g.10gb", 7, 0),
        ("beta-data", "nvidia.com/gpu", 0, 0), ("beta-data", "nvidia.com/mig-1g.10gb", 7, BURST_QUOTA_USED),
    ]
    for namespace, resource, hard, used in quotas:
        for kind, value in (("hard", hard), ("used", used)):
            add("kube_resourcequota", {**KSM, "namespace": namespace, "resourcequota": "tenant-quota",
                                       "resource": f"requests.{resource}", "type": kind},
                value if isinstance(value, tuple) else constant(value))
        add("kube_resourcequota", {**KSM, "namespace": namespace, "resourcequota": "priority-batch",
                                   "resource": f"requests.{resource}", "type": "hard"}, constant(99))  # other quotas: ignored

    # DCGM exporter (honorLabels: the exporter's namespace/pod labels are the workload's).
    dcgm = {"job": "dcgm-exporter", "modelName": "NVIDIA H100 80GB HBM3", "container": "main"}

    def device(host: str, gpu: int, namespace: str, pod: str, **extra: str) -> dict[str, str]:
        return {**dcgm, "instance": f"{host}:9400", "Hostname": host, "gpu": str(gpu), "UUID": f"GPU-{host}-{gpu}",
                "namespace": namespace, "pod": pod, **extra}

    for gpu in range(8):
        add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", device("h1", gpu, "alpha", "train-0"), constant(0.9))
        add("DCGM_FI_DEV_FB_USED", device("h1", gpu, "alpha", "train-0"), constant(40960))
        add("DCGM_FI_DEV_GPU_UTIL", device("h2", gpu, "alpha", "train-1"), constant(80))
        add("DCGM_FI_DEV_FB_USED", device("h2", gpu, "alpha", "train-1"), constant(20480))
    add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", device("h3", 0, "alpha", "notebook"), constant(0.01))
    add("DCGM_FI_DEV_GPU_UTIL", device("h3", 0, "alpha", "notebook"), constant(50))  # both present: GR_ENGINE wins
    add("DCGM_FI_DEV_FB_USED", device("h3", 0, "alpha", "notebook"), constant(1024))
    for gpu in range(1, 5):
        add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", device("h3", gpu, "beta", "serve"), constant(0.5))
        add("DCGM_FI_DEV_FB_USED", device("h3", gpu, "beta", "serve"), constant(10240))
    add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", device("h3", 7, "", ""), constant(0.0))  # free GPU: no pod, not counted
    mig = {"modelName": "NVIDIA A100-SXM4-80GB", "GPU_I_PROFILE": "1g.10gb"}
    for instance in (1, 2, 3):
        labels = device("m1", 0, "beta-data", "mig-job", GPU_I_ID=str(instance), **mig)
        add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, constant(0.6))
        add("DCGM_FI_DEV_FB_USED", labels, constant(5120))
    for instance in (4, 5):
        labels = device("m1", 0, "beta-data", "burst", GPU_I_ID=str(instance), **mig)
        add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, constant(0.3, start=BURST_START, end=BURST_END))
        add("DCGM_FI_DEV_FB_USED", labels, constant(5120, start=BURST_START, end=BURST_END))

    # Kueue: pending workloads and the admission-wait histogram per ClusterQueue (named like the tenant).
    kueue = {"job": "kueue", "instance": "kueue:8080"}
    add("kueue_pending_workloads", {**kueue, "cluster_queue": "alpha", "status": "active"}, tuple(1.0 if i < 20 else 0.0 for i in range(STEPS)))
    add("kueue_pending_workloads", {**kueue, "cluster_queue": "alpha", "status": "inadmissible"}, constant(0))
    add("kueue_pending_workloads", {**kueue, "cluster_queue": "beta", "status": "active"}, constant(1))
    add("kueue_pending_workloads", {**kueue, "cluster_queue": "beta", "status": "inadmissible"}, constant(1))
    buckets = ("1", "5", "10", "30", "60", "300", "+Inf")
    per_minute = {"alpha": (0, 0, 5, 5, 10, 10, 10), "beta": (0, 0, 0, 0, 0, 4, 4)}
    for queue, cumulative in per_minute.items():
        for le, count in zip(buckets, cumulative):
            add("kueue_admission_wait_time_seconds_bucket", {**kueue, "cluster_queue": queue, "le": le}, counter(count))
    # A ClusterQueue of a team that is no tenant here (no namespace carries our tenant label): the
    # rules must leave it out, so every expected answer stays as it is.
    add("kueue_pending_workloads", {**kueue, "cluster_queue": "other-team", "status": "active"}, constant(3))
    for le in buckets:
        add("kueue_admission_wait_time_seconds_bucket", {**kueue, "cluster_queue": "other-team", "le": le}, counter(2))
    return out


def promtool_values(values: tuple[Value, ...]) -> str:
    """Values in promtool's input_series syntax: explicit numbers, `_` for no sample."""
    return " ".join("_" if v is None else repr(float(v)) for v in values)


def promtool_input_series() -> list[dict[str, str]]:
    return [{"series": s.selector(), "values": promtool_values(s.values)} for s in series()]


def openmetrics(start_seconds: int) -> str:
    """All series as OpenMetrics text with timestamps from `start_seconds` (for `promtool tsdb create-blocks-from openmetrics`)."""
    lines = []
    for s in sorted(series(), key=lambda s: s.name):
        label_text = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        for i, value in enumerate(s.values):
            if value is not None:
                lines.append(f"{s.name}{{{label_text}}} {float(value)!r} {start_seconds + i * STEP_SECONDS}")
    return "\n".join(lines) + "\n# EOF\n"

