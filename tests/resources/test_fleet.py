"""The Pulumi program under Pulumi's mock runtime registers exactly what the builders produce."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from components.manifests.build import environment_objects
from components.manifests.meta import object_id
from components.resources.kubernetes import registered_metadata
from components.load import load_environment, stack_names
from tools.pulumi_mocks import REPO, normalise, run_program

STACKS = stack_names(REPO)


def _registered_objects(registrations):
    objects = {}
    for registration in registrations:
        if not registration.type.startswith("kubernetes:") or registration.type.startswith("kubernetes:helm"):
            continue
        if registration.type == "pulumi:providers:kubernetes" or registration.read:
            continue
        obj = dict(registration.inputs)
        objects[object_id(obj)] = normalise(obj)
    return objects


@pytest.fixture(scope="module", params=STACKS)
def program(request):
    registrations, monitor = run_program(request.param)
    return request.param, registrations, monitor


def test_program_registers_exactly_the_built_objects(program):
    stack, registrations, _ = program
    built = environment_objects(load_environment(REPO, stack))
    # The shell adds one thing: the stable server-side apply field manager (registered_metadata).
    expected = {
        object_id(o): normalise({**o, "metadata": registered_metadata(o)})
        for objects in built.values() for o in objects
    }
    registered = _registered_objects(registrations)
    assert sorted(registered) == sorted(expected)
    for key, obj in expected.items():
        assert registered[key] == obj, key


def test_every_tenant_child_has_its_tenant_component_as_parent(program):
    stack, registrations, monitor = program
    tenants = {r.name: r.urn for r in registrations if r.type == "gpu-tenancy:index:Tenant"}
    assert tenants, "no Tenant components registered"
    env = load_environment(REPO, stack)
    assert sorted(tenants) == sorted(t.name for t in env.tenants)
    for registration in registrations:
        owner = next((t for t in tenants if registration.name.startswith(f"{t}-")), None)
        if registration.type.startswith("kubernetes:") and owner and registration.parent in tenants.values():
            assert registration.parent == tenants[owner], registration.name
    tenant_children = [r for r in registrations if r.parent in tenants.values()]
    assert len(tenant_children) == sum(len(v) for k, v in environment_objects(env).items() if k != "_platform") + sum(
        1 for t in env.tenants if t.spec.vcluster.enabled
    )


def test_every_object_of_a_tenant_outlives_the_removal_of_its_file(program):
    """Removing a tenant file keeps the whole tenant: namespaces are retained (and protected where
    the stack asks for it), everything else goes only with a namespace (deleted_with): namespaced
    objects with their own; cluster-scoped ones, and the tenant's monitoring rule in the platform's
    monitoring namespace, with the tenant's primary namespace."""
    stack, registrations, _ = program
    tenants = {r.urn: r.name for r in registrations if r.type == "gpu-tenancy:index:Tenant"}
    env = load_environment(REPO, stack)
    children = [r for r in registrations if r.parent in tenants and r.type.startswith("kubernetes:")]
    namespaces = {r.inputs["metadata"]["name"]: r.urn for r in children if r.type == "kubernetes:core/v1:Namespace"}
    outside = [r for r in children if r.type != "kubernetes:core/v1:Namespace" and "helm" not in r.type
               and r.inputs["metadata"].get("namespace") not in namespaces]
    assert any(not r.inputs["metadata"].get("namespace") for r in outside), "no cluster-scoped tenant objects to check"
    if env.platform.monitoring is not None:
        assert any(r.type.endswith(":PrometheusRule") for r in outside), "no tenant monitoring rule to check"
    protect = env.platform.protect_namespaces
    for registration in children:
        if registration.type == "kubernetes:core/v1:Namespace":
            assert registration.options["retainOnDelete"] is True, registration.name
            assert registration.options["protect"] is protect, registration.name
        elif registration in outside:
            assert registration.options["deletedWith"] == namespaces[tenants[registration.parent]], registration.name
        else:
            namespace = registration.inputs.get("namespace") or registration.inputs["metadata"]["namespace"]
            assert registration.options["deletedWith"] == namespaces[namespace], registration.name


