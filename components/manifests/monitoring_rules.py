"""Prometheus recording rules and alerts per tenant and GPU class (a `monitoring.coreos.com/v1` PrometheusRule).

Built only when the stack has a `monitoring:` block. Every series is derived from what standard
exporters publish, joined with what this tool put on the cluster:

* the tenant of a namespace comes from the namespace label `gpu-tenancy.dev/tenant` that we set
  (kube-state-metrics `kube_namespace_labels`), so a tenant's series follow its namespaces;
* the GPU class of a node comes from the node label `<labelDomain>/gpu-class` that we set
  (`kube_node_labels`);
* ClusterQueues (Kueue) and leaf Queues (KAI) are named like their tenant;
* capacity, per-class quotas and overcommit come from the stack itself (static series), because
  a ResourceQuota counts resources, not GPU classes.

Names follow the Prometheus convention `level:metric:operation`, all under `gpu_tenancy:`. The
rule groups are also what `promtool check rules` / `promtool test rules` read (docs/monitoring.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Optional

from ..fleet import gpu_capacity as cap
from ..fleet import mig
from ..fleet.isolation import mode_of
from ..fleet.facts import FleetFacts, TenantView
from ..spec.monitoring import Monitoring, MonitoringThresholds
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from .kueue import gpu_class_quotas
from .meta import (
    COST_CENTER_LABEL,
    DOCS_ANNOTATION,
    MIG_STATE_LABEL,
    TENANT_LABEL,
    KubeObject,
    gpu_class_label,
    kube_object,
    object_meta,
    platform_labels,
    tenant_labels,
)
from .quota import TENANT_QUOTA

API_VERSION = "monitoring.coreos.com/v1"
RULE_NAME = "gpu-tenancy"
RUNBOOK_ANCHOR = "docs/monitoring.md#"

# Recording rule names: the public vocabulary of the dashboards and of docs/monitoring.md.
NAMESPACE_TENANT = "gpu_tenancy:namespace_tenant:info"
NODE_CLASS = "gpu_tenancy:node_gpu_class:info"
POD_REQUESTS = "gpu_tenancy:pod_gpu_requests:sum"
TENANT_REQUESTS = "gpu_tenancy:tenant_gpu_requests:sum"
QUOTA_USED = "gpu_tenancy:tenant_gpu_quota_used:sum"
QUOTA_HARD = "gpu_tenancy:tenant_gpu_quota_hard:sum"
TENANT_QUOTA_STACK = "gpu_tenancy:tenant_gpu_quota:stack"
CLASS_QUOTA_STACK = "gpu_tenancy:gpu_class_quota:stack"
CLASS_CAPACITY_STACK = "gpu_tenancy:gpu_class_capacity:stack"
CLASS_OVERCOMMIT_STACK = "gpu_tenancy:gpu_class_overcommit:stack"
CLASS_ALLOCATABLE = "gpu_tenancy:gpu_class_allocatable:sum"
ENGINE_ACTIVE = "gpu_tenancy:gpu_engine_active:ratio"
FB_USED = "gpu_tenancy:gpu_fb_used:bytes"
POD_ACTIVE = "gpu_tenancy:pod_gpu_engine_active:avg"
TENANT_ACTIVE_AVG = "gpu_tenancy:tenant_gpu_engine_active:avg"
TENANT_ACTIVE_SUM = "gpu_tenancy:tenant_gpu_engine_active:sum"
TENANT_FB_USED = "gpu_tenancy:tenant_gpu_fb_used_bytes:sum"
QUEUE_WAIT_P50 = "gpu_tenancy:tenant_queue_wait_seconds:p50"
QUEUE_WAIT_P95 = "gpu_tenancy:tenant_queue_wait_seconds:p95"
PENDING_WORKLOADS = "gpu_tenancy:tenant_pending_workloads:sum"
KAI_ALLOCATED = "gpu_tenancy:tenant_queue_allocated_gpus:kai"
KAI_DESERVED = "gpu_tenancy:tenant_queue_deserved_gpus:kai"
# Chargeback: GPU-equivalents (what a device is of a physical GPU) held and kept busy, per tenant,
# cost centre and class; GPU-hours are their integral over a period (`gpu_hours_expr`).
NAMESPACE_COST_CENTER = "gpu_tenancy:namespace_cost_center:info"
DEVICE_GPU_FRACTION = "gpu_tenancy:gpu_class_device_gpu_fraction:stack"
POD_ALLOCATED_GPUS = "gpu_tenancy:pod_gpu_allocated:gpus"
TENANT_ALLOCATED_GPUS = "gpu_tenancy:tenant_gpu_allocated:gpus"
TENANT_USED_GPUS = "gpu_tenancy:tenant_gpu_used:gpus"
CHARGEBACK_LABELS = ("cost_center", "tenant", "gpu_class")
# DRA: devices allocated to ResourceClaims, as kube-state-metrics' native `resourceclaims` and
# `resourceslices` collectors publish them (kubernetes/kube-state-metrics#3020, not in v2.20.0; a
# custom-resource-state entry cannot: KSM resolves CRS kinds from CRDs only and drops a built-in one).
KSM_CLAIM_DEVICES = "kube_resourceclaim_allocation_device_info"
KSM_SLICE_INFO = "kube_resourceslice_info"
KSM_CLAIM_RESERVED = "kube_resourceclaim_status_reserved_for"
KSM_CLAIM_COLLECTORS = ("resourceclaims", "resourceslices")
# The requests of the claim the scheduler makes for a pod's DRA extended resources (KEP-5004,
# `container-<i>-request-<j>`): the pod's own request of a mapped name is then not charged again.
EXTENDED_RESOURCE_REQUESTS = "container-[0-9]+-request-[0-9]+"
POOL_NODE = "gpu_tenancy:dra_pool_node:info"
CLAIM_DEVICE_SHARE = "gpu_tenancy:claim_device_share:ratio"
CLAIM_ALLOCATED_GPUS = "gpu_tenancy:claim_gpu_allocated:gpus"
TENANT_CLAIM_GPUS = "gpu_tenancy:tenant_claim_gpu_allocated:gpus"
EXTENDED_RESOURCE_PODS = "gpu_tenancy:pod_extended_resource_claim:info"
MIG_PARTITION_FRACTION = "gpu_tenancy:mig_partition_gpu_fraction:stack"
# The NVIDIA DRA driver names a MIG partition `gpu-<minor>-mig-<profile without dots>-<profile id>-<start>`
# (its MigSpec canonical name, e.g. gpu-2-mig-1g24gb-19-0): the compute slices lead the profile.
MIG_DEVICE_SLICES = ".+-mig-([0-9]+)g[0-9]+gb.*"
GPU_HOURS_RESOLUTION_MINUTES = 1


def enabled_monitoring(platform: Platform) -> Monitoring | None:
    """The stack's monitoring settings, or None when the block is absent or disabled.

    >>> enabled_monitoring(Platform(labelDomain="x.dev")) is None
    True
    """
    monitoring = platform.monitoring
    return monitoring if monitoring is not None and monitoring.enabled else None


def sanitize(name: str) -> str:
    """A Kubernetes name as kube-state-metrics writes it into a label name or value (`[^a-zA-Z0-9_]` -> `_`).

    >>> sanitize("nvidia.com/mig-1g.10gb")
    'nvidia_com_mig_1g_10gb'
    """
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def ksm_label(key: str) -> str:
    """The label kube-state-metrics gives an allow-listed Kubernetes label (`kube_*_labels`).

    >>> ksm_label("gpu-tenancy.dev/tenant")
    'label_gpu_tenancy_dev_tenant'
    """
    return "label_" + sanitize(key)


def regex_text(value: str) -> str:
    """`value` as a literal inside a regex inside a double-quoted PromQL string (backslashes doubled).

    >>> print(regex_text("requests.nvidia.com/gpu"))
    requests\\\\.nvidia\\\\.com/gpu
    """
    return re.sub(r"([.+*?()|\[\]{}^$\\])", r"\\\\\1", value)


def _alternatives(values: list[str]) -> str:
    """A regex matching exactly these values (label matchers are anchored), for a double-quoted PromQL string."""
    return "|".join(regex_text(v) for v in sorted(set(values)))


def _number(value: Fraction | int) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def gpu_resources(facts: FleetFacts) -> list[str]:
    """GPU resources of the cluster (`FleetFacts.cluster_gpu_resources`) as kube-state-metrics names them in `resource` labels.

    >>> gpu_resources(FleetFacts("dev", Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {"h100": {
    ...     "model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}}}), ()))
    ['nvidia_com_gpu']
    """
    return [sanitize(resource) for resource in facts.cluster_gpu_resources]


def class_capacity(platform: Platform) -> dict[tuple[str, str], int]:
    """Devices per (GPU class, extended resource) from the inventory: whole GPUs, shares or MIG slices.

    >>> class_capacity(Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {"h100": {
    ...     "model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}},
    ...     "nodePools": {"p": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]}}}))
    {('h100', 'nvidia.com/gpu'): 16}
    """
    result: dict[tuple[str, str], int] = {}
    for _, pool in sorted(platform.node_pools.items()):
        for resource, count in cap.node_gpu_resources(platform, pool).items():
            key = (pool.gpu_class, resource)
            result[key] = result.get(key, 0) + pool.node_count * count
    return dict(sorted(result.items()))


def device_gpu_fractions(platform: Platform) -> dict[tuple[str, str], Fraction]:
    """What one device of each (GPU class, extended resource) is of a physical GPU, for chargeback.

    A whole GPU is 1; a time-slice or MPS share 1/replicas; a MIG instance (mixed strategy) its
    compute slices over the GPU's (a 1g.10gb on an A100 is 1/7); under the single strategy, where
    every slice is an `nvidia.com/gpu`, the class's GPUs over the devices they advertise.

    >>> device_gpu_fractions(Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {"l4": {
    ...     "model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing",
    ...     "timeSlicing": {"replicas": 4}}}, "nodePools": {"p": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}}}))
    {('l4', 'nvidia.com/gpu'): Fraction(1, 4)}
    """
    gpus: dict[str, int] = {}
    for pool in platform.node_pools.values():
        gpus[pool.gpu_class] = gpus.get(pool.gpu_class, 0) + pool.node_count * pool.gpus_per_node
    result: dict[tuple[str, str], Fraction] = {}
    for (class_name, resource), devices in class_capacity(platform).items():
        gpu_class = platform.gpu_classes[class_name]
        result[(class_name, resource)] = mode_of(gpu_class).device_share(gpu_class, resource, gpus[class_name], devices)
    return result


def gpu_hours_expr(series: str, period: str, step_seconds: int = GPU_HOURS_RESOLUTION_MINUTES * 60) -> str:
    """PromQL for the GPU-hours of a GPU-equivalents series over `period` ending at the query's time,
    per cost centre, tenant and class: a subquery at `step_seconds` (a minute unless asked; it must
    divide an hour) summed, so the result does not depend on the rule evaluation interval, and a pod
    that stops stops counting (staleness). A pod is counted at the steps it held its devices, so
    each run is off by up to a step: finer steps for periods of minutes (a test run).

    >>> print(gpu_hours_expr(TENANT_ALLOCATED_GPUS, "3h"))
    sum by (cost_center, tenant, gpu_class) (sum_over_time(gpu_tenancy:tenant_gpu_allocated:gpus[3h:1m])) / 60
    >>> print(gpu_hours_expr(TENANT_ALLOCATED_GPUS, "90s", step_seconds=1))
    sum by (cost_center, tenant, gpu_class) (sum_over_time(gpu_tenancy:tenant_gpu_allocated:gpus[90s:1s])) / 3600
    """
    return f"sum by ({', '.join(CHARGEBACK_LABELS)}) (sum_over_time({series}[{period}:{_step(step_seconds)}])) / {3600 // step_seconds}"


def _step(step_seconds: int) -> str:
    """A subquery's resolution (`1m`, `15s`): a step that divides an hour, else ValueError."""
    if step_seconds <= 0 or 3600 % step_seconds:
        raise ValueError(f"a GPU-hours step of {step_seconds} s does not divide an hour; use one that does (1, 5, 15, 60, ...)")
    return f"{step_seconds // 60}m" if step_seconds % 60 == 0 else f"{step_seconds}s"


