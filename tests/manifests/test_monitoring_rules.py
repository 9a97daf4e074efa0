"""The PrometheusRule builder: off by default, labels and names from the stack, valid against the CRD.

What the rules compute is checked by `promtool test rules` and a real Prometheus in tests/monitoring.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from importlib import resources

import jsonschema
import pytest
import yaml

from components.manifests import monitoring_rules as r
from components.manifests.build import platform_objects
from components.fleet.environment import Environment, LoadedTenant
from components.spec.monitoring import Monitoring
from components.spec.stack import Platform

from .test_queues_crds import cel_failures, to_json_schema

PLATFORM = {
    "labelDomain": "gpu.example.com",
    "gpuClasses": {
        "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi", "overcommit": 1.5},
        "l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing", "timeSlicing": {"replicas": 4, "renameByDefault": True}},
        "a100-mig": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"},
    },
    "nodePools": {
        "h100": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["h1", "h2"]},
        "l4": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["l1"]},
        "mig": {"gpuClass": "a100-mig", "gpusPerNode": 8, "nodes": ["m1"], "migLayout": "all-3g.40gb"},
    },
}


def environment(make_environment, **monitoring) -> Environment:
    return make_environment(**PLATFORM, monitoring=monitoring) if monitoring is not None else make_environment(**PLATFORM)


@lru_cache(maxsize=None)
def crd_schema() -> dict:
    text = resources.files("components.data").joinpath("prometheus-operator/monitoring.coreos.com_prometheusrules.yaml").read_text("utf-8")
    crd = yaml.safe_load(text)
    return next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]


def crd_errors(obj: dict) -> list[str]:
    schema = crd_schema()
    validator = jsonschema.Draft202012Validator(to_json_schema(schema))
    errors = [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]
    return errors + cel_failures(schema, obj)


def test_off_without_the_block(make_environment, prod, dev):
    env = make_environment(**PLATFORM)
    assert r.prometheus_rule(env.facts) is None and r.rule_groups(env.facts) == []
    assert [o for o in platform_objects(dev) if o["kind"] == "PrometheusRule"] == []


def test_disabled_block_generates_nothing(make_environment):
    assert r.prometheus_rule(make_environment(**PLATFORM, monitoring={"enabled": False}).facts) is None


def test_prod_rule_validates_against_the_crd(prod):
    rules = [o for o in platform_objects(prod) if o["kind"] == "PrometheusRule"]
    assert len(rules) == 1
    assert crd_errors(rules[0]) == []
    assert rules[0]["metadata"]["namespace"] == "monitoring"
    assert rules[0]["metadata"]["labels"]["release"] == "kube-prometheus-stack"


@pytest.mark.parametrize("exporters", [None, [], ["dcgm"], ["dcgm", "kueue"]])
def test_every_variant_validates_against_the_crd(make_environment, exporters):
    scheduler = "kueue" if exporters and "kueue" in exporters else "none"
    env = make_environment(**PLATFORM, scheduler=scheduler, monitoring={"exporters": exporters, "dcgmLabelPrefix": "exported_"})
    assert crd_errors(r.prometheus_rule(env.facts)) == []


def test_the_crd_check_catches_a_broken_rule(make_environment):
    rule = r.prometheus_rule(environment(make_environment).facts)
    rule["spec"]["groups"][0]["rules"][0]["for"] = "two hours"  # not a duration
    rule["spec"]["groups"][0]["interval"] = 5
    assert len(crd_errors(rule)) >= 2


def test_names_come_from_the_labels_we_set(make_environment):
    groups = r.rule_groups(environment(make_environment).facts)
    text = yaml.safe_dump(groups)
    assert "label_gpu_example_com_gpu_class" in text  # <labelDomain>/gpu-class on the nodes
    assert "label_gpu_tenancy_dev_tenant" in text  # gpu-tenancy.dev/tenant on the namespaces
    assert "label_nvidia_com_mig_config_state" in text  # MIG class present -> the MIG alert


def test_resources_cover_whole_gpus_shares_and_mig_slices(make_environment):
    assert r.gpu_resources(environment(make_environment).facts) == ["nvidia_com_gpu", "nvidia_com_gpu_shared", "nvidia_com_mig_3g_40gb"]


def test_capacity_per_class_and_resource(make_environment):
    assert r.class_capacity(environment(make_environment).platform) == {
        ("a100-mig", "nvidia.com/mig-3g.40gb"): 16,  # 8 GPUs x 2 instances
        ("h100", "nvidia.com/gpu"): 16,
        ("l4", "nvidia.com/gpu.shared"): 8,  # 2 GPUs x 4 replicas
    }


def test_static_series_carry_capacity_overcommit_and_quotas(make_environment, make_tenant):
    base = environment(make_environment)
    tenant = make_tenant(name="team-a", gpu={"classes": ["h100", "a100-mig"]}, quota={"gpu": {"h100": 6}, "mig": {"3g.40gb": 4}})
    env = Environment(base.name, base.platform, None, [LoadedTenant(tenant, None)])
    stack = {(rule["record"], tuple(sorted(rule.get("labels", {}).items()))): rule["expr"]
             for rule in r.stack_rules(env.facts)}
    assert stack[(r.CLASS_OVERCOMMIT_STACK, (("gpu_class", "h100"),))] == "vector(1.5)"
    assert stack[(r.CLASS_CAPACITY_STACK, (("gpu_class", "l4"), ("resource", "nvidia_com_gpu_shared")))] == "vector(8)"
    # The class sums come from the tenants' own series: no tenant is named in the environment's group.
    assert stack[(r.CLASS_QUOTA_STACK, ())] == f"sum by (gpu_class, resource) ({r.TENANT_QUOTA_STACK})"
    assert "team-a" not in yaml.safe_dump(r.platform_rule_group(env.facts))
    group = r.tenant_rule_group(tenant, env.view(tenant))
    own = {tuple(sorted(rule["labels"].items())): rule["expr"] for rule in group["rules"]}
    assert group["name"] == f"gpu-tenancy.{env.name}.tenant.team-a"
    assert {rule["record"] for rule in group["rules"]} == {r.TENANT_QUOTA_STACK}
    assert own[(("gpu_class", "h100"), ("resource", "nvidia_com_gpu"), ("tenant", "team-a"))] == "vector(6)"
    assert own[(("gpu_class", "a100-mig"), ("resource", "nvidia_com_mig_3g_40gb"), ("tenant", "team-a"))] == "vector(4)"


def test_each_tenant_has_its_own_rule_object_in_its_own_objects(prod):
    from components.manifests.build import tenant_objects

    monitoring = prod.platform.monitoring
    for loaded in prod.tenants:
        rules = [o for o in tenant_objects(loaded.spec, prod.view(loaded.spec)) if o["kind"] == "PrometheusRule"]
        group = r.tenant_rule_group(loaded.spec, prod.view(loaded.spec))
        if group is None:
            assert rules == [], loaded.name
            continue
        [rule] = rules
        assert rule["metadata"]["name"] == f"gpu-tenancy-tenant-{loaded.name}"
        assert rule["metadata"]["namespace"] == monitoring.namespace
        assert rule["metadata"]["labels"]["gpu-tenancy.dev/tenant"] == loaded.name
        assert monitoring.rule_labels.items() <= rule["metadata"]["labels"].items()
        assert rule["spec"]["groups"] == [group]
        assert crd_errors(rule) == []
    assert [o for o in platform_objects(prod) if o["kind"] == "PrometheusRule"] == [r.prometheus_rule(prod.facts)]


def test_a_tenant_without_gpu_quota_has_no_rule(make_environment, make_tenant):
    base = environment(make_environment)
    tenant = make_tenant(name="cpu-only")
    env = Environment(base.name, base.platform, None, [LoadedTenant(tenant, None)])
    assert r.tenant_rule_group(tenant, env.view(tenant)) is None and r.tenant_prometheus_rule(tenant, env.view(tenant)) is None
    assert [g["name"] for g in r.rule_groups(env.facts)] == [f"gpu-tenancy.{env.name}"]


def test_queues_of_other_teams_are_left_out_without_naming_tenants(make_environment):
    env = make_environment(**PLATFORM, scheduler="kueue", monitoring={})
    pending = next(rule for rule in r.queue_rules(env.facts, frozenset({"kueue"}), env.platform.monitoring)
                   if rule["record"] == r.PENDING_WORKLOADS)
    assert pending["expr"].endswith(f"and on (tenant) max by (tenant) ({r.NAMESPACE_TENANT})")


def test_thresholds_reach_the_alerts(make_environment):
    env = environment(make_environment, thresholds={"nearQuotaRatio": 0.8, "idleActivityPercent": 10, "idleFor": "90m", "pendingFor": "1h"})
    alerts = {a["alert"]: a for a in r.alert_rules(env.facts, frozenset({"dcgm"}), env.platform.monitoring)}
    assert alerts["GpuTenantNearQuota"]["expr"].endswith(">= 0.8")
    assert alerts["GpuAllocatedIdle"]["expr"] == f"{r.POD_ACTIVE} < 0.1"
    assert alerts["GpuAllocatedIdle"]["for"] == "90m"
    assert alerts["GpuTenantPodPendingTooLong"]["for"] == "1h"


def test_every_alert_has_a_runbook_and_tenant_scoped_labels(prod):
    alerts = [rule for group in r.rule_groups(prod.facts) for rule in group["rules"] if "alert" in rule]
    assert {a["alert"] for a in alerts} == {
        "GpuTenantNearQuota", "GpuTenantPodPendingTooLong", "GpuQuotaOverCapacity", "GpuAllocatedIdle",
        "GpuTenantWorkloadsPendingTooLong", "GpuMigReconfigurationFailed",
    }
    for alert in alerts:
        assert alert["annotations"]["runbook"].startswith("1. "), alert["alert"]
        assert alert["annotations"]["runbook_url"] == f"docs/monitoring.md#{alert['alert'].lower()}"
        assert alert["labels"]["severity"] in ("warning", "critical")


def test_exporters_decide_which_rules_exist(make_environment):
    none = make_environment(**PLATFORM, monitoring={"exporters": []})
    names = {rule.get("record") or rule.get("alert") for g in r.rule_groups(none.facts) for rule in g["rules"]}
    assert r.ENGINE_ACTIVE not in names and "GpuAllocatedIdle" not in names and r.QUEUE_WAIT_P95 not in names
    kueue = make_environment(**PLATFORM, scheduler="kueue", monitoring={})
    names = {rule.get("record") or rule.get("alert") for g in r.rule_groups(kueue.facts) for rule in g["rules"]}
    assert {r.ENGINE_ACTIVE, r.QUEUE_WAIT_P95, "GpuTenantWorkloadsPendingTooLong"} <= names
    kai = make_environment(**PLATFORM, scheduler="kai", monitoring={})
    names = {rule.get("record") or rule.get("alert") for g in r.rule_groups(kai.facts) for rule in g["rules"]}
    assert {r.KAI_ALLOCATED, r.KAI_DESERVED} <= names and r.QUEUE_WAIT_P95 not in names


def test_exported_dcgm_labels_are_renamed(make_environment):
    env = make_environment(**PLATFORM, monitoring={"dcgmLabelPrefix": "exported_"})
    active = next(rule for rule in r.utilisation_rules(env.platform.monitoring) if rule["record"] == r.ENGINE_ACTIVE)
    assert 'exported_pod!=""' in active["expr"]
    assert '"pod", "$1", "exported_pod"' in active["expr"]


def test_each_group_reads_only_what_it_or_a_tenant_group_records(prod):
    """The environment's group is in dependency order: a rule reads only series that rules before
    it record, or the tenants' constant quota series (their own groups, which come first)."""
    groups = r.rule_groups(prod.facts)
    *tenants, platform = groups
    assert platform["name"] == "gpu-tenancy.prod"
    assert [g["name"] for g in tenants] == sorted(f"gpu-tenancy.prod.tenant.{t.name}" for t in prod.tenants
                                                 if r.tenant_rule_group(t.spec, prod.view(t.spec)))
    assert {rule["record"] for g in tenants for rule in g["rules"]} == {r.TENANT_QUOTA_STACK}
    assert all(rule["expr"].startswith("vector(") for g in tenants for rule in g["rules"])
    rules = platform["rules"]
    for index, rule in enumerate(rules):
        later = {other["record"] for other in rules[index:] if "record" in other} - {rule.get("record")}
        assert [name for name in later if name in rule["expr"]] == [], rule