def test_a_decommissioned_tenant_deletes_its_namespaces_before_its_policies(tmp_path):
    """Decommissioned: nothing retained or protected, and the namespaces depend on the tenant's
    cluster-scoped objects, so the engine deletes them first and no pod runs without its policy."""
    root = _copy_project(tmp_path)
    path = root / "tenants" / "eval.yaml"
    path.write_text(path.read_text().replace("kind: Tenant\n", "kind: Tenant\nlifecycle: decommissioned\ndecommission: {confirm: eval}\n", 1))
    registrations, _ = run_program("prod", root)
    (tenant,) = [r.urn for r in registrations if r.type == "gpu-tenancy:index:Tenant" and r.name == "eval"]
    children = [r for r in registrations if r.parent == tenant and r.type.startswith("kubernetes:")]
    guards = {r.urn for r in children if r.type != "kubernetes:core/v1:Namespace"
              and not r.inputs["metadata"].get("namespace")}
    assert any("ValidatingAdmissionPolicy" in u for u in guards), guards
    # The guard binding stays while the namespaces do, and goes after them (issue 34).
    assert "gpu-tenancy-guard-eval" in {r.inputs["metadata"]["name"] for r in children if r.urn in guards}
    for registration in children:
        assert registration.options["retainOnDelete"] in (False, None), registration.name
        assert not registration.options["protect"], registration.name
        if registration.urn in guards:
            assert not registration.options["deletedWith"], registration.name
        if registration.type == "kubernetes:core/v1:Namespace":
            assert guards <= set(registration.options["dependencies"]), registration.name


def test_node_taints_land_after_the_placement_policies_and_the_kueue_flavors():
    """Rollout order (docs/gpu-sharing.md): a node's taint patch depends on the placement policy, every
    tenant's placement binding and TenantGrant (through the one gate they all have, which the patch
    depends on), and on the platform's other objects; the label patch of
    a tainted node depends on its taint patch (so an upgrade from one patch with both never drops the
    taint, GpuPlatform)."""
    registrations, _ = run_program("prod")
    urns = {r.urn: r for r in registrations}
    policies = {u for u, r in urns.items() if (r.type == "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
                and r.inputs["metadata"]["name"].startswith("gpu-tenancy-placement-"))
                or r.type == "kubernetes:gpu-tenancy.dev/v1alpha1:TenantGrant"}
    policies |= {u for u, r in urns.items() if r.type == "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
                 and r.inputs["metadata"]["name"] == "gpu-tenancy-placement"}
    flavors = {u for u, r in urns.items() if r.type == "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"}
    others = {u for u, r in urns.items() if r.type.startswith("kubernetes:") and "GpuPlatform$" in u
              and r.type != "kubernetes:core/v1:NodePatch" and not r.read}
    joined = {r.name: r.urn for r in registrations if r.read and r.type == "kubernetes:core/v1:Node"}
    assert len(policies) == 2 * len(load_environment(REPO, "prod").tenants) + 1 and flavors and others
    patches = [r for r in registrations if r.type == "kubernetes:core/v1:NodePatch"]
    tainting = {r.inputs["metadata"]["name"]: r for r in patches if (r.inputs.get("spec") or {}).get("taints")}
    labelling = {r.inputs["metadata"]["name"]: r for r in patches if r.inputs["metadata"].get("labels")}
    # Every static node of prod, MIG pools included (gpu-a100-03), has both.
    assert set(tainting) == set(labelling) >= {"gpu-a100-01", "gpu-a100-03", "gpu-h100-01"}
    (gate,) = [r for r in registrations if r.type == "pulumi:index:Stash"]   # GpuPlatform._gate, nothing on the cluster
    tenants_gates = {u for u in policies if "GpuPlatform$" not in u}   # every tenant's placement binding and grant
    assert len(tenants_gates) == len(policies) - 1 and set(gate.options["dependencies"]) == tenants_gates
    for name, taints in tainting.items():
        assert taints.name == f"prod-platform-node-{name}-taints" and labelling[name].name == f"prod-platform-node-{name}"
        assert (policies - tenants_gates) | flavors | others | {gate.urn} <= set(taints.options["dependencies"]), taints.name
        assert not {r.urn for r in patches} & set(taints.options["dependencies"]), taints.name
        # Both patches wait for the read of their Node, which fails when it is not on the cluster (no phantom Node).
        assert joined[f"prod-platform-node-{name}-joined"] in taints.options["dependencies"], taints.name
        assert labelling[name].options["dependencies"] == sorted([taints.urn, joined[f"prod-platform-node-{name}-joined"]])


