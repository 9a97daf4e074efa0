"""Splitting a tenant's compute and GPU budget across its namespaces (`namespaceQuotas`)."""

from __future__ import annotations

import pytest

from components.manifests.quota import TENANT_QUOTA, resource_quotas, split_budget
from components.validate.tenant import check_tenant
from components.spec.quantity import Quantity
from components.spec.yaml_source import SourceDocument

H100 = {"h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}}


def _hard(objects, namespace, name=TENANT_QUOTA):
    return next(q for q in objects if q["metadata"]["namespace"] == namespace and q["metadata"]["name"] == name)["spec"]["hard"]


@pytest.fixture
def canary_tenant(make_tenant):
    return make_tenant(
        namespaces=["team-a-canary", "team-a-data"],
        gpu={"classes": ["h100"]},
        quota={"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "64Gi"}, "gpu": 8,
               "priorityClasses": {"training": {"gpu": 8, "cpu": "8"}}},
        namespaceQuotas={"team-a-canary": {"cpu": {"requests": "500m", "limits": "2"}, "gpu": 1}},
    )


def test_slices_are_taken_out_of_the_primary_namespace(canary_tenant, make_environment):
    env = make_environment(gpuClasses=H100)
    objects = resource_quotas(canary_tenant, env.view(canary_tenant))
    primary, canary, data = (_hard(objects, ns) for ns in ("team-a", "team-a-canary", "team-a-data"))
    assert primary["requests.cpu"] == "7500m" and primary["limits.cpu"] == "14"
    assert primary["requests.memory"] == "64Gi"  # untouched keys keep the author's spelling
    assert primary["requests.nvidia.com/gpu"] == "7"
    assert canary["requests.cpu"] == "500m" and canary["limits.cpu"] == "2" and canary["requests.nvidia.com/gpu"] == "1"
    assert canary["requests.memory"] == "0"  # not carved out: the canary gets none
    assert data["requests.cpu"] == "0" and data["requests.nvidia.com/gpu"] == "0"
    # the tenant-wide total is still exactly its quota
    for key, total in {"requests.cpu": "8", "limits.cpu": "16", "requests.nvidia.com/gpu": "8"}.items():
        assert sum(Quantity.parse(h[key]).value for h in (primary, canary, data)) == Quantity.parse(total).value, key


def test_priority_caps_never_exceed_the_namespace_budget(canary_tenant, make_environment):
    env = make_environment(gpuClasses=H100)
    objects = resource_quotas(canary_tenant, env.view(canary_tenant))
    assert _hard(objects, "team-a", "priority-training")["requests.nvidia.com/gpu"] == "7"
    assert _hard(objects, "team-a-canary", "priority-training")["requests.nvidia.com/gpu"] == "1"
    assert _hard(objects, "team-a-canary", "priority-training")["requests.cpu"] == "500m"
    assert _hard(objects, "team-a-data", "priority-training")["requests.nvidia.com/gpu"] == "0"


def test_split_budget_is_exact():
    kept = split_budget({"requests.cpu": "1", "requests.memory": "1Gi"}, {"a": {"requests.cpu": "100m"}, "b": {"requests.cpu": "200m", "requests.memory": "512Mi"}})
    assert kept == {"requests.cpu": "700m", "requests.memory": "512Mi"}


def _problems(tenant, env):
    doc = SourceDocument("tenants/team-a.yaml", {}, {})
    return [p.message for p in check_tenant(tenant, doc, env.platform) if "namespaceQuotas" in p.field]


def test_slices_larger_than_the_quota_are_rejected(make_tenant, make_environment):
    tenant = make_tenant(
        namespaces=["team-a-canary"], gpu={"classes": ["h100"]}, quota={"cpu": {"requests": "2"}, "gpu": 1},
        namespaceQuotas={"team-a-canary": {"cpu": {"requests": "3"}, "gpu": 2}},
    )
    messages = _problems(tenant, make_environment(gpuClasses=H100))
    assert any("requests.cpu add up to more than the tenant's quota of 2" in m for m in messages)
    assert any("requests.nvidia.com/gpu add up to more than the tenant's quota of 1" in m for m in messages)


def test_slices_must_name_an_extra_namespace_and_an_existing_budget(make_tenant, make_environment):
    env = make_environment(gpuClasses=H100)
    unknown = make_tenant(namespaces=["team-a-canary"], quota={"cpu": {"requests": "2"}}, namespaceQuotas={"team-a-cnary": {"cpu": {"requests": "1"}}})
    assert any("'team-a-cnary' is not an extra namespace" in m for m in _problems(unknown, env))
    no_budget = make_tenant(namespaces=["team-a-canary"], quota={"cpu": {"requests": "2"}}, namespaceQuotas={"team-a-canary": {"memory": {"requests": "1Gi"}}})
    assert any("quota has no requests.memory to carve it from" in m for m in _problems(no_budget, env))


def test_example_canary_gets_its_slice(prod):
    inference = next(t.spec for t in prod.tenants if t.name == "inference")
    objects = resource_quotas(inference, prod.view(inference))
    canary = _hard(objects, "inference-canary")
    assert canary["requests.nvidia.com/gpu"] == "2" and canary["requests.cpu"] == "16"
    assert _hard(objects, "inference")["requests.nvidia.com/gpu"] == "22"
