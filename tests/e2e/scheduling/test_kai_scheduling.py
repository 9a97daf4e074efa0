"""Queues and placement on the real KAI Scheduler (scheduler, binder, pod-grouper; `kai.py`).

The example staging stack (`scheduler: kai`) is applied as rendered; its nodes are Ready with
their GPU capacity; pods are created as the tenant's developer, with `schedulerName:
kai-scheduler` and the tenant's `kai.scheduler/queue` label, as the tool tells tenants to
(docs/queues-and-vclusters.md). Each bound pod has a PodGroup in the tenant's queue and a
BindRequest: KAI placed it, not kube-scheduler (which ignores pods naming another scheduler).

Whole GPUs are placed by KAI here; GPU shares by annotation (`gpu-fraction`, `gpu-memory`) are
proven at admission and in the queue (their PodGroup), not on a GPU: KAI runs a fraction pod only
beside a reservation pod, which only a kubelet runs.
"""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from components.manifests.meta import KAI_QUEUE_LABEL as QUEUE_LABEL
from components.manifests.meta import pool_label
from components.manifests.placement_policy import placement
from components.fleet import gpu_capacity as cap
from tests.e2e.scheduling.jobs import wait_or_explain
from tests.e2e.scheduling.kai import KaiPods, kai_pod, on_pool, running_kai_stack
from tools.kai import kai_crd_dir
from tools.applied_stack import AppliedStack
from tools.control_plane import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

ENVIRONMENT, _ = AppliedStack.render("staging")


@pytest.fixture(scope="module")
def kai_stack(e2e_summary):
    """The example staging stack on a control plane with kube-scheduler and the real KAI Scheduler."""
    yield from running_kai_stack("staging", e2e_summary)


@pytest.fixture
def pods(kai_stack):
    created = KaiPods(kai_stack)
    yield created
    created.cleanup()


def _whole_gpu_cases() -> list[tuple[str, str]]:
    """(tenant, pool) for every pool offering whole GPUs that each tenant holds whole-GPU quota for."""
    platform = ENVIRONMENT.platform
    cases = []
    for loaded in ENVIRONMENT.tenants:
        if loaded.spec.lifecycle != "active" or not cap.gpu_quota_by_resource(loaded.spec, platform).get(cap.GPU):
            continue
        for pool in placement(loaded.spec, ENVIRONMENT.view(loaded.spec)).pools:
            node_pool = platform.node_pools[pool]
            if node_pool.nodes and cap.node_gpu_resources(platform, node_pool).get(cap.GPU):
                cases.append((loaded.name, pool))
    return cases


# --------------------------------------------------------------------------
# the example staging stack
# --------------------------------------------------------------------------


def test_stack_applies_cleanly_on_kais_crds(kai_stack, e2e_summary):
    """Every rendered object is accepted, the Queues by the CRD of the KAI that runs."""
    rejected = [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}: {r.reason} {r.body}"
                for o, r in kai_stack.results if isinstance(r, ApiException)]
    assert not rejected, "\n".join(rejected)
    queues = kai_stack.of_kind("Queue")
    live = {q["metadata"]["name"]: q["spec"] for q in (kai_stack.plane.cp.get_object(q) for q in queues)}
    assert live == {q["metadata"]["name"]: q["spec"] for q in queues}
    e2e_summary.append(f"scheduling lane (staging): {len(queues)} KAI Queues, {len(kai_stack.node_pool)} ready nodes")


def test_the_shipped_queue_crd_is_that_of_the_kai_we_run(kai_stack):
    """components/data/kai-scheduler's Queue CRD must be the one in the KAI snapshot the lane builds."""
    shipped = REPO_ROOT / "components" / "data" / "kai-scheduler" / "scheduling.run.ai_queues.yaml"
    assert shipped.read_bytes() == (kai_crd_dir() / shipped.name).read_bytes()


@pytest.mark.parametrize("tenant,pool", _whole_gpu_cases())
def test_whole_gpu_pod_goes_through_the_tenants_queue_to_its_pool(kai_stack, pods, tenant, pool):
    name = pods.submit(tenant, kai_pod(1, queue=tenant, **on_pool(kai_stack, tenant, pool)))
    bound = pods.wait_bound(tenant, name)
    assert kai_stack.node_pool[bound.spec.node_name] == pool
    group = pods.pod_group(tenant, name)
    assert group is not None and group["spec"]["queue"] == tenant, pods.explain(tenant, name)
    request = pods.bind_request(tenant, name)
    assert request is not None and request["spec"]["selectedNode"] == bound.spec.node_name