def test_a_label_patch_of_an_untainted_node_waits_for_nothing(tmp_path):
    """`patchTaints: false`: the pool's nodes have their label patch only, and it depends on nothing
    but the read of its Node."""
    project = _copy_project(tmp_path)
    stack = project / "stacks" / "Pulumi.prod.yaml"
    stack.write_text(stack.read_text().replace("        migLayout: eval-mix\n", "        migLayout: eval-mix\n        patchTaints: false\n", 1))
    registrations, _ = run_program("prod", project)
    patches = {r.name: r for r in registrations if r.type == "kubernetes:core/v1:NodePatch"}
    assert "prod-platform-node-gpu-a100-03" in patches and "prod-platform-node-gpu-a100-03-taints" not in patches
    (joined,) = [r.urn for r in registrations if r.read and r.name == "prod-platform-node-gpu-a100-03-joined"]
    assert patches["prod-platform-node-gpu-a100-03"].options["dependencies"] == [joined]
    assert "prod-platform-node-gpu-a100-01-taints" in patches


def test_the_cluster_provider_does_not_store_the_kubeconfig_path(monkeypatch):
    """The SDK defaults the provider's `kubeconfig` input to $KUBECONFIG: a path that differs per
    machine made every preview from another checkout show a provider change."""
    monkeypatch.setenv("KUBECONFIG", "/home/someone/.kube/elsewhere")
    registrations, _ = run_program("prod")
    providers = [r for r in registrations if r.type == "pulumi:providers:kubernetes"]
    assert providers and all(r.inputs.get("kubeconfig") in ("", None) for r in providers), providers


def test_namespaced_children_are_deleted_with_their_namespace(program):
    _, registrations, _ = program
    namespace_urns = {r.inputs["metadata"]["name"]: r.urn for r in registrations if r.type == "kubernetes:core/v1:Namespace"}
    namespaced = [
        r for r in registrations
        if r.type.startswith("kubernetes:") and isinstance(r.inputs.get("metadata"), dict) and r.inputs["metadata"].get("namespace") in namespace_urns
    ]
    assert namespaced
    for registration in namespaced:
        assert registration.options["deletedWith"] == namespace_urns[registration.inputs["metadata"]["namespace"]], registration.name


def test_node_patches_carry_the_fixed_field_manager_and_force_except_the_taint_patches():
    """Label patches: `gpu-tenancy`, forced. Taint patches: no annotation at all (the provider applies
    `pulumi.com/patchFieldManager` to the Node, where the label patch owns it: naming another manager
    would conflict on it), so the provider gives each its own manager, and they are never forced."""
    registrations, _ = run_program("prod")
    patches = [r for r in registrations if r.type == "kubernetes:core/v1:NodePatch"]
    assert len(patches) == 24  # 5 + 3 H100 nodes, 2 + 2 A100 nodes in the prod example, two patches each
    labelling = [p for p in patches if p.name.endswith("-taints") is False]
    tainting = [p for p in patches if p.name.endswith("-taints")]
    assert len(labelling) == len(tainting) == 12
    for patch in labelling:
        assert patch.inputs["metadata"]["annotations"] == {"pulumi.com/patchFieldManager": "gpu-tenancy", "pulumi.com/patchForce": "true"}
        assert "spec" not in patch.inputs, patch.name
    for patch in tainting:
        assert patch.inputs["metadata"] == {"name": patch.inputs["metadata"]["name"]}, patch.name
        assert patch.inputs["spec"]["taints"], patch.name


def test_component_types_and_names():
    registrations, _ = run_program("prod")
    types = {r.type for r in registrations if r.type.startswith("gpu-tenancy:")}
    assert types == {"gpu-tenancy:index:Fleet", "gpu-tenancy:index:GpuPlatform", "gpu-tenancy:index:Tenant"}
    for registration in registrations:
        if registration.type.startswith("kubernetes:") and registration.type != "pulumi:providers:kubernetes":
            assert registration.name.startswith(("prod-platform-", "eval-", "inference-", "llm-finetune-")), registration.name


def _copy_project(tmp_path: Path) -> Path:
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, tmp_path / part)
    shutil.copy(REPO / "__main__.py", tmp_path / "__main__.py")
    return tmp_path


def test_adding_a_tenant_changes_no_other_tenants_urns_or_inputs(tmp_path):
    root = _copy_project(tmp_path)
    before, _ = run_program("prod", root)
    new = yaml.safe_load((root / "tenants" / "eval.yaml").read_text())
    new.update(name="newcomer", displayName="Newcomer", environments={}, namespaces=[])
    new["network"]["ingressFrom"]["tenants"] = []
    (root / "tenants" / "newcomer.yaml").write_text(yaml.safe_dump(new))
    after, _ = run_program("prod", root)

    def by_urn(registrations):
        return {r.urn: normalise(r.inputs) for r in registrations if "newcomer" not in r.urn}

    old, new_ = by_urn(before), by_urn(after)
    unchanged_tenant_urns = {u for u in old if "gpu-tenancy:index:Tenant" in u}
    assert unchanged_tenant_urns and unchanged_tenant_urns <= set(new_)
    for urn, inputs in old.items():
        if "index:GpuPlatform" in urn or "$gpu-tenancy:index:GpuPlatform" in urn:
            continue  # platform objects (e.g. the placement policy) may list the new tenant
        assert urn in new_, urn
        assert new_[urn] == inputs, urn
    added = {r.urn for r in after if "newcomer" in r.urn}
    assert any("gpu-tenancy:index:Tenant::newcomer" in u for u in added)


