"""Pods against the prod stack's admission chain on a real kube-apiserver.

ResourceQuota (tenant budgets, PriorityClass caps, suspension), LimitRange
defaults, the per-tenant placement ValidatingAdmissionPolicy and Pod Security,
each with the objects `environment_objects()` renders for the example prod
stack (applied once per session by the `prod_stack` fixture). There are no
nodes: admitted pods stay Pending, which is all admission promises.

Numbers (quotas, defaults) are read from the rendered objects; tenant, pool and
class names are the example files' (llm-finetune: dedicated pool h100-train;
inference: dedicated h100-serve, restricted Pod Security, online-inference
grant; eval: shared a100 and a100-mig classes).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity
from tests.e2e.queued import queued

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
MIG_1G = "nvidia.com/mig-1g.10gb"


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def pod(name: str | None = None, *, limits: dict | None = None, requests: dict | None = None,
        node_selector: dict | None = None, tolerations: list | None = None, affinity: dict | None = None,
        priority_class: str | None = None, privileged: bool = False, restricted: bool = True,
        node_name: str | None = None) -> dict:
    """A pod that satisfies Pod Security `restricted` unless told otherwise (so it fits every tenant)."""
    container: dict = {"name": "main", "image": "registry.invalid/cuda:12"}  # never pulled: no nodes
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    if resources:
        container["resources"] = resources
    spec: dict = {"automountServiceAccountToken": False, "containers": [container]}
    if restricted:
        spec["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000,
                                   "seccompProfile": {"type": "RuntimeDefault"}}
        container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if privileged:
        container["securityContext"] = {"privileged": True}
    for key, value in (("nodeSelector", node_selector), ("tolerations", tolerations), ("affinity", affinity),
                       ("priorityClassName", priority_class), ("nodeName", node_name)):
        if value:
            spec[key] = value
    return queued({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name or f"e2e-{uuid.uuid4().hex[:8]}"}, "spec": spec})


def message_of(exc: ApiException) -> str:
    try:
        return json.loads(exc.body)["message"]
    except (TypeError, ValueError, KeyError):
        return str(exc)


def rejected(core: client.CoreV1Api, namespace: str, body: dict, dry_run: bool = True) -> str:
    """Create `body` (dry-run by default: admission runs in full) and return the 403 message."""
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(namespace, body, dry_run="All" if dry_run else None)
    assert err.value.status == 403, message_of(err.value)
    return message_of(err.value)


@pytest.fixture(scope="module")
def core(apiserver) -> client.CoreV1Api:
    return client.CoreV1Api(apiserver.api_client)


@pytest.fixture
def created(core, apiserver):
    """Create pods for real; after the test every one is deleted and its quota usage released."""
    made: dict[str, list[str]] = {}
    used_before: dict[str, dict] = {}

    def create(namespace: str, body: dict) -> client.V1Pod:
        used_before.setdefault(namespace, apiserver.quota_used(namespace))
        result = core.create_namespaced_pod(namespace, body)
        made.setdefault(namespace, []).append(result.metadata.name)
        return result

    yield create
    for namespace, names in made.items():
        apiserver.delete_pods(namespace, names, quota_used_before=used_before[namespace])


def hard(stack, namespace: str, quota: str) -> dict[str, str]:
    return stack.find("ResourceQuota", quota, namespace)["spec"]["hard"]


def labels(stack) -> tuple[str, str, str]:
    """(pool, gpu-class, tenant) node label keys of the stack."""
    domain = stack.environment.platform.label_domain
    return f"{domain}/pool", f"{domain}/gpu-class", f"{domain}/tenant"


def on_own_pool(stack, tenant: str) -> dict:
    """nodeSelector + toleration placing a pod on the tenant's (first) dedicated pool."""
    pool_key, _, tenant_key = labels(stack)
    pool = stack.tenant(tenant).gpu.dedicated_pools[0]
    return {"node_selector": {pool_key: pool},
            "tolerations": [{"key": tenant_key, "operator": "Equal", "value": tenant, "effect": "NoSchedule"}]}