# --- figures over a period: one table that `tenants report` and the fleet dashboard both read -----


@dataclass(frozen=True)
class Period:
    """A period as a query over it reads it: a PromQL range (`10800s`; in the dashboard Grafana's
    `$__range`), the same length in seconds (`10800`; `$__range_s`) and the integration step.

    >>> Period.of_seconds(10800)
    Period(window='10800s', seconds='10800', step_seconds=60)
    """

    window: str
    seconds: str
    step_seconds: int = GPU_HOURS_RESOLUTION_MINUTES * 60

    @classmethod
    def of_seconds(cls, seconds: int, step_seconds: int = GPU_HOURS_RESOLUTION_MINUTES * 60) -> "Period":
        return cls(f"{seconds}s", str(seconds), step_seconds)


DASHBOARD_PERIOD = Period("$__range", "$__range_s")   # the dashboard's time range (a month: pick it in Grafana)
IDLE_BELOW = 0.5   # held GPU-hours under this share of the quota's are idle (`--idle-below`'s default, the panel's)
ALLOCATED, USED, PEAK, GUARANTEED = "allocated", "used", "peak", "guaranteed"


@dataclass(frozen=True)
class PeriodFigure:
    """One figure per (cost centre,) tenant and GPU class over a period, in GPU-equivalents
    (`device_gpu_fractions`): its column or legend, its query, the exporter it needs beyond
    kube-state-metrics (None: none)."""

    label: str
    query: Callable[[Period], str]
    exporter: Optional[str] = None