def test_vcluster_release_gets_the_rendered_values_including_nulls():
    registrations, _ = run_program("dev")
    releases = [r for r in registrations if r.type == "kubernetes:helm.sh/v3:Release"]
    env = load_environment(REPO, "dev")
    enabled = [t for t in env.tenants if t.spec.vcluster.enabled]
    assert [r.name for r in releases] == [f"{t.name}-vcluster" for t in enabled]
    from components.manifests.build import helm_releases

    for release, loaded in zip(releases, enabled):
        (expected,) = helm_releases(loaded.spec, env.view(loaded.spec))
        assert release.inputs["chart"] == "vcluster" and release.inputs["version"] == expected["version"]
        assert release.inputs["namespace"] == loaded.name
        assert "values" not in release.inputs  # Pulumi would drop the nulls that delete chart defaults
        (asset,) = release.inputs["valueYamlFiles"]
        values = yaml.safe_load(asset.text)
        assert values == expected["values"]
        assert None in _leaves(values)
        assert release.options["deletedWith"], "the release goes with its namespace"


def _leaves(value):
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_immutable_fields_of_custom_resources_replace_them():
    """Kueue refuses to change a LocalQueue's clusterQueue (a renamed tenant's queue in a namespace
    it keeps): the program replaces it, deleting first, instead of failing at preview."""
    registrations, _ = run_program("prod")
    local_queues = [r for r in registrations if r.inputs.get("kind") == "LocalQueue"]
    assert local_queues
    for registration in local_queues:
        assert registration.options["replaceOnChanges"] == ["spec.clusterQueue"], registration.name
        assert registration.options["deleteBeforeReplace"] is True, registration.name


def test_the_immutable_fields_table_matches_the_vendored_crds():
    from importlib import resources

    from components.manifests.meta import IMMUTABLE_FIELDS

    data = resources.files("components.data")
    for (group, kind), paths in IMMUTABLE_FIELDS.items():
        if group == "rbac.authorization.k8s.io":
            continue  # built in: RoleBinding and ClusterRoleBinding roleRef
        crd = next(
            doc for sub in ("kueue", "kai-scheduler") for f in data.joinpath(sub).iterdir() if f.name.endswith(".yaml")
            for doc in yaml.safe_load_all(f.read_text()) if isinstance(doc, dict)
            and doc.get("kind") == "CustomResourceDefinition" and doc["spec"]["group"] == group
            and doc["spec"]["names"]["kind"] == kind
        )
        for version in crd["spec"]["versions"]:
            for path in paths:
                node = version["schema"]["openAPIV3Schema"]
                for part in path.split("."):
                    node = node["properties"][part]
                rules = [v["rule"] for v in node.get("x-kubernetes-validations", [])]
                assert "self == oldSelf" in rules, (kind, version["name"], path)


def test_a_guard_binding_waits_for_its_grant_and_both_for_the_platforms_guard_and_crd():
    """A binding pointing at a policy or TenantGrant not there yet would leave the tenant's namespaces
    unguarded (no policy) or refusing everything (no grant) for the length of the update."""
    registrations, _ = run_program("prod")
    by_name = {r.name: r for r in registrations}
    crd = by_name["prod-platform-customresourcedefinition-tenantgrants.gpu-tenancy.dev"].urn
    policy = by_name["prod-platform-validatingadmissionpolicy-gpu-tenancy-guard"].urn
    for loaded in load_environment(REPO, "prod").tenants:
        grant = by_name[f"{loaded.name}-tenantgrant-{loaded.name}"]
        binding = by_name[f"{loaded.name}-validatingadmissionpolicybinding-gpu-tenancy-guard-{loaded.name}"]
        assert {crd, policy} <= set(grant.options["dependencies"]), grant.name
        assert {crd, policy, grant.urn} <= set(binding.options["dependencies"]), binding.name
        assert grant.type == "kubernetes:gpu-tenancy.dev/v1alpha1:TenantGrant"
