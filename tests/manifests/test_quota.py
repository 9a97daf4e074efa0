from __future__ import annotations

import pytest

from components.manifests.meta import TENANT_LABEL
from components.manifests.quota import (
    SUSPENDED_QUOTA,
    TENANT_QUOTA,
    gpu_hard,
    resource_quotas,
)

from .example_tenants import tenant_of, viewed

H100 = {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}
L4_SHARED = {
    "model": "L4",
    "product": "NVIDIA-L4",
    "memory": "24Gi",
    "sharing": "timeSlicing",
    "timeSlicing": {"replicas": 4, "renameByDefault": True},
}


def _by_place(quotas: list[dict]) -> dict[tuple[str, str], dict]:
    return {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in quotas}


def _hard(quotas: list[dict], namespace: str, name: str) -> dict[str, str]:
    return _by_place(quotas)[(namespace, name)]["spec"]["hard"]


def _without_kind_counts(hard: dict[str, str]) -> dict[str, str]:
    """The keys other than the `count/<kind>` guard rails (pinned by the tests at the end)."""
    return {k: v for k, v in hard.items() if not k.startswith("count/")}


def test_primary_namespace_quota_of_the_finetuning_tenant(prod):
    quotas = viewed(resource_quotas, tenant_of(prod, "llm-finetune"), prod)
    assert _without_kind_counts(_hard(quotas, "llm-finetune", TENANT_QUOTA)) == {
        "fast-nvme.storageclass.storage.k8s.io/persistentvolumeclaims": "20",
        "fast-nvme.storageclass.storage.k8s.io/requests.storage": "50Ti",
        # the NVIDIA DRA driver's DeviceClasses (deviceClasses, owner driver): both key forms at 0
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": "0",
        "requests.deviceclass.resource.kubernetes.io/mig.nvidia.com": "0",
        "limits.cpu": "640",
        "limits.ephemeral-storage": "4Ti",
        "limits.memory": "4Ti",
        "persistentvolumeclaims": "100",
        "pods": "400",
        "requests.cpu": "320",
        "requests.ephemeral-storage": "2Ti",
        "requests.memory": "2560Gi",
        "requests.nvidia.com/gpu": "40",
        # every share and MIG profile the stack's GPU models could advertise: 0, not unlimited
        "requests.nvidia.com/gpu.shared": "0",
        "requests.nvidia.com/mig-1g.10gb": "0",
        "requests.nvidia.com/mig-1g.10gb.me": "0",
        "requests.nvidia.com/mig-1g.20gb": "0",
        "requests.nvidia.com/mig-2g.20gb": "0",
        "requests.nvidia.com/mig-3g.40gb": "0",
        "requests.nvidia.com/mig-4g.40gb": "0",
        "requests.nvidia.com/mig-7g.80gb": "0",
        "requests.storage": "200Ti",
        "services": "20",
        "services.loadbalancers": "0",
        # Guard rails from the stack (guardRails) for what the tenant does not set.
        "configmaps": "1000",
        "secrets": "1000",
        "services.nodeports": "0",
        "standard.storageclass.storage.k8s.io/persistentvolumeclaims": "20",
        "standard.storageclass.storage.k8s.io/requests.storage": "1Ti",
    }


def test_extra_namespaces_get_no_compute_or_gpu_budget_but_keep_guard_rails(prod):
    quotas = viewed(resource_quotas, tenant_of(prod, "llm-finetune"), prod)
    primary = _hard(quotas, "llm-finetune", TENANT_QUOTA)
    extra = _hard(quotas, "llm-finetune-data", TENANT_QUOTA)
    assert set(extra) == set(primary)
    for key, value in extra.items():
        budget = key.startswith(("requests.cpu", "limits.", "requests.memory", "requests.ephemeral-storage", "requests.nvidia.com/"))
        assert value == ("0" if budget or key == "pods" else primary[key]), key
    assert extra["requests.storage"] == "200Ti"
    # A zero compute budget admits no pods at all: not even one whose requests and limits are all 0.
    assert extra["pods"] == "0" and primary["pods"] == "400"