def test_output_is_deterministic(prod):
    assert r.prometheus_rule(prod.facts) == r.prometheus_rule(prod.facts)


@pytest.mark.parametrize(
    "monitoring, scheduler, message",
    [
        ({"exporters": ["kueue"]}, "none", "monitoring.exporters lists kueue but scheduler is 'none'"),
        ({"exporters": ["kai"]}, "kueue", "monitoring.exporters lists kai but scheduler is 'kueue'"),
        ({"exporters": ["dcgm", "dcgm"]}, "none", "lists an exporter twice"),
        ({"thresholds": {"idleFor": "2 hours"}}, "none", "String should match pattern"),
        ({"thresholds": {"nearQuotaRatio": 1.5}}, "none", "less than or equal to 1"),
        ({"dashboardLabels": {"grafana dashboard": "1"}}, "none", "String should match pattern"),
    ],
)
def test_bad_monitoring_blocks_are_rejected(monitoring, scheduler, message):
    with pytest.raises(Exception) as error:
        Platform.model_validate({**PLATFORM, "scheduler": scheduler, "monitoring": monitoring})
    assert message in str(error.value)


def test_defaults():
    monitoring = Monitoring()
    assert monitoring.namespace == "monitoring"
    assert monitoring.dashboard_labels == {"grafana_dashboard": "1"}
    assert monitoring.exporters_for("none") == frozenset({"dcgm"})


