"""Dashboards: built with grafana-foundation-sdk, round-trip through its types, read only our recording rules.

What each panel answers for each tenant is checked against a real Prometheus in tests/monitoring.
"""

from __future__ import annotations

import json
import re

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

from components.manifests import monitoring_dashboards as md
from components.manifests import monitoring_rules as r
from components.manifests.build import platform_objects
from components.manifests.meta import GRAFANA_FOLDER_ANNOTATION

register_default_plugins()  # typed panel options and Prometheus queries when decoding


def config_maps(environment):
    return [o for o in platform_objects(environment) if o["kind"] == "ConfigMap" and o["metadata"]["name"] in (md.FLEET, md.TENANT)]


def test_two_dashboards_as_sidecar_config_maps(prod):
    maps = config_maps(prod)
    assert [m["metadata"]["name"] for m in maps] == [md.FLEET, md.TENANT]
    for cm in maps:
        assert cm["metadata"]["namespace"] == "monitoring"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert list(cm["data"]) == [f"{cm['metadata']['name']}.json"]
        assert "annotations" not in cm["metadata"]


def test_labels_and_folder_are_configurable(make_environment):
    env = make_environment(monitoring={"namespace": "obs", "dashboardLabels": {"grafana.io/dashboard": "gpu"}, "dashboardFolder": "GPU"})
    for cm in md.dashboard_config_maps(env.facts):
        assert cm["metadata"]["namespace"] == "obs"
        assert cm["metadata"]["labels"]["grafana.io/dashboard"] == "gpu" and "grafana_dashboard" not in cm["metadata"]["labels"]
        assert cm["metadata"]["annotations"] == {GRAFANA_FOLDER_ANNOTATION: "GPU"}


def test_off_without_the_block(dev):
    assert md.dashboards(dev.facts) == {} and config_maps(dev) == []


def test_dashboards_round_trip_through_the_sdk_types(prod):
    for cm in config_maps(prod):
        original = json.loads(next(iter(cm["data"].values())))
        model = Dashboard.from_json(original)
        assert isinstance(model, Dashboard)
        assert json.loads(json.dumps(model, cls=JSONEncoder)) == original
        # Typed all the way down: panels and Prometheus targets decode to SDK classes, not dicts.
        panel = next(p for p in model.panels if getattr(p, "type_val", "") == "timeseries")
        assert type(panel.targets[0]).__module__.endswith("models.prometheus")


def test_queries_read_only_recording_rules_that_exist(prod):
    records = {rule["record"] for g in r.rule_groups(prod.facts) for rule in g["rules"] if "record" in rule}
    for name, dashboard in md.dashboards(prod.facts).items():
        exprs = [t["expr"] for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]]
        assert exprs, name
        for expr in exprs:
            used = set(re.findall(r"gpu_tenancy:[a-z0-9_]+:[a-z0-9_]+", expr))
            assert used and used <= records, expr
            assert not re.search(r"\b(kube_|DCGM_|kueue_)", expr), f"raw exporter metric in a panel: {expr}"


def test_tenant_dashboard_is_scoped_by_its_variable(prod):
    dashboard = md.dashboards(prod.facts)[md.TENANT]
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names == ["datasource", md.TENANT_VARIABLE]
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert '{tenant="$tenant"}' in target["expr"], target["expr"]


def test_panels_have_unique_ids_and_use_the_datasource_variable(prod):
    for dashboard in md.dashboards(prod.facts).values():
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        assert all(p["datasource"] == {"type": "prometheus", "uid": "${datasource}"} for p in dashboard["panels"] if p["type"] != "row")
        assert len(dashboard["uid"]) <= 40


def test_exporters_decide_which_panels_exist(make_environment):
    titles = lambda env: {p["title"] for d in md.dashboards(env.facts).values() for p in d["panels"]}  # noqa: E731
    bare = titles(make_environment(monitoring={"exporters": []}))
    assert "Engine activity by class" not in bare and "Queue wait p95 by tenant" not in bare
    kueue = titles(make_environment(scheduler="kueue", monitoring={}))
    assert {"Engine activity by class", "Queue wait p95 by tenant", "Pending workloads"} <= kueue


def test_text_is_deterministic(prod):
    assert config_maps(prod) == config_maps(prod)