# --------------------------------------------------------------------------
# ResourceQuota and LimitRange
# --------------------------------------------------------------------------


def test_gpu_pod_over_tenant_quota_is_rejected(core, prod_stack):
    limit = int(hard(prod_stack, "llm-finetune", "tenant-quota")[f"requests.{GPU}"])
    message = rejected(core, "llm-finetune", pod(limits={GPU: str(limit + 1)}, **on_own_pool(prod_stack, "llm-finetune")))
    assert "exceeded quota: tenant-quota" in message
    assert f"requested: requests.{GPU}={limit + 1}" in message and f"limited: requests.{GPU}={limit}" in message


def test_gpu_pod_within_quota_is_admitted_and_stays_pending(apiserver, core, prod_stack, created):
    made = created("llm-finetune", pod(limits={GPU: "1"}, **on_own_pool(prod_stack, "llm-finetune")))
    live = core.read_namespaced_pod(made.metadata.name, "llm-finetune")
    assert live.status.phase == "Pending" and not live.spec.node_name  # no scheduler, no nodes
    assert live.spec.containers[0].resources.requests[GPU] == "1"      # requests defaulted from limits
    apiserver.wait_for(
        lambda: int(core.read_namespaced_resource_quota("tenant-quota", "llm-finetune").status.used[f"requests.{GPU}"]) >= 1,
        what="the GPU to be counted in tenant-quota")


def test_cpu_pod_over_tenant_quota_is_rejected(core, prod_stack):
    # eval's LimitRange sets no cpu max, so the quota alone decides.
    assert "cpu" not in prod_stack.find("LimitRange", "tenant-limits", "eval")["spec"]["limits"][0].get("max", {})
    cpu = int(parse_quantity(hard(prod_stack, "eval", "tenant-quota")["requests.cpu"]))
    message = rejected(core, "eval", pod(requests={"cpu": str(cpu + 1)}, limits={"cpu": str(cpu + 1)}))
    assert "exceeded quota: tenant-quota" in message
    assert f"requested: requests.cpu={cpu + 1}" in message and f"limited: requests.cpu={cpu}" in message


@pytest.mark.parametrize("tenant", ["llm-finetune", "inference", "eval"])
def test_pod_without_requests_gets_limitrange_defaults(core, prod_stack, created, tenant):
    item = prod_stack.find("LimitRange", "tenant-limits", tenant)["spec"]["limits"][0]
    made = created(tenant, pod())
    resources = made.spec.containers[0].resources

    def quantities(values: dict | None) -> dict:
        return {k: parse_quantity(v) for k, v in (values or {}).items()}

    assert quantities(resources.requests) == quantities(item["defaultRequest"])
    assert quantities(resources.limits) == quantities(item["default"])


def test_count_guard_rails_of_other_kinds_are_counted_by_the_quota_controller(apiserver, core, prod_stack):
    # Every key must be one the controller can compute: a count for a kind the server does not
    # serve would leave the whole quota's usage unknown (and every pod refused).
    keys = {k for k in hard(prod_stack, "eval", "tenant-quota") if k.startswith("count/")}
    assert {"count/deployments.apps", "count/jobs.batch", "count/serviceaccounts", "count/rolebindings.rbac.authorization.k8s.io"} <= keys

    def counted() -> bool:
        used = core.read_namespaced_resource_quota("tenant-quota", "eval").status.used or {}
        return keys <= set(used) and int(used["count/serviceaccounts"]) >= 1  # the namespace's default account

    apiserver.wait_for(counted, what="every count/ key of eval's tenant-quota to have a usage")