def test_tenant_wide_gpu_total_equals_its_quota_across_namespaces(prod):
    tenant = tenant_of(prod, "inference")
    quotas = [q for q in resource_quotas(tenant, prod.view(tenant)) if q["metadata"]["name"] == TENANT_QUOTA]
    assert len(quotas) == len(tenant.all_namespaces) == 2
    assert sum(int(q["spec"]["hard"]["requests.nvidia.com/gpu"]) for q in quotas) == 24


def test_quantities_keep_the_spelling_of_the_tenant_file(prod):
    hard = _hard(viewed(resource_quotas, tenant_of(prod, "llm-finetune"), prod), "llm-finetune", TENANT_QUOTA)
    assert hard["requests.memory"] == "2560Gi"
    assert hard["limits.memory"] == "4Ti"
    assert all(isinstance(value, str) for value in hard.values())


def test_mig_slices_are_quota_per_profile_resource(prod):
    hard = _hard(viewed(resource_quotas, tenant_of(prod, "eval"), prod), "eval", TENANT_QUOTA)
    assert hard["requests.nvidia.com/gpu"] == "20"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "48"
    assert hard["requests.nvidia.com/mig-3g.40gb"] == "16"


def test_gpu_keys_are_requests_only(environments):
    for env in environments.values():
        for loaded in env.tenants:
            for quota in resource_quotas(loaded.spec, env.view(loaded.spec)):
                for key in quota["spec"]["hard"]:
                    assert not key.startswith(("limits.nvidia.com/", "nvidia.com/")), key


def test_gpus_are_granted_never_implied(make_tenant, make_environment):
    env = make_environment(gpuClasses={"h100": H100, "l4": L4_SHARED})
    assert env.facts.cluster_gpu_resources == ("nvidia.com/gpu", "nvidia.com/gpu.shared")   # what is offered
    resources = env.facts.quota_gpu_resources
    # H100 MIG profiles are keys although no layout offers them: no key would mean no limit
    assert resources[:2] == ("nvidia.com/gpu", "nvidia.com/gpu.shared") and "nvidia.com/mig-1g.10gb" in resources
    cpu_only = make_tenant(quota={"cpu": {"requests": "4"}})
    assert gpu_hard(env.view(cpu_only)) == {f"requests.{r}": "0" for r in resources}
    shared = make_tenant(gpu={"classes": ["l4"]}, quota={"gpu": 3})
    assert gpu_hard(env.view(shared)) == {**{f"requests.{r}": "0" for r in resources}, "requests.nvidia.com/gpu.shared": "3"}
    l4_only = make_environment(gpuClasses={"l4": {**L4_SHARED, "timeSlicing": {"replicas": 4}}})
    assert l4_only.facts.quota_gpu_resources == ("nvidia.com/gpu", "nvidia.com/gpu.shared")  # L4: no MIG


def test_tenant_without_quota_still_gets_the_guard_rails(make_tenant, make_environment):
    quotas = resource_quotas(make_tenant(), make_environment().view(make_tenant()))
    # Guard rails always exist: object counts, storage and ephemeral storage from the stack's defaults.
    assert _without_kind_counts(_hard(quotas, "team-a", TENANT_QUOTA)) == {
        "configmaps": "1000", "limits.ephemeral-storage": "500Gi", "persistentvolumeclaims": "100", "pods": "1000",
        "requests.ephemeral-storage": "100Gi", "requests.storage": "1Ti",
        "secrets": "1000", "services": "100", "services.loadbalancers": "0", "services.nodeports": "0",
    }
    # only the classes that need a grant (online-inference, training) get a scoped quota: pods 0
    names = [q["metadata"]["name"] for q in quotas]
    assert names == [TENANT_QUOTA, "priority-online-inference", "priority-training", "cross-namespace-affinity"]
    assert all(q["spec"]["hard"] == {"pods": "0"} for q in quotas[1:])