def _guaranteed_hours(period: Period) -> str:
    # The tenants' quota series (their files, as deployed) weighted like the chargeback, for every hour of the period.
    quota = f"{TENANT_QUOTA_STACK} * on (gpu_class, resource) group_left () {DEVICE_GPU_FRACTION}"
    return f"sum by (tenant, gpu_class) ({quota}) * {period.seconds} / 3600"


def _peak_held(period: Period) -> str:
    return (f"max by ({', '.join(CHARGEBACK_LABELS)}) "
            f"(max_over_time({TENANT_ALLOCATED_GPUS}[{period.window}:{_step(period.step_seconds)}]))")


# Chargeback (`tenants report`, the dashboard's "Chargeback" row) reads allocated and used; idle
# guaranteed quota (`tenants report --idle`, the "Idle guaranteed quota" row) all four: the report
# takes the quota from the tenant files instead, with their lines.
PERIOD_FIGURES: dict[str, PeriodFigure] = {
    GUARANTEED: PeriodFigure("quota GPU-h", _guaranteed_hours),
    ALLOCATED: PeriodFigure("held GPU-h", lambda p: gpu_hours_expr(TENANT_ALLOCATED_GPUS, p.window, p.step_seconds)),
    USED: PeriodFigure("used GPU-h", lambda p: gpu_hours_expr(TENANT_USED_GPUS, p.window, p.step_seconds), "dcgm"),
    PEAK: PeriodFigure("peak held GPUs", _peak_held),
}


def figure_queries(period: Period, names: tuple[str, ...], exporters: Optional[frozenset[str]] = None) -> dict[str, str]:
    """The queries of the named `PERIOD_FIGURES` over `period`, by name, leaving out those whose
    exporter is not in `exporters` (None: keep all).

    >>> figure_queries(Period.of_seconds(10800), (PEAK,))
    {'peak': 'max by (cost_center, tenant, gpu_class) (max_over_time(gpu_tenancy:tenant_gpu_allocated:gpus[10800s:1m]))'}
    >>> list(figure_queries(DASHBOARD_PERIOD, (ALLOCATED, USED), frozenset()))
    ['allocated']
    """
    return {name: PERIOD_FIGURES[name].query(period) for name in names
            if exporters is None or PERIOD_FIGURES[name].exporter in (None, *exporters)}


def idle_share_query(period: Period, below: float = IDLE_BELOW) -> str:
    """Held over guaranteed GPU-hours per tenant and class, where under `below`: the rows `tenants
    report --idle` lists (a tenant that held nothing counts as 0, not as missing).

    >>> print(idle_share_query(Period.of_seconds(3600)))   # doctest: +ELLIPSIS
    (sum by (tenant, gpu_class) (sum by (...) (sum_over_time(...[3600s:1m])) / 60) or on (tenant, gpu_class) (... * 0)) / on (tenant, gpu_class) (... > 0) < 0.5
    """
    held = f"sum by (tenant, gpu_class) ({PERIOD_FIGURES[ALLOCATED].query(period)})"
    guaranteed = PERIOD_FIGURES[GUARANTEED].query(period)
    return f"({held} or on (tenant, gpu_class) ({guaranteed} * 0)) / on (tenant, gpu_class) ({guaranteed} > 0) < {below:g}"


def tenant_class_quotas(tenant: Tenant, view: TenantView) -> dict[tuple[str, str], int]:
    """A tenant's nominal GPU quota per (GPU class, resource), as its Kueue flavors carry it.

    >>> tenant_class_quotas(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))[("a100", "nvidia.com/gpu")]
    20
    """
    return {
        (gpu_class, resource): count
        for gpu_class, resources in gpu_class_quotas(tenant, view).items()
        for resource, count in resources.items()
    }


# --- rule helpers -------------------------------------------------------------------------------


def _record(name: str, expr: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"record": name, "expr": _squash(expr)}
    if labels:
        rule["labels"] = dict(sorted(labels.items()))
    return rule


def _squash(expr: str) -> str:
    """One-line PromQL (deterministic, readable in `kubectl get -o yaml` and diffs)."""
    return re.sub(r"\s+", " ", expr).replace("( ", "(").replace(" )", ")").strip()


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str, runbook: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": _squash(expr),
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook": runbook,
            "runbook_url": RUNBOOK_ANCHOR + name.lower(),
        },
    }


def _by_tenant(expr: str) -> str:
    return f"{expr} * on (namespace) group_left (tenant) {NAMESPACE_TENANT}"


def _by_class(expr: str) -> str:
    return f"{expr} * on (node) group_left (gpu_class) {NODE_CLASS}"


# --- groups -------------------------------------------------------------------------------------