def test_extra_namespaces_get_only_their_carved_budget(core, prod_stack, placement_active):
    """components/manifests/quota.py: `namespaceQuotas` carves compute/GPU budget out for an extra
    namespace (inference-canary), enforced there; an extra namespace without an entry
    (llm-finetune-data) gets those keys at "0" and holds data, not pods (the LimitRange gives every
    container requests that a zero quota refuses)."""
    data_ns = "llm-finetune-data"
    assert data_ns in prod_stack.tenant("llm-finetune").namespaces
    assert hard(prod_stack, data_ns, "tenant-quota")["requests.cpu"] == "0"
    message = rejected(core, data_ns, pod())
    assert "exceeded quota: tenant-quota" in message and "requests.cpu=0" in message, message
    core.create_namespaced_secret(data_ns, {"metadata": {"name": "e2e-data"}, "stringData": {"k": "v"}}, dry_run="All")

    canary = "inference-canary"
    assert canary in prod_stack.tenant("inference").namespaces
    gpus = int(hard(prod_stack, canary, "tenant-quota")[f"requests.{GPU}"])
    assert gpus > 0
    _, _, tenant_key = labels(prod_stack)
    on_inference = {"node_selector": {tenant_key: "inference"},
                    "tolerations": [{"key": tenant_key, "operator": "Equal", "value": "inference", "effect": "NoSchedule"}]}
    core.create_namespaced_pod(canary, pod(limits={GPU: str(gpus)}, **on_inference), dry_run="All")
    message = rejected(core, canary, pod(limits={GPU: str(gpus + 1)}, **on_inference))
    assert "exceeded quota: tenant-quota" in message and f"limited: requests.{GPU}={gpus}" in message, message


def test_priority_class_without_grant_is_rejected(core, prod_stack, created):
    """online-inference is reserved (`pods: 0` unless granted): llm-finetune and eval may not use it.

    The guard refuses it (a `pods: 0` quota alone admits such pods under churn: test_quota_race.py);
    the quota is still there and counts."""
    for tenant in ("llm-finetune", "eval"):
        assert hard(prod_stack, tenant, "priority-online-inference") == {"pods": "0"}
        message = rejected(core, tenant, pod(priority_class="online-inference"))
        assert "ValidatingAdmissionPolicy 'gpu-tenancy-guard'" in message
        assert f"PriorityClass 'online-inference' is not granted to tenant {tenant}: its pods may use " in message
    # The tenant with the grant is admitted at that priority.
    assert int(hard(prod_stack, "inference", "priority-online-inference")["pods"]) > 0
    made = created("inference", pod(priority_class="online-inference"))
    assert made.spec.priority == prod_stack.find("PriorityClass", "online-inference")["value"]


def test_priority_class_gpu_cap_holds(core, prod_stack, created):
    """llm-finetune may use 40 GPUs, but only `interactive.gpu` of them at priority interactive."""
    cap = int(hard(prod_stack, "llm-finetune", "priority-interactive")[f"requests.{GPU}"])
    total = int(hard(prod_stack, "llm-finetune", "tenant-quota")[f"requests.{GPU}"])
    assert cap < total
    placement = on_own_pool(prod_stack, "llm-finetune")
    message = rejected(core, "llm-finetune", pod(limits={GPU: str(cap + 1)}, priority_class="interactive", **placement))
    assert "exceeded quota: priority-interactive" in message
    assert f"limited: requests.{GPU}={cap}" in message
    # The same request at priority training is within that class's cap and the tenant quota.
    core.create_namespaced_pod("llm-finetune", pod(limits={GPU: str(cap + 1)}, priority_class="training", **placement),
                               dry_run="All")


def test_suspended_tenant_cannot_create_pods(apiserver, core, prod_stack, tmp_path):
    """eval, renamed eval-suspended and set `lifecycle: suspended` in a copy of the project."""
    root = tmp_path / "project"
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    source = (root / "tenants" / "eval.yaml").read_text()
    (root / "tenants" / "eval.yaml").unlink()
    assert "\nname: eval\n" in source and "lifecycle:" not in source
    (root / "tenants" / "eval-suspended.yaml").write_text(
        source.replace("\nname: eval\n", "\nname: eval-suspended\n") + "lifecycle: suspended\n")
    _, objects = prod_stack.render("prod", root=root)
    mine = objects["eval-suspended"]
    results = apiserver.apply_rendered(mine)
    assert not [r for _, r in results if isinstance(r, ApiException)], results
    try:
        apiserver.wait_namespaces_ready(mine)
        quotas = {o["metadata"]["name"]: o["spec"]["hard"] for o in mine if o["kind"] == "ResourceQuota"}
        assert quotas["suspended"] == {"pods": "0"}
        message = rejected(core, "eval-suspended", pod(), dry_run=False)
        assert "exceeded quota: suspended" in message
        assert "requested: pods=1, used: pods=0, limited: pods=0" in message
        # Not a side effect of the rest of the tenant's objects: eval itself (active) admits that pod.
        core.create_namespaced_pod("eval", pod(), dry_run="All")
    finally:
        apiserver.delete_namespace("eval-suspended")
        for obj in mine:
            if "namespace" not in obj["metadata"] and obj["kind"] != "Namespace":
                res = apiserver.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
                apiserver.dynamic.delete(res, name=obj["metadata"]["name"])