def test_cross_namespace_affinity_is_refused_unless_the_tenant_opts_in(make_tenant, make_environment):
    (quota,) = [q for q in viewed(resource_quotas, make_tenant(namespaces=["team-a-2"]), make_environment())
                if q["metadata"]["name"] == "cross-namespace-affinity"][:1]
    assert quota["spec"] == {"hard": {"pods": "0"}, "scopes": ["CrossNamespacePodAffinity"]}
    assert len([q for q in viewed(resource_quotas, make_tenant(namespaces=["team-a-2"]), make_environment())
                if q["metadata"]["name"] == "cross-namespace-affinity"]) == 2  # one per namespace
    opted_in = make_tenant(quota={"crossNamespaceAffinity": True})
    assert "cross-namespace-affinity" not in {q["metadata"]["name"] for q in resource_quotas(opted_in, make_environment().view(opted_in))}


def test_storage_classes_nobody_grants_are_pinned_at_zero(make_tenant, make_environment):
    environment = make_environment(guardRails={
        "storage": {"requests": "2Ti", "storageClasses": {"standard": {"requests": "1Ti"}}},
        "storageClasses": ["standard", "fast", "archive"],
    })
    tenant = make_tenant(quota={"storage": {"storageClasses": {"fast": {"requests": "10Ti", "persistentVolumeClaims": 3}}}})
    hard = _hard(resource_quotas(tenant, environment.view(tenant)), "team-a", TENANT_QUOTA)
    storage = {k: v for k, v in _without_kind_counts(hard).items() if ("storage" in k or "claims" in k) and "ephemeral" not in k}
    assert storage == {
        "archive.storageclass.storage.k8s.io/persistentvolumeclaims": "0",
        "archive.storageclass.storage.k8s.io/requests.storage": "0",
        "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "3",
        "fast.storageclass.storage.k8s.io/requests.storage": "10Ti",
        "persistentvolumeclaims": "100",
        "requests.storage": "2Ti",
        "standard.storageclass.storage.k8s.io/requests.storage": "1Ti",
    }


def test_zero_compute_budget_admits_no_pods(make_tenant, make_environment):
    hard = _hard(viewed(resource_quotas, make_tenant(quota={"cpu": {"requests": "0"}, "memory": {"requests": "0"}}), make_environment()),
                 "team-a", TENANT_QUOTA)
    assert hard["pods"] == "0"
    hard = _hard(viewed(resource_quotas, make_tenant(quota={"cpu": {"requests": "1"}}), make_environment()), "team-a", TENANT_QUOTA)
    assert hard["pods"] == "1000"


def test_objects_counts_use_the_core_quota_keys(make_tenant, make_environment):
    tenant = make_tenant(
        quota={"objects": {"pods": 1, "services": 2, "servicesLoadBalancers": 3, "servicesNodePorts": 4,
                           "persistentVolumeClaims": 5, "configMaps": 6, "secrets": 7}}
    )
    hard = _hard(resource_quotas(tenant, make_environment().view(tenant)), "team-a", TENANT_QUOTA)
    assert _without_kind_counts(hard) == {"pods": "1", "services": "2", "services.loadbalancers": "3", "services.nodeports": "4",
                    "persistentvolumeclaims": "5", "configmaps": "6", "secrets": "7", "requests.storage": "1Ti",
                    "requests.ephemeral-storage": "100Gi", "limits.ephemeral-storage": "500Gi"}


def test_ephemeral_storage_is_a_guard_rail_where_the_tenant_sets_none(make_tenant, make_environment):
    environment = make_environment(guardRails={"ephemeralStorage": {"quota": {"requests": "50Gi", "limits": "200Gi"}}})
    tenant = make_tenant(namespaces=["team-a-data"], quota={"cpu": {"requests": "8"}})
    quotas = resource_quotas(tenant, environment.view(tenant))
    for namespace in ("team-a", "team-a-data"):  # per namespace, like storage: not a split budget
        hard = _hard(quotas, namespace, TENANT_QUOTA)
        assert (hard["requests.ephemeral-storage"], hard["limits.ephemeral-storage"]) == ("50Gi", "200Gi")


