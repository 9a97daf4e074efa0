"""What a GPU stack cutover moves, for the reviewer of the pull request that makes it.

Moving from the GPU Operator's device plugin to its DRA driver (`platform.gpuStack`
`devicePlugin` → `both` → `dra`, and each class's `serving`) changes how a pod asks for a GPU.
The object diff shows every quota key and flavor that changes; what a reviewer needs is what that
means on the cluster: which of a tenant's ways of asking for a GPU stop being admitted when its
pods are next created (a rollout, a restart, the next job), and what they must ask for instead.
Running pods keep their GPUs: quota and queues are checked when a pod (or claim) is created.

Read from the rendered objects (the same ones `pulumi up` applies): a GPU path is a quota key of a
tenant's `tenant-quota` that meters a GPU resource or a DeviceClass; a path is lost when its key
held more than 0 and now holds 0 or is gone, gained the other way round. With Kueue the tenant's
ClusterQueue must count the new path too (`coveredResources`). The consequences of each `gpuStack`
come from its row of `GPU_STACKS`; only the fields that differ are named.

>>> cutover_warnings("dev", dev, dev, {}, {})
([], frozenset())
"""

from __future__ import annotations

from typing import Mapping

from ..fleet.devices import CLAIM_DEVICES_SUFFIX, IMPLICIT_EXTENDED_RESOURCE_PREFIX
from ..fleet.environment import Environment
from ..manifests.build import PLATFORM
from ..manifests.meta import KubeObject
from ..manifests.quota import TENANT_QUOTA
from ..spec.quantity import Quantity
from .documents import DiffWarning
from .object_changes import quota_amount, resource_quotas

# How each field of a `GPU_STACKS` row is said in a cutover warning (one label per field).
STACK_FIELDS = (
    ("quota_keys", "GPU quota keys"),
    ("kueue", "Kueue"),
    ("pools_key_on", "pools key on"),
)
_GFD = ("GPU Feature Discovery's nvidia.com/gpu.product and the MIG Manager's nvidia.com/mig.config node labels "
        "are removed by the GPU Operator: pods that select them are no longer placed")


def gpu_path(key: str, gpu_resources: frozenset[str]) -> str | None:
    """What a pod (or claim) asks for to be metered by the quota key `key`, or None for a key that
    meters no GPU (cpu, memory, storage, counts).

    >>> gpu_path("b200.gpu.op.dev.deviceclass.resource.k8s.io/devices", frozenset())
    'ResourceClaims of DeviceClass b200.gpu.op.dev'
    >>> gpu_path("requests.nvidia.com/gpu", frozenset({"nvidia.com/gpu"})), gpu_path("requests.cpu", frozenset())
    ('pods asking for nvidia.com/gpu', None)
    """
    if key.endswith(CLAIM_DEVICES_SUFFIX):
        return f"ResourceClaims of DeviceClass {key[:-len(CLAIM_DEVICES_SUFFIX)]}"
    resource = key.removeprefix("requests.")
    if resource != key and (resource in gpu_resources or resource.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX)):
        return f"pods asking for {resource}"
    return None


def _count(value: object) -> Quantity:
    amount = quota_amount(value)
    return amount if amount is not None else Quantity.parse(0)


def _gpu_budgets(objects: Mapping[str, list[KubeObject]], gpu_resources: frozenset[str]) -> dict[tuple[str, str], dict[str, str]]:
    """(tenant, namespace) -> {GPU quota key: hard} of each tenant namespace's `tenant-quota`."""
    return {(owner, namespace): {k: str(v) for k, v in hard.items() if gpu_path(k, gpu_resources) is not None}
            for (namespace, name), (owner, hard) in resource_quotas(objects).items() if name == TENANT_QUOTA}


def _queue_resources(objects: Mapping[str, list[KubeObject]]) -> dict[str, set[str]]:
    """Tenant -> the resources its ClusterQueues count (`coveredResources`)."""
    covered: dict[str, set[str]] = {}
    for owner, items in objects.items():
        queues = [o for o in items if o.get("kind") == "ClusterQueue"] if owner != PLATFORM else []
        for group in (g for q in queues for g in (q.get("spec") or {}).get("resourceGroups") or []):
            covered.setdefault(owner, set()).update(group.get("coveredResources") or [])
    return covered


def _moved(before: Environment, after: Environment) -> list[str]:
    """The stack-level and per-class changes that make a cutover, in words (empty: no cutover)."""
    moved = []
    old, new = before.platform, after.platform
    if old.effective_gpu_stack != new.effective_gpu_stack:
        moved.append(f"gpuStack {old.effective_gpu_stack} → {new.effective_gpu_stack}")
    for name in sorted(set(old.gpu_classes) & set(new.gpu_classes)):
        if old.gpu_classes[name].serving != new.gpu_classes[name].serving:
            moved.append(f"class {name} serving {old.gpu_classes[name].serving} → {new.gpu_classes[name].serving}")
    return moved