def test_a_pod_naming_another_tenants_queue_is_refused(kai_stack, pods):
    """eval's developer puts a pod into llm-finetune's queue: the queue policy refuses it at creation."""
    body = kai_pod(1, queue="llm-finetune", **on_pool(kai_stack, "eval", "a100-shared"))
    with pytest.raises(ApiException) as refused:
        pods.submit("eval", body)
    assert refused.value.status == 403
    assert f"{QUEUE_LABEL} must be eval" in refused.value.body
    body["metadata"]["labels"][QUEUE_LABEL] = "eval"   # the legitimate neighbour: its own queue
    name = pods.submit("eval", body)
    assert kai_stack.node_pool[pods.wait_bound("eval", name).spec.node_name] == "a100-shared"


def test_a_gpu_pod_outside_its_kai_queue_is_refused_at_creation(kai_stack, pods):
    """Without the queue label, or without schedulerName (the default scheduler would bind it outside KAI)."""
    target = on_pool(kai_stack, "eval", "a100-shared")
    for body in (kai_pod(1, queue=None, **target), kai_pod(1, queue="eval", **target)):
        if body["metadata"].get("labels"):
            del body["spec"]["schedulerName"]
        with pytest.raises(ApiException) as refused:
            pods.submit("eval", body)
        assert refused.value.status == 403
        assert "a pod that requests GPUs must set schedulerName: kai-scheduler and label kai.scheduler/queue: eval" in refused.value.body
    legit = pods.submit("eval", kai_pod(1, queue="eval", **target))
    assert kai_stack.node_pool[pods.wait_bound("eval", legit).spec.node_name] == "a100-shared"


def test_a_pod_without_a_queue_label_is_never_scheduled(kai_stack, pods):
    """A CPU pod for KAI: KAI would put it into `default-queue`; the pod-grouper's PodGroup for it is refused."""
    body = kai_pod(1, queue=None)
    for values in body["spec"]["containers"][0]["resources"].values():
        del values["nvidia.com/gpu"]
    body["spec"].pop("tolerations", None)   # a CPU pod may not tolerate the shared GPU pools' taint
    name = pods.submit("eval", body)
    # The pod-grouper's PodGroup create is refused by the queue policy; it says so in an event on the pod.
    warning = pods.wait_event("eval", name, "PodGrouperWarning", containing=f"{QUEUE_LABEL} must be eval")
    assert "default-queue" in warning.message, warning.message
    assert pods.pod_group("eval", name) is None
    assert pods.core.read_namespaced_pod(name, "eval").spec.node_name is None
    # The same pod in its own queue is the legitimate neighbour: bound.
    legit = pods.submit("eval", kai_pod(1, queue="eval", **on_pool(kai_stack, "eval", "a100-shared")))
    assert kai_stack.node_pool[pods.wait_bound("eval", legit).spec.node_name] == "a100-shared"


def test_a_pod_selecting_another_tenants_dedicated_pool_is_refused(kai_stack, pods):
    """eval's developer targets llm-finetune's training pool through eval's own queue: placement refuses it."""
    with pytest.raises(ApiException) as refused:
        pods.submit("eval", kai_pod(1, queue="eval", selector={pool_label(ENVIRONMENT.platform): "h100-train"}))
    assert refused.value.status == 403 and "h100-train" in refused.value.body


