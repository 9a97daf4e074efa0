"""The optional vCluster: a plain Helm release description whose values mirror the tenant's host limits
and pass the chart's own values.schema.json (v0.36.1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.manifests import vcluster
from components.manifests.limit_range import container_limits
from components.manifests.quota import TENANT_QUOTA, resource_quotas
from components.fleet.environment import Environment
from components.load import load_environment
from components.validate.vcluster import VALUES, schema_errors

from .test_queues_crds import queue_lab
from .example_tenants import viewed

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def examples() -> dict[str, Environment]:
    environments = {name: load_environment(REPO, name) for name in ("dev", "prod", "staging")}
    return {**environments, "dra": load_environment(REPO / "tests" / "fixtures" / "dra", "dra")}


def _spec(environment: Environment, name: str):
    return next(t.spec for t in environment.tenants if t.name == name)


def _enabled(tenant, **vcluster):
    return tenant.model_copy(update={"vcluster": tenant.vcluster.model_copy(update={"enabled": True, **vcluster})})


def test_the_dev_example_release(examples):
    dev = examples["dev"]
    release = viewed(vcluster.vcluster_release, _spec(dev, "llm-finetune"), dev)
    assert {k: v for k, v in release.items() if k != "values"} == {
        "name": "vcluster", "namespace": "llm-finetune", "chart": "vcluster",
        "repository": "https://charts.loft.sh", "version": "0.36.1",
    }
    # the tenant's override is merged over the generated values
    assert release["values"]["controlPlane"]["statefulSet"]["resources"]["requests"] == {"cpu": "200m", "memory": "512Mi"}
    # on shared pools only: not pinned (a selector onto the GPU-tainted pools leaves its CPU pods no node)
    assert release["values"]["sync"]["fromHost"]["nodes"]["selector"]["labels"] == {}


def test_no_release_when_disabled_or_decommissioned(examples):
    prod = examples["prod"]
    assert viewed(vcluster.vcluster_release, _spec(prod, "llm-finetune"), prod) is None
    lab = queue_lab("none")
    gone = _enabled(_spec(lab, "gone"))
    assert vcluster.vcluster_release(gone, lab.view(gone)) is None


@pytest.mark.parametrize("case", ["dev", "prod", "staging", "dra", "lab"])
def test_generated_values_pass_the_chart_schema_for_every_tenant(examples, case):
    environment = examples[case] if case != "lab" else queue_lab("none")
    for loaded in environment.tenants:
        values = viewed(vcluster.vcluster_values, _enabled(loaded.spec, priority_class_name="batch"), environment)
        assert schema_errors(values) == [], loaded.name
        assert schema_errors(viewed(vcluster.vcluster_values, _enabled(loaded.spec), environment)) == []


@pytest.mark.parametrize("case", ["dev", "dra"])
def test_every_generated_value_is_a_platform_key_of_the_one_table(examples, case):
    """The builder and the validator share one table: every value the platform generates is one the
    tenant may not override (`components.validate.vcluster.VALUES`, rule `platform`)."""
    environment = examples[case]

    def leaves(values, path=()):
        if isinstance(values, dict) and values:
            return [leaf for key, value in values.items() for leaf in leaves(value, path + (key,))]
        return [path]

    for loaded in environment.tenants:
        for spec in (_enabled(loaded.spec), _enabled(loaded.spec, priority_class_name="batch")):
            for leaf in leaves(viewed(vcluster.generated_values, spec, environment)):
                rules = [VALUES[leaf[:cut]] for cut in range(len(leaf), 0, -1) if leaf[:cut] in VALUES]
                assert rules and rules[0].who == "platform", (loaded.name, leaf)


def test_the_schema_check_is_not_vacuous(examples):
    dev = examples["dev"]
    values = viewed(vcluster.vcluster_values, _spec(dev, "llm-finetune"), dev)
    values["sync"]["toHost"]["pods"]["enforceTolerations"] = "not-a-list"
    values["policies"]["networkPolicy"]["enabeld"] = True
    assert [path for path, _ in schema_errors(values)] == [
        ("policies", "networkPolicy", "enabeld"), ("sync", "toHost", "pods", "enforceTolerations")
    ]


def test_pods_are_pinned_to_dedicated_pools_only(examples):
    prod, dev = examples["prod"], examples["dev"]
    inference = viewed(vcluster.generated_values, _enabled(_spec(prod, "inference")), prod)["sync"]
    assert inference["fromHost"]["nodes"] == {"enabled": True, "selector": {"labels": {"gpu.acme.dev/tenant": "inference"}}, "syncBackChanges": False}
    assert inference["toHost"]["pods"]["enforceTolerations"] == ["gpu.acme.dev/tenant=inference:NoSchedule"]
    single = viewed(vcluster.generated_values, _enabled(_spec(dev, "inference")), dev)["sync"]
    # one shared class: its pools carry the GPU taint, which the vCluster's CPU pods may not tolerate
    assert single["fromHost"]["nodes"]["selector"]["labels"] == {}
    assert single["toHost"]["pods"]["enforceTolerations"] == []
    several = viewed(vcluster.node_selector, _spec(dev, "eval"), dev)   # l4 and a100-mig, shared
    assert several == {}


def test_quota_and_limit_range_mirror_the_tenants_own(examples):
    prod = examples["prod"]
    tenant = _spec(prod, "eval")
    values = viewed(vcluster.generated_values, _enabled(tenant), prod)["policies"]
    host = next(q for q in resource_quotas(tenant, prod.view(tenant)) if q["metadata"]["name"] == TENANT_QUOTA and q["metadata"]["namespace"] == "eval")
    mirrored = {k: v for k, v in values["resourceQuota"]["quota"].items() if v is not None}
    assert values["resourceQuota"]["enabled"] is True
    assert mirrored == host["spec"]["hard"]
    # chart defaults the tenant leaves open are nulled (Helm deletes them) instead of limiting it
    assert values["resourceQuota"]["quota"]["count/pods"] is None
    assert all(v is None for k, v in values["resourceQuota"]["quota"].items() if k not in host["spec"]["hard"])
    limits = container_limits(tenant, prod.view(tenant))
    assert {k: v for k, v in values["limitRange"]["default"].items() if v is not None} == limits["default"]
    assert {k: v for k, v in values["limitRange"]["defaultRequest"].items() if v is not None} == limits["defaultRequest"]
    assert values["limitRange"]["defaultRequest"]["ephemeral-storage"] == "256Mi"  # the stack's guard rails
    assert mirrored["requests.ephemeral-storage"] == "100Gi"


def test_nothing_to_mirror_disables_the_charts_quota(make_tenant, make_environment):
    # Only when the stack's guard rails are switched off too (they are on by default).
    environment = make_environment(guardRails={"objects": {}, "storage": {}, "ephemeralStorage": {"quota": {}}})
    values = viewed(vcluster.generated_values, make_tenant(vcluster={"enabled": True}), environment)["policies"]
    assert values["resourceQuota"]["enabled"] is False
    assert values["limitRange"]["enabled"] is True  # the stack's LimitRange defaults still apply


def test_network_policy_adds_no_public_egress_and_pod_security_matches(examples):
    prod = examples["prod"]
    policies = viewed(vcluster.generated_values, _enabled(_spec(prod, "inference")), prod)["policies"]
    assert policies["networkPolicy"] == {"enabled": True, "workload": {"publicEgress": {"enabled": False}}}
    assert policies["podSecurityStandard"] == "restricted"


def test_no_cluster_scoped_objects_are_synced_to_the_host(examples):
    dev = examples["dev"]
    to_host = viewed(vcluster.vcluster_values, _spec(dev, "llm-finetune"), dev)["sync"]["toHost"]
    for kind in ("namespaces", "persistentVolumes", "priorityClasses", "storageClasses"):
        assert to_host[kind] == {"enabled": False}


def test_no_host_priority_class_sync_a_forced_class_or_the_hosts_default(examples):
    """The chart's rule for `sync.fromHost.priorityClasses` is every verb on PriorityClasses
    cluster-wide (the same as for toHost): neither sync is ever generated, a class is only forced."""
    dev = examples["dev"]
    tenant = _spec(dev, "llm-finetune")
    synced = vcluster.generated_values(tenant, dev.view(tenant))["sync"]
    assert synced["fromHost"]["priorityClasses"] == {"enabled": False}
    assert synced["toHost"]["priorityClasses"] == {"enabled": False}
    assert "priorityClassName" not in synced["toHost"]["pods"]
    forced = viewed(vcluster.generated_values, _enabled(tenant, priority_class_name="training"), dev)["sync"]
    assert forced["toHost"]["pods"]["priorityClassName"] == "training"
    assert forced["fromHost"]["priorityClasses"] == {"enabled": False}


def test_no_kubelet_proxy(examples):
    """The chart's default proxyKubelets gives the vCluster `nodes/proxy` of every node (the kubelet API)."""
    dev = examples["dev"]
    for loaded in dev.tenants:
        values = viewed(vcluster.vcluster_values, _enabled(loaded.spec), dev)
        assert values["networking"]["advanced"]["proxyKubelets"] == {"byHostname": False, "byIP": False}