def test_chargeback_weighs_each_device_by_what_it_is_of_a_gpu(make_environment):
    weights = r.device_gpu_fractions(environment(make_environment).platform)
    assert weights == {
        ("a100-mig", "nvidia.com/mig-3g.40gb"): Fraction(3, 7),  # 3 of an A100's 7 compute slices
        ("h100", "nvidia.com/gpu"): 1,
        ("l4", "nvidia.com/gpu.shared"): Fraction(1, 4),  # one of 4 time-slicing replicas
    }


def test_chargeback_weights_of_mps_a30_slices_whole_leftovers_and_the_single_strategy(make_environment):
    platform = make_environment(
        gpuClasses={
            "h100-mps": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi", "sharing": "mps", "mps": {"replicas": 3}},
            "a30": {"model": "A30-24GB", "product": "NVIDIA-A30", "memory": "24Gi", "sharing": "mig"},
            "a100-single": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig",
                            "mig": {"strategy": "single"}},
        },
        migLayouts={"half": [{"devices": [0, 1], "profiles": {"1g.6gb": 4}}]},
        nodePools={
            "mps": {"gpuClass": "h100-mps", "gpusPerNode": 8, "nodes": ["p1"]},
            "a30": {"gpuClass": "a30", "gpusPerNode": 4, "nodes": ["a1"], "migLayout": "half"},  # GPUs 2 and 3 stay whole
            "single": {"gpuClass": "a100-single", "gpusPerNode": 8, "nodes": ["s1", "s2"], "migLayout": "all-1g.10gb"},
        },
    ).platform
    assert r.device_gpu_fractions(platform) == {
        ("a100-single", "nvidia.com/gpu"): Fraction(16, 16 * 7),  # 16 GPUs advertise 112 devices
        ("a30", "nvidia.com/gpu"): 1,
        ("a30", "nvidia.com/mig-1g.6gb"): Fraction(1, 4),  # an A30 has 4 compute slices
        ("h100-mps", "nvidia.com/gpu"): Fraction(1, 3),
    }