def test_the_queue_fills_to_its_quota_and_the_next_pod_is_refused(kai_stack, pods):
    """llm-finetune's queue and ResourceQuota both hold 12 H100s: KAI binds 12 on its pool, the 13th is refused at creation."""
    platform = ENVIRONMENT.platform
    quota = cap.gpu_quota_by_class(kai_stack.tenant("llm-finetune"), platform)["h100"]
    assert kai_stack.find("Queue", "llm-finetune")["spec"]["resources"]["gpu"]["quota"] == quota
    target = on_pool(kai_stack, "llm-finetune", "h100-train")
    per_node = platform.node_pools["h100-train"].gpus_per_node
    sizes = [per_node] * (quota // per_node) + ([quota % per_node] if quota % per_node else [])
    names = [pods.submit("llm-finetune", kai_pod(n, queue="llm-finetune", **target)) for n in sizes]
    assert {kai_stack.node_pool[pods.wait_bound("llm-finetune", n).spec.node_name] for n in names} == {"h100-train"}
    with pytest.raises(ApiException) as refused:
        pods.submit("llm-finetune", kai_pod(1, queue="llm-finetune", **target))
    assert refused.value.status == 403 and "exceeded quota" in refused.value.body


def test_a_tenants_extra_namespace_uses_the_tenants_queue(kai_stack, pods):
    """inference-canary belongs to inference: its pods go through queue `inference`, and only that queue."""
    target = on_pool(kai_stack, "inference", "h100-serve")
    with pytest.raises(ApiException) as refused:
        pods.submit("inference", kai_pod(1, queue="inference-canary", **target), namespace="inference-canary")
    assert refused.value.status == 403 and f"{QUEUE_LABEL} must be inference" in refused.value.body
    name = pods.submit("inference", kai_pod(1, queue="inference", **target), namespace="inference-canary")
    assert kai_stack.node_pool[pods.wait_bound("inference-canary", name).spec.node_name] == "h100-serve"
    assert pods.pod_group("inference-canary", name)["spec"]["queue"] == "inference"


# --------------------------------------------------------------------------
# GPU shares by annotation (KAI fractions): admission and queue accounting only
# --------------------------------------------------------------------------
# A fraction pod runs only once KAI's binder has a reservation pod on the node, which needs a
# kubelet: here the API server's admission and the pod-grouper's PodGroup (the queue that meters
# the share) are what is proven, not the share on a GPU.


def _without_gpu_resource(body: dict) -> dict:
    for values in body["spec"]["containers"][0]["resources"].values():
        del values["nvidia.com/gpu"]
    body["spec"].pop("tolerations", None)   # a CPU pod may not tolerate the shared GPU pools' taint
    return body


def _fraction_pod(queue: str | None, annotations: dict | None = None, **target) -> dict:
    """A pod asking KAI for half a GPU by annotation, with no GPU resource (so no ResourceQuota sees it)."""
    body = _without_gpu_resource(kai_pod(1, queue=queue, **target))
    body["metadata"]["annotations"] = annotations or {"gpu-fraction": "0.5"}
    return body


def _refused(pods, tenant: str, body: dict) -> str:
    with pytest.raises(ApiException) as refused:
        pods.submit(tenant, body)
    assert refused.value.status == 403, refused.value.body
    return refused.value.body


def test_a_fraction_pod_must_select_a_pool_of_its_tenant(kai_stack, pods):
    """Placement treats the annotation as a GPU request: unpinned, or on another tenant's pool, refused."""
    assert "that request GPUs must select where they run" in _refused(pods, "eval", _fraction_pod("eval"))
    assert "h100-train" in _refused(pods, "eval", _fraction_pod("eval", selector={pool_label(ENVIRONMENT.platform): "h100-train"}))


def test_a_fraction_pod_outside_its_tenants_kai_queue_is_refused(kai_stack, pods):
    target = on_pool(kai_stack, "eval", "a100-shared")
    message = ("pods with the KAI GPU-sharing annotation gpu-fraction must set schedulerName: kai-scheduler "
               "and label kai.scheduler/queue: eval")
    assert message in _refused(pods, "eval", _fraction_pod(None, **target))
    assert message in _refused(pods, "eval", _fraction_pod("llm-finetune", **target))   # the first failed rule is the one said
    other_scheduler = _fraction_pod("eval", **target)
    other_scheduler["spec"]["schedulerName"] = "default-scheduler"
    assert message in _refused(pods, "eval", other_scheduler)
    by_memory = _fraction_pod(None, {"gpu-memory": "2000"}, **target)
    assert "annotation gpu-memory must set schedulerName" in _refused(pods, "eval", by_memory)


def test_the_legitimate_fraction_pod_is_admitted_and_metered_by_its_queue(kai_stack, pods):
    name = pods.submit("eval", _fraction_pod("eval", **on_pool(kai_stack, "eval", "a100-shared")))
    pod = pods.core.read_namespaced_pod(name, "eval")
    assert pod.metadata.annotations["gpu-fraction"] == "0.5" and pod.spec.scheduler_name == "kai-scheduler"
    group = wait_or_explain(kai_stack.plane.cp, lambda: pods.pod_group("eval", name), f"the PodGroup of eval/{name}",
                            lambda: pods.explain("eval", name), 60)
    assert group["spec"]["queue"] == "eval"


def test_a_pending_pod_cannot_gain_a_gpu_share_later(kai_stack, pods):
    """Placement checks the spec; the annotation is metadata, so adding it after creation is refused."""
    plain = _without_gpu_resource(kai_pod(1, queue="eval", selector={"gpu-tenancy-e2e/no-such-node": "true"}))
    name = pods.submit("eval", plain)   # pending: no node has that label
    member = pods.member_core("eval")
    with pytest.raises(ApiException) as refused:
        member.patch_namespaced_pod(name, "eval", {"metadata": {"annotations": {"gpu-fraction": "1"}}})
    assert refused.value.status == 403 and "cannot be added, changed or removed after it is created" in refused.value.body
    member.patch_namespaced_pod(name, "eval", {"metadata": {"labels": {"team": "eval"}}})   # the neighbour: a label
    assert pods.core.read_namespaced_pod(name, "eval").metadata.labels["team"] == "eval"


# --------------------------------------------------------------------------
# KAI's per-pod GPU-sharing ConfigMaps (gpu-tenancy-kai-sharing) and the variables KAI's webhook injects
# --------------------------------------------------------------------------
# KAI's webhook is not run here (it needs TLS serving the API server calls back): a share is
# created the way it leaves the webhook, and the binder's writes are made with its identity.

KAI_PREFIX = "e2e-x7k2p9q-shared-gpu"
BINDER = "system:serviceaccount:kai-scheduler:binder"   # queues.kai.binderServiceAccount's default


def _config_map(name: str, data: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {"NVIDIA_VISIBLE_DEVICES": "all"}}


def _as_webhook_leaves_it(body: dict, prefix: str = KAI_PREFIX) -> dict:
    """A share with what KAI's webhook adds (pkg/binder/common/gpu_access.go, env_vars.go)."""
    body["metadata"]["annotations"]["runai/shared-gpu-configmap"] = prefix
    container = body["spec"]["containers"][0]
    container["env"] = [{"name": name, "valueFrom": {"configMapKeyRef": {"name": f"{prefix}-0", "key": name}}}
                        for name in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION", "CUDA_DEVICE_MEMORY_LIMIT")]
    container["envFrom"] = [{"configMapRef": {"name": f"{prefix}-0-evar", "optional": False}}]
    # With admission.blockNvidiaVisibleDevices, KAI's deviceaccess plugin hides the GPU from the other containers.
    sidecar = {k: v for k, v in container.items() if k not in ("env", "envFrom")}
    body["spec"]["containers"].append({**sidecar, "name": "sidecar", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]})
    return body


@pytest.fixture
def binder_core(kai_stack):
    """CoreV1Api as KAI's binder ServiceAccount, with the ConfigMap rights KAI's chart gives it (a ClusterRole)."""
    from kubernetes import client

    cp = kai_stack.plane.cp
    rbac = client.RbacAuthorizationV1Api(cp.api_client)
    name = "e2e-kai-binder-configmaps"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update", "patch", "delete"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": name},
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                                      "subjects": [{"kind": "ServiceAccount", "name": "binder", "namespace": "kai-scheduler"}]})
    yield client.CoreV1Api(cp.client_for(BINDER, ["system:serviceaccounts", "system:serviceaccounts:kai-scheduler"]))
    rbac.delete_cluster_role_binding(name)
    rbac.delete_cluster_role(name)