def _label_info(record: str, metric: str, key: str, label: str, kubernetes_label: str) -> dict[str, Any]:
    """1 per object (`key`) carrying `kubernetes_label`, its value as `label`."""
    source = ksm_label(kubernetes_label)
    return _record(
        record, f'max by ({key}, {label}) (label_replace({metric}{{{source}!=""}}, "{label}", "$1", "{source}", "(.+)"))'
    )


def mapping_rules(platform: Platform) -> list[dict[str, Any]]:
    """Which tenant and cost centre a namespace belongs to and which class a node is, from the labels we set.

    >>> [rule["record"] for rule in mapping_rules(prod.platform)]
    ['gpu_tenancy:namespace_tenant:info', 'gpu_tenancy:namespace_cost_center:info', 'gpu_tenancy:node_gpu_class:info']
    """
    return [
        _label_info(NAMESPACE_TENANT, "kube_namespace_labels", "namespace", "tenant", TENANT_LABEL),
        _label_info(NAMESPACE_COST_CENTER, "kube_namespace_labels", "namespace", "cost_center", COST_CENTER_LABEL),
        _label_info(NODE_CLASS, "kube_node_labels", "node", "gpu_class", gpu_class_label(platform)),
    ]


def allocation_rules(facts: FleetFacts) -> list[dict[str, Any]]:
    """GPUs held per pod and per tenant and class, and the namespace quota used vs hard.

    >>> [rule["record"] for rule in allocation_rules(prod.facts)]
    ['gpu_tenancy:pod_gpu_requests:sum', 'gpu_tenancy:tenant_gpu_requests:sum', 'gpu_tenancy:tenant_gpu_quota_used:sum', 'gpu_tenancy:tenant_gpu_quota_hard:sum']
    """
    resources = _alternatives(gpu_resources(facts))
    held = (
        f'sum by (namespace, pod, node, resource) (kube_pod_container_resource_requests{{resource=~"{resources}", node!=""}}'
        f' * on (namespace, pod) group_left () max by (namespace, pod) (kube_pod_status_phase{{phase=~"Pending|Running"}} == 1))'
    )
    rules = [
        _record(POD_REQUESTS, _by_class(_by_tenant(held))),
        _record(TENANT_REQUESTS, f"sum by (tenant, gpu_class, resource) ({POD_REQUESTS})"),
    ]
    # kube_resourcequota names resources as Kubernetes does (requests.nvidia.com/gpu); rename them to
    # the kube-state-metrics form of the pod series so that used, hard and requested join on `resource`.
    for record, kind in ((QUOTA_USED, "used"), (QUOTA_HARD, "hard")):
        series = f'kube_resourcequota{{resourcequota="{TENANT_QUOTA}", type="{kind}", resource=~"{_alternatives(["requests." + r for r in facts.cluster_gpu_resources])}"}}'
        for resource in facts.cluster_gpu_resources:
            series = f'label_replace({series}, "resource", "{sanitize(resource)}", "resource", "{regex_text("requests." + resource)}")'
        rules.append(_record(record, f"sum by (tenant, resource) ({_by_tenant(series)})"))
    return rules


def stack_rules(facts: FleetFacts) -> list[dict[str, Any]]:
    """What the stack declares: capacity and overcommit per class (static series), and the quotas of
    all tenants per class (summed from the tenants' own static series).

    >>> sorted({rule["record"] for rule in stack_rules(prod.facts)})
    ['gpu_tenancy:gpu_class_allocatable:sum', 'gpu_tenancy:gpu_class_capacity:stack', 'gpu_tenancy:gpu_class_overcommit:stack', 'gpu_tenancy:gpu_class_quota:stack']
    """
    platform = facts.platform
    rules = []
    for (gpu_class, resource), count in class_capacity(platform).items():
        rules.append(_record(CLASS_CAPACITY_STACK, f"vector({count})", {"gpu_class": gpu_class, "resource": sanitize(resource)}))
    for gpu_class, spec in sorted(platform.gpu_classes.items()):
        rules.append(_record(CLASS_OVERCOMMIT_STACK, f"vector({_number(Fraction(spec.overcommit))})", {"gpu_class": gpu_class}))
    # Each tenant's quota is a static series of the tenant's own PrometheusRule (tenant_rule_group),
    # so that a quota edit changes the tenant's stack only (docs/sharding.md); the class sums are
    # computed from them.
    rules.append(_record(CLASS_QUOTA_STACK, f"sum by (gpu_class, resource) ({TENANT_QUOTA_STACK})"))
    resources = _alternatives(gpu_resources(facts))
    rules.append(
        _record(
            CLASS_ALLOCATABLE,
            f'sum by (gpu_class, resource) ({_by_class(f"kube_node_status_allocatable{{resource=~{chr(34)}{resources}{chr(34)}}}")})',
        )
    )
    return rules


def utilisation_rules(monitoring: Monitoring) -> list[dict[str, Any]]:
    """Engine activity and framebuffer of the GPUs pods hold (DCGM exporter), per pod and per tenant and class.

    `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (a 0..1 ratio, also reported per MIG instance) is preferred;
    GPUs that only report `DCGM_FI_DEV_GPU_UTIL` (percent) fall back to it.

    >>> [rule["record"] for rule in utilisation_rules(prod.platform.monitoring)]
    ['gpu_tenancy:gpu_engine_active:ratio', 'gpu_tenancy:gpu_fb_used:bytes', 'gpu_tenancy:pod_gpu_engine_active:avg', 'gpu_tenancy:tenant_gpu_engine_active:avg', 'gpu_tenancy:tenant_gpu_engine_active:sum', 'gpu_tenancy:tenant_gpu_fb_used_bytes:sum']
    """
    prefix = monitoring.dcgm_label_prefix
    device = f"Hostname, gpu, GPU_I_ID, GPU_I_PROFILE, {prefix}namespace, {prefix}pod"

    def per_device(metric: str) -> str:
        return f'max by ({device}) ({metric}{{{prefix}pod!=""}})'

    def pod_labels(expr: str) -> str:
        expr = f'label_replace({expr}, "node", "$1", "Hostname", "(.+)")'
        if prefix:
            for label in ("namespace", "pod"):
                expr = f'label_replace({expr}, "{label}", "$1", "{prefix}{label}", "(.+)")'
            expr = f"max without ({prefix}namespace, {prefix}pod) ({expr})"
        return expr

    joined_active = _by_class(_by_tenant(ENGINE_ACTIVE))
    joined_fb = _by_class(_by_tenant(FB_USED))
    return [
        _record(
            ENGINE_ACTIVE,
            pod_labels(f"{per_device('DCGM_FI_PROF_GR_ENGINE_ACTIVE')} or {per_device('DCGM_FI_DEV_GPU_UTIL')} / 100"),
        ),
        _record(FB_USED, pod_labels(f"{per_device('DCGM_FI_DEV_FB_USED')} * 1048576")),
        _record(POD_ACTIVE, f"avg by (tenant, gpu_class, namespace, pod) ({joined_active})"),
        _record(TENANT_ACTIVE_AVG, f"avg by (tenant, gpu_class) ({joined_active})"),
        _record(TENANT_ACTIVE_SUM, f"sum by (tenant, gpu_class) ({joined_active})"),
        _record(TENANT_FB_USED, f"sum by (tenant, gpu_class) ({joined_fb})"),
    ]