def test_ephemeral_storage_the_tenant_sets_is_budget_and_the_other_side_a_guard_rail(make_tenant, make_environment):
    tenant = make_tenant(namespaces=["team-a-data"], quota={"ephemeralStorage": {"requests": "300Gi"}})
    quotas = resource_quotas(tenant, make_environment().view(tenant))
    own, extra = _hard(quotas, "team-a", TENANT_QUOTA), _hard(quotas, "team-a-data", TENANT_QUOTA)
    assert (own["requests.ephemeral-storage"], own["limits.ephemeral-storage"]) == ("300Gi", "500Gi")
    # The tenant's own value is budget: an extra namespace without a slice gets none of it.
    assert (extra["requests.ephemeral-storage"], extra["limits.ephemeral-storage"]) == ("0", "500Gi")


def test_unlisted_priority_class_gets_the_stack_default_cap(prod):
    quotas = viewed(resource_quotas, tenant_of(prod, "eval"), prod)
    online = _by_place(quotas)[("eval", "priority-online-inference")]
    assert online["spec"]["hard"] == {"pods": "0"}
    assert online["spec"]["scopeSelector"] == {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["online-inference"]}]
    }


def test_priority_classes_without_any_cap_get_no_scoped_quota(prod):
    names = {q["metadata"]["name"] for q in viewed(resource_quotas, tenant_of(prod, "eval"), prod)}
    # eval lists only batch; online-inference and training need a grant it does not have
    assert names == {TENANT_QUOTA, "priority-batch", "priority-online-inference", "priority-training", "cross-namespace-affinity"}


def test_granted_priority_class_uses_the_tenant_cap(prod):
    quotas = viewed(resource_quotas, tenant_of(prod, "inference"), prod)
    # The cap (24 GPUs) is clamped to what each namespace holds: 22 kept, 2 carved out for the canary.
    assert _hard(quotas, "inference", "priority-online-inference") == {"pods": "200", "requests.nvidia.com/gpu": "22"}
    assert _hard(quotas, "inference-canary", "priority-online-inference") == {"pods": "200", "requests.nvidia.com/gpu": "2"}


def test_priority_gpu_cap_applies_per_resource_and_never_above_the_quota(make_tenant, make_environment):
    env = make_environment(gpuClasses={"h100": H100, "l4": L4_SHARED})
    tenant = make_tenant(
        gpu={"classes": ["h100", "l4"]},
        quota={"gpu": {"h100": 2, "l4": 8}, "priorityClasses": {"training": {"gpu": 4, "cpu": "500m", "memory": "8Gi"}}},
    )
    assert _hard(resource_quotas(tenant, env.view(tenant)), "team-a", "priority-training") == {
        "requests.cpu": "500m",
        "requests.memory": "8Gi",
        "requests.nvidia.com/gpu": "2",
        "requests.nvidia.com/gpu.shared": "4",
    }


def test_tenant_cap_overrides_the_default_cap(make_tenant, make_environment):
    tenant = make_tenant(quota={"priorityClasses": {"online-inference": {"pods": 5}}})
    assert _hard(resource_quotas(tenant, make_environment().view(tenant)), "team-a", "priority-online-inference") == {"pods": "5"}


@pytest.mark.parametrize("lifecycle", ["suspended", "decommissioned"])
def test_suspended_tenant_admits_no_new_pods_in_any_namespace(make_tenant, make_environment, lifecycle):
    extra = {"decommission": {"confirm": "team-a"}} if lifecycle == "decommissioned" else {}
    tenant = make_tenant(lifecycle=lifecycle, namespaces=["team-a-data"], **extra)
    quotas = _by_place(resource_quotas(tenant, make_environment().view(tenant)))
    for namespace in ("team-a", "team-a-data"):
        assert quotas[(namespace, SUSPENDED_QUOTA)]["spec"] == {"hard": {"pods": "0"}}


def test_active_tenant_has_no_suspended_quota(prod):
    for loaded in prod.tenants:
        assert all(q["metadata"]["name"] != SUSPENDED_QUOTA for q in resource_quotas(loaded.spec, prod.view(loaded.spec)))