# --------------------------------------------------------------------------
# Placement: the tenants' ValidatingAdmissionPolicies
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def placement_active(apiserver, core, prod_stack):
    """Policies take a moment to reach the admission plugin: wait (bounded) until each denies."""
    _, class_key, _ = labels(prod_stack)
    for tenant in ("llm-finetune", "inference", "eval"):
        bad = pod(limits={GPU: "1"}, node_selector={class_key: "no-such-class"}, restricted=True)

        def denied(t: str = tenant) -> bool:
            try:
                core.create_namespaced_pod(t, bad, dry_run="All")
            except ApiException as exc:
                return exc.status == 403 and f"binding 'gpu-tenancy-placement-{t}'" in message_of(exc)
            return False

        apiserver.wait_for(denied, timeout=30, what=f"placement policy of {tenant} to take effect")


def _placement_cases(stack_labels: tuple[str, str, str]):
    pool, gpu_class, tenant_key = stack_labels
    own_train = {"key": tenant_key, "operator": "Equal", "value": "llm-finetune", "effect": "NoSchedule"}
    return [
        ("llm-finetune", "other tenant's dedicated pool",
         dict(limits={GPU: "1"}, node_selector={pool: "h100-serve"}, tolerations=[own_train]),
         "node pool 'h100-serve' is not allowed for tenant llm-finetune"),
        ("llm-finetune", "disallowed GPU class",
         dict(limits={GPU: "1"}, node_selector={gpu_class: "a100"}),
         "GPU class 'a100' is not allowed for tenant llm-finetune"),
        ("eval", "other tenant's pool by required affinity",
         dict(limits={GPU: "1"}, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
             "nodeSelectorTerms": [{"matchExpressions": [{"key": pool, "operator": "In", "values": ["h100-train"]}]}]}}}),
         "node pool 'h100-train' is not allowed for tenant eval"),
        ("eval", "disallowed GPU class",
         dict(limits={GPU: "1"}, node_selector={gpu_class: "h100"}),
         "GPU class 'h100' is not allowed for tenant eval"),
        ("llm-finetune", "wildcard toleration",
         dict(node_selector={pool: "h100-train"}, tolerations=[{"operator": "Exists"}]),
         "a toleration with operator Exists and no key tolerates every taint"),
        ("inference", "wildcard toleration (no GPU)",
         dict(tolerations=[{"operator": "Exists"}]),
         "a toleration with operator Exists and no key tolerates every taint"),
        ("llm-finetune", "toleration of another tenant's taint",
         dict(limits={GPU: "1"}, node_selector={pool: "h100-train"},
              tolerations=[own_train, {"key": tenant_key, "operator": "Equal", "value": "inference", "effect": "NoSchedule"}]),
         f"the toleration of taint {tenant_key}=inference would let pods onto nodes dedicated to another tenant"),
        ("eval", "every tenant's taint (Exists on the tenant key)",
         dict(limits={MIG_1G: "1"}, node_selector={gpu_class: "a100-mig"},
              tolerations=[{"key": tenant_key, "operator": "Exists"}]),
         f"the toleration of taint {tenant_key} (operator Exists: every tenant)"),
        ("eval", "disallowed GPU product",
         dict(limits={GPU: "1"}, node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
         "GPU product 'NVIDIA-H100-80GB-HBM3' is not allowed for tenant eval"),
        ("eval", "another tenant's nodes by tenant label",
         dict(node_selector={tenant_key: "inference"}),
         f"nodes dedicated to another tenant are selected ({tenant_key})"),
        ("eval", "GPU pod that selects no node",
         dict(limits={GPU: "1"}),
         "pods of tenant eval that request GPUs must select where they run"),
        ("inference", "spec.nodeName",
         dict(node_name="gpu-h100-06"),
         "pods of tenant inference may not set spec.nodeName"),
    ]


