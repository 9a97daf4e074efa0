"""Labels and taints of GPU nodes: what the placement policy and pod selectors key on, and what
keeps pods off nodes that are not theirs.

Static nodes are patched in place by server-side apply: partial Node objects carrying only what we
own. Nodes of autoscaled groups come and go, so patching them is a race; their labels and taints
belong in the node group definition instead, and `node_group_requirements` says what they must be.

Each static node of a GPU pool gets two patches of the same Node:
- the **label patch**, labels only, forced, under the field manager `gpu-tenancy`: we take over our
  label keys, e.g. the `nvidia.com/mig.config=all-disabled` default the GPU Operator writes on every
  MIG-capable node, which a MIG pool's layout replaces;
- the **taint patch**, `spec.taints` only, never forced, under a field manager of its own: the
  Pulumi provider's `pulumi-kubernetes-<random>`, kept in the stack's state. It names none
  (`pulumi.com/patchFieldManager`): the provider applies that annotation to the Node too, so two
  patches naming different managers conflict on it. `spec.taints` is one atomic list under
  server-side apply, which the node lifecycle controller, cordon and other tools write too; forcing
  it would drop their taints, so a conflict there is reported instead.
One patch carrying both could be neither: unforced it conflicts on the MIG layout label at the first
apply, forced it drops other managers' taints.

Dedicated pools are tainted (`<domain>/tenant=<owner>:NoSchedule`): the taint keeps off pods that
select no node, or select only on labels we do not manage, which admission cannot judge; admission
(the placement policy) is what stops anyone else from tolerating it or selecting the nodes. Shared
GPU pools, MIG ones included, are tainted `nvidia.com/gpu=present:NoSchedule`: without it, CPU-only
pods fill the nodes' cpu and memory and GPU pods of the tenants that pay for the pool stay Pending
next to idle GPUs; the placement policy lets only GPU pods tolerate it. `patchTaints: false` opts a
pool out (no taint patch) when its nodes register with the taint themselves (kubelet
`--register-with-taints`, the node group).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..fleet import gpu_capacity as cap
from ..fleet.facts import FleetFacts
from . import mig_config, time_slicing
from .meta import (FIELD_MANAGER, GPU_TAINT_KEY, GPU_TAINT_VALUE, PATCH_FIELD_MANAGER, PATCH_FORCE,
                   KubeObject, gpu_class_label, kube_object, object_id, pool_label, tenant_label)

NODE_KIND = "Node"
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


def label_patch(name: str, labels: Mapping[str, str]) -> KubeObject:
    """The label patch of a node: a partial Node with our labels only, forced, under `gpu-tenancy`.

    Forced: we take over our label keys where another manager set them first (the `all-disabled`
    MIG config the GPU Operator writes); the keys of other managers are not in it, so they stay.

    >>> label_patch("n1", {"a": "b"})["metadata"]["annotations"]
    {'pulumi.com/patchFieldManager': 'gpu-tenancy', 'pulumi.com/patchForce': 'true'}
    """
    annotations = {PATCH_FIELD_MANAGER: FIELD_MANAGER, PATCH_FORCE: "true"}
    return kube_object("v1", NODE_KIND, {"name": name, "labels": dict(sorted(labels.items())), "annotations": annotations})


def taint_patch(name: str, taints: list[dict[str, str]]) -> KubeObject:
    """The taint patch of a node: a partial Node with `spec.taints` only, never forced, and no field
    manager annotation (the provider gives it a manager of its own; module docstring).

    `spec.taints` is one atomic list: forcing it would drop the taints other managers own, so a
    node whose list another manager changed is reported as a conflict instead, and keeps its taints.

    >>> patch = taint_patch("n1", [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}])
    >>> patch["metadata"], patch["spec"]["taints"][0]["key"]
    ({'name': 'n1'}, 'nvidia.com/gpu')
    """
    return kube_object("v1", NODE_KIND, {"name": name}, spec={"taints": [dict(t) for t in taints]})


def patches_taints(facts: FleetFacts, pool_name: str) -> bool:
    """Whether the pool's static nodes get a taint patch: `patchTaints` if set, else yes (every GPU pool,
    MIG pools included: the taint patch is apart from the forced label patch that sets the MIG layout).

    `patchTaints: false` is for nodes that register with the taint themselves (kubelet
    `--register-with-taints`, the node group; `node_group_requirements` lists it).

    >>> patches_taints(prod.facts, "a100-shared"), patches_taints(prod.facts, "a100-mig"), patches_taints(prod.facts, "h100-train")
    (True, True, True)
    """
    pool = facts.platform.node_pools[pool_name]
    return True if pool.patch_taints is None else pool.patch_taints


def node_patches(facts: FleetFacts) -> list[KubeObject]:
    """Per static node of every GPU pool its label patch, then its taint patch where `patches_taints`;
    by node name.

    >>> [(p["metadata"]["name"], sorted(p["metadata"].get("labels", {}))[:1]) for p in node_patches(dev.facts)][:2]
    [('dev-a100-01', ['gpu.acme.dev/gpu-class']), ('dev-a100-01', [])]
    """
    patches = []
    for pool_name, pool in sorted(facts.platform.node_pools.items()):
        if pool.gpu_class not in facts.platform.gpu_classes:
            continue
        labels = pool_labels(facts, pool_name)
        taints = pool_taints(facts, pool_name) if patches_taints(facts, pool_name) else []
        for node in pool.nodes:
            patches.append(label_patch(node, labels))
            if taints:
                patches.append(taint_patch(node, taints))
    return sorted(patches, key=object_id)


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
        requirements: dict[str, Any] = {
            "nodeSelector": dict(sorted(pool.node_selector.items())),
            "maxNodes": pool.max_nodes,
            "minNodes": pool.min_nodes or 0,
            "labels": pool_labels(facts, pool_name),
            "taints": pool_taints(facts, pool_name),
        }
        if pool.autoscaler is not None:
            key, fragment = AUTOSCALER_FRAGMENTS[pool.autoscaler]
            requirements[key] = fragment(requirements, cap.node_gpu_resources(facts.platform, pool))
        result[pool_name] = requirements
    return result


def _group_labels(requirements: Mapping[str, Any]) -> dict[str, str]:
    # What every node of the group carries: the labels the pool selects it by, and ours.
    return dict(sorted({**requirements["nodeSelector"], **requirements["labels"]}.items()))


def karpenter_node_pool(requirements: Mapping[str, Any], resources: Mapping[str, int]) -> dict[str, Any]:
    """The part of a Karpenter `karpenter.sh/v1` NodePool that makes its nodes the pool's: labels and
    taints in `spec.template`, set when each node is created (merge it into the NodePool that names
    the instance types and the node class). Karpenter sets the labels of its own domains
    (`karpenter.sh/nodepool`, ...) itself and refuses them in a template, so a pool selecting its
    nodes by one keeps it out; the GPU resources are the instance type's, not the template's.

    >>> karpenter_node_pool({"nodeSelector": {"karpenter.sh/nodepool": "l4"}, "labels": {"x.dev/pool": "l4"},
    ...     "taints": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]}, {})["spec"]["template"]
    {'metadata': {'labels': {'x.dev/pool': 'l4'}}, 'spec': {'taints': [{'effect': 'NoSchedule', 'key': 'nvidia.com/gpu', 'value': 'present'}]}}
    """
    labels = {k: v for k, v in _group_labels(requirements).items() if not k.split("/")[0].endswith(KARPENTER_DOMAIN)}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "spec": {"template": {"metadata": {"labels": labels}, "spec": {"taints": [dict(t) for t in requirements["taints"]]}}}}


def cluster_autoscaler_tags(requirements: Mapping[str, Any], resources: Mapping[str, int]) -> dict[str, str]:
    """The node-template tags the cluster-autoscaler reads from an Auto Scaling group to scale it up
    from zero nodes (with none to look at, it learns the labels, taints and GPUs a new node would
    have only from them): `.../label/<key>`, `.../taint/<key>: <value>:<effect>`, `.../resources/<name>`.
    The group's nodes must still get the labels and taints themselves (kubelet flags, the node group).

    >>> cluster_autoscaler_tags({"nodeSelector": {}, "labels": {"x.dev/pool": "l4"},
    ...     "taints": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]}, {"nvidia.com/gpu": 8})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'k8s.io/cluster-autoscaler/node-template/label/x.dev/pool': 'l4',
     'k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu': '8',
     'k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu': 'present:NoSchedule'}
    """
    tags = {f"{CA_NODE_TEMPLATE}/label/{k}": v for k, v in _group_labels(requirements).items()}
    tags.update({f"{CA_NODE_TEMPLATE}/taint/{t['key']}": f"{t.get('value', '')}:{t['effect']}" for t in requirements["taints"]})
    tags.update({f"{CA_NODE_TEMPLATE}/resources/{name}": str(count) for name, count in resources.items()})
    return dict(sorted(tags.items()))


KARPENTER_DOMAIN = "karpenter.sh"
CA_NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
# One row per autoscaler a pool may name (`nodePools.<pool>.autoscaler`): the key of its fragment in
# the node group requirements, and how it is built from them and a node's GPU resources.
AUTOSCALER_FRAGMENTS = {
    "karpenter": ("karpenterNodePool", karpenter_node_pool),
    "cluster-autoscaler": ("clusterAutoscalerTags", cluster_autoscaler_tags),
}