def _forbidden(call) -> str:
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 403, refused.value.body
    return refused.value.body


def test_a_developer_cannot_write_a_kai_config_map_but_the_binder_can(kai_stack, pods, binder_core):
    member = pods.member_core("eval")
    name = f"{KAI_PREFIX}-0"
    # Harmless data, so that the name is the only thing refused: the API server reports only the
    # first policy that denies, and a key named NVIDIA_VISIBLE_DEVICES is the guard's to refuse.
    squat = _forbidden(lambda: member.create_namespaced_config_map("eval", _config_map(name, {"mode": "strict"})))
    assert f"ConfigMap {name} has the name of a KAI GPU-sharing ConfigMap" in squat
    assert "only KAI's binder (kai-scheduler/binder)" in squat
    evar = _forbidden(lambda: member.create_namespaced_config_map("eval", _config_map(f"{name}-evar", {"mode": "strict"})))
    assert f"ConfigMap {name}-evar has the name of a KAI GPU-sharing ConfigMap" in evar
    # The squat with the key a share reads is refused too (by whichever of the two policies is asked first).
    _forbidden(lambda: member.create_namespaced_config_map("eval", _config_map(name)))
    try:
        binder_core.create_namespaced_config_map("eval", _config_map(name, {"NVIDIA_VISIBLE_DEVICES": "GPU-0"}))
        binder_core.patch_namespaced_config_map(name, "eval", {"data": {"CUDA_DEVICE_MEMORY_LIMIT": "40960m"}})
        # The developer, on the binder's ConfigMap: widen the share to every GPU, or delete it.
        _forbidden(lambda: member.patch_namespaced_config_map(name, "eval", {"data": {"NVIDIA_VISIBLE_DEVICES": "all"}}))
        _forbidden(lambda: member.delete_namespaced_config_map(name, "eval"))
        assert pods.core.read_namespaced_config_map(name, "eval").data == {
            "CUDA_DEVICE_MEMORY_LIMIT": "40960m", "NVIDIA_VISIBLE_DEVICES": "GPU-0"}
    finally:
        binder_core.delete_namespaced_config_map(name, "eval")
    # The neighbour: an ordinary ConfigMap of the developer's own.
    member.create_namespaced_config_map("eval", _config_map("e2e-settings", {"mode": "strict"}))
    member.patch_namespaced_config_map("e2e-settings", "eval", {"data": {"mode": "lenient"}})
    member.delete_namespaced_config_map("e2e-settings", "eval")