def _stack_message(before: Environment, after: Environment, moved: list[str]) -> str:
    old, new = before.platform.gpu_stack_role, after.platform.gpu_stack_role
    parts = [f"{label}: {getattr(old, field)} → {getattr(new, field)}"
             for field, label in STACK_FIELDS if getattr(old, field) != getattr(new, field)]
    if old.gfd_labels and not new.gfd_labels:
        parts.append(_GFD)
    consequences = f"; {'; '.join(parts)}" if parts else ""
    return (f"GPU stack cutover ({', '.join(moved)}){consequences}. Running pods keep their GPUs; each tenant's "
            f"warning below says which of its pods are refused when next created and what to ask for instead")


def _opened(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """The keys above 0 in `new` that were 0 or absent in `old`."""
    zero = Quantity.parse(0)
    return [k for k in sorted(new) if _count(new[k]) > zero and _count(old.get(k, "0")) == zero]


def _lowered(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """The keys whose value goes down (to 0, or gone, included)."""
    return [k for k in sorted(old) if _count(new.get(k, "0")) < _count(old[k])]


def _refusal(key: str, old: Mapping[str, str], new: Mapping[str, str], gpu_resources: frozenset[str]) -> str:
    after = new.get(key, "absent")
    beyond = "" if _count(new.get(key, "0")) == Quantity.parse(0) else f" beyond {after}"
    return f"{gpu_path(key, gpu_resources)}{beyond} ({key} {old[key]} → {after})"


def _tenant_message(tenant: str, namespace: str, old: dict[str, str], new: dict[str, str],
                    gpu_resources: frozenset[str], queue: tuple[set[str], set[str]]) -> str | None:
    lowered, gained = _lowered(old, new), _opened(old, new)
    if not lowered:
        return None
    refused = "; ".join(_refusal(k, old, new, gpu_resources) for k in lowered)
    instead = ("; ask instead with " + ", ".join(f"{gpu_path(k, gpu_resources)} ({k} {new[k]})" for k in gained)
               if gained else "")
    stops, starts = queue
    counted = ""
    if stops or starts:
        counted = "; its ClusterQueue " + ", ".join(
            [f"stops counting {', '.join(sorted(stops))}"] * bool(stops) + [f"counts {', '.join(sorted(starts))}"] * bool(starts))
    return (f"tenant {tenant}, namespace {namespace}: when next created (rollout, restart, next job) these are "
            f"refused: {refused}{instead}{counted}")


def cutover_warnings(stack: str, before: Environment | None, after: Environment | None,
                     old_objects: Mapping[str, list[KubeObject]], new_objects: Mapping[str, list[KubeObject]],
                     own_quota_kept: frozenset[str] = frozenset()) -> tuple[list[DiffWarning], frozenset[tuple[str, str]]]:
    """`gpu-stack-cutover` for the stack and `gpu-path-refused` per tenant namespace whose GPU quota keys
    go down, when `gpuStack` or a class's `serving` changes between base and head; with the (namespace,
    quota key) pairs of tenants in `own_quota_kept` (their `quota` unchanged, so the cutover is the
    cause), which `quota_lowered_warnings` then leaves to these warnings.

    >>> cutover_warnings("dev", None, dev, {}, {})
    ([], frozenset())
    """
    if before is None or after is None:
        return [], frozenset()
    moved = _moved(before, after)
    if not moved:
        return [], frozenset()
    warnings: list[DiffWarning] = [
        {"stack": stack, "tenant": None, "kind": "gpu-stack-cutover", "message": _stack_message(before, after, moved)}]
    gpu_resources = frozenset(before.facts.quota_gpu_resources) | frozenset(after.facts.quota_gpu_resources) | frozenset(
        dc.extended_resource_name for side in (before, after) for dc in side.platform.device_classes.values()
        if dc.extended_resource_name)
    old_budgets, new_budgets = _gpu_budgets(old_objects, gpu_resources), _gpu_budgets(new_objects, gpu_resources)
    old_queues, new_queues = _queue_resources(old_objects), _queue_resources(new_objects)
    explained: set[tuple[str, str]] = set()
    for tenant, namespace in sorted(set(old_budgets) & set(new_budgets)):
        old, new = old_budgets[(tenant, namespace)], new_budgets[(tenant, namespace)]
        if tenant in own_quota_kept:
            explained.update((namespace, key) for key in _lowered(old, new))
        queue = (old_queues.get(tenant, set()) - new_queues.get(tenant, set()),
                 new_queues.get(tenant, set()) - old_queues.get(tenant, set()))
        message = _tenant_message(tenant, namespace, old, new, gpu_resources, queue)
        if message:
            warnings.append({"stack": stack, "tenant": tenant, "kind": "gpu-path-refused", "message": message})
    return warnings, frozenset(explained)