def test_every_quota_is_labelled_for_its_tenant(prod):
    for loaded in prod.tenants:
        for quota in resource_quotas(loaded.spec, prod.view(loaded.spec)):
            assert quota["metadata"]["labels"][TENANT_LABEL] == loaded.name
            assert quota["metadata"]["namespace"] in loaded.spec.all_namespaces


def _creatable_kinds() -> set[str]:
    """Every stored namespaced kind a tenant role, a shipped bundle or a DRA grant lets a member create."""
    from components.manifests.claim_policy import CLAIM_RESOURCES, DRA_GROUP
    from components.manifests.rbac import ROLES, role_rules
    from components.spec.role_bundles import shipped_bundles

    rules = [r for role in ROLES for r in role_rules(role)]
    rules += [rule.model_dump(by_alias=True) for bundle in shipped_bundles().values() for rule in bundle.rules]
    rules.append({"apiGroups": [DRA_GROUP], "resources": list(CLAIM_RESOURCES), "verbs": ["create"]})
    kinds = set()
    for rule in rules:
        if "create" not in rule["verbs"]:
            continue
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                if "/" not in resource:  # subresources (pods/exec, pipelines/versions) store no object of their own
                    kinds.add(resource if group == "" else f"{resource}.{group}")
    return kinds


def test_every_kind_a_member_may_create_has_a_count_guard_rail(make_tenant, make_environment):
    from components.spec.stack import CUSTOM_RESOURCE_KINDS, DEFAULT_KIND_COUNTS

    hard = _hard(resource_quotas(make_tenant(), make_environment().view(make_tenant())), "team-a", TENANT_QUOTA)
    typed = {"pods", "services", "persistentvolumeclaims", "configmaps", "secrets"}
    kinds = _creatable_kinds()
    assert {"deployments.apps", "rayclusters.ray.io", "resourceclaims.resource.k8s.io", "serviceaccounts"} <= kinds
    assert "count/deployments.apps" in hard and "count/rayclusters.ray.io" not in hard
    uncounted = sorted(k for k in kinds if k not in typed and f"count/{k}" not in hard and k not in CUSTOM_RESOURCE_KINDS)
    assert uncounted == [], "add a default count to DEFAULT_KIND_COUNTS, or a CRD kind to CUSTOM_RESOURCE_KINDS (components/spec/stack.py)"
    # Custom resources are never counted by default (an unserved kind stops the namespace's quota),
    # and the list names only kinds a member may really create.
    assert not set(CUSTOM_RESOURCE_KINDS) & set(DEFAULT_KIND_COUNTS)
    assert set(CUSTOM_RESOURCE_KINDS) <= kinds


def test_tenant_kind_counts_override_the_stacks_one_by_one(make_tenant, make_environment):
    tenant = make_tenant(quota={"objects": {"kinds": {"deployments.apps": 7, "widgets.example.com": 3}}})
    hard = _hard(resource_quotas(tenant, make_environment().view(tenant)), "team-a", TENANT_QUOTA)
    assert (hard["count/deployments.apps"], hard["count/widgets.example.com"], hard["count/jobs.batch"]) == ("7", "3", "2000")


def test_a_typed_kind_under_kinds_is_refused_with_its_field():
    from pydantic import ValidationError

    from components.spec.tenant import ObjectCounts

    with pytest.raises(ValidationError, match="write objects.configMaps instead of kinds.configmaps"):
        ObjectCounts.model_validate({"kinds": {"configmaps": 5}})


def test_security_doc_states_the_worst_case_etcd_figure_of_the_default_guard_rails(make_tenant):
    from pathlib import Path

    from components.manifests.quota import worst_case_etcd_bytes, worst_case_objects
    from components.spec.stack import Platform

    platform, tenant = Platform(labelDomain="gpu.example.com"), make_tenant()
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text().split())
    figure = f"{worst_case_objects(tenant, platform):,} objects, {worst_case_etcd_bytes(tenant, platform) / 2**30:.1f} GiB per namespace"
    assert figure == "11,800 objects, 17.3 GiB per namespace"
    assert figure in text