def claims_metered(platform: Platform) -> bool:
    """Whether any DeviceClass of the stack meters a GPU class (`deviceClasses.<c>.gpuClass`): then
    devices allocated to ResourceClaims are charged (`claim_rules`); classes a driver installs that
    meter none pin every tenant at 0, so no claim of theirs is ever charged.

    >>> claims_metered(prod.platform), claims_metered(dra.platform)
    (False, True)
    """
    return any(spec.gpu_class is not None for spec in platform.device_classes.values())


def mig_partition_fractions(platform: Platform) -> dict[tuple[str, int], Fraction]:
    """What a MIG partition of each compute-slice size is of its GPU, per class served as MIG through
    DRA: its compute slices over the model's (a 1g on an A100 is 1/7, as a device-plugin 1g.10gb is).

    >>> mig_partition_fractions(dra_mig.platform)
    {('a100-mig', 1): Fraction(1, 7), ('a100-mig', 3): Fraction(3, 7)}
    """
    out: dict[tuple[str, int], Fraction] = {}
    for name, gpu_class in sorted(platform.gpu_classes.items()):
        geo = mig.geometry().get(gpu_class.model)
        if gpu_class.sharing != "mig" or gpu_class.serving != "dra" or geo is None:
            continue
        for profile in platform.layout_profiles(name):
            slices = geo.profiles[profile].compute
            out[(name, slices)] = Fraction(slices, geo.compute_slices)
    return dict(sorted(out.items()))


def claim_rules(platform: Platform) -> list[dict[str, Any]]:
    """GPUs held through ResourceClaims per claim, tenant and class; [] unless `claims_metered`.

    Each allocated device result of a claim (`kube_resourceclaim_allocation_device_info`: it exists
    while the claim is allocated, whether its pods run yet or not) counts its share of the device:
    1 when the claim has the device alone, 1/N when N results hold it at once (consumable capacity
    shares a device between claims; KSM publishes no consumed amount, so holders split it evenly
    and a device never counts more than once). The class is the one of the node of the device's
    pool (`kube_resourceslice_info`: a node-local pool, as a GPU driver's is); a DRA device of a
    class counts 1, a MIG partition (MIG through DRA) its compute slices' share of the GPU
    (`mig_partition_fractions`, the slices read from the driver's device name). The claims the
    scheduler makes for DRA extended resources count too (a `deviceclass.resource.kubernetes.io/*`
    request is in no KSM pod series); the pods they are reserved for are listed so that the pod's
    own request of a mapped name is not charged again (`chargeback_rules`).

    >>> [rule["record"] for rule in claim_rules(dra.platform)]   # doctest: +NORMALIZE_WHITESPACE
    ['gpu_tenancy:dra_pool_node:info', 'gpu_tenancy:claim_device_share:ratio', 'gpu_tenancy:claim_gpu_allocated:gpus',
     'gpu_tenancy:tenant_claim_gpu_allocated:gpus', 'gpu_tenancy:pod_extended_resource_claim:info']
    >>> claim_rules(prod.platform)
    []
    """
    if not claims_metered(platform):
        return []
    pool_node = f'label_replace(label_replace({KSM_SLICE_INFO}{{node_name!=""}}, "pool", "$1", "pool_name", "(.+)"), "node", "$1", "node_name", "(.+)")'
    result = "namespace, resourceclaim, request, driver, pool, device"
    holders = f"count by (driver, pool, device) ({KSM_CLAIM_DEVICES})"
    on_node = f"{CLAIM_DEVICE_SHARE} * on (driver, pool) group_left (node) {POOL_NODE}"
    claim = "tenant, gpu_class, namespace, resourceclaim"
    made = f'max by (namespace, resourceclaim) ({KSM_CLAIM_DEVICES}{{request=~"{EXTENDED_RESOURCE_REQUESTS}"}})'
    reserved = f'label_replace({KSM_CLAIM_RESERVED}{{consumer_resource="pods"}}, "pod", "$1", "consumer_name", "(.+)")'
    held = _by_class(_by_tenant(on_node))
    fractions = mig_partition_fractions(platform)
    if fractions:
        # A MIG partition claimed through DRA is its compute slices' share of the GPU, as a device-plugin
        # MIG slice is (`device_gpu_fractions`); every other device of a claim is a whole one.
        sliced = f'label_replace({held}, "mig_slices", "$1", "device", "{MIG_DEVICE_SLICES}")'
        held = f"({sliced} * on (gpu_class, mig_slices) group_left () {MIG_PARTITION_FRACTION}) or on ({result}) {held}"
    return [
        *(_record(MIG_PARTITION_FRACTION, f"vector({_number(fraction)})", {"gpu_class": gpu_class, "mig_slices": str(slices)})
          for (gpu_class, slices), fraction in fractions.items()),
        _record(POOL_NODE, f"max by (driver, pool, node) ({pool_node})"),
        _record(CLAIM_DEVICE_SHARE, f"max by ({result}) ({KSM_CLAIM_DEVICES}) / on (driver, pool, device) group_left () {holders}"),
        _record(CLAIM_ALLOCATED_GPUS, f"sum by ({claim}) ({held})"),
        _record(TENANT_CLAIM_GPUS, f"sum by ({', '.join(CHARGEBACK_LABELS)}) ({CLAIM_ALLOCATED_GPUS} * {_by_cost_center()})"),
        _record(EXTENDED_RESOURCE_PODS, f"max by (namespace, pod) ({reserved} * on (namespace, resourceclaim) group_left () {made})"),
    ]


