"""The GpuPlatform component registers its plan (manifests/registration.py `platform_plan`): every
entry as `<platform>-<key>` with the plan's dependencies, its node taints after every tenant's gates
(through one gate resource),
and every node patch after the read of its Node (`GpuPlatform.joined`: no phantom Node)."""

from __future__ import annotations

from components.load import load_environment
from components.manifests.build import helm_releases, platform_objects, tenant_objects
from components.manifests.gpu_nodes import is_node_patch
from components.manifests.registration import platform_plan, tenant_plan
from tools.pulumi_mocks import REPO, run_program


def test_the_platform_registers_its_plan_and_its_taints_wait_for_the_tenants_gates():
    registrations, _ = run_program("prod")
    by_name = {r.name: r for r in registrations}
    environment = load_environment(REPO, "prod")
    gates = set()
    for loaded in environment.tenants:
        view = environment.view(loaded.spec)
        plan = tenant_plan(loaded.spec, tenant_objects(loaded.spec, view), helm_releases(loaded.spec, view),
                           protect_namespaces=environment.platform.protect_namespaces)
        gates |= {by_name[f"{loaded.name}-{e.key}"].urn for e in plan if "taint gates" in e.provides}
    assert len(gates) == 2 * len(environment.tenants)   # each tenant's placement binding and grant
    plan = platform_plan(platform_objects(environment))
    (component,) = [r.urn for r in registrations if r.type == "gpu-tenancy:index:GpuPlatform"]
    # The gate: one engine-only resource depending on every tenant's gates (GpuPlatform._gate).
    (gate,) = [r for r in registrations if r.parent == component and r.type == "pulumi:index:Stash"]
    assert gate.name == "prod-platform-taint-gates" and set(gate.options["dependencies"]) == gates
    assert sorted(r.name for r in registrations if r.parent == component and not r.read and r is not gate) == \
        sorted(f"prod-platform-{e.key}" for e in plan)
    nodes = {e.subject["metadata"]["name"] for e in plan if is_node_patch(e.subject)}
    reads = {r.name: r for r in registrations if r.parent == component and r.read}
    assert sorted(reads) == sorted(f"prod-platform-node-{n}-joined" for n in nodes)
    assert {r.type for r in reads.values()} == {"kubernetes:core/v1:Node"}
    assert any(e.deferred for e in plan)
    for entry in plan:
        options = by_name[f"prod-platform-{entry.key}"].options
        waited = {gate.urn} if "taint gates" in entry.waits_for else set()
        if is_node_patch(entry.subject):
            waited = waited | {reads[f"prod-platform-node-{entry.subject['metadata']['name']}-joined"].urn}
        assert set(options["dependencies"]) == {by_name[f"prod-platform-{k}"].urn for k in entry.depends_on} | waited, entry.key
