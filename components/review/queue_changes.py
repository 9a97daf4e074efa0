"""Whether a change moves the queues: the decision behind the pull-request workflow's queue simulation.

Pure, over the diff document (`diff.report`): a stack's change is sorted into the classes that can
change how long a team waits and how busy the GPUs are (`CLASSES`): its tenants' quotas (quota
fields, ResourceQuotas, ClusterQueues' resource groups, tenants added, removed or suspended),
pools (capacity, nodes, MIG layouts, ResourceFlavors, a tenant's classes or dedicated pools),
cohorts (Cohorts, a ClusterQueue's cohort) and queue settings (LocalQueues, priority classes, the
rest of a ClusterQueue: preemption, fair sharing, queueing strategy). `tenants diff --format
simulate` prints `simulations(document)`; the workflow runs `tenants simulate` for each stack it
names and posts `SKIPPED` when it names none (docs/simulate.md, "In the pull request").
"""

from __future__ import annotations

from typing import Iterable, Mapping

from .documents import DiffDocument, ObjectChange, StackDiff

CLASSES = ("quotas", "pools", "cohorts", "queues")
SKIPPED = ("Queue simulation skipped: this change touches no quotas, pools, cohorts or queue settings "
           "(`tenants diff --format simulate`).")

# Objects whose every change is of one class; ClusterQueues are read field by field.
KIND_CLASS = {
    "ResourceQuota": "quotas", "Queue": "quotas",           # a KAI queue's quota
    "ResourceFlavor": "pools", "Topology": "pools", "Node": "pools",
    "Cohort": "cohorts",
    "LocalQueue": "queues", "WorkloadPriorityClass": "queues", "PriorityClass": "queues", "AdmissionCheck": "queues",
}
POOL_FIGURES = ("capacity", "overcommit", "limit")   # of a capacity row (`diff.capacity_rows`)
CLUSTER_QUEUE_FIELDS = (("spec.cohort", "cohorts"), ("spec.resourceGroups", "quotas"))


def object_classes(change: ObjectChange) -> set[str]:
    """The classes of one object's change (none for objects that do not move the queues).

    >>> cq = {"id": "x", "kind": "ClusterQueue", "namespace": None, "name": "eval", "change": "changed",
    ...       "fields": [{"path": "spec.cohort", "from": "a", "to": "b"}, {"path": "spec.preemption.withinClusterQueue", "from": None, "to": "Never"}]}
    >>> sorted(object_classes(cq))
    ['cohorts', 'queues']
    >>> object_classes({**cq, "kind": "NetworkPolicy"})
    set()
    """
    kind = change["kind"]
    if kind in KIND_CLASS:
        return {KIND_CLASS[kind]}
    if kind != "ClusterQueue":
        return set()
    if change["change"] != "changed":
        return {"quotas", "queues"}   # a queue comes or goes with its quota
    return {next((c for prefix, c in CLUSTER_QUEUE_FIELDS if f["path"].startswith(prefix)), "queues") for f in change["fields"]}


def _objects(changes: Iterable[ObjectChange]) -> set[str]:
    return {c for change in changes for c in object_classes(change)}


def _capacity_moved(row: Mapping) -> bool:
    """A class's or profile's devices change (not only what the quotas ask of them: that is `quotas`)."""
    before, after = row["from"] or {}, row["to"] or {}
    return any(before.get(k) != after.get(k) for k in POOL_FIGURES)


def change_classes(stack: StackDiff) -> list[str]:
    """The classes a stack's change touches, in `CLASSES` order.

    >>> from components.review.diff import Side, compare_stack
    >>> change_classes(compare_stack("dev", Side(dev), Side(dev)))
    []
    """
    names = stack["tenants"]
    found = _objects(stack["platformObjects"])
    if names["added"] or names["removed"] or names["lifecycle"]:
        found.add("quotas")
    for detail in stack["tenantDetails"]:
        found |= _objects(detail["objects"])
        if detail["quota"]:
            found.add("quotas")
        if any(n["added"] or n["removed"] for n in detail["placement"].values()):
            found.add("pools")
    if stack["nodes"] or stack["nodeGroups"] or stack["mig"] or stack["splitMoves"] or any(map(_capacity_moved, stack["capacity"])):
        found.add("pools")
    return [c for c in CLASSES if c in found]


def simulations(document: DiffDocument) -> list[Mapping[str, object]]:
    """The stacks whose queues the change may move, each with the classes it touches: what the
    workflow simulates (a removed stack has nothing left to replay on).

    >>> simulations({"stacks": []})
    []
    """
    out = []
    for stack in document["stacks"]:
        classes = change_classes(stack) if stack["change"] != "removed" else []
        if classes:
            out.append({"environment": stack["name"], "changes": classes})
    return out