def dra_mapped_resources(facts: FleetFacts) -> list[str]:
    """The GPU resources of the cluster (kube-state-metrics names) that a DeviceClass maps as its
    `extendedResourceName`: a pod's request of one is served by the device plugin or by DRA (then
    through a claim the scheduler makes, charged as a claim).

    >>> dra_mapped_resources(dra.facts), dra_mapped_resources(prod.facts)
    (['nvidia_com_gpu'], [])
    """
    mapped = {sanitize(spec.extended_resource_name) for spec in facts.platform.device_classes.values()
              if spec.gpu_class is not None and spec.extended_resource_name is not None}
    return sorted(mapped & set(gpu_resources(facts)))


def _pod_requests_charged(facts: FleetFacts) -> str:
    """The pods' requests the chargeback counts: all, but a mapped resource's of a pod that has a
    scheduler-made claim (its devices are the claim's, charged there)."""
    mapped = dra_mapped_resources(facts)
    if not claims_metered(facts.platform) or not mapped:
        return POD_REQUESTS
    names = _alternatives(mapped)
    return (f'(({POD_REQUESTS}{{resource=~"{names}"}} unless on (namespace, pod) {EXTENDED_RESOURCE_PODS})'
            f' or {POD_REQUESTS}{{resource!~"{names}"}})')


def _by_cost_center() -> str:
    return f"on (namespace) group_left (cost_center) {NAMESPACE_COST_CENTER}"


def chargeback_rules(facts: FleetFacts, exporters: frozenset[str]) -> list[dict[str, Any]]:
    """GPU-equivalents held (requests of scheduled pods, and devices of allocated claims when a
    DeviceClass meters a GPU class: `claim_rules`) and busy (DCGM activity x held, pods only), per
    tenant, cost centre and class: each device weighted by what it is of a GPU (`device_gpu_fractions`).

    >>> exporters = prod.platform.monitoring.exporters_for(prod.platform.scheduler)
    >>> sorted({rule["record"] for rule in chargeback_rules(prod.facts, exporters)})[:3]
    ['gpu_tenancy:gpu_class_device_gpu_fraction:stack', 'gpu_tenancy:pod_gpu_allocated:gpus', 'gpu_tenancy:tenant_gpu_allocated:gpus']
    """
    rules = [
        _record(DEVICE_GPU_FRACTION, f"vector({_number(fraction)})", {"gpu_class": gpu_class, "resource": sanitize(resource)})
        for (gpu_class, resource), fraction in device_gpu_fractions(facts.platform).items()
    ]
    pod = "tenant, gpu_class, namespace, pod"
    by_cost_center = _by_cost_center()
    # A claim's GPUs join the pods' under the same name: each series has `pod` or `resourceclaim`, never both.
    held = f"({POD_ALLOCATED_GPUS} or {CLAIM_ALLOCATED_GPUS})" if claims_metered(facts.platform) else POD_ALLOCATED_GPUS
    rules += [
        _record(
            POD_ALLOCATED_GPUS,
            f"sum by ({pod}) ({_pod_requests_charged(facts)} * on (gpu_class, resource) group_left () {DEVICE_GPU_FRACTION})",
        ),
        _record(TENANT_ALLOCATED_GPUS, f"sum by ({', '.join(CHARGEBACK_LABELS)}) ({held} * {by_cost_center})"),
    ]
    if "dcgm" in exporters:
        # A pod's busy GPU-equivalents: the average activity of its devices times what it holds, so a
        # 1g.10gb instance fully busy is 1/7 GPU, and a time-slice share carries its part of the GPU.
        rules.append(
            _record(
                TENANT_USED_GPUS,
                f"sum by ({', '.join(CHARGEBACK_LABELS)}) ({POD_ACTIVE} * on ({pod}) group_left () {POD_ALLOCATED_GPUS}"
                f" * {by_cost_center})",
            )
        )
    return rules


def _ours(expr: str) -> str:
    # A queue is named like its tenant; keep those of tenants that have namespaces labelled by us,
    # which leaves other teams' queues out without listing tenants here (a new tenant changes
    # only its own stack).
    return f"({expr}) and on (tenant) max by (tenant) ({NAMESPACE_TENANT})"


def queue_rules(facts: FleetFacts, exporters: frozenset[str], monitoring: Monitoring) -> list[dict[str, Any]]:
    """Queue wait percentiles and pending workloads (Kueue), or allocated vs deserved GPUs (KAI), per tenant.

    >>> monitoring = prod.platform.monitoring
    >>> [rule["record"] for rule in queue_rules(prod.facts, frozenset({"kueue"}), monitoring)]
    ['gpu_tenancy:tenant_queue_wait_seconds:p50', 'gpu_tenancy:tenant_queue_wait_seconds:p95', 'gpu_tenancy:tenant_pending_workloads:sum']
    >>> queue_rules(prod.facts, frozenset(), monitoring)
    []
    """
    rules = []
    if "kueue" in exporters:
        window = monitoring.thresholds.queue_wait_window
        buckets = _ours(
            f'sum by (tenant, le) (label_replace(rate(kueue_admission_wait_time_seconds_bucket[{window}]),'
            f' "tenant", "$1", "cluster_queue", "(.+)"))'
        )
        rules += [
            _record(QUEUE_WAIT_P50, f"histogram_quantile(0.5, {buckets})"),
            _record(QUEUE_WAIT_P95, f"histogram_quantile(0.95, {buckets})"),
            _record(
                PENDING_WORKLOADS,
                _ours('sum by (tenant, status) (label_replace(kueue_pending_workloads, "tenant", "$1", "cluster_queue", "(.+)"))'),
            ),
        ]
    if "kai" in exporters:
        for record, metric in ((KAI_ALLOCATED, "kai_queue_allocated_gpus"), (KAI_DESERVED, "kai_queue_deserved_gpus")):
            rules.append(_record(record, _ours(f'max by (tenant) (label_replace({metric}, "tenant", "$1", "queue_name", "(.+)"))')))
    return rules