def test_overrides_merge_maps_replace_lists_and_keep_nulls(make_tenant, make_environment):
    tenant = make_tenant(vcluster={"enabled": True, "values": {
        "sync": {"toHost": {"pods": {"translateImage": {"a": "b"}}}},
        "controlPlane": {"statefulSet": {"env": [{"name": "X", "value": "1"}]}},
        "exportKubeConfig": {"context": None},
    }})
    values = vcluster.vcluster_values(tenant, make_environment().view(tenant))
    assert values["sync"]["toHost"]["pods"]["translateImage"] == {"a": "b"}
    assert values["sync"]["toHost"]["pods"]["enabled"] is True  # generated sibling kept
    assert values["controlPlane"]["statefulSet"]["env"] == [{"name": "X", "value": "1"}]
    assert values["exportKubeConfig"] == {"context": None}


def test_values_are_deterministic_with_sorted_maps(examples):
    dev = examples["dev"]
    first = viewed(vcluster.vcluster_values, _spec(dev, "llm-finetune"), dev)
    assert first == viewed(vcluster.vcluster_values, _spec(dev, "llm-finetune"), dev)

    def sorted_everywhere(value) -> bool:
        if isinstance(value, dict):
            return list(value) == sorted(value) and all(sorted_everywhere(v) for v in value.values())
        if isinstance(value, list):
            return all(sorted_everywhere(v) for v in value)
        return True

    assert sorted_everywhere(first)


