"""The TenantGrant's CRD schema and each tenant's grant are generated from the declared guard-rail fields."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from components.manifests import guard_policy, placement_policy
from components.manifests.grant_fields import GrantField
from components.manifests.tenant_grant import grant_crd_schema, grant_fields, tenant_grant

# A guard rail declared only here: its field, its type and how it is computed.
MAX_JOBS = GrantField(
    "maxJobs",
    {"type": "integer", "format": "int32", "description": "Jobs the tenant may run at once."},
    lambda source: 10 * len(source.tenant.all_namespaces),
)


@pytest.fixture
def max_jobs(monkeypatch):
    monkeypatch.setattr(guard_policy, "GRANT_FIELDS", (*guard_policy.GRANT_FIELDS, MAX_JOBS))


def test_a_guard_rail_declared_once_gets_its_crd_property_grant_value_and_cel_path(max_jobs, prod):
    spec = prod.tenants[0].spec
    schema = grant_crd_schema()["properties"]["spec"]
    grant = tenant_grant(spec, prod.view(spec))

    assert schema["properties"]["maxJobs"] == MAX_JOBS.schema and "maxJobs" in schema["required"]
    assert grant["spec"]["maxJobs"] == 10 * len(spec.all_namespaces)
    assert MAX_JOBS.cel == "params.spec.maxJobs"
    jsonschema.validate(grant, grant_crd_schema())


def test_without_the_declaration_there_is_no_such_field(prod):
    spec = prod.tenants[0].spec

    assert "maxJobs" not in grant_crd_schema()["properties"]["spec"]["properties"]
    assert "maxJobs" not in tenant_grant(spec, prod.view(spec))["spec"]


def test_a_field_declared_twice_is_an_error(monkeypatch):
    monkeypatch.setattr(placement_policy, "GRANT_FIELDS", (*placement_policy.GRANT_FIELDS, guard_policy.NAMESPACES))

    with pytest.raises(ValueError, match="'namespaces' is declared twice"):
        grant_fields()


def test_every_grant_path_the_policies_read_is_a_declared_field_and_every_field_is_read(prod):
    text = json.dumps([guard_policy.guard_policy(prod.facts), placement_policy.placement_policy(prod.facts)])

    read = set(re.findall(r"params\.spec\.(\w+)", text))

    assert read == set(grant_fields())


def test_every_tenant_s_grant_has_exactly_the_declared_fields_and_matches_the_crd(environments):
    for environment in environments.values():
        for loaded in environment.tenants:
            grant = tenant_grant(loaded.spec, environment.view(loaded.spec))
            assert sorted(grant["spec"]) == sorted(grant_fields())
            jsonschema.validate(grant, grant_crd_schema())