def alert_rules(facts: FleetFacts, exporters: frozenset[str], monitoring: Monitoring) -> list[dict[str, Any]]:
    """Alerts with the tenant (and pod) in their labels and a runbook in their annotations.

    >>> monitoring = prod.platform.monitoring
    >>> [rule["alert"] for rule in alert_rules(prod.facts, monitoring.exporters_for(prod.platform.scheduler), monitoring)]
    ['GpuTenantNearQuota', 'GpuTenantPodPendingTooLong', 'GpuQuotaOverCapacity', 'GpuAllocatedIdle', 'GpuTenantWorkloadsPendingTooLong', 'GpuMigReconfigurationFailed']
    """
    t = monitoring.thresholds
    alerts = [_near_quota_alert(t), _pod_pending_alert(facts, t), _over_capacity_alert()]
    if "dcgm" in exporters:
        alerts.append(_allocated_idle_alert(monitoring))
    if "kueue" in exporters:
        alerts.append(_workloads_pending_alert(t))
    if any(mode_of(spec).partitions_gpus for spec in facts.platform.gpu_classes.values()):
        alerts.append(_mig_reconfiguration_alert(t))
    return alerts


def _near_quota_alert(t: MonitoringThresholds) -> dict[str, Any]:
    ratio = _number(Fraction(t.near_quota_ratio))
    percent = _number(Fraction(t.near_quota_ratio) * 100)
    return _alert(
        "GpuTenantNearQuota",
        f"{QUOTA_USED} / on (tenant, resource) ({QUOTA_HARD} > 0) >= {ratio}",
        t.near_quota_for,
        "warning",
        "Tenant {{ $labels.tenant }} uses {{ $value | humanizePercentage }} of its {{ $labels.resource }} quota",
        f"Pods of tenant {{{{ $labels.tenant }}}} request at least {percent}% of the {{{{ $labels.resource }}}} its "
        "namespace quota allows; new pods beyond the quota will be rejected at admission.",
        "1. Check who holds the GPUs: the per-tenant dashboard, panel 'GPUs held'. "
        "2. Look for idle pods (GpuAllocatedIdle) and ask the tenant to release them. "
        "3. If the demand is real, raise quota in tenants/<tenant>.yaml by pull request (the capacity check shows the headroom).",
    )


def _pod_pending_alert(facts: FleetFacts, t: MonitoringThresholds) -> dict[str, Any]:
    resources = _alternatives(gpu_resources(facts))
    return _alert(
        "GpuTenantPodPendingTooLong",
        f'(sum by (namespace, pod) (kube_pod_container_resource_requests{{resource=~"{resources}", node=""}})'
        f' and on (namespace, pod) (max by (namespace, pod) (kube_pod_status_phase{{phase="Pending"}}) == 1))'
        f" * on (namespace) group_left (tenant) {NAMESPACE_TENANT}",
        t.pending_for,
        "warning",
        "GPU pod {{ $labels.namespace }}/{{ $labels.pod }} of tenant {{ $labels.tenant }} has not been scheduled for " + t.pending_for,
        "The pod requests {{ $value }} GPU device(s) and no node has taken it.",
        "1. `kubectl -n <namespace> describe pod <pod>`: the scheduler's events name the reason (insufficient "
        "nvidia.com/..., taints, placement policy). 2. Compare the tenant's GPUs held with the class capacity on "
        "the fleet dashboard. 3. If nodes are missing, see GpuQuotaOverCapacity.",
    )


def _over_capacity_alert() -> dict[str, Any]:
    return _alert(
        "GpuQuotaOverCapacity",
        f"{CLASS_QUOTA_STACK} > on (gpu_class, resource) ({CLASS_ALLOCATABLE} * on (gpu_class) group_left () {CLASS_OVERCOMMIT_STACK})"
        f" or ({CLASS_QUOTA_STACK} > 0 unless on (gpu_class, resource) {CLASS_ALLOCATABLE})",
        "10m",
        "critical",
        "Quotas of GPU class {{ $labels.gpu_class }} ({{ $labels.resource }}) exceed what its nodes now offer",
        "Tenants' quotas for {{ $labels.gpu_class }} sum to {{ $value }} devices, more than the allocatable "
        "devices of the class's nodes times its overcommit: nodes are lost, cordoned or their device plugin is down. "
        "Tenants within quota will see pods pending.",
        "1. `kubectl get nodes -l <labelDomain>/gpu-class=<class>`: find NotReady nodes or nodes with 0 allocatable "
        "GPUs. 2. Check the device plugin and GPU Operator pods on them. 3. If capacity is gone for good, lower "
        "quotas or the class's node count in the stack (the capacity check then agrees).",
    )


def _allocated_idle_alert(monitoring: Monitoring) -> dict[str, Any]:
    idle = _number(Fraction(monitoring.idle_ratio))
    t = monitoring.thresholds
    return _alert(
        "GpuAllocatedIdle",
        f"{POD_ACTIVE} < {idle}",
        t.idle_for,
        "warning",
        "Pod {{ $labels.namespace }}/{{ $labels.pod }} of tenant {{ $labels.tenant }} holds idle {{ $labels.gpu_class }} GPUs",
        f"The GPUs this pod holds have averaged less than {_number(Fraction(t.idle_activity_percent))}% engine "
        f"activity for {t.idle_for}; other tenants may be waiting for them.",
        "1. Ask the tenant (contacts in the namespace annotations) whether the pod still needs the GPU. "
        "2. Notebooks: stop the kernel or scale the workload to 0. "
        "3. Repeated offenders: lower the tenant's quota or use a time-sliced class for interactive work.",
    )


