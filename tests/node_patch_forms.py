"""The node patches as gpu-tenancy rendered them before each static node got a label patch and a
taint patch (issue 22 item 4): one partial Node per node, under `gpu-tenancy`, carrying the labels
and, where that version tainted the pool, the taints, unforced (forced only when label-only).

That version did not taint a shared pool partitioned by MIG unless the stack set `patchTaints`
(its MIG layout label had to be forced, and a patch with taints never is). Tests build deployed
stacks of that version from it, to prove that upgrading never leaves a node untainted.
"""

from __future__ import annotations

from typing import Any

from components.fleet.facts import FleetFacts
from components.manifests import gpu_nodes, mig_config
from components.manifests.meta import FIELD_MANAGER, MIG_CONFIG_LABEL, PATCH_FIELD_MANAGER, PATCH_FORCE, kube_object


def tainted_before(facts: FleetFacts, pool_name: str) -> bool:
    """`patches_taints` of that version: `patchTaints` if set, else yes except on a shared MIG pool."""
    pool = facts.platform.node_pools[pool_name]
    if pool.patch_taints is not None:
        return pool.patch_taints
    if pool_name in facts.pool_owners:
        return True
    return mig_config.node_labels(facts.platform, pool).get(MIG_CONFIG_LABEL, mig_config.ALL_DISABLED) == mig_config.ALL_DISABLED


def single_patches(facts: FleetFacts) -> list[dict[str, Any]]:
    """One partial Node per static node of every GPU pool, as that version rendered them."""
    patches = []
    for pool_name, pool in sorted(facts.platform.node_pools.items()):
        if pool.gpu_class not in facts.platform.gpu_classes:
            continue
        labels = gpu_nodes.pool_labels(facts, pool_name)
        taints = gpu_nodes.pool_taints(facts, pool_name) if tainted_before(facts, pool_name) else []
        for node in pool.nodes:
            annotations = {PATCH_FIELD_MANAGER: FIELD_MANAGER}
            if not taints:
                annotations[PATCH_FORCE] = "true"
            metadata = {"name": node, "labels": dict(labels), "annotations": dict(sorted(annotations.items()))}
            patches.append(kube_object("v1", "Node", metadata, spec={"taints": taints} if taints else None))
    return sorted(patches, key=lambda p: p["metadata"]["name"])


def with_single_patches(objects: list[dict[str, Any]], facts: FleetFacts) -> list[dict[str, Any]]:
    """Platform objects with their node patches in that version's form."""
    return [*(o for o in objects if not gpu_nodes.is_node_patch(o)), *single_patches(facts)]
