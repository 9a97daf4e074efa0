"""Ephemeral storage against the stack's guard rails: located errors from check_tenant / check_platform."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from components.spec.stack import Platform
from components.spec.tenant import Tenant
from components.spec.yaml_source import parse_yaml
from components.validate.platform import check_platform
from components.validate.tenant import check_tenant

TENANT = "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: team\ndisplayName: Team\ncostCenter: cc-1\n"


def _problems(extra: str, **platform) -> list[str]:
    text = TENANT + extra
    tenant = Tenant.model_validate(yaml.safe_load(text))
    spec = Platform.model_validate({"labelDomain": "gpu.example.com", **platform})
    return [str(p) for p in check_tenant(tenant, parse_yaml(text, "tenants/team.yaml"), spec)]


def test_values_within_the_guard_rails_pass():
    assert _problems("quota:\n  ephemeralStorage: {requests: 50Gi, limits: 400Gi}\n"
                     "limits:\n  default: {ephemeralStorage: 20Gi}\n  max: {ephemeralStorage: 100Gi}\n") == []


def test_every_per_container_value_above_the_max_is_located():
    problems = _problems("limits:\n  defaultRequest: {ephemeralStorage: 200Gi}\n  default: {ephemeralStorage: 200Gi}\n"
                         "  max: {ephemeralStorage: 200Gi}\n", guardRails={"ephemeralStorage": {"quota": {}}})
    assert [p.split(": ", 2)[:2] for p in problems] == [
        ["tenants/team.yaml:7:20", "limits.defaultRequest.ephemeralStorage"],
        ["tenants/team.yaml:8:13", "limits.default.ephemeralStorage"],
        ["tenants/team.yaml:9:9", "limits.max.ephemeralStorage"],
    ]
    assert all("above the stack's guardRails.ephemeralStorage.max (100Gi)" in p for p in problems)


def test_a_default_limit_above_the_namespace_quota_could_admit_no_pod():
    problems = _problems("limits:\n  default: {ephemeralStorage: 20Gi}\n", guardRails={"ephemeralStorage": {"quota": {"limits": "10Gi"}}})
    assert problems == ["tenants/team.yaml:7:13: limits.default.ephemeralStorage: the default limit (20Gi) is larger than the whole "
                        "quota on limits (10Gi); no defaulted pod could be admitted"]


def test_limits_alone_below_the_guard_rails_requests_are_located_at_the_tenants_side():
    problems = _problems("quota:\n  ephemeralStorage: {limits: 50Gi}\n")
    assert problems == ["tenants/team.yaml:7:22: quota.ephemeralStorage.limits: limits (50Gi) with the stack's "
                        "guardRails.ephemeralStorage.quota.requests (100Gi) leaves limits below requests; set "
                        "quota.ephemeralStorage.requests too"]


@pytest.mark.parametrize("rail, fragment", [
    ({"defaultRequest": "8Gi", "default": "4Gi"}, "defaultRequest (8Gi) is above default (4Gi)"),
    ({"max": "1Gi"}, "default (4Gi) is above max (1Gi)"),
    ({"quota": {"requests": "1Ti", "limits": "100Gi"}}, "quota.requests (1Ti) is above quota.limits (100Gi)"),
    ({"quota": {"requests": "100Mi"}}, "defaultRequest (256Mi) is above quota.requests (100Mi)"),
    ({"quota": {"limits": "1Gi"}}, "default (4Gi) is above quota.limits (1Gi)"),
])
def test_inconsistent_guard_rails_are_refused(rail, fragment):
    with pytest.raises(ValidationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        Platform.model_validate({"labelDomain": "gpu.example.com", "guardRails": {"ephemeralStorage": rail}})


def test_stack_limit_range_defaults_are_held_to_the_guard_rail_max():
    text = ("config:\n  gpu-tenancy:platform:\n    labelDomain: gpu.example.com\n"
            "    limitRangeDefaults:\n      max: {ephemeralStorage: 1Ti}\n")
    platform = Platform.model_validate(yaml.safe_load(text)["config"]["gpu-tenancy:platform"])
    assert [str(p) for p in check_platform(platform, parse_yaml(text, "stacks/Pulumi.x.yaml"))] == [
        "stacks/Pulumi.x.yaml:5:13: config.gpu-tenancy:platform.limitRangeDefaults.max.ephemeralStorage: 1Ti is above "
        "guardRails.ephemeralStorage.max (100Gi), the bound of every tenant; lower it, or raise the guard rail"]
