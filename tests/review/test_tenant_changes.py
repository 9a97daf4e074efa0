"""A tenant's changes in a reviewer's terms: quota deltas, role grants, egress that got wider."""

from __future__ import annotations

import pytest

from components.review.tenant_changes import access_changes, network_changes, quota_changes, quota_values, tenant_changes
from components.fleet.environment import Environment
from components.spec.stack import Platform
from components.spec.tenant import Tenant

PLATFORM = Platform.model_validate({
    "labelDomain": "gpu.example.com",
    "gpuClasses": {
        "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
        "l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi"},
    },
    "nodePools": {
        "train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1"]},
        "inf": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n2"]},
    },
})
ENV = Environment("prod", PLATFORM, None, [])


def tenant(**fields) -> Tenant:
    return Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "team",
                                  "displayName": "Team", "costCenter": "cc", **fields})


def egress(*rules: dict) -> Tenant:
    return tenant(network={"egress": list(rules)})


def test_plain_gpu_count_reads_as_its_single_class():
    plain = quota_values(tenant(quota={"gpu": 8}, gpu={"classes": ["h100"]}), ENV)
    per_class = quota_values(tenant(quota={"gpu": {"h100": 8}}, gpu={"classes": ["h100"]}), ENV)

    assert plain == per_class == {"gpu.h100": 8}


def test_dedicated_pool_gives_the_class_of_a_plain_count():
    assert quota_values(tenant(quota={"gpu": 4}, gpu={"dedicatedPools": ["train"]}), ENV) == {"gpu.h100": 4}


def test_equal_quantities_written_differently_are_no_change():
    before = quota_values(tenant(quota={"memory": {"requests": "1Ti"}}), ENV)
    after = quota_values(tenant(quota={"memory": {"requests": "1024Gi"}}), ENV)

    assert quota_changes(before, after) == []
    assert quota_changes(before, {"memory.requests": "2Ti"}) == [
        {"key": "memory.requests", "label": "memory.requests", "from": "1Ti", "to": "2Ti"}
    ]


def test_mig_and_priority_caps_are_keys_of_their_own():
    values = quota_values(tenant(quota={"mig": {"1g.10gb": 4}, "priorityClasses": {"training": {"gpu": 2}}}), ENV)

    assert values == {"mig.1g.10gb": 4, "priorityClasses.training.gpu": 2}


def test_access_grants_and_revocations():
    before = tenant(access={"owners": {"groups": ["leads"]}, "ciServiceAccounts": [{"name": "ci"}]})
    after = tenant(access={"owners": {"groups": ["leads", "others"]}, "developers": {"users": ["jo@x.dev"]}})

    assert access_changes(before, after) == [
        {"role": "owner", "subject": "group:others", "change": "granted"},
        {"role": "developer", "subject": "serviceaccount:team/ci", "change": "revoked"},
        {"role": "developer", "subject": "user:jo@x.dev", "change": "granted"},
    ]


@pytest.mark.parametrize(
    ("old", "new", "widened"),
    [
        ({"cidr": "10.0.0.0/8", "ports": [{"port": 443}]}, {"cidr": "10.1.0.0/16", "ports": [{"port": 443}]}, False),
        ({"cidr": "10.0.0.0/8", "ports": [{"port": 443}]}, {"cidr": "10.0.0.0/7", "ports": [{"port": 443}]}, True),
        ({"cidr": "10.0.0.0/8", "ports": [{"port": 443}]}, {"cidr": "10.0.0.0/8", "ports": [{"port": 443, "protocol": "UDP"}]}, True),
        ({"cidr": "10.0.0.0/8", "ports": [{"port": 8000, "endPort": 9000}]}, {"cidr": "10.0.0.0/8", "ports": [{"port": 8080}]}, False),
        ({"cidr": "10.0.0.0/8", "ports": [{"port": 8000, "endPort": 9000}]}, {"cidr": "10.0.0.0/8", "ports": [{"port": 8080, "endPort": 9100}]}, True),
        ({"cidr": "10.0.0.0/8"}, {"cidr": "10.0.0.0/8", "ports": [{"port": 1}]}, False),
        ({"cidr": "10.0.0.0/8", "except": ["10.9.0.0/16"]}, {"cidr": "10.0.0.0/8"}, True),
        ({"cidr": "10.0.0.0/8", "except": ["10.9.0.0/16"]}, {"cidr": "10.1.0.0/16"}, False),
        ({"cidr": "10.0.0.0/8"}, {"cidr": "fd00::/8"}, True),
    ],
)
def test_egress_is_widened_only_when_the_base_did_not_allow_it(old, new, widened):
    changes = network_changes(egress(old), egress(new))

    added = [c for c in changes if c["direction"] == "egress" and c["change"] != "removed"]
    assert [c["change"] for c in added] == ["widened" if widened else "added"]


def test_egress_of_a_new_tenant_is_added_not_widened():
    assert [c["change"] for c in network_changes(None, egress({"cidr": "10.0.0.0/8"}))] == ["added"]


def test_ingress_sources_and_ports():
    before = tenant(network={"ingressFrom": {"tenants": ["a"], "ports": [{"port": 8080}]}})
    after = tenant(network={"ingressFrom": {"tenants": ["b"], "platform": ["monitoring"]}})

    changes = {(c["change"], c["rule"]) for c in network_changes(before, after)}

    assert changes == {
        ("added", "from tenant b"),
        ("removed", "from tenant a"),
        ("added", "from platform role monitoring"),
        ("widened", "ports for other tenants: all ports"),
    }


def test_unchanged_tenant_has_no_changes():
    spec = tenant(quota={"gpu": 2}, gpu={"classes": ["l4"]})

    assert tenant_changes(spec, ENV, spec, ENV, []) is None


def test_changed_tenant_lists_quota_lifecycle_and_classes():
    before = tenant(quota={"gpu": 2}, gpu={"classes": ["l4"]})
    after = tenant(quota={"gpu": {"l4": 2, "h100": 1}}, gpu={"classes": ["l4", "h100"]}, lifecycle="suspended")

    detail = tenant_changes(before, ENV, after, ENV, [])

    assert detail["quota"] == [{"key": "gpu.h100", "label": "GPUs h100", "from": None, "to": 1}]
    assert detail["lifecycle"] == {"from": "active", "to": "suspended"}
    assert detail["placement"]["classes"] == {"added": ["h100"], "removed": []}
