"""The per-tenant placement policy, evaluated with real CEL interpreters against pod manifests.

Each case runs under two independent implementations from PyPI: `common-expression-language`
(import `cel`, Rust cel-interpreter) and `cel-python` (import `celpy`). Admission is replayed
the way the API server does it: matchConditions, then variables in order, then every
validation; a failed validation reports its messageExpression.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from components.manifests import placement_policy as pp
from components.manifests.tenant_grant import tenant_grant
from tests.manifests.cel_admission import ENGINES
from tests.manifests.cel_admission import admit as replay

CLASS, POOL, TENANT, PRODUCT = "gpu.acme.dev/gpu-class", "gpu.acme.dev/pool", "gpu.acme.dev/tenant", "nvidia.com/gpu.product"
GPU = {"limits": {"nvidia.com/gpu": "1"}}


# ---- the admission replay on two CEL engines (tests/manifests/cel_admission.py) --------------


@pytest.fixture(params=ENGINES, ids=lambda e: e.name)
def engine(request):
    return request.param


@dataclasses.dataclass(frozen=True)
class Placement:
    """The placement policy as one tenant's binding applies it: with the tenant's TenantGrant as params."""

    policy: dict
    grant: dict

    def __getitem__(self, key):
        return self.policy[key]


def admit(engine, policy: Placement, pod: dict, operation: str = "CREATE", old: dict | None = None) -> list[str]:
    """Messages of the validations the pod fails (empty: admitted)."""
    return replay(engine, policy.policy, pod, resource="pods", operation=operation, old=old, params=policy.grant)


def pod(*, node_selector=None, tolerations=None, resources=None, affinity_terms=None, init_resources=None, **extra):
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.invalid/app:1", "resources": resources or {}}]}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if tolerations is not None:
        spec["tolerations"] = tolerations
    if affinity_terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": affinity_terms}}}
    if init_resources is not None:
        spec["initContainers"] = [{"name": "init", "image": "registry.invalid/init:1", "resources": init_resources}]
    spec.update(extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"}, "spec": spec}


def term(key, operator, values=None):
    expression = {"key": key, "operator": operator}
    if values is not None:
        expression["values"] = values
    return {"matchExpressions": [expression]}


def foreign(pool: str, owner: str, tenant: str, own_pool: bool = False) -> str:
    """The message of the rule that keeps every pod's node selection off other tenants' dedicated pools."""
    own = f"tenant {tenant} may only select or tolerate {TENANT}={tenant}" if own_pool else f"tenant {tenant} has no dedicated pools"
    return (
        f"the node selection (nodeSelector, required node affinity or matchFields) can reach node pool '{pool}', "
        f"dedicated to tenant {owner}; dedicated nodes belong to their tenant for every pod; {own}"
    )


def policy_for(environment, tenant: str) -> Placement:
    loaded = next(t for t in environment.tenants if t.name == tenant)
    return Placement(pp.placement_policy(environment.facts), tenant_grant(loaded.spec, environment.view(loaded.spec)))


# ---- allowed pods -------------------------------------------------------------------------


def test_allowed_pods_are_admitted(engine, prod):
    eval_policy = policy_for(prod, "eval")
    assert admit(engine, eval_policy, pod()) == []  # CPU pod, no placement at all
    assert admit(engine, eval_policy, pod(node_selector={CLASS: "a100-mig"}, resources={"limits": {"nvidia.com/mig-1g.10gb": "1"}})) == []
    assert admit(engine, eval_policy, pod(node_selector={POOL: "a100-shared"}, resources=GPU)) == []
    assert admit(engine, eval_policy, pod(affinity_terms=[term(CLASS, "In", ["a100", "a100-mig"])], resources=GPU)) == []
    assert admit(engine, eval_policy, pod(node_selector={PRODUCT: "NVIDIA-A100-SXM4-80GB"}, resources=GPU)) == []
    # A toleration of an unrelated taint is fine.
    assert admit(engine, eval_policy, pod(tolerations=[{"key": "example.com/spot", "operator": "Exists", "effect": "NoSchedule"}])) == []


def test_dedicated_pool_owner_is_admitted(engine, prod):
    inference = policy_for(prod, "inference")
    own = pod(
        node_selector={TENANT: "inference"},
        tolerations=[{"key": TENANT, "operator": "Equal", "value": "inference", "effect": "NoSchedule"}],
        resources=GPU,
    )
    assert admit(engine, inference, own) == []
    assert admit(engine, inference, pod(node_selector={POOL: "h100-serve", CLASS: "h100"}, resources=GPU)) == []
    assert admit(engine, inference, pod(affinity_terms=[term(TENANT, "In", ["inference"])], resources=GPU)) == []


# ---- forbidden pods -----------------------------------------------------------------------


def test_other_teams_dedicated_pool_by_node_selector_is_denied(engine, prod):
    messages = admit(engine, policy_for(prod, "eval"), pod(node_selector={POOL: "h100-train"}, resources=GPU))
    assert messages[0] == (
        "node pool 'h100-train' is not allowed for tenant eval; allowed classes: a100, a100-mig; "
        "pools: a100-mig, a100-shared; dedicated pools: none"
    )


def test_other_teams_tenant_label_is_denied(engine, prod):
    messages = admit(engine, policy_for(prod, "llm-finetune"), pod(node_selector={TENANT: "inference"}, resources=GPU))
    assert any("nodes dedicated to another tenant are selected" in m for m in messages)


def test_tolerating_another_teams_taint_is_denied(engine, prod):
    toleration = {"key": TENANT, "operator": "Equal", "value": "inference", "effect": "NoSchedule"}
    messages = admit(engine, policy_for(prod, "llm-finetune"), pod(tolerations=[toleration]))
    assert messages == [
        "the toleration of taint gpu.acme.dev/tenant=inference would let pods onto nodes dedicated to another tenant; "
        "tenant llm-finetune may only select or tolerate gpu.acme.dev/tenant=llm-finetune"
    ]


def test_tolerating_every_tenant_taint_is_denied(engine, prod):
    messages = admit(engine, policy_for(prod, "inference"), pod(tolerations=[{"key": TENANT, "operator": "Exists"}]))
    assert len(messages) == 1 and "(operator Exists: every tenant)" in messages[0]


def test_wildcard_toleration_is_denied(engine, prod):
    messages = admit(engine, policy_for(prod, "eval"), pod(tolerations=[{"operator": "Exists"}]))
    assert messages == [
        "a toleration with operator Exists and no key tolerates every taint, including other tenants' dedicated nodes; "
        "tolerate specific taint keys"
    ]


def test_gpu_class_not_allowed_is_denied(engine, prod):
    messages = admit(engine, policy_for(prod, "eval"), pod(node_selector={CLASS: "h100"}, resources=GPU))
    assert messages[0] == (
        "GPU class 'h100' is not allowed for tenant eval; allowed classes: a100, a100-mig; "
        "pools: a100-mig, a100-shared; dedicated pools: none"
    )
    # The class has other tenants' dedicated pools, and it does not pin the GPU pod to allowed nodes.
    assert messages[1] == foreign("h100-serve", "inference", "eval")
    assert len(messages) == 3 and messages[2].startswith("pods of tenant eval that request GPUs must select")


def test_required_node_affinity_to_forbidden_class_is_denied(engine, prod):
    terms = [term(CLASS, "In", ["a100"]), term(CLASS, "In", ["a100-mig", "h100"])]
    messages = admit(engine, policy_for(prod, "eval"), pod(affinity_terms=terms, resources=GPU))
    assert messages and messages[0].startswith("GPU class 'h100' is not allowed for tenant eval")


def test_forbidden_product_is_denied(engine, prod):
    messages = admit(engine, policy_for(prod, "eval"), pod(node_selector={PRODUCT: "NVIDIA-H100-80GB-HBM3"}))
    assert messages == [
        "GPU product 'NVIDIA-H100-80GB-HBM3' is not allowed for tenant eval; allowed classes: a100, a100-mig; "
        "pools: a100-mig, a100-shared; dedicated pools: none",
        foreign("h100-serve", "inference", "eval"),
    ]


def test_tenant_label_exists_is_denied_but_notin_is_allowed(engine, prod):
    policy = policy_for(prod, "llm-finetune")
    assert admit(engine, policy, pod(affinity_terms=[term(TENANT, "Exists")])) == [
        "nodes dedicated to another tenant are selected (gpu.acme.dev/tenant); "
        "tenant llm-finetune may only select or tolerate gpu.acme.dev/tenant=llm-finetune",
        foreign("h100-serve", "inference", "llm-finetune", own_pool=True),
    ]
    assert admit(engine, policy, pod(affinity_terms=[term(TENANT, "NotIn", ["inference"])])) == []


def test_gpu_pod_must_pin_itself(engine, prod):
    policy = policy_for(prod, "eval")
    assert admit(engine, policy, pod(resources=GPU)) == [
        "pods of tenant eval that request GPUs must select where they run, with nodeSelector or required node "
        "affinity (operator In) on gpu.acme.dev/pool (one of a100-mig, a100-shared) or gpu.acme.dev/gpu-class "
        "(one of a100, a100-mig); pods requesting only nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb need no "
        "selector (only the tenant's pools offer them)"
    ]
    # GPUs requested by an init container or as requests count too.
    assert len(admit(engine, policy, pod(init_resources={"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}))) == 1
    # A MIG profile only eval's pools offer pins the pod by itself; mixed with a whole GPU it does not.
    assert admit(engine, policy, pod(resources={"limits": {"nvidia.com/mig-3g.40gb": "1"}})) == []
    assert admit(engine, policy, pod(init_resources={"requests": {"nvidia.com/mig-1g.10gb": "1"}})) == []
    assert len(admit(engine, policy, pod(resources={"limits": {"nvidia.com/mig-3g.40gb": "1", "nvidia.com/gpu": "1"}}))) == 1
    # nvidia.com/gpu is also served by the H100 pools eval may not use: no implicit pinning for it
    view = prod.view(prod.tenants[0].spec)
    assert "nvidia.com/gpu" not in pp.pinning_resources(pp.placement(prod.tenants[0].spec, view), view)
    # Affinity terms are ORed: one unpinned term lets the pod go anywhere (other tenants' pools included).
    loose = [term(POOL, "In", ["a100-shared"]), term("kubernetes.io/arch", "In", ["amd64"])]
    assert admit(engine, policy, pod(affinity_terms=loose, resources=GPU))[1:] == [
        "pods of tenant eval that request GPUs must select where they run, with nodeSelector or required node "
        "affinity (operator In) on gpu.acme.dev/pool (one of a100-mig, a100-shared) or gpu.acme.dev/gpu-class "
        "(one of a100, a100-mig); pods requesting only nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb need no "
        "selector (only the tenant's pools offer them)"
    ]
    tight = [term(POOL, "In", ["a100-shared"]), term(CLASS, "In", ["a100-mig"])]
    assert admit(engine, policy, pod(affinity_terms=tight, resources=GPU)) == []


def test_class_shared_with_other_teams_dedicated_pools_does_not_pin(engine, prod):
    # h100 also has inference's dedicated pool: selecting the class alone could land there.
    messages = admit(engine, policy_for(prod, "llm-finetune"), pod(node_selector={CLASS: "h100"}, resources=GPU))
    assert messages == [
        foreign("h100-serve", "inference", "llm-finetune", own_pool=True),
        "pods of tenant llm-finetune that request GPUs must select where they run, with nodeSelector or required node "
        "affinity (operator In) on gpu.acme.dev/pool (one of h100-train) or gpu.acme.dev/tenant=llm-finetune"
    ]


def test_node_name_is_denied_on_create_only(engine, prod):
    policy = policy_for(prod, "eval")
    bound = pod(nodeName="gpu-h100-01")
    assert admit(engine, policy, bound) == [
        "pods of tenant eval may not set spec.nodeName: it bypasses the scheduler and every placement rule; "
        "select nodes with nodeSelector gpu.acme.dev/pool or gpu.acme.dev/gpu-class instead"
    ]
    # Scheduled pods carry nodeName; a spec change on them must not trip this rule.
    changed = copy.deepcopy(bound)
    changed["spec"]["containers"][0]["image"] = "registry.invalid/app:2"
    assert admit(engine, policy, changed, operation="UPDATE", old=bound) == []


def test_updates_that_keep_the_spec_pass_but_new_tolerations_are_checked(engine, prod):
    policy = policy_for(prod, "eval")
    legacy = pod(resources=GPU)  # created before the policy existed: not pinned
    relabelled = copy.deepcopy(legacy)
    relabelled["metadata"]["labels"] = {"done": "true"}
    assert admit(engine, policy, relabelled, operation="UPDATE", old=legacy) == []
    tolerating = pod(node_selector={POOL: "a100-shared"}, resources=GPU)
    widened = copy.deepcopy(tolerating)
    widened["spec"]["tolerations"] = [{"key": TENANT, "value": "inference", "effect": "NoSchedule"}]
    messages = admit(engine, policy, widened, operation="UPDATE", old=tolerating)
    assert len(messages) == 1 and "gpu.acme.dev/tenant=inference" in messages[0]


def test_tenant_without_gpu_access_may_not_request_gpus(engine, prod):
    eval_ = next(t for t in prod.tenants if t.name == "eval")
    tenant = eval_.spec.model_copy(update={"gpu": eval_.spec.gpu.model_copy(update={"classes": []})})
    environment = dataclasses.replace(prod, tenants=[dataclasses.replace(t, spec=tenant) if t is eval_ else t for t in prod.tenants])
    policy = Placement(pp.placement_policy(environment.facts), tenant_grant(tenant, environment.view(tenant)))
    messages = admit(engine, policy, pod(resources=GPU))
    assert messages == [
        "tenant eval may not use GPUs in this environment (no usable pool: gpu.classes and gpu.dedicatedPools "
        "give none); remove the GPU resources and DRA resourceClaims from the pod"
    ]
    assert admit(engine, policy, pod()) == []


def test_dev_time_sliced_class_pins_for_every_tenant(engine, dev):
    for tenant in ("eval", "inference", "llm-finetune"):
        policy = policy_for(dev, tenant)
        assert admit(engine, policy, pod(node_selector={CLASS: "l4"}, resources=GPU)) == [], tenant
    assert len(admit(engine, policy_for(dev, "inference"), pod(node_selector={CLASS: "a100-mig"}))) == 1


# ---- the shared GPU pools' taint nvidia.com/gpu=present:NoSchedule ---------------------------

SHARED_TAINT = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def cpu_only_may_not_tolerate(tenant: str, classes: str) -> str:
    return (
        "only pods that request GPUs may tolerate taint nvidia.com/gpu (shared GPU pools): a pod without GPUs there "
        "would take the cpu and memory that GPU pods need and strand the pool's GPUs; remove the toleration of "
        f"nvidia.com/gpu, or request a GPU of a class tenant {tenant} may use ({classes})"
    )


@pytest.mark.parametrize("toleration", [
    SHARED_TAINT,
    {"key": "nvidia.com/gpu", "operator": "Exists"},                       # key-only Exists: every value and effect
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "value": "present"},                         # operator defaults to Equal
], ids=["equal", "exists-any-effect", "exists", "default-operator"])
def test_a_cpu_only_pod_may_not_tolerate_the_shared_gpu_taint(engine, prod, toleration):
    messages = admit(engine, policy_for(prod, "eval"), pod(tolerations=[toleration]))
    assert messages == [cpu_only_may_not_tolerate("eval", "a100, a100-mig")]
    # Selecting the shared pool's nodes by label changes nothing: the pod still requests no GPU.
    assert admit(engine, policy_for(prod, "eval"), pod(node_selector={POOL: "a100-shared"}, tolerations=[toleration])) == messages


def test_the_wildcard_toleration_stays_refused_for_gpu_pods_too(engine, prod):
    messages = admit(engine, policy_for(prod, "eval"), pod(node_selector={POOL: "a100-shared"}, resources=GPU, tolerations=[{"operator": "Exists"}]))
    assert len(messages) == 1 and messages[0].startswith("a toleration with operator Exists and no key tolerates every taint")


def test_a_gpu_pod_of_a_granted_tenant_tolerates_the_shared_taint(engine, prod, dev):
    eval_policy = policy_for(prod, "eval")
    for toleration in (SHARED_TAINT, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}):
        assert admit(engine, eval_policy, pod(node_selector={POOL: "a100-shared"}, resources=GPU, tolerations=[toleration])) == []
    # MIG slices are GPU requests too, and pinned by their resource alone.
    mig = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    assert admit(engine, eval_policy, pod(resources=mig, tolerations=[SHARED_TAINT])) == []
    # A GPU request in an init container only still makes a GPU pod.
    assert admit(engine, eval_policy, pod(node_selector={POOL: "a100-shared"}, init_resources=GPU, tolerations=[SHARED_TAINT])) == []
    assert admit(engine, policy_for(dev, "inference"), pod(resources=GPU, tolerations=[SHARED_TAINT])) == []


def test_a_gpu_pod_of_a_tenant_not_granted_the_class_is_refused_with_the_toleration(engine, prod):
    messages = admit(engine, policy_for(prod, "llm-finetune"), pod(node_selector={POOL: "a100-shared"}, resources=GPU, tolerations=[SHARED_TAINT]))
    assert [m.split(";")[0] for m in messages] == [
        "node pool 'a100-shared' is not allowed for tenant llm-finetune",
        "pods of tenant llm-finetune that request GPUs must select where they run, with nodeSelector or required node "
        "affinity (operator In) on gpu.acme.dev/pool (one of h100-train) or gpu.acme.dev/tenant=llm-finetune",
    ]


# ---- the objects ------------------------------------------------------------------------------


def test_placement_lists(prod):
    by_name = {t.name: pp.placement(t.spec, prod.view(t.spec)) for t in prod.tenants}
    assert by_name["eval"].pools == ["a100-mig", "a100-shared"] and by_name["eval"].dedicated_pools == []
    assert by_name["inference"].classes == ["h100"] and by_name["inference"].pools == ["h100-serve"]
    assert by_name["inference"].pinning_classes == []  # h100 also has llm-finetune's pool
    assert by_name["llm-finetune"].dedicated_pools == ["h100-train"]


def test_one_policy_for_the_environment_and_one_binding_per_tenant(prod):
    policy = pp.placement_policy(prod.facts)
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "gpu-tenancy.dev/tenant", "operator": "Exists"}]}
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert policy["spec"]["paramKind"] == {"apiVersion": "gpu-tenancy.dev/v1alpha1", "kind": "TenantGrant"}
    assert "gpu-tenancy.dev/tenant" not in policy["metadata"]["labels"]
    # Nothing of a tenant or a pool is in the policy: onboarding one changes no other object.
    text = str(policy)
    assert [name for name in [*(t.name for t in prod.tenants), *prod.platform.node_pools] if name in text] == []
    tenant = next(t for t in prod.tenants if t.name == "eval").spec
    (binding,) = pp.placement_objects(tenant, prod.view(tenant))
    assert binding["spec"] == {
        "matchResources": {"namespaceSelector": {"matchLabels": {"gpu-tenancy.dev/tenant": "eval"}}},
        "paramRef": {"name": "eval", "parameterNotFoundAction": "Deny"},
        "policyName": "gpu-tenancy-placement", "validationActions": ["Deny"]}
    assert binding["metadata"]["labels"]["gpu-tenancy.dev/tenant"] == "eval"


def test_decommissioned_tenant_keeps_its_binding_and_grant_until_its_namespaces_are_gone(prod):
    """Its pods may run until the namespaces are deleted; the program deletes the binding after them."""
    from components.manifests.build import tenant_objects

    tenant = next(t for t in prod.tenants if t.name == "eval").spec.model_copy(update={"lifecycle": "decommissioned"})
    active = next(t for t in prod.tenants if t.name == "eval").spec
    assert [o["kind"] for o in pp.placement_objects(tenant, prod.view(tenant))] == ["ValidatingAdmissionPolicyBinding"]
    assert pp.placement_objects(tenant, prod.view(tenant)) == pp.placement_objects(active, prod.view(active))
    kinds = [o["kind"] for o in tenant_objects(tenant, prod.view(tenant))]
    assert kinds.count("TenantGrant") == 1


def test_policy_objects_match_the_kubernetes_schema(prod, dev, kube_schemas):
    objects = [o for env in (prod, dev) for t in env.tenants for o in pp.placement_objects(t.spec, env.view(t.spec))]
    objects += [pp.placement_policy(env.facts) for env in (prod, dev)]
    assert len(objects) == 8
    for version in kube_schemas.versions:  # 1.30 (ValidatingAdmissionPolicy v1 is GA) up to the newest
        for obj in objects:
            assert kube_schemas.errors(obj, version) == [], (version, obj["metadata"]["name"])


# ---- dedicated nodes belong to their tenant for every pod (not only GPU pods) ---------------


HOST = "kubernetes.io/hostname"


@pytest.mark.parametrize(
    "what, kwargs",
    [
        ("hostname of another tenant's dedicated node", dict(node_selector={HOST: "gpu-h100-06"})),
        ("hostname by required affinity", dict(affinity_terms=[term(HOST, "In", ["gpu-a100-01", "gpu-h100-07"])])),
        ("node name by matchFields", dict(affinity_terms=[{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-h100-08"]}]}])),
        ("NotIn on pools leaving a dedicated pool", dict(affinity_terms=[term(POOL, "NotIn", ["a100-shared", "a100-mig", "h100-train"])])),
        ("NotIn on the tenant label leaving another tenant", dict(affinity_terms=[term(TENANT, "NotIn", ["llm-finetune"])])),
        ("Exists on the pool label", dict(affinity_terms=[term(POOL, "Exists")])),
        ("NotIn on hostnames", dict(affinity_terms=[term(HOST, "NotIn", ["gpu-h100-06"])])),
    ],
)
def test_cpu_pod_cannot_select_another_tenants_dedicated_nodes(engine, prod, what, kwargs):
    messages = admit(engine, policy_for(prod, "eval"), pod(**kwargs))
    assert foreign("h100-serve", "inference", "eval") in messages or foreign("h100-train", "llm-finetune", "eval") in messages, (what, messages)


def test_selections_that_stay_off_foreign_dedicated_nodes_are_admitted(engine, prod):
    eval_policy = policy_for(prod, "eval")
    assert admit(engine, eval_policy, pod(node_selector={HOST: "gpu-a100-01"})) == []  # a shared node
    assert admit(engine, eval_policy, pod(affinity_terms=[term(TENANT, "DoesNotExist")])) == []
    assert admit(engine, eval_policy, pod(affinity_terms=[term(CLASS, "DoesNotExist")])) == []  # CPU nodes only
    assert admit(engine, eval_policy, pod(node_selector={"topology.kubernetes.io/zone": "a"})) == []  # other labels: the taint
    # The owner may select its own dedicated nodes by hostname.
    inference = policy_for(prod, "inference")
    own = [{"key": TENANT, "operator": "Equal", "value": "inference", "effect": "NoSchedule"}]
    assert admit(engine, inference, pod(node_selector={HOST: "gpu-h100-06"}, tolerations=own)) == []


def test_gated_pod_update_that_adds_a_foreign_selector_is_denied(engine, prod):
    policy = policy_for(prod, "eval")
    gated = pod(schedulingGates=[{"name": "example.com/wait"}])
    assert admit(engine, policy, gated) == []
    updated = copy.deepcopy(gated)
    updated["spec"]["nodeSelector"] = {HOST: "gpu-h100-01"}
    assert admit(engine, policy, updated, operation="UPDATE", old=gated) == [foreign("h100-train", "llm-finetune", "eval")]


def test_autoscaled_foreign_pool_makes_every_hostname_selection_suspect(engine, prod):
    environment = copy.deepcopy(prod)
    environment.platform.node_pools["h100-serve"] = environment.platform.node_pools["h100-serve"].model_copy(
        update={"nodes": [], "max_nodes": 4, "node_selector": {"group": "serve"}})
    messages = admit(engine, policy_for(environment, "eval"), pod(node_selector={HOST: "any-node"}))
    assert messages == [foreign("h100-serve", "inference", "eval")]


# ---- GPU shares by annotation (KAI fractions) -----------------------------------------------


def _shared_by_annotation(annotation: str = "gpu-fraction", **kwargs) -> dict:
    shared = pod(**kwargs)
    shared["metadata"]["annotations"] = {annotation: "0.5"}
    return shared


@pytest.mark.parametrize("annotation", ["gpu-fraction", "gpu-memory", "gpu-fraction-num-devices"])
def test_on_a_kai_stack_a_gpu_share_by_annotation_is_placed_like_a_gpu_request(engine, environments, annotation):
    policy = policy_for(environments["staging"], "eval")
    refused = admit(engine, policy, _shared_by_annotation(annotation))
    assert len(refused) == 1 and refused[0].startswith("pods of tenant eval that request GPUs must select where they run")
    assert admit(engine, policy, _shared_by_annotation(annotation, node_selector={POOL: "a100-shared"})) == []
    assert "h100-train" in " ".join(admit(engine, policy, _shared_by_annotation(annotation, node_selector={POOL: "h100-train"})))
    # A share is never pinned by a request, even next to a resource only the tenant's pools offer.
    offered_only_here = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    assert len(admit(engine, policy, _shared_by_annotation(annotation, resources=offered_only_here))) == 1


@pytest.mark.parametrize("annotations", [
    {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "4"}, {"gpu-memory": "20000", "gpu-fraction-num-devices": "2"},
    {"gpu-fraction": "0.5"}, {"gpu-memory": "2000"},
])
def test_every_kai_sharing_form_selecting_only_unmanaged_labels_is_refused(engine, environments, annotations):
    """A zone or instance type reaches every tenant's pools: a share over several devices is pinned like one GPU."""
    policy = policy_for(environments["staging"], "eval")
    unmanaged = pod(node_selector={"topology.kubernetes.io/zone": "zone-a", "node.kubernetes.io/instance-type": "p4d.24xlarge"})
    unmanaged["metadata"]["annotations"] = annotations
    (refused,) = admit(engine, policy, unmanaged)
    assert refused.startswith("pods of tenant eval that request GPUs must select where they run")
    on_own_pool = pod(node_selector={"topology.kubernetes.io/zone": "zone-a", POOL: "a100-shared"})
    on_own_pool["metadata"]["annotations"] = annotations
    assert admit(engine, policy, on_own_pool) == []


def test_without_kai_the_annotations_mean_nothing_and_change_nothing(engine, prod):
    assert prod.platform.scheduler != "kai"
    assert admit(engine, policy_for(prod, "eval"), _shared_by_annotation()) == []
