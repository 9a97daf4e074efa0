"""The optional `monitoring:` block of a stack: Prometheus rules, alerts and Grafana dashboards.

Off unless the block is present. What it generates (see docs/monitoring.md) reads the metrics of
standard exporters: kube-state-metrics (always), the NVIDIA DCGM exporter, and Kueue or KAI when the
stack's scheduler is one of them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Optional

from pydantic import Field, model_validator

from .base import DnsLabel, LabelValue, Model

# A Prometheus duration as rule `for:` fields and range selectors accept it, e.g. 2h, 90m, 1h30m.
PromDuration = Annotated[
    str,
    Field(pattern=r"^([0-9]+(ms|s|m|h|d|w|y))+$", description="Prometheus duration, e.g. 30m, 2h, 1h30m"),
]
LabelKey = Annotated[str, Field(pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=316)]

Exporter = Literal["dcgm", "kueue", "kai"]


class MonitoringThresholds(Model):
    """When the alerts fire."""

    near_quota_ratio: Annotated[Decimal, Field(gt=0, le=1)] = Field(
        Decimal("0.9"), description="GpuTenantNearQuota fires when a tenant's used/hard GPU quota reaches this share"
    )
    near_quota_for: PromDuration = Field("15m", description="how long the tenant must stay at or above the ratio")
    idle_activity_percent: Annotated[Decimal, Field(ge=0, lt=100)] = Field(
        Decimal(5), description="a GPU whose engine activity stays below this percentage counts as idle"
    )
    idle_for: PromDuration = Field("2h", description="GpuAllocatedIdle fires after a pod's GPUs have been idle this long")
    pending_for: PromDuration = Field("30m", description="GpuTenantPodPendingTooLong / GpuTenantWorkloadsPendingTooLong fire after this long")
    mig_config_for: PromDuration = Field(
        "15m", description="GpuMigReconfigurationFailed fires when nvidia.com/mig.config.state is not success this long"
    )
    queue_wait_window: PromDuration = Field(
        "1h", description="window of the queue-wait percentiles (admissions are rare; a short window is mostly empty)"
    )


class Monitoring(Model):
    """Per-tenant GPU monitoring: a PrometheusRule (recording rules + alerts) and Grafana dashboards."""

    enabled: bool = Field(True, description="set false to keep the block but generate nothing")
    namespace: DnsLabel = Field("monitoring", description="namespace of the PrometheusRule and the dashboard ConfigMaps")
    rule_labels: dict[LabelKey, LabelValue] = Field(
        {}, description="extra labels on the PrometheusRule so that the Prometheus ruleSelector picks it, e.g. {release: kube-prometheus-stack}"
    )
    dashboard_labels: dict[LabelKey, LabelValue] = Field(
        {"grafana_dashboard": "1"}, description="labels the Grafana dashboard sidecar looks for (kube-prometheus-stack: grafana_dashboard: \"1\")"
    )
    dashboard_folder: Optional[str] = Field(
        None, description="Grafana folder, set as the sidecar's folder annotation (grafana_folder) when given"
    )
    exporters: Optional[list[Exporter]] = Field(
        None,
        description="exporters scraped besides kube-state-metrics: dcgm (GPU activity), kueue or kai (queues; must match "
        "`scheduler`); unset: dcgm plus the stack's scheduler",
    )
    dcgm_label_prefix: Literal["", "exported_"] = Field(
        "",
        description="where the DCGM exporter's pod labels end up: '' when the ServiceMonitor honours them (honorLabels: true), "
        "'exported_' when Prometheus renamed them to exported_namespace / exported_pod",
    )
    thresholds: MonitoringThresholds = MonitoringThresholds()

    @model_validator(mode="after")
    def _unique_exporters(self) -> "Monitoring":
        exporters = self.exporters or []
        if len(set(exporters)) != len(exporters):
            raise ValueError("`exporters` lists an exporter twice")
        if "kueue" in exporters and "kai" in exporters:
            raise ValueError("`exporters` lists both kueue and kai; a stack has one scheduler")
        return self

    def exporters_for(self, scheduler: str) -> frozenset[str]:
        """The exporters the rules and dashboards may rely on.

        >>> sorted(Monitoring().exporters_for("kueue"))
        ['dcgm', 'kueue']
        >>> sorted(Monitoring(exporters=[]).exporters_for("kueue"))
        []
        """
        if self.exporters is not None:
            return frozenset(self.exporters)
        return frozenset({"dcgm"} | ({scheduler} if scheduler in ("kueue", "kai") else set()))

    @property
    def idle_ratio(self) -> Decimal:
        """The idle threshold as a 0..1 ratio (engine activity is a ratio).

        >>> Monitoring().idle_ratio
        Decimal('0.05')
        """
        return self.thresholds.idle_activity_percent / 100
