from __future__ import annotations

from components.manifests.limit_range import LIMIT_RANGE, limit_ranges
from components.manifests.meta import TENANT_LABEL

from .example_tenants import tenant_of, viewed


def _item(objects: list[dict]) -> dict:
    (item,) = objects[0]["spec"]["limits"]
    return item


def test_one_limit_range_per_namespace(prod):
    objects = viewed(limit_ranges, tenant_of(prod, "llm-finetune"), prod)
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects] == [
        ("llm-finetune", LIMIT_RANGE),
        ("llm-finetune-data", LIMIT_RANGE),
    ]
    assert objects[0]["spec"] == objects[1]["spec"]
    assert all(o["metadata"]["labels"][TENANT_LABEL] == "llm-finetune" for o in objects)


def test_tenant_values_win_and_unset_ones_come_from_the_stack(prod):
    item = _item(viewed(limit_ranges, tenant_of(prod, "llm-finetune"), prod))
    assert item == {
        "type": "Container",
        "defaultRequest": {"cpu": "500m", "ephemeral-storage": "1Gi", "memory": "1Gi"},
        "default": {"cpu": "4", "ephemeral-storage": "20Gi", "memory": "16Gi"},
        "max": {"cpu": "128", "ephemeral-storage": "100Gi", "memory": "1536Gi"},
    }


def test_stack_defaults_only_and_empty_sections_left_out(prod):
    item = _item(viewed(limit_ranges, tenant_of(prod, "eval"), prod))
    assert item == {
        "type": "Container",
        "defaultRequest": {"cpu": "250m", "ephemeral-storage": "256Mi", "memory": "512Mi"},
        "default": {"cpu": "2", "ephemeral-storage": "4Gi", "memory": "4Gi"},
        "max": {"ephemeral-storage": "100Gi"},
    }


def test_min_section_uses_the_kubernetes_resource_names(make_tenant, make_environment):
    tenant = make_tenant(limits={"min": {"ephemeralStorage": "100Mi", "cpu": "10m"}})
    item = _item(limit_ranges(tenant, make_environment().view(tenant)))
    assert item["min"] == {"cpu": "10m", "ephemeral-storage": "100Mi"}


def test_ephemeral_storage_guard_rails_always_give_a_limit_range(make_tenant, make_environment):
    # The quota keys requests/limits.ephemeral-storage are in every namespace: without these
    # defaults a pod that states no ephemeral-storage would be refused by the quota.
    env = make_environment(limitRangeDefaults={}, guardRails={"ephemeralStorage": {"defaultRequest": "1Gi", "default": "2Gi", "max": "10Gi"}})
    assert _item(limit_ranges(make_tenant(), env.view(make_tenant()))) == {
        "type": "Container", "defaultRequest": {"ephemeral-storage": "1Gi"}, "default": {"ephemeral-storage": "2Gi"},
        "max": {"ephemeral-storage": "10Gi"},
    }


def test_stack_limit_range_defaults_win_over_the_guard_rails(make_tenant, make_environment):
    env = make_environment(limitRangeDefaults={"default": {"ephemeralStorage": "8Gi"}})
    item = _item(limit_ranges(make_tenant(), env.view(make_tenant())))
    assert item["default"]["ephemeral-storage"] == "8Gi" and item["defaultRequest"]["ephemeral-storage"] == "256Mi"