def test_chargeback_rules_join_requests_with_weights_and_cost_centres(make_environment):
    rules = {rule["record"]: rule for rule in r.platform_rule_group(environment(make_environment, exporters=[]).facts)["rules"] if "record" in rule}
    assert r.TENANT_USED_GPUS not in rules  # busy GPU-hours need DCGM
    allocated = rules[r.TENANT_ALLOCATED_GPUS]["expr"]
    assert allocated.startswith("sum by (cost_center, tenant, gpu_class) (") and r.NAMESPACE_COST_CENTER in allocated
    assert r.DEVICE_GPU_FRACTION in rules[r.POD_ALLOCATED_GPUS]["expr"]
    with_dcgm = {rule.get("record") for rule in r.platform_rule_group(environment(make_environment).facts)["rules"]}
    assert r.TENANT_USED_GPUS in with_dcgm


def test_claims_join_the_chargeback_only_where_a_device_class_meters_a_gpu_class(prod):
    """prod's DeviceClasses are the driver's, metering nothing: its rules read no claim series. The
    DRA fixture's do: held GPUs are the pods' requests (but a mapped request of a pod holding a
    scheduler-made claim) or the claims', in the group's order (claims before the chargeback)."""
    from tests.monitoring.test_promtool import dra_with_monitoring

    dra = dra_with_monitoring()

    def rules(env):
        return {rule["record"]: rule["expr"] for g in r.rule_groups(env.facts) for rule in g["rules"] if "record" in rule}

    assert not any("resourceclaim" in expr for expr in rules(prod).values())
    held = rules(dra)
    assert f"({r.POD_ALLOCATED_GPUS} or {r.CLAIM_ALLOCATED_GPUS})" in held[r.TENANT_ALLOCATED_GPUS]
    assert f'{r.POD_REQUESTS}{{resource=~"nvidia_com_gpu"}} unless on (namespace, pod) {r.EXTENDED_RESOURCE_PODS}' in held[r.POD_ALLOCATED_GPUS]
    order = list(held)
    assert order.index(r.EXTENDED_RESOURCE_PODS) < order.index(r.POD_ALLOCATED_GPUS) and order.index(r.CLAIM_ALLOCATED_GPUS) < order.index(r.TENANT_ALLOCATED_GPUS)