PLACEMENT_IDS = [f"{t}: {what}" for t, what, _, _ in _placement_cases(("p", "c", "t"))]


@pytest.mark.parametrize("case", range(len(PLACEMENT_IDS)), ids=PLACEMENT_IDS)
def test_placement_violation_is_denied_by_tenant_policy(core, prod_stack, placement_active, case):
    tenant, _, kwargs, expected = _placement_cases(labels(prod_stack))[case]
    message = rejected(core, tenant, pod(**kwargs))
    binding = f"gpu-tenancy-placement-{tenant}"
    assert f"ValidatingAdmissionPolicy 'gpu-tenancy-placement' with binding '{binding}' denied request" in message, message
    assert expected in message, message


def test_allowed_placements_are_admitted(core, prod_stack, placement_active, created):
    pool, gpu_class, tenant_key = labels(prod_stack)
    # llm-finetune on its dedicated pool, tolerating its own taint.
    created("llm-finetune", pod(limits={GPU: "1"}, **on_own_pool(prod_stack, "llm-finetune")))
    # inference by its tenant label (any of its dedicated nodes), restricted Pod Security satisfied.
    created("inference", pod(limits={GPU: "1"}, node_selector={tenant_key: "inference"},
                             tolerations=[{"key": tenant_key, "operator": "Equal", "value": "inference",
                                           "effect": "NoSchedule"}]))
    # eval: a MIG slice by class, and a whole A100 by required affinity on its shared pool.
    created("eval", pod(limits={MIG_1G: "1"}, node_selector={gpu_class: "a100-mig"}))
    created("eval", pod(limits={GPU: "1"}, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": pool, "operator": "In", "values": ["a100-shared"]}]}]}}}))
    # eval: a whole A100 by GPU product (every pool with that product is one eval may use).
    created("eval", pod(limits={GPU: "1"}, node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}))
    # CPU-only pods need no placement at all.
    created("eval", pod())
    # A MIG slice only eval's pools offer pins the pod by its request alone (issue 14).
    created("eval", pod(limits={MIG_1G: "1"}))


def test_placement_checks_spec_updates_but_not_metadata_updates(core, prod_stack, placement_active, created):
    """UPDATEs are checked only when the spec changes (matchConditions): relabelling an admitted pod
    passes; adding a wildcard toleration to it is denied like at creation."""
    made = created("llm-finetune", pod(limits={GPU: "1"}, **on_own_pool(prod_stack, "llm-finetune")))
    name = made.metadata.name
    core.patch_namespaced_pod(name, "llm-finetune", {"metadata": {"labels": {"e2e": "relabelled"}}})
    tolerations = [t.to_dict() for t in core.read_namespaced_pod(name, "llm-finetune").spec.tolerations]
    tolerations = [{k: v for k, v in t.items() if v is not None} for t in tolerations]
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod(name, "llm-finetune",
                                  {"spec": {"tolerations": [*tolerations, {"operator": "Exists"}]}})
    assert err.value.status == 403, message_of(err.value)
    assert "a toleration with operator Exists and no key tolerates every taint" in message_of(err.value)


# --------------------------------------------------------------------------
# Pod Security
# --------------------------------------------------------------------------


def _enforced(stack, namespace: str) -> str:
    ns_labels = stack.find("Namespace", namespace)["metadata"]["labels"]
    return f'{ns_labels["pod-security.kubernetes.io/enforce"]}:{ns_labels["pod-security.kubernetes.io/enforce-version"]}'


@pytest.mark.parametrize("namespace", ["eval", "llm-finetune", "inference"])
def test_privileged_pod_is_rejected_by_pod_security(core, prod_stack, namespace):
    level = _enforced(prod_stack, namespace)
    assert level.split(":")[0] in ("baseline", "restricted")
    message = rejected(core, namespace, pod(privileged=True, restricted=False))
    assert f'violates PodSecurity "{level}"' in message and "privileged" in message, message


def test_restricted_namespace_rejects_a_baseline_pod(core, prod_stack):
    assert _enforced(prod_stack, "inference").startswith("restricted:")
    message = rejected(core, "inference", pod(restricted=False))
    assert f'violates PodSecurity "{_enforced(prod_stack, "inference")}"' in message
    assert "runAsNonRoot" in message and "allowPrivilegeEscalation" in message
    # The same pod is fine under baseline (eval).
    core.create_namespaced_pod("eval", pod(restricted=False), dry_run="All")


# --------------------------------------------------------------------------
# Jobs outside the queue (gpu-tenancy-kueue-queue)
# --------------------------------------------------------------------------


def _suspended_cpu_job(name: str, queue: str | None = None) -> dict:
    """A suspended Job whose pods request no GPU: Kueue's queue label is not needed to create it."""
    template = pod(name="unused")
    template["metadata"] = {"labels": {}}
    template["spec"].pop("schedulingGates")   # a Job's pods are gated by Kueue when it creates them, not in the template
    template["spec"]["restartPolicy"] = "Never"
    metadata: dict = {"name": name}
    if queue:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"suspend": True, "template": {"metadata": template["metadata"], "spec": template["spec"]}}}