def test_values_yaml_keeps_the_nulls_that_delete_chart_defaults(examples):
    import yaml

    dev = examples["dev"]
    values = viewed(vcluster.vcluster_values, _spec(dev, "llm-finetune"), dev)
    text = vcluster.values_yaml(values)
    assert "      count/pods: null\n" in text
    assert yaml.safe_load(text) == values


def test_yaml_decimals_become_plain_numbers(make_tenant, make_environment):
    from decimal import Decimal

    tenant = make_tenant(vcluster={"enabled": True, "values": {"controlPlane": {"statefulSet": {"scheduling": {"priorityClassName": "x"}}},
                                                               "telemetry": {"enabled": False}, "x": {"ratio": Decimal("0.5"), "count": Decimal("2.0")}}})
    values = vcluster.vcluster_values(tenant, make_environment().view(tenant))
    assert values["x"] == {"count": 2, "ratio": 0.5}
    assert type(values["x"]["count"]) is int
    assert "ratio: 0.5" in vcluster.values_yaml(values)


def _selects(selector: dict, labels: dict) -> bool:
    """A label selector's meaning (matchLabels and `In` expressions, all the generator writes)."""
    assert {e["operator"] for e in selector.get("matchExpressions", [])} <= {"In"}
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()) and all(
        labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", []))


@pytest.mark.parametrize(("tenant", "visible"), [
    ("vision", ["b200.gpu.dra.dev", "h100.gpu.dra.dev"]),
    ("robotics", ["h100.gpu.dra.dev"]),
])
def test_a_tenant_with_a_device_class_grant_syncs_claims_and_sees_only_its_classes(examples, tenant, visible):
    from components.manifests.device_classes import device_classes

    dra = examples["dra"]
    sync = viewed(vcluster.vcluster_values, _enabled(_spec(dra, tenant)), dra)["sync"]
    assert sync["toHost"]["resourceClaims"] == {"enabled": True}
    assert sync["toHost"]["resourceClaimTemplates"] == {"enabled": True}
    synced = sync["fromHost"]["deviceClasses"]
    assert synced["enabled"] is True
    # the selector against the DeviceClass objects the stack creates (the driver's carry no label of ours)
    assert [o["metadata"]["name"] for o in device_classes(dra.facts) if _selects(synced["selector"], o["metadata"]["labels"])] == visible


@pytest.mark.parametrize(("case", "tenant"), [("dra", "speech"), ("dev", "llm-finetune"), ("prod", "inference")])
def test_without_a_device_class_grant_dra_stays_off(examples, case, tenant):
    """speech has no GPU grant; the example stacks list only driver classes, metered at 0 for everyone."""
    environment = examples[case]
    sync = viewed(vcluster.vcluster_values, _enabled(_spec(environment, tenant)), environment)["sync"]
    assert sync["toHost"]["resourceClaims"] == sync["toHost"]["resourceClaimTemplates"] == {"enabled": False}
    assert sync["fromHost"]["deviceClasses"] == {"enabled": False}
