"""The Tenant component registers its plan (manifests/registration.py) and nothing else: every
entry as `<tenant>-<key>`, with the plan's retain, protect, deleted-with and dependencies."""

from __future__ import annotations

import pytest

from components.load import load_environment
from components.manifests.build import helm_releases, platform_objects, tenant_objects
from components.manifests.registration import platform_plan, tenant_plan
from tools.pulumi_mocks import REPO, run_program


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_each_tenant_registers_its_plan_with_the_plans_options(stack):
    registrations, _ = run_program(stack)
    by_name = {r.name: r for r in registrations}
    environment = load_environment(REPO, stack)
    admission = {by_name[f"{stack}-platform-{e.key}"].urn for e in platform_plan(platform_objects(environment))
                 if "admission" in e.provides}
    assert len(admission) == 3   # the TenantGrant CRD, the guard and placement policies
    for loaded in environment.tenants:
        view = environment.view(loaded.spec)
        plan = tenant_plan(loaded.spec, tenant_objects(loaded.spec, view), helm_releases(loaded.spec, view),
                           protect_namespaces=environment.platform.protect_namespaces)
        (component,) = [r.urn for r in registrations if r.type == "gpu-tenancy:index:Tenant" and r.name == loaded.name]
        assert sorted(r.name for r in registrations if r.parent == component) == sorted(f"{loaded.name}-{e.key}" for e in plan)
        urn = {e.key: by_name[f"{loaded.name}-{e.key}"].urn for e in plan}
        for entry in plan:
            options = by_name[f"{loaded.name}-{entry.key}"].options
            assert options["retainOnDelete"] == entry.retain_on_delete, entry.key
            assert options["protect"] is bool(entry.protect), entry.key
            assert options["deletedWith"] == (urn[entry.deleted_with] if entry.deleted_with else ""), entry.key
            waited = admission if "admission" in entry.waits_for else set()
            assert set(options["dependencies"]) == {urn[k] for k in entry.depends_on} | waited, entry.key