def test_the_variables_kais_webhook_injects_are_admitted_and_hand_made_ones_are_not(kai_stack, pods):
    target = on_pool(kai_stack, "eval", "a100-shared")
    name = pods.submit("eval", _as_webhook_leaves_it(_fraction_pod("eval", **target)))
    main, sidecar = pods.core.read_namespaced_pod(name, "eval").spec.containers
    assert {e.name: e.value_from.config_map_key_ref.name for e in main.env}["NVIDIA_VISIBLE_DEVICES"] == f"{KAI_PREFIX}-0"
    assert [(e.name, e.value) for e in sidecar.env] == [("NVIDIA_VISIBLE_DEVICES", "void")]
    by_hand = _fraction_pod("eval", **target)
    by_hand["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert "environment variable NVIDIA_VISIBLE_DEVICES is refused" in _refused(pods, "eval", by_hand)
    # The annotation alone, so that it is the only thing refused (the API server reports the first
    # policy that denies, and the guard refuses NVIDIA_* variables read from a ConfigMap not KAI's).
    outside = _fraction_pod("eval", {"gpu-fraction": "0.5", "runai/shared-gpu-configmap": "e2e-settings"}, **target)
    refused = _refused(pods, "eval", outside)
    assert "annotation runai/shared-gpu-configmap must end in -shared-gpu (got 'e2e-settings')" in refused
    _refused(pods, "eval", _as_webhook_leaves_it(_fraction_pod("eval", **target), prefix="e2e-settings"))


def test_a_share_cannot_opt_out_of_hamicore(kai_stack, pods):
    target = on_pool(kai_stack, "eval", "a100-shared")
    opt_out = _fraction_pod("eval", {"gpu-fraction": "0.5", "kai-resource-isolator.io/inject": "false"}, **target)
    assert "annotation kai-resource-isolator.io/inject is refused" in _refused(pods, "eval", opt_out)


@pytest.mark.parametrize("name, value", [
    ("CUDA_DEVICE_MEMORY_LIMIT_0", "80g"),     # read before the CUDA_DEVICE_MEMORY_LIMIT KAI's webhook sets
    ("CUDA_DEVICE_MEMORY_LIMIT", "80g"),       # in the share's other container, where KAI sets none
    ("CUDA_REDIRECT", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),   # CUDA's calls to another library than libvgpu.so
    ("GPU_CORE_UTILIZATION_POLICY", "DISABLE"),
])
def test_a_share_cannot_lift_hamicores_bound_by_environment(kai_stack, pods, name, value):
    """The opt-out annotation is refused (above); the same bound set by env is too, as the developer."""
    share = _as_webhook_leaves_it(_fraction_pod("eval", **on_pool(kai_stack, "eval", "a100-shared")))
    container = share["spec"]["containers"][1 if name == "CUDA_DEVICE_MEMORY_LIMIT" else 0]
    container["env"].append({"name": name, "value": value})
    refused = _refused(pods, "eval", share)
    assert "ValidatingAdmissionPolicy 'gpu-tenancy-guard' with binding 'gpu-tenancy-guard-eval' denied request" in refused
    assert f"environment variable {name} is refused in pods of tenant eval: HAMi-core reads it" in refused


def test_hamicores_variables_cannot_come_in_through_env_from_but_kais_bound_and_ordinary_ones_do(kai_stack, pods, binder_core):
    target = on_pool(kai_stack, "eval", "a100-shared")
    spelled = _as_webhook_leaves_it(_fraction_pod("eval", **target))
    spelled["spec"]["containers"][0]["envFrom"].append({"prefix": "CUDA_DEVICE_MEMORY_LIMIT_", "configMapRef": {"name": "e2e-limits"}})
    assert "envFrom prefix CUDA_DEVICE_MEMORY_LIMIT_ is refused in pods of tenant eval" in _refused(pods, "eval", spelled)
    member = pods.member_core("eval")
    key = _forbidden(lambda: member.create_namespaced_config_map("eval", _config_map("e2e-limits", {"CUDA_DEVICE_MEMORY_LIMIT_0": "80g"})))
    assert "key CUDA_DEVICE_MEMORY_LIMIT_0 is refused in ConfigMaps and Secrets of tenant eval" in key
    # The neighbours: the share as KAI's webhook leaves it (its bound from the share's own ConfigMap, which
    # only the binder writes), with ordinary CUDA variables of the developer's own.
    share = _as_webhook_leaves_it(_fraction_pod("eval", **target))
    share["spec"]["containers"][0]["env"] += [{"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"},
                                              {"name": "CUDA_DEVICE_ORDER", "value": "PCI_BUS_ID"}]
    name = pods.submit("eval", share)
    env = {e.name: e for e in pods.core.read_namespaced_pod(name, "eval").spec.containers[0].env}
    assert env["CUDA_DEVICE_MEMORY_LIMIT"].value_from.config_map_key_ref.name == f"{KAI_PREFIX}-0"
    member.create_namespaced_config_map("eval", _config_map("e2e-cuda-settings", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}))
    member.delete_namespaced_config_map("e2e-cuda-settings", "eval")