def test_chargeback_panel_integrates_over_the_dashboard_range(make_environment):
    def chargeback(env):
        return next(p for p in md.dashboards(env.facts)[md.FLEET]["panels"] if p["title"].startswith("GPU-hours"))

    with_dcgm = chargeback(make_environment(monitoring={}))
    assert [t["expr"] for t in with_dcgm["targets"]] == [
        r.gpu_hours_expr(r.TENANT_ALLOCATED_GPUS, "$__range"), r.gpu_hours_expr(r.TENANT_USED_GPUS, "$__range")]
    assert all(t["instant"] and t["format"] == "table" for t in with_dcgm["targets"])
    # Without DCGM there is no activity to charge: allocated GPU-hours only.
    assert [t["refId"] for t in chargeback(make_environment(monitoring={"exporters": []}))["targets"]] == ["A"]


def _row(dashboard, title: str) -> list[dict]:
    """The panels under the row `title`, up to the next row."""
    panels, inside = [], False
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            inside = panel["title"] == title
        elif inside:
            panels.append(panel)
    return panels


def test_the_idle_quota_row_asks_what_tenants_report_idle_asks(make_environment):
    """#41: `tenants report --idle` and the fleet dashboard read one table of queries
    (monitoring_rules.PERIOD_FIGURES): the row's are the report's, over Grafana's time range
    instead of --from/--to, plus the quota's GPU-hours the report reads from the files."""
    from datetime import datetime, timezone

    from components.review.chargeback import ALLOCATED, PEAK, USED, idle_period_queries

    three_hours = idle_period_queries(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, 3, tzinfo=timezone.utc))
    report = {name: expr.replace("[10800s:", "[$__range:") for name, expr in three_hours.items()}
    table, share = _row(md.dashboards(make_environment(monitoring={}).facts)[md.FLEET], "Idle guaranteed quota")
    guaranteed, *asked = [t["expr"] for t in table["targets"]]
    assert asked == [report[ALLOCATED], report[USED], report[PEAK]]
    assert guaranteed == ("sum by (tenant, gpu_class) (gpu_tenancy:tenant_gpu_quota:stack * on (gpu_class, resource) "
                          "group_left () gpu_tenancy:gpu_class_device_gpu_fraction:stack) * $__range_s / 3600")
    assert all(t["instant"] and t["format"] == "table" for t in table["targets"] + share["targets"])
    # The share is the report's test, held under half the quota's GPU-hours, on the same two queries.
    (idle,) = [t["expr"] for t in share["targets"]]
    assert idle.endswith(" < 0.5") and report[ALLOCATED] in idle and idle.count(guaranteed) == 2, idle
    # Without DCGM: nothing used to show, the rest stays.
    bare = _row(md.dashboards(make_environment(monitoring={"exporters": []}).facts)[md.FLEET], "Idle guaranteed quota")
    assert [t["expr"] for t in bare[0]["targets"]] == [guaranteed, report[ALLOCATED], report[PEAK]]



def test_claims_panels_exist_only_where_a_device_class_meters_a_gpu_class(prod):
    from tests.monitoring.test_promtool import dra_with_monitoring

    dra = dra_with_monitoring()
    records = {rule["record"] for g in r.rule_groups(dra.facts) for rule in g["rules"] if "record" in rule}
    boards = md.dashboards(dra.facts)
    claims = [t["expr"] for d in boards.values() for p in d["panels"] if "ResourceClaims" in p["title"] for t in p["targets"]]
    assert claims == [f"sum by (tenant, gpu_class) ({r.TENANT_CLAIM_GPUS})",
                      f'sum by (tenant, gpu_class) ({r.TENANT_CLAIM_GPUS}{{tenant="$tenant"}})']
    assert [p["title"] for p in _row(boards[md.FLEET], "Chargeback")][-1] == "GPUs held through ResourceClaims, by tenant and class"
    for dashboard in boards.values():
        for expr in (t["expr"] for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]):
            assert set(re.findall(r"gpu_tenancy:[a-z0-9_]+:[a-z0-9_]+", expr)) <= records, expr
    assert not any("ResourceClaims" in p["title"] for d in md.dashboards(prod.facts).values() for p in d["panels"])
