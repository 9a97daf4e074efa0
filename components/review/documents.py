"""The shapes of the diff document: what `compare_stack` returns, `report` assembles, `tenants diff
--format json` prints and `diff_format` reads (docs/diff.md describes the keys).

TypedDicts, not dataclasses: the document is JSON and its key order is the bytes it prints, so it
stays plain dicts; these name what each dict holds. Keys that are Python keywords (`from`) need
the functional form.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Optional, TypedDict

Change = Literal["added", "removed", "changed"]

# One leaf that differs: a field of an object, a MIG layout entry, a node group requirement.
FieldChange = TypedDict("FieldChange", {"path": str, "from": Any, "to": Any})


class ObjectChange(TypedDict):
    """An object added, removed or changed, by object id (`object_changes.object_changes`)."""

    id: str
    kind: str
    namespace: Optional[str]
    name: str
    change: Change
    fields: list[FieldChange]
    summary: NotRequired[list[str]]   # inventory terms instead of the fields (inventory_changes.summarise)


class DiffWarning(TypedDict):
    """Something a reviewer must not miss; `kind` is one of docs/diff.md's warnings."""

    stack: str
    tenant: Optional[str]
    kind: str
    message: str


class Names(TypedDict):
    """Names added and removed (`tenant_changes.set_change`)."""

    added: list[str]
    removed: list[str]


Lifecycle = TypedDict("Lifecycle", {"from": Optional[str], "to": Optional[str]})
QuotaChange = TypedDict("QuotaChange", {"key": str, "label": str, "from": Any, "to": Any})


class AccessChange(TypedDict):
    role: str
    subject: str
    change: Literal["granted", "revoked"]


class NetworkChange(TypedDict):
    direction: Literal["egress", "ingress"]
    change: str                      # added, removed, widened, changed
    rule: str
    detail: str


class TenantDetail(TypedDict):
    """Everything that changes for one tenant (`tenant_changes.tenant_changes`)."""

    tenant: str
    change: Change
    renamedFrom: Optional[str]
    lifecycle: Lifecycle
    namespaces: Names
    quota: list[QuotaChange]
    access: list[AccessChange]
    network: list[NetworkChange]
    placement: dict[str, Names]      # classes, dedicatedPools
    objects: list[ObjectChange]


class CapacityFigures(TypedDict, total=False):
    """One GPU class, MIG profile, DRA DeviceClass or the KAI queues on one side: the columns of
    `tenants capacity` (review/capacity_report.py) that the kind of row has."""

    capacity: int                 # GPU classes and MIG profiles
    overcommit: float             # 1.25, or 1 (an int) when whole
    limit: float                  # capacity x overcommit (an int when whole)
    status: Literal["ok", "warning", "over"]
    kaiFractions: Optional[str]   # the memory bound of KAI fractions on the class, None without them
    requested: float              # every kind; whole but on KAI queues, whose quotas may be fractions
    byTenant: dict[str, float]
    gpuClass: str                 # DRA devices: the class whose grant meters them
    departments: dict[str, float]  # KAI queues
    fractions: list[str]
    memoryBound: str
CapacityRow = TypedDict("CapacityRow", {
    "kind": Literal["gpuClass", "migProfile", "draDevices", "kaiQueues"],
    "name": str,
    "from": Optional[CapacityFigures],
    "to": Optional[CapacityFigures],
    "changed": bool,
})

PoolUnits = TypedDict("PoolUnits", {"from": int, "to": int})


class SplitMove(TypedDict):
    """A tenant's quota of one commodity that stays the same while its split across pools changes."""

    tenant: str
    quota: str
    units: int
    pools: dict[str, PoolUnits]


LabelChange = TypedDict("LabelChange", {"key": str, "from": Optional[str], "to": Optional[str]})


class PatchChange(TypedDict):
    id: str
    change: Change


class NodeChange(TypedDict):
    """What our patches set on one static node, before and after."""

    node: str
    change: Change
    labels: list[LabelChange]
    taints: Names
    patches: list[PatchChange]


class NodeGroupChange(TypedDict):
    """An autoscaled pool whose node group must set other labels or taints."""

    pool: str
    fields: list[FieldChange]
    change: Change
    requires: dict[str, Any] | None   # what the node group must set now (`node_group_requirements`); None: removed


ShardMove = TypedDict("ShardMove", {
    "decommissioned": bool, "environment": str, "tenant": str, "from": str, "to": str, "urn": str, "command": str,
})
Rename = TypedDict("Rename", {"from": str, "to": str})


class TenantNames(TypedDict):
    """The stack's tenants by what happens to them."""

    added: list[str]
    removed: list[str]
    renamed: list[Rename]
    changed: list[str]
    notDeployed: list[str]
    lifecycle: list[dict[str, Optional[str]]]   # {tenant, from, to}


class ObjectTotals(TypedDict):
    added: int
    changed: int
    removed: int


class StackDiff(TypedDict):
    """Everything that changes in one stack (`diff.compare_stack`)."""

    name: str
    change: Literal["added", "removed", "changed", "unchanged"]
    tenants: TenantNames
    objectTotals: ObjectTotals
    capacity: list[CapacityRow]
    splitMoves: list[SplitMove]
    nodes: list[NodeChange]
    nodeGroups: list[NodeGroupChange]
    mig: list[FieldChange]
    platformObjects: list[ObjectChange]
    pulumiStacks: list[str]
    shardMoves: list[ShardMove]
    tenantDetails: list[TenantDetail]
    warnings: list[DiffWarning]
    notes: list[str]


class DiffDocument(TypedDict):
    """The whole diff (`diff.report`, `tenants diff --format json`)."""

    formatVersion: int
    base: dict[str, str]             # ref, commit, how
    head: str
    changed: bool
    warnings: list[DiffWarning]
    notes: list[str]
    shardMoves: list[ShardMove]
    stacks: list[StackDiff]
    touchedStacks: list[str]