def test_a_share_over_several_devices_is_pinned_and_metered_like_any_share(kai_stack, pods):
    """gpu-fraction with gpu-fraction-num-devices selecting only labels the tool does not manage reaches
    every tenant's pools: refused like a whole GPU; a device count KAI's queue cannot charge is refused."""
    several = {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}
    unmanaged = _fraction_pod("eval", several, selector={"topology.kubernetes.io/zone": "zone-a"})
    assert "that request GPUs must select where they run" in _refused(pods, "eval", unmanaged)
    target = on_pool(kai_stack, "eval", "a100-shared")
    nothing = _refused(pods, "eval", _fraction_pod("eval", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, **target))
    assert "annotation gpu-fraction-num-devices='0' is refused: KAI's queue, the only meter of GPU shares, cannot charge it" in nothing
    alone = _refused(pods, "eval", _fraction_pod("eval", {"gpu-fraction-num-devices": "4"}, **target))
    assert "beside gpu-fraction or gpu-memory" in alone
    name = pods.submit("eval", _fraction_pod("eval", several, **target))   # the neighbour: on its own pool, in its queue
    group = wait_or_explain(kai_stack.plane.cp, lambda: pods.pod_group("eval", name), f"the PodGroup of eval/{name}",
                            lambda: pods.explain("eval", name), 60)
    assert group["spec"]["queue"] == "eval"


def test_the_kai_sharing_and_guard_policies_type_check_clean(kai_stack):
    """The server type-checks each expression against both kinds the policy matches (ConfigMap, Pod)."""
    from kubernetes import client

    from tools.applied_stack import wait_policies_typechecked

    cp = kai_stack.plane.cp
    names = ["gpu-tenancy-kai-sharing", "gpu-tenancy-guard", "gpu-tenancy-kai-queue"]
    wait_policies_typechecked(cp, [{"kind": "ValidatingAdmissionPolicy", "metadata": {"name": n}} for n in names])
    adm = client.AdmissionregistrationV1Api(cp.api_client)
    for name in names:
        status = adm.read_validating_admission_policy(name).status
        warnings = (status.type_checking.expression_warnings or []) if status.type_checking else []
        assert not warnings, "\n".join(f"{name} {w.field_ref}: {w.warning}" for w in warnings)
