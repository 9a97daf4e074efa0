"""Labels (and, opt-in, taints) of GPU nodes: what the placement policy and pod selectors key on.

Static nodes are patched in place by server-side apply under our field manager: a partial Node
object carrying only what we own. Nodes of autoscaled groups come and go, so patching them is a
race; their labels and taints belong in the node group definition instead, and
`node_group_requirements` says what they must be.

Dedicated pools are tainted by default (`<domain>/tenant=<owner>:NoSchedule`): the taint keeps
off pods that select no node, or select only on labels we do not manage, which admission cannot
judge; admission (the placement policy) is what stops anyone else from tolerating it or selecting
the nodes. Shared GPU pools are tainted `nvidia.com/gpu=present:NoSchedule`: without it, CPU-only
pods fill the nodes' cpu and memory and GPU pods of the tenants that pay for the pool stay Pending
next to idle GPUs; the placement policy lets only GPU pods tolerate it (a shared MIG pool's static
nodes are not patched with it by default, `patches_taints`). `patchTaints: false` opts a
pool out when its nodes register with the taint themselves (kubelet `--register-with-taints`, the
node group): `spec.taints` is one atomic list under server-side apply, so whoever applies it owns
the whole list, and the node lifecycle controller, cordon and other tools write the same list.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..fleet.facts import FleetFacts
from . import mig_config, time_slicing
from .meta import FIELD_MANAGER, GPU_TAINT_KEY, GPU_TAINT_VALUE, MIG_CONFIG_LABEL, KubeObject, gpu_class_label, kube_object, pool_label, tenant_label

NODE_KIND = "Node"
PATCH_FIELD_MANAGER = "pulumi.com/patchFieldManager"
PATCH_FORCE = "pulumi.com/patchForce"
TAINT_EFFECT = "NoSchedule"


def pool_labels(facts: FleetFacts, pool_name: str) -> dict[str, str]:
    """Every label a node of the pool must carry.

    >>> pool_labels(prod.facts, "h100-serve")["gpu.acme.dev/tenant"]
    'inference'
    """
    platform = facts.platform
    pool = platform.node_pools[pool_name]
    labels = {gpu_class_label(platform): pool.gpu_class, pool_label(platform): pool_name}
    owner = facts.pool_owners.get(pool_name)
    if owner is not None:
        labels[tenant_label(platform)] = owner
    labels.update(mig_config.node_labels(platform, pool))
    labels.update(time_slicing.node_labels(platform, pool))
    return dict(sorted(labels.items()))


def pool_taints(facts: FleetFacts, pool_name: str) -> list[dict[str, str]]:
    """Taints a node of the pool should carry: `<domain>/tenant=<owner>:NoSchedule` on dedicated
    pools, `nvidia.com/gpu=present:NoSchedule` on shared GPU pools.

    A dedicated pool carries its tenant taint only: its owner's CPU pods may use its own nodes.
    GPU pods tolerate the shared taint themselves, or get the toleration from the Kueue flavor of
    the pool (`kueue._flavor_tolerations`); admission refuses it on pods that request no GPU.

    >>> pool_taints(prod.facts, "h100-serve"), pool_taints(prod.facts, "a100-shared")
    ([{'effect': 'NoSchedule', 'key': 'gpu.acme.dev/tenant', 'value': 'inference'}], [{'effect': 'NoSchedule', 'key': 'nvidia.com/gpu', 'value': 'present'}])
    """
    owner = facts.pool_owners.get(pool_name)
    if owner is None:
        return [{"effect": TAINT_EFFECT, "key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE}]
    return [{"effect": TAINT_EFFECT, "key": tenant_label(facts.platform), "value": owner}]


def node_patch(name: str, labels: Mapping[str, str], taints: list[dict[str, str]]) -> KubeObject:
    """A partial Node for server-side apply: only the fields we own.

    Label-only patches are forced (we take over our label keys, e.g. the `all-disabled` default the
    GPU Operator writes); a patch with taints is never forced, because forcing an atomic list would
    drop taints that other controllers own.

    >>> node_patch("n1", {"a": "b"}, [])["metadata"]["annotations"]["pulumi.com/patchForce"]
    'true'
    """
    annotations = {PATCH_FIELD_MANAGER: FIELD_MANAGER}
    if not taints:
        annotations[PATCH_FORCE] = "true"
    metadata: dict[str, Any] = {"name": name, "labels": dict(sorted(labels.items())), "annotations": dict(sorted(annotations.items()))}
    spec = {"taints": taints} if taints else None
    return kube_object("v1", NODE_KIND, metadata, spec=spec)


def patches_taints(facts: FleetFacts, pool_name: str) -> bool:
    """Whether the node patches of the pool carry its taint: `patchTaints` if set, else yes, except
    on a shared pool partitioned by MIG.

    A patch with taints is never forced (an atomic list), and the GPU Operator writes
    `nvidia.com/mig.config=all-disabled` on every MIG-capable node: an unforced patch that sets a
    MIG layout conflicts on that label at the first apply. So a shared MIG pool keeps its forced
    label-only patch, and its nodes register with the GPU taint (`node_group_requirements`, kubelet
    `--register-with-taints`), or the stack sets `patchTaints: true` and takes the conflict.

    >>> patches_taints(prod.facts, "a100-shared"), patches_taints(prod.facts, "a100-mig"), patches_taints(prod.facts, "h100-train")
    (True, False, True)
    """
    pool = facts.platform.node_pools[pool_name]
    if pool.patch_taints is not None:
        return pool.patch_taints
    if pool_name in facts.pool_owners:
        return True
    return mig_config.node_labels(facts.platform, pool).get(MIG_CONFIG_LABEL, mig_config.ALL_DISABLED) == mig_config.ALL_DISABLED


def node_patches(facts: FleetFacts) -> list[KubeObject]:
    """One partial Node per static node of every GPU pool, with the pool's taint where `patches_taints`.

    >>> [p["metadata"]["name"] for p in node_patches(dev.facts)]
    ['dev-a100-01', 'dev-l4-01']
    """
    patches = []
    for pool_name, pool in sorted(facts.platform.node_pools.items()):
        if pool.gpu_class not in facts.platform.gpu_classes:
            continue
        labels = pool_labels(facts, pool_name)
        taints = pool_taints(facts, pool_name) if patches_taints(facts, pool_name) else []
        patches.extend(node_patch(node, labels, taints) for node in pool.nodes)
    return sorted(patches, key=lambda p: p["metadata"]["name"])


def is_node_patch(obj: Mapping[str, Any]) -> bool:
    """Whether an object is a partial Node to be applied as a patch (never created or deleted as a whole).

    >>> is_node_patch({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    True
    """
    return obj.get("apiVersion") == "v1" and obj.get("kind") == NODE_KIND


def node_group_requirements(facts: FleetFacts) -> dict[str, dict[str, Any]]:
    """Labels and taints that each autoscaled pool's node group must set on its nodes at creation.

    Exported as a stack output: the group definition (Karpenter NodePool, cluster-autoscaler
    node group, GKE/EKS node pool) applies them when a node registers, so no patch races the
    autoscaler. Every pool lists its taint here (`patchTaints: false` too), as nothing fights over
    taints that a node is born with.

    >>> node_group_requirements(dev.facts)["l4-shared"]["labels"]["gpu.acme.dev/pool"]
    'l4-shared'
    """
    result: dict[str, dict[str, Any]] = {}
    for pool_name, pool in sorted(facts.platform.node_pools.items()):
        if pool.max_nodes is None or pool.gpu_class not in facts.platform.gpu_classes:
            continue
        result[pool_name] = {
            "nodeSelector": dict(sorted(pool.node_selector.items())),
            "maxNodes": pool.max_nodes,
            "labels": pool_labels(facts, pool_name),
            "taints": pool_taints(facts, pool_name),
        }
    return result
