"""Grafana dashboards for per-tenant GPU monitoring, built with Grafana's typed SDK and shipped as ConfigMaps.

Two dashboards, both reading only the recording rules of `monitoring_rules` (so a query here
never repeats the joins there):

* **GPU fleet overview**: per GPU class the stack's capacity, the sum of quotas, the devices
  requested and the devices busy; per tenant the GPUs held, busy share, quota use, queue wait and
  pending work; GPU-hours per cost centre (chargeback) and idle guaranteed quota over the time
  range, with the queries `tenants report` asks (`monitoring_rules.PERIOD_FIGURES`), and the GPUs
  held through ResourceClaims when a DeviceClass meters a GPU class; a table of idle GPU pods.
* **GPU tenant**: one tenant (a `tenant` variable): held vs quota per class, namespace quota
  used vs hard, engine activity and framebuffer per class, activity per pod, queue wait.

The dashboard JSON comes from `grafana-foundation-sdk` builders (typed: a misspelt option is an
AttributeError here, not a silently ignored key in Grafana). Each dashboard is a ConfigMap with the
labels the Grafana sidecar of kube-prometheus-stack watches (`grafana_dashboard: "1"` by default).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from ..fleet.facts import FleetFacts
from ..spec.monitoring import Monitoring
from . import monitoring_rules as r
from .meta import GRAFANA_FOLDER_ANNOTATION, KubeObject, kube_object, object_meta, platform_labels

FLEET = "gpu-tenancy-fleet-overview"
TENANT = "gpu-tenancy-tenant"
DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
TENANT_VARIABLE = "tenant"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    """What a panel shows; `kind` is timeseries or table (an instant table)."""

    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12
    extra: dict[str, Any] = field(default_factory=dict)


def _busy_share(selector: str = "") -> str:
    return (
        f"sum by (tenant) ({r.TENANT_ACTIVE_SUM}{selector}) / on (tenant) (sum by (tenant) ({r.TENANT_REQUESTS}{selector}) > 0)"
    )


def fleet_panels(exporters: frozenset[str], monitoring: Monitoring, claims: bool = False) -> list[tuple[str, list[PanelSpec]]]:
    """Rows and panels of the fleet overview (queries of missing exporters are left out; the claims
    panel only when a DeviceClass meters a GPU class: `monitoring_rules.claims_metered`).

    >>> monitoring = prod.platform.monitoring
    >>> [row for row, _ in fleet_panels(monitoring.exporters_for(prod.platform.scheduler), monitoring)]
    ['GPU classes', 'Tenants', 'Chargeback', 'Idle guaranteed quota', 'Idle GPUs']
    >>> [p.title for p in dict(fleet_panels(frozenset(), monitoring, claims=True))["Chargeback"]][1:]
    ['GPUs held through ResourceClaims, by tenant and class']
    """
    tenants = [*_tenant_load_panels(exporters), *_fleet_queue_panels(exporters, monitoring)]
    chargeback = [chargeback_panel(exporters), *([claims_panel("")] if claims else [])]
    rows = [("GPU classes", _class_panels(exporters)), ("Tenants", tenants), ("Chargeback", chargeback),
            idle_quota_row(exporters)]
    if "dcgm" in exporters:
        rows.append(_idle_row(monitoring))
    return rows


def _class_panels(exporters: frozenset[str]) -> list[PanelSpec]:
    classes = [
        PanelSpec(
            "Capacity by GPU class (stack inventory)",
            "Devices the stack declares per class: whole GPUs, time-slice shares or MIG instances.",
            (Query(f"sum by (gpu_class) ({r.CLASS_CAPACITY_STACK})", "{{gpu_class}}"),),
            unit="none",
        ),
        PanelSpec(
            "Sum of tenant quotas by GPU class",
            "Nominal quotas of all tenants per class, from the tenant files (Kueue flavor quotas).",
            (Query(f"sum by (gpu_class) ({r.CLASS_QUOTA_STACK})", "{{gpu_class}}"),),
            unit="none",
        ),
        PanelSpec(
            "Devices requested by GPU class",
            "GPU devices requested by scheduled pods of all tenants (kube-state-metrics).",
            (Query(f"sum by (gpu_class) ({r.TENANT_REQUESTS})", "{{gpu_class}}"),),
            unit="none",
        ),
        PanelSpec(
            "Allocatable devices by GPU class",
            "What the nodes of each class report as allocatable now; below capacity means lost or broken nodes.",
            (Query(f"sum by (gpu_class) ({r.CLASS_ALLOCATABLE})", "{{gpu_class}}"),),
            unit="none",
        ),
    ]
    if "dcgm" in exporters:
        classes.append(
            PanelSpec(
                "Busy devices by GPU class",
                "Sum of engine activity of the devices pods hold: 1 = one device fully busy.",
                (Query(f"sum by (gpu_class) ({r.TENANT_ACTIVE_SUM})", "{{gpu_class}}"),),
                unit="none",
            )
        )
    return classes


def _tenant_load_panels(exporters: frozenset[str]) -> list[PanelSpec]:
    tenants = [
        PanelSpec(
            "GPUs held by tenant",
            "Devices requested by the tenant's scheduled pods, all classes.",
            (Query(f"sum by (tenant) ({r.TENANT_REQUESTS})", "{{tenant}}"),),
            unit="none",
        ),
        PanelSpec(
            "Namespace GPU quota used by tenant",
            "Highest used/hard ratio over the tenant's GPU resources (ResourceQuota tenant-quota).",
            (Query(f"max by (tenant) ({r.QUOTA_USED} / on (tenant, resource) ({r.QUOTA_HARD} > 0))", "{{tenant}}"),),
            unit="percentunit",
        ),
    ]
    if "dcgm" in exporters:
        tenants.append(
            PanelSpec(
                "Busy share of held GPUs by tenant",
                "Engine activity summed over the tenant's devices divided by the devices it holds.",
                (Query(_busy_share(), "{{tenant}}"),),
                unit="percentunit",
            )
        )
    return tenants


def _fleet_queue_panels(exporters: frozenset[str], monitoring: Monitoring) -> list[PanelSpec]:
    panels: list[PanelSpec] = []
    if "kueue" in exporters:
        panels += [
            PanelSpec(
                "Queue wait p95 by tenant",
                f"95th percentile of the time workloads waited for admission in the tenant's ClusterQueue "
                f"(over {monitoring.thresholds.queue_wait_window}).",
                (Query(r.QUEUE_WAIT_P95, "{{tenant}}"),),
                unit="s",
            ),
            PanelSpec(
                "Pending workloads by tenant",
                "Workloads waiting in the tenant's ClusterQueue (active and inadmissible).",
                (Query(f"sum by (tenant) ({r.PENDING_WORKLOADS})", "{{tenant}}"),),
                unit="none",
            ),
        ]
    if "kai" in exporters:
        panels.append(
            PanelSpec(
                "KAI queue GPUs allocated by tenant",
                "GPUs KAI has allocated to the tenant's leaf queue.",
                (Query(r.KAI_ALLOCATED, "{{tenant}}"),),
                unit="none",
            )
        )
    return panels


def _idle_row(monitoring: Monitoring) -> tuple[str, list[PanelSpec]]:
    idle = float(monitoring.idle_ratio)
    return (
        "Idle GPUs",
        [
            PanelSpec(
                "Pods holding idle GPUs now",
                f"Pods whose GPUs average under {monitoring.thresholds.idle_activity_percent}% engine activity "
                f"(the GpuAllocatedIdle alert fires after {monitoring.thresholds.idle_for}).",
                (Query(f"{r.POD_ACTIVE} < {idle:g}", "{{namespace}}/{{pod}}"),),
                unit="percentunit",
                kind="table",
                width=24,
            )
        ],
    )


CHARGEBACK_RANGE, RANGE_SECONDS = r.DASHBOARD_PERIOD.window, r.DASHBOARD_PERIOD.seconds   # Grafana's time range, e.g. a month


def chargeback_panel(exporters: frozenset[str]) -> PanelSpec:
    """GPU-hours per cost centre, tenant and class over the dashboard's time range (allocated, and
    used when DCGM is scraped); `tenants report` prints the same figures for any period.

    >>> chargeback_panel(prod.platform.monitoring.exporters_for(prod.platform.scheduler)).title
    'GPU-hours by cost centre, tenant and class (time range)'
    """
    legend = "{{cost_center}} {{tenant}} {{gpu_class}}"
    queries = r.figure_queries(r.DASHBOARD_PERIOD, (r.ALLOCATED, r.USED), exporters)
    return PanelSpec(
        "GPU-hours by cost centre, tenant and class (time range)",
        "GPU-hours over the dashboard's time range: allocated = devices held by scheduled pods, used = their engine "
        "activity; a MIG instance or time-slice share counts as what it is of a GPU (a 1g.10gb of an A100 is 1/7).",
        tuple(Query(expr, f"{legend} {name}") for name, expr in queries.items()),
        unit="none",
        kind="table",
        width=24,
    )


def claims_panel(selector: str) -> PanelSpec:
    """GPU-equivalents held through ResourceClaims (DRA) per tenant and class: the claims' part of
    the held GPUs the chargeback integrates (`monitoring_rules.claim_rules`); `selector` narrows it
    (the tenant dashboard's `{tenant="$tenant"}`).

    >>> claims_panel("").queries[0].expr
    'sum by (tenant, gpu_class) (gpu_tenancy:tenant_claim_gpu_allocated:gpus)'
    """
    return PanelSpec(
        "GPUs held through ResourceClaims, by tenant and class",
        "Devices allocated to the tenant's ResourceClaims (written by the tenant, made from a template or by the "
        "scheduler for a DRA extended resource), counted while allocated; a device shared by N claims (consumable "
        "capacity) counts 1/N to each. Included in the GPU-hours held above and in `tenants report`.",
        (Query(f"sum by (tenant, gpu_class) ({r.TENANT_CLAIM_GPUS}{selector})", "{{tenant}} {{gpu_class}}"),),
        unit="none",
        width=24,
    )


IDLE_QUOTA_FIGURES = (r.GUARANTEED, r.ALLOCATED, r.USED, r.PEAK)


def idle_quota_row(exporters: frozenset[str]) -> tuple[str, list[PanelSpec]]:
    """Idle guaranteed quota over the dashboard's time range: per tenant and class the quota's,
    the held and the used GPU-hours and the most held at once, and the share held where under
    `IDLE_BELOW`; the queries `tenants report --idle` asks (`monitoring_rules.PERIOD_FIGURES`).

    >>> [p.title for p in idle_quota_row(frozenset({"dcgm"}))[1]]
    ['Guaranteed quota vs GPU-hours held and used, by tenant and class (time range)', 'Quota held under 50% of its GPU-hours (time range)']
    """
    legend = "{{tenant}} {{gpu_class}}"
    figures = r.figure_queries(r.DASHBOARD_PERIOD, IDLE_QUOTA_FIGURES, exporters)
    report = "`tenants report --idle --stack <env>` asks the same queries for any period and names the quota line to lower"
    return ("Idle guaranteed quota", [
        PanelSpec(
            "Guaranteed quota vs GPU-hours held and used, by tenant and class (time range)",
            "Per tenant and GPU class over the time range, in GPU-equivalents: the quota's GPU-hours (the tenant files' "
            "quota for every hour), the GPU-hours its scheduled pods held and used, and the most it held at once; "
            f"{report}.",
            tuple(Query(expr, f"{legend} {r.PERIOD_FIGURES[name].label}") for name, expr in figures.items()),
            unit="none",
            kind="table",
            width=24,
        ),
        PanelSpec(
            f"Quota held under {r.IDLE_BELOW:.0%} of its GPU-hours (time range)",
            f"Held over guaranteed GPU-hours where under {r.IDLE_BELOW:.0%}: quota a tenant holds and does not use "
            f"(0 when its pods held nothing); {report}.",
            (Query(r.idle_share_query(r.DASHBOARD_PERIOD), legend),),
            unit="percentunit",
            kind="table",
            width=24,
        ),
    ])


def tenant_panels(exporters: frozenset[str], monitoring: Monitoring, claims: bool = False) -> list[tuple[str, list[PanelSpec]]]:
    """Rows and panels of the per-tenant dashboard; queries select `tenant="$tenant"`.

    >>> monitoring = prod.platform.monitoring
    >>> [row for row, _ in tenant_panels(monitoring.exporters_for(prod.platform.scheduler), monitoring)]
    ['Allocation', 'Utilisation', 'Queue']
    >>> [p.title for p in dict(tenant_panels(frozenset(), monitoring, claims=True))["Allocation"]][-1]
    'GPUs held through ResourceClaims, by tenant and class'
    """
    t = f'{{tenant="${TENANT_VARIABLE}"}}'
    rows = [("Allocation", [*_allocation_panels(t), *([claims_panel(t)] if claims else [])])]
    if "dcgm" in exporters:
        rows.append(("Utilisation", _utilisation_panels(t)))
    queue = _tenant_queue_panels(exporters, monitoring, t)
    if queue:
        rows.append(("Queue", queue))
    return rows


def _allocation_panels(t: str) -> list[PanelSpec]:
    return [
        PanelSpec(
            "GPUs held by class",
            "Devices requested by the tenant's scheduled pods per GPU class.",
            (Query(f"sum by (gpu_class) ({r.TENANT_REQUESTS}{t})", "{{gpu_class}}"),),
            unit="none",
        ),
        PanelSpec(
            "Quota by class (tenant file)",
            "The tenant's nominal quota per GPU class, as its tenant file declares it.",
            (Query(f"sum by (gpu_class) ({r.TENANT_QUOTA_STACK}{t})", "{{gpu_class}}"),),
            unit="none",
        ),
        PanelSpec(
            "Namespace GPU quota: used and hard",
            "ResourceQuota tenant-quota summed over the tenant's namespaces, per GPU resource.",
            (Query(f"{r.QUOTA_USED}{t}", "{{resource}} used"), Query(f"{r.QUOTA_HARD}{t}", "{{resource}} hard")),
            unit="none",
        ),
    ]


def _utilisation_panels(t: str) -> list[PanelSpec]:
    return [
        PanelSpec(
            "Engine activity by class",
            "Average graphics-engine activity of the devices the tenant's pods hold (DCGM).",
            (Query(f"{r.TENANT_ACTIVE_AVG}{t}", "{{gpu_class}}"),),
            unit="percentunit",
        ),
        PanelSpec(
            "Framebuffer used by class",
            "GPU memory in use on the devices the tenant's pods hold (DCGM).",
            (Query(f"{r.TENANT_FB_USED}{t}", "{{gpu_class}}"),),
            unit="bytes",
        ),
        PanelSpec(
            "Engine activity per pod",
            "Average activity of each pod's devices; the idle alert watches this series.",
            (Query(f"{r.POD_ACTIVE}{t}", "{{namespace}}/{{pod}}"),),
            unit="percentunit",
            width=24,
        ),
    ]


def _tenant_queue_panels(exporters: frozenset[str], monitoring: Monitoring, t: str) -> list[PanelSpec]:
    queue: list[PanelSpec] = []
    if "kueue" in exporters:
        queue += [
            PanelSpec(
                "Queue wait p50 and p95",
                f"Time the tenant's workloads waited for admission (over {monitoring.thresholds.queue_wait_window}).",
                (Query(f"{r.QUEUE_WAIT_P50}{t}", "p50"), Query(f"{r.QUEUE_WAIT_P95}{t}", "p95")),
                unit="s",
            ),
            PanelSpec(
                "Pending workloads",
                "Workloads waiting in the tenant's ClusterQueue, by Kueue status.",
                (Query(f"{r.PENDING_WORKLOADS}{t}", "{{status}}"),),
                unit="none",
            ),
        ]
    if "kai" in exporters:
        queue.append(
            PanelSpec(
                "KAI queue: allocated and deserved GPUs",
                "GPUs allocated to the tenant's leaf queue and its deserved share.",
                (Query(f"{r.KAI_ALLOCATED}{t}", "allocated"), Query(f"{r.KAI_DESERVED}{t}", "deserved")),
                unit="none",
            )
        )
    return queue


# --- SDK ----------------------------------------------------------------------------------------


def _panel(spec: PanelSpec, panel_id: int, height: int = 8) -> Any:
    builder = timeseries.Panel() if spec.kind == "timeseries" else table.Panel()
    builder = builder.id(panel_id).title(spec.title).description(spec.description).datasource(DATASOURCE).unit(spec.unit)
    builder = builder.height(height).span(spec.width)
    for index, query in enumerate(spec.queries):
        target = gp.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(chr(ord("A") + index))
        if spec.kind == "table":
            target = target.instant().format(pm.PromQueryFormat.TABLE)
        builder = builder.with_target(target)
    if spec.kind == "timeseries":
        builder = builder.min(0).line_width(1).fill_opacity(10)
    else:
        builder = builder.align(common.FieldTextAlignment.AUTO).inspect(False)
    return builder


def _datasource_variable() -> Any:
    return gd.DatasourceVariable("datasource").label("Data source").type("prometheus")


def build_dashboard(uid: str, title: str, rows: list[tuple[str, list[PanelSpec]]], tags: list[str], tenant_variable: bool) -> dm.Dashboard:
    """A dashboard model from rows of panel specs (typed SDK objects, not yet JSON).

    >>> monitoring = prod.platform.monitoring
    >>> model = build_dashboard("demo", "Demo", tenant_panels(frozenset(), monitoring), ["gpu-tenancy"], True)
    >>> [(v["name"], v["type"]) for v in dashboard_json(model)["templating"]["list"]]
    [('datasource', 'datasource'), ('tenant', 'query')]
    """
    builder = (
        gd.Dashboard(title)
        .uid(uid)
        .tags(tags)
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("browser")
        .readonly()
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .with_variable(_datasource_variable())
    )
    if tenant_variable:
        builder = builder.with_variable(
            gd.QueryVariable(TENANT_VARIABLE)
            .label("Tenant")
            .datasource(DATASOURCE)
            .query(f"label_values({r.NAMESPACE_TENANT}, tenant)")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.ALPHABETICAL_ASC)
        )
    panel_id = 0
    for row_title, panels in rows:
        panel_id += 1
        builder = builder.with_row(gd.Row(row_title).id(panel_id))
        for spec in panels:
            panel_id += 1
            builder = builder.with_panel(_panel(spec, panel_id, height=10 if spec.kind == "table" else 8))
    return builder.build()


def dashboard_json(model: dm.Dashboard) -> dict[str, Any]:
    """The dashboard as Grafana's JSON (plain dicts, through the SDK's encoder).

    >>> board = dashboard_json(build_dashboard("demo", "Demo", [], ["gpu-tenancy"], False))
    >>> board["uid"], board["title"], board["tags"]
    ('demo', 'Demo', ['gpu-tenancy'])
    """
    return json.loads(json.dumps(model, cls=JSONEncoder))


def dashboards(facts: FleetFacts) -> dict[str, dict[str, Any]]:
    """Dashboard JSON by ConfigMap name; {} when monitoring is off.

    >>> {name: board["title"] for name, board in dashboards(prod.facts).items()}
    {'gpu-tenancy-fleet-overview': 'GPU fleet overview (prod)', 'gpu-tenancy-tenant': 'GPU tenant (prod)'}
    >>> dashboards(dev.facts)
    {}
    """
    monitoring = r.enabled_monitoring(facts.platform)
    if monitoring is None:
        return {}
    env = facts.environment_label
    exporters = monitoring.exporters_for(facts.platform.scheduler)
    claims = r.claims_metered(facts.platform)
    tags = ["gpu-tenancy", env]
    return {
        FLEET: dashboard_json(
            build_dashboard(f"{FLEET}-{env}"[:40], f"GPU fleet overview ({env})", fleet_panels(exporters, monitoring, claims), tags, False)
        ),
        TENANT: dashboard_json(
            build_dashboard(f"{TENANT}-{env}"[:40], f"GPU tenant ({env})", tenant_panels(exporters, monitoring, claims), tags, True)
        ),
    }


def dashboard_text(dashboard: dict[str, Any]) -> str:
    """Deterministic JSON text of a dashboard (sorted keys), as the ConfigMap carries it.

    >>> print(dashboard_text({"title": "Demo", "panels": []}), end="")
    {
     "panels": [],
     "title": "Demo"
    }
    """
    return json.dumps(dashboard, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def dashboard_config_maps(facts: FleetFacts) -> list[KubeObject]:
    """One ConfigMap per dashboard, labelled for the Grafana sidecar; [] when monitoring is off.

    >>> [(c["metadata"]["name"], sorted(c["data"])) for c in dashboard_config_maps(prod.facts)]
    [('gpu-tenancy-fleet-overview', ['gpu-tenancy-fleet-overview.json']), ('gpu-tenancy-tenant', ['gpu-tenancy-tenant.json'])]
    """
    monitoring = r.enabled_monitoring(facts.platform)
    if monitoring is None:
        return []
    labels = {**platform_labels(facts.environment_label), **monitoring.dashboard_labels}
    annotations = {GRAFANA_FOLDER_ANNOTATION: monitoring.dashboard_folder} if monitoring.dashboard_folder else None
    return [
        kube_object(
            "v1",
            "ConfigMap",
            object_meta(name, namespace=monitoring.namespace, labels=labels, annotations=annotations),
            data={f"{name}.json": dashboard_text(dashboard)},
        )
        for name, dashboard in sorted(dashboards(facts).items())
    ]