def _with_gpus(template_patch_target: str = "main") -> dict:
    """A strategic-merge patch adding one GPU to the container `main` of a Job's pod template."""
    return {"spec": {"template": {"spec": {"containers": [
        {"name": template_patch_target, "resources": {"limits": {GPU: "1"}, "requests": {GPU: "1"}}}]}}}}


def test_a_suspended_cpu_job_cannot_gain_gpus_outside_the_queue(apiserver, prod_stack):
    """The API server lets a suspended Job's pod template change (resources too); a member's CPU Job
    created without the queue label would otherwise get GPUs, be unsuspended by its owner and run
    GPU pods no queue counts (the pods a Job controller creates are checked by their Job)."""
    developer = client.BatchV1Api(apiserver.client_for("e2e-dev@llm-finetune", [prod_stack.tenant("llm-finetune").access.developers.groups[0]]))
    admin = client.BatchV1Api(apiserver.api_client)
    names = [f"e2e-susp-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    outside, queued_job = names
    developer.create_namespaced_job("llm-finetune", _suspended_cpu_job(outside))
    developer.create_namespaced_job("llm-finetune", _suspended_cpu_job(queued_job, queue="default"))
    try:
        with pytest.raises(ApiException) as err:
            developer.patch_namespaced_job(outside, "llm-finetune", _with_gpus(), dry_run="All")
        assert err.value.status == 403, message_of(err.value)
        assert "ValidatingAdmissionPolicy 'gpu-tenancy-kueue-queue'" in message_of(err.value)
        assert "GPU requests cannot be added to a Job outside the tenant's queue" in message_of(err.value)
        # The neighbours: a CPU edit of the same Job, starting it (it has no GPUs), and GPUs for a queued Job.
        patched = developer.patch_namespaced_job(outside, "llm-finetune", {"spec": {"template": {"metadata": {"annotations": {"step": "2"}}}}},
                                                 dry_run="All")
        assert patched.spec.template.metadata.annotations == {"step": "2"}
        assert developer.patch_namespaced_job(outside, "llm-finetune", {"spec": {"suspend": False}}, dry_run="All").spec.suspend is False
        gpus = developer.patch_namespaced_job(queued_job, "llm-finetune", _with_gpus(), dry_run="All")
        assert gpus.spec.template.spec.containers[0].resources.limits == {GPU: "1"}
    finally:
        for name in names:
            admin.delete_namespaced_job(name, "llm-finetune", propagation_policy="Background")