def _workloads_pending_alert(t: MonitoringThresholds) -> dict[str, Any]:
    return _alert(
        "GpuTenantWorkloadsPendingTooLong",
        f"sum by (tenant) ({PENDING_WORKLOADS}) > 0",
        t.pending_for,
        "warning",
        "Tenant {{ $labels.tenant }} has had workloads waiting in its Kueue queue for " + t.pending_for,
        "{{ $value }} workload(s) of the tenant are pending in its ClusterQueue and have not been admitted "
        f"for {t.pending_for} (the count never dropped to zero in that time).",
        "1. `kubectl get workloads -n <namespace>` and `kubectl describe clusterqueue <tenant>`: the "
        "admission condition says which flavor/resource is short. 2. Quota reached: see GpuTenantNearQuota. "
        "3. Cohort exhausted: borrowing is capped by the other tenants' usage; wait or raise the nominal quota.",
    )


def _mig_reconfiguration_alert(t: MonitoringThresholds) -> dict[str, Any]:
    state = ksm_label(MIG_STATE_LABEL)
    return _alert(
        "GpuMigReconfigurationFailed",
        f'max by (node, state) (label_replace(kube_node_labels{{{state}!="", {state}!="success"}}, "state", "$1", "{state}", "(.+)"))',
        t.mig_config_for,
        "critical",
        "MIG reconfiguration of node {{ $labels.node }} is '{{ $labels.state }}'",
        f"The node's {MIG_STATE_LABEL} label has not been 'success' for {t.mig_config_for}: the MIG manager "
        "could not apply the layout, so the node advertises the wrong (or no) MIG devices.",
        "1. `kubectl -n <gpu-operator namespace> logs -l app=nvidia-mig-manager` on that node. "
        "2. GPUs in use block reconfiguration: drain the node and let the MIG manager retry. "
        "3. Check that the node's nvidia.com/mig.config names a layout of the rendered MIG ConfigMap.",
    )


def platform_rule_group(facts: FleetFacts) -> dict[str, Any] | None:
    """The environment's group: every rule but the tenants' quotas, in dependency order; None when
    monitoring is off.

    Rules of a group run one after the other at the same evaluation time, so every rule (and
    alert) sees the series the rules before it recorded at that instant. Separate groups run
    independently, and a chain of them would lag one interval per step (an idle alert would fire
    one interval late per hop). The one input from other groups is the tenants' quotas: constant
    series, so reading them one interval late changes nothing.

    >>> platform_rule_group(prod.facts)["name"], platform_rule_group(dev.facts)
    ('gpu-tenancy.prod', None)
    """
    monitoring = enabled_monitoring(facts.platform)
    if monitoring is None:
        return None
    exporters = monitoring.exporters_for(facts.platform.scheduler)
    rules = [*mapping_rules(facts.platform), *stack_rules(facts), *allocation_rules(facts), *claim_rules(facts.platform)]
    if "dcgm" in exporters:
        rules += utilisation_rules(monitoring)
    rules += chargeback_rules(facts, exporters)
    rules += queue_rules(facts, exporters, monitoring)
    rules += alert_rules(facts, exporters, monitoring)
    return {"name": f"gpu-tenancy.{facts.environment_label}", "rules": rules}


def tenant_rule_group(tenant: Tenant, view: TenantView) -> dict[str, Any] | None:
    """One tenant's group: its nominal GPU quota per class and resource (static series); None when
    monitoring is off or the tenant has no GPU quota.

    >>> tenant_rule_group(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["name"]
    'gpu-tenancy.prod.tenant.eval'
    """
    if enabled_monitoring(view.platform) is None:
        return None
    rules = [
        _record(TENANT_QUOTA_STACK, f"vector({count})", {"tenant": tenant.name, "gpu_class": gpu_class, "resource": sanitize(resource)})
        for (gpu_class, resource), count in sorted(tenant_class_quotas(tenant, view).items())
    ]
    return {"name": f"gpu-tenancy.{view.environment_label}.tenant.{tenant.name}", "rules": rules} if rules else None


def rule_groups(facts: FleetFacts) -> list[dict[str, Any]]:
    """Every group the environment's PrometheusRules hold, as Prometheus loads them: the tenants'
    (by name), then the environment's; [] when monitoring is off. `promtool` and the tests read this.

    >>> [group["name"] for group in rule_groups(prod.facts)]
    ['gpu-tenancy.prod.tenant.eval', 'gpu-tenancy.prod.tenant.inference', 'gpu-tenancy.prod.tenant.llm-finetune', 'gpu-tenancy.prod']
    """
    platform = platform_rule_group(facts)
    if platform is None:
        return []
    tenants = [tenant_rule_group(spec, facts.view(spec)) for _, spec in facts.members]
    return [*sorted((g for g in tenants if g), key=lambda g: g["name"]), platform]


def _rule_object(name: str, monitoring: Monitoring, group: dict[str, Any], labels: dict[str, str]) -> KubeObject:
    return kube_object(
        API_VERSION,
        "PrometheusRule",
        object_meta(name, namespace=monitoring.namespace, labels={**labels, **monitoring.rule_labels},
                    annotations={DOCS_ANNOTATION: "docs/monitoring.md"}),
        spec={"groups": [group]},
    )


def prometheus_rule(facts: FleetFacts) -> KubeObject | None:
    """The environment's PrometheusRule, labelled so that the stack's Prometheus selects it; None when monitoring is off.

    >>> rule = prometheus_rule(prod.facts)
    >>> rule["metadata"]["name"], rule["metadata"]["namespace"], prometheus_rule(dev.facts)
    ('gpu-tenancy', 'monitoring', None)
    """
    group = platform_rule_group(facts)
    if group is None:
        return None
    return _rule_object(RULE_NAME, facts.platform.monitoring, group, platform_labels(facts.environment_label))


def tenant_prometheus_rule(tenant: Tenant, view: TenantView) -> KubeObject | None:
    """A tenant's PrometheusRule (its quota series), in the monitoring namespace; None when
    monitoring is off or the tenant has no GPU quota. It belongs to the tenant's stack.

    >>> tenant_prometheus_rule(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["metadata"]["name"]
    'gpu-tenancy-tenant-eval'
    """
    group = tenant_rule_group(tenant, view)
    if group is None:
        return None
    return _rule_object(f"{RULE_NAME}-tenant-{tenant.name}", view.platform.monitoring, group,
                        tenant_labels(tenant.name, view.environment_label))
