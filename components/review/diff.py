"""What changes between two versions of the tenants and stacks: the report a reviewer reads on a PR.

Pure: `compare_stack` takes one stack's loaded environment on each side (None where the stack is
absent) and returns plain, JSON-ready data with the warnings a reviewer must not miss, in phases:
build both sides, compare the tenants, the capacity, the cluster-wide objects and the Pulumi
stacks; `report` assembles stacks into the document `tenants diff --format json` prints
(docs/diff.md describes it; `documents` names its shapes). Per-tenant interpretation lives in
`tenant_changes`, object field diffs in `object_changes`, formatting in `diff_format`, git
plumbing in `components.cli.diff`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping, TypedDict

import yaml

from ..manifests.build import PLATFORM, environment_objects, helm_releases, tenant_objects
from ..manifests.gpu_nodes import node_group_requirements
from ..manifests.image_policy import allowed_registries
from ..manifests.rbac import write_subjects
from ..manifests.meta import MIG_CONFIG_LABEL, KubeObject, immutable_fields, is_taint_patch, object_id
from ..manifests.renames import rename_message
from ..manifests.guard_policy import ingress_hosts
from .capacity_report import capacity_table
from .documents import (
    CapacityFigures, CapacityRow, DiffDocument, DiffWarning, FieldChange, NodeChange, NodeGroupChange, ObjectChange,
    ObjectTotals, ShardMove, SplitMove, StackDiff, TenantDetail, TenantNames,
)
from .expiry import expiry_warnings
from .gpu_cutover import cutover_warnings
from .inventory_changes import summarise
from .object_changes import field_changes, object_changes, quota_amount, resource_quotas
from ..fleet import gpu_capacity as cap
from ..fleet.environment import Environment
from ..fleet.feasibility import commodity_text
from ..fleet.ingress_hosts import WILDCARD, at_or_below, below
from .moves.stack_changes import move_warning, touched_stacks
from ..spec.quantity import Quantity
from ..spec.tenant import Tenant
from .tenant_changes import set_change, tenant_changes
from ..validate.capacity import crowded_commodities

FORMAT_VERSION = 1


@dataclass
class Side:
    """One stack on one side of the comparison.

    `environment` is None when the stack does not exist on that side (or its stack file could not
    be loaded); `problems` says why parts of the side are missing (only ever set for the base).
    """

    environment: Environment | None
    problems: list[str] = field(default_factory=list)


# --- capacity ----------------------------------------------------------------------------------


_CAPACITY_KEYS = ("capacity", "overcommit", "limit", "requested", "status", "byTenant", "kaiFractions")
_CAPACITY_KIND_ORDER = {"gpuClass": 0, "migProfile": 1, "draDevices": 2, "kaiQueues": 3}


def capacity_rows(environment: Environment) -> dict[tuple[str, str], CapacityFigures]:
    """Per GPU class and MIG profile: capacity, overcommit, limit, quotas of active tenants, status;
    per DRA DeviceClass the devices granted; on a KAI stack the queues' GPU quota (fractions included).

    Taken from `tenants capacity` (the arithmetic of `tenants validate`), so the three never disagree.

    >>> capacity_rows(prod)[("gpuClass", "h100")]["status"]
    'warning'
    >>> capacity_rows(staging)[("kaiQueues", "gpu")]["memoryBound"]
    'hamicore'
    """
    table = capacity_table(environment)
    rows = {}
    for kind, section in (("gpuClass", "gpuClasses"), ("migProfile", "migProfiles")):
        for name, row in table[section].items():
            rows[(kind, name)] = {key: row[key] for key in _CAPACITY_KEYS if key in row}
    for name, row in table["gpuClasses"].items():
        for device_class, devices in row["draDevices"].items():
            rows[("draDevices", device_class)] = {"gpuClass": name, **devices}
    if table["kaiQueues"] is not None:
        rows[("kaiQueues", "gpu")] = dict(table["kaiQueues"])
    return rows


def capacity_changes(before: Environment | None, after: Environment | None) -> list[CapacityRow]:
    """Every GPU class and MIG profile on either side, with both sides' figures and whether they differ.

    >>> [(r["name"], r["from"], r["to"]["capacity"]) for r in capacity_changes(None, prod)][:1]
    [('a100', None, 16)]
    """
    old = capacity_rows(before) if before else {}
    new = capacity_rows(after) if after else {}
    result: list[CapacityRow] = []
    for kind, name in sorted(set(old) | set(new), key=lambda k: (_CAPACITY_KIND_ORDER[k[0]], k[1])):
        left, right = old.get((kind, name)), new.get((kind, name))
        result.append({"kind": kind, "name": name, "from": left, "to": right, "changed": left != right})
    return result


def split_moves(before: Environment | None, after: Environment | None) -> list[SplitMove]:
    """Tenants whose quota of a GPU class or MIG profile stays the same while its split across
    pools (the Kueue flavors' nominal quotas) changes: named with the pools it moves between.

    >>> split_moves(prod, prod)
    []
    """
    if before is None or after is None:
        return []
    old, new = before.facts.quota_split, after.facts.quota_split
    result: list[SplitMove] = []
    for tenant in sorted(set(old) & set(new)):
        for commodity in sorted(set(old[tenant]) & set(new[tenant])):
            a, b = old[tenant][commodity], new[tenant][commodity]
            if a == b or sum(a.values()) != sum(b.values()):
                continue
            pools = {p: {"from": a.get(p, 0), "to": b.get(p, 0)} for p in sorted(set(a) | set(b)) if a.get(p, 0) != b.get(p, 0)}
            result.append({"tenant": tenant, "quota": commodity_text(commodity), "units": sum(b.values()), "pools": pools})
    return result


def _split_move_warnings(stack: str, moves: list[SplitMove], scheduler: str) -> list[DiffWarning]:
    warnings: list[DiffWarning] = []
    for move in moves:
        pools = ", ".join(f"{p} {n['from']} -> {n['to']}" for p, n in move["pools"].items())
        why = ("; its running workloads above a pool's new nominal quota count as borrowed and may be preempted"
               if scheduler == "kueue" else "")
        _warn(warnings, stack, move["tenant"], "split-move", (
            f"tenant {move['tenant']}: its {move['quota']} quota stays {move['units']} but moves between pools ({pools}){why}"
        ))
    return warnings


# --- nodes and MIG -----------------------------------------------------------------------------


def _is_node(obj: Mapping[str, Any]) -> bool:
    return obj.get("apiVersion") == "v1" and obj.get("kind") == "Node"


def mig_config_names(*environments: Environment | None) -> set[str]:
    """Names of the MIG Manager ConfigMap (stack setting `gpuOperator.migConfig`) on either side.

    >>> mig_config_names(dev, None)
    {'gpu-tenancy-mig-config'}
    """
    return {e.platform.gpu_operator.mig_config for e in environments if e is not None}


def _is_mig_config(obj: Mapping[str, Any], names: set[str]) -> bool:
    return obj.get("kind") == "ConfigMap" and obj["metadata"]["name"] in names


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint.get('effect', '')}"


class _Patched(TypedDict):
    labels: dict[str, str]
    taints: set[str]
    patches: dict[str, KubeObject]


def _nodes(objects: list[KubeObject]) -> dict[str, _Patched]:
    """Per static node what our patches set on it (labels of its label patch, taints of its taint
    patch), and the object id of each patch."""
    nodes: dict[str, _Patched] = {}
    for obj in objects:
        if not _is_node(obj):
            continue
        node = nodes.setdefault(obj["metadata"]["name"], {"labels": {}, "taints": set(), "patches": {}})
        node["labels"].update((obj.get("metadata") or {}).get("labels") or {})
        node["taints"].update(_taint_text(t) for t in (obj.get("spec") or {}).get("taints") or [])
        node["patches"][object_id(obj)] = obj
    return nodes


def node_changes(before: list[KubeObject], after: list[KubeObject]) -> list[NodeChange]:
    """Per static node: whether we start or stop patching it, and which labels and taints change
    (of all its patches together: a node's label patch and taint patch are one node here); and,
    under `patches`, which of its partial Nodes (by object id) are added, removed or changed.

    >>> node = lambda v: {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"pool": v}}}
    >>> node_changes([node("a")], [node("b")])[0]["labels"]
    [{'key': 'pool', 'from': 'a', 'to': 'b'}]
    """
    old, new = _nodes(before), _nodes(after)
    empty: _Patched = {"labels": {}, "taints": set(), "patches": {}}
    changes: list[NodeChange] = []
    for name in sorted(set(old) | set(new)):
        left, right = old.get(name, empty), new.get(name, empty)
        labels = [
            {"key": key, "from": left["labels"].get(key), "to": right["labels"].get(key)}
            for key in sorted(set(left["labels"]) | set(right["labels"]))
            if left["labels"].get(key) != right["labels"].get(key)
        ]
        taints = set_change(left["taints"], right["taints"])
        patches = [
            {"id": key, "change": "added" if key not in left["patches"] else "removed" if key not in right["patches"] else "changed"}
            for key in sorted(set(left["patches"]) | set(right["patches"]))
            if left["patches"].get(key) != right["patches"].get(key)
        ]
        if patches:
            change = "added" if name not in old else "removed" if name not in new else "changed"
            changes.append({"node": name, "change": change, "labels": labels, "taints": taints, "patches": patches})
    return changes


def mig_changes(before: list[KubeObject], after: list[KubeObject], names: set[str]) -> list[FieldChange]:
    """Field changes inside the mig-parted ConfigMap `names` (layouts added, removed or re-cut).

    >>> cm = lambda text: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"config.yaml": text}}
    >>> mig_changes([cm("a:\\n  b: 1\\n")], [cm("a:\\n  b: 2\\n")], {"m"})
    [{'path': 'data.config.yaml.a.b', 'from': 1, 'to': 2}]
    """
    old = [o for o in before if _is_mig_config(o, names)]
    new = [o for o in after if _is_mig_config(o, names)]
    changes: list[FieldChange] = []
    for entry in object_changes(old, new):
        if entry["change"] == "changed":
            changes.extend(f for f in entry["fields"] if f["path"].startswith("data."))
        else:
            present = {"from": "absent", "to": "present"} if entry["change"] == "added" else {"from": "present", "to": "absent"}
            changes.append({"path": entry["id"], **present})
    return changes


def _mig_layouts(objects: list[KubeObject], names: set[str]) -> dict[str, list[Mapping[str, object]]]:
    for obj in objects:
        if _is_mig_config(obj, names):
            text = (obj.get("data") or {}).get("config.yaml") or ""
            return (yaml.safe_load(text) or {}).get("mig-configs") or {}
    return {}


def mig_drain_nodes(before: list[KubeObject], after: list[KubeObject], names: set[str]) -> list[str]:
    """Static nodes whose MIG layout changes: their `nvidia.com/mig.config` label, or the layout it names.

    MIG Manager re-partitions a node's GPUs only while no pod uses them, so these nodes must be
    drained first; their pods lose their GPUs (MIG slices do not survive a re-cut).

    >>> node = lambda v: {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {MIG_CONFIG_LABEL: v}}}
    >>> mig_drain_nodes([node("a")], [node("b")], set())
    ['n1']
    """
    old_layouts, new_layouts = _mig_layouts(before, names), _mig_layouts(after, names)
    old = {name: node["labels"].get(MIG_CONFIG_LABEL) for name, node in _nodes(before).items()}
    drained = []
    for obj in after:
        if not _is_node(obj) or is_taint_patch(obj):
            continue
        name = obj["metadata"]["name"]
        layout = (obj["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL)
        if name not in old or layout is None:
            continue
        if old[name] != layout or old_layouts.get(layout) != new_layouts.get(layout):
            drained.append(name)
    return sorted(drained)


def node_group_changes(before: Environment | None, after: Environment | None) -> list[NodeGroupChange]:
    """Autoscaled pools whose required node labels or taints change: their node group definition
    (outside this project) must be updated by hand.

    >>> node_group_changes(None, dev)[0]["change"]
    'added'
    """
    old = node_group_requirements(before.facts) if before else {}
    new = node_group_requirements(after.facts) if after else {}
    return [
        {"pool": pool, "fields": field_changes(old.get(pool), new.get(pool)) if pool in old and pool in new else [],
         "change": "added" if pool not in old else "removed" if pool not in new else "changed",
         "requires": new.get(pool)}
        for pool in sorted(set(old) | set(new))
        if old.get(pool) != new.get(pool)
    ]


# --- one stack -----------------------------------------------------------------------------------


def _warn(warnings: list[DiffWarning], stack: str, tenant: str | None, kind: str, message: str) -> None:
    warnings.append({"stack": stack, "tenant": tenant, "kind": kind, "message": message})


def _removal_warning(name: str, spec: Tenant, environment: Environment | None, file_kept: bool) -> tuple[str, str]:
    namespaces = ", ".join(spec.all_namespaces)
    if spec.is_decommissioned:
        return "tenant-deleted", (
            f"tenant {name} was decommissioned and is now removed: `pulumi up` DELETES its namespaces "
            f"({namespaces}) and everything in them, including data in volumes"
        )
    why = "is disabled in this stack (stack `tenants` list)" if file_kept else "file is removed"
    message = (
        f"tenant {name} {why}, but NOTHING of it is deleted: its namespaces ({namespaces}) with everything in "
        f"them, and its cluster-wide objects (placement policy, role bindings, queues), stay on the cluster as "
        f"they are, and Pulumi stops managing them (`pulumi preview` lists them as deletes; the namespaces "
        f"are retainOnDelete and the rest goes only with them, so the engine only forgets them). To delete them, keep the file with "
        f"`lifecycle: decommissioned` and `decommission: {{confirm: {name}}}`, merge and deploy, then remove "
        f"the file (docs/offboarding.md)"
    )
    if environment is not None and environment.platform.protect_namespaces:
        message += (
            "; this stack protects namespaces (protectNamespaces), so `pulumi up` will refuse to drop them "
            "until they are decommissioned or unprotected with `pulumi state unprotect`"
        )
    return "tenant-removed", message


def _egress_warnings(stack: str, detail: TenantDetail) -> list[DiffWarning]:
    warnings: list[DiffWarning] = []
    tenant = detail["tenant"]
    for rule in detail["network"]:
        if rule["direction"] != "egress":
            continue
        if rule["change"] == "widened":
            _warn(warnings, stack, tenant, "egress-widened", f"tenant {tenant} egress widened: {rule['detail']} ({rule['rule']})")
        elif rule["change"] == "added" and rule["rule"].split(" ", 1)[0].endswith("/0"):
            _warn(warnings, stack, tenant, "egress-widened", f"new tenant {tenant} may send traffic to every address ({rule['rule']})")
    return warnings


def _replaced_objects(detail: TenantDetail) -> list[str]:
    """The changed objects whose change hits a field Kubernetes cannot change in place, with those fields."""
    replaced = []
    for change in detail["objects"]:
        if change["change"] != "changed":
            continue
        api_version = change["id"].rsplit("/", 3)[0]
        fields = immutable_fields({"apiVersion": api_version, "kind": change["kind"]})
        hit = sorted({f["path"] for f in change["fields"] if any(f["path"] == p or f["path"].startswith(p + ".") for p in fields)})
        if hit:
            where = f"{change['namespace']}/" if change["namespace"] else ""
            replaced.append(f"{change['kind']} {where}{change['name']} ({', '.join(hit)})")
    return replaced


def _moved_objects(detail: TenantDetail, after: Tenant | None) -> tuple[list[str], int]:
    """Objects removed from one namespace and added to another: those said one by one, and how many others."""
    removed = {(c["kind"], c["name"]): c["namespace"] for c in detail["objects"] if c["change"] == "removed" and c["namespace"]}
    added = {(c["kind"], c["name"]): c["namespace"] for c in detail["objects"] if c["change"] == "added" and c["namespace"]}
    kept = set(after.all_namespaces) if after is not None else set()
    listed, others = [], 0
    for kind, name in sorted(set(removed) & set(added)):
        source, target = removed[(kind, name)], added[(kind, name)]
        if source in kept:
            listed.append(f"{kind} {name} moves from {source} to {target} and is DELETED from {source}, "
                          f"which stays a namespace of the tenant")
        elif kind == "ServiceAccount":
            listed.append(f"{kind} {name} moves from {source} to {target} (the old one stays in the retained {source})")
        else:
            others += 1
    return listed, others


def _object_warnings(stack: str, detail: TenantDetail, after: Tenant | None) -> list[DiffWarning]:
    """Objects replaced because a field cannot change in place, and objects that move namespace."""
    warnings: list[DiffWarning] = []
    tenant = detail["tenant"]
    replaced = _replaced_objects(detail)
    if replaced:
        _warn(warnings, stack, tenant, "objects-replaced", (
            f"tenant {tenant}: {len(replaced)} object(s) change a field Kubernetes cannot change in place, so "
            f"`pulumi up` deletes and re-creates them (briefly absent): {'; '.join(replaced)}"
        ))
    listed, others = _moved_objects(detail, after)
    if listed:
        more = f"; {others} more object(s) move with the namespace" if others else ""
        _warn(warnings, stack, tenant, "objects-moved", (
            f"tenant {tenant}: objects move to another namespace; whatever uses them (a CI system's "
            f"ServiceAccount token, a Secret reference) must follow: {'; '.join(listed)}{more}"
        ))
    return warnings


def _image_warnings(stack: str, tenant: str, before: Tenant | None, after: Tenant | None,
                    before_env: Environment | None, after_env: Environment | None) -> list[DiffWarning]:
    """An existing tenant may pull images from registries it could not before, or tags where it needed digests."""
    warnings: list[DiffWarning] = []
    if before is None or after is None or before_env is None or after_env is None:
        return warnings
    old, new = allowed_registries(before, before_env.platform), allowed_registries(after, after_env.platform)
    if old and not new:
        _warn(warnings, stack, tenant, "images-widened", (
            f"tenant {tenant} may pull images from any registry (was: {', '.join(old)})"))
    elif old:
        wider = [entry for entry in new if not any(entry == o or entry.startswith(o + "/") for o in old)]
        if wider:
            _warn(warnings, stack, tenant, "images-widened", (
                f"tenant {tenant} may pull images from {', '.join(wider)} too (was: {', '.join(old)})"))
    if before_env.platform.images.require_digest and not after_env.platform.images.require_digest:
        _warn(warnings, stack, tenant, "images-widened", f"images of tenant {tenant} no longer need a digest (tags may be re-pushed)")
    return warnings


def _ingress_host_warnings(stack: str, tenant: str, before: Tenant | None, after: Tenant | None,
                           before_env: Environment | None, after_env: Environment | None) -> list[DiffWarning]:
    """An existing tenant may serve Ingress hosts it could not before (its TenantGrant, what the guard admits):
    a host below none of its old hosts' domains, or a wildcard below none of its old wildcards."""
    warnings: list[DiffWarning] = []
    if before is None or after is None or before_env is None or after_env is None:
        return warnings
    old_hosts, old_domains = ingress_hosts(before, before_env.view(before))
    new_hosts, new_domains = ingress_hosts(after, after_env.view(after))
    wider = [host for host in new_hosts if host not in old_hosts and not any(below(host, d) for d in old_domains)]
    wider += [WILDCARD + domain for domain in new_domains if not any(at_or_below(domain, d) for d in old_domains)]
    if wider:
        was = ", ".join([*old_hosts, *(WILDCARD + d for d in old_domains)]) or "none"
        _warn(warnings, stack, tenant, "ingress-hosts-widened", (
            f"tenant {tenant} may serve Ingress hosts {', '.join(sorted(wider))} too (was: {was}): an Ingress of a host takes "
            "its traffic, so check that these names are the tenant's"))
    return warnings


def placement_narrowed_warnings(stack: str, tenant: str, before: Tenant | None, after: Tenant | None,
                                before_env: Environment | None, after_env: Environment | None) -> list[DiffWarning]:
    """A tenant that keeps running loses pools its pods may land on (a class dropped from `gpu.classes`,
    a shared pool dedicated to another tenant, its own dedication ended; a pool the stack removes is
    the nodes' change, not this): nothing running moves, but
    each pod created afterwards (a restart, a rollout, the next job) is refused there by the placement
    policy, or waits for room in the pools it has left. Said once, with the pools.

    >>> shared = prod.tenants[0].spec.model_copy(update={"name": "eval"})
    >>> gone = shared.model_copy(update={"gpu": shared.gpu.model_copy(update={"classes": []})})
    >>> placement_narrowed_warnings("prod", "eval", shared, gone, prod, prod)[0]["message"][:84]
    'tenant eval may no longer place pods on pools a100-mig, a100-shared (it keeps: none)'
    """
    warnings: list[DiffWarning] = []
    if before is None or after is None or before_env is None or after_env is None or not after.is_active:
        return warnings
    # A pool removed from the stack is the nodes' change (and the split's), not this tenant's.
    lost = sorted(p for p in set(before_env.view(before).reachable_pools) - set(after_env.view(after).reachable_pools)
                  if p in after_env.platform.node_pools)
    if lost:
        kept = ", ".join(after_env.view(after).reachable_pools) or "none"
        _warn(warnings, stack, tenant, "placement-narrowed", (
            f"tenant {tenant} may no longer place pods on pools {', '.join(lost)} (it keeps: {kept}); "
            "its pods running there keep running, but each one created afterwards (a restart, a rollout, the next job) "
            "is refused there by the placement policy: move its workloads off them before the deploy, or keep the pools"))
    return warnings


# What a decommissioned tenant keeps until its namespaces are gone: the admission objects that hold for
# everybody in them (and their parameters), deleted after the namespaces when the file is removed.
_GUARDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "TenantGrant")


def decommission_message(tenant: Tenant, environment: Environment | None) -> str:
    """The `tenant-decommissioned` warning: the namespaces become deletable, who loses which access
    now, and which guards stay until the namespaces are gone.

    >>> retired = prod.tenants[0].spec.model_copy(update={"lifecycle": "decommissioned"})
    >>> print(decommission_message(retired, prod))   # doctest: +NORMALIZE_WHITESPACE
    tenant eval is decommissioned: `pulumi up` lifts retain and protect on its namespaces (eval); removing its
    file afterwards DELETES them and all data in them; its ClusterQueue eval is stopped (stopPolicy: HoldAndDrain),
    not deleted: admitted workloads must finish before Kueue lets a ClusterQueue go, so Kueue evicts them now, and
    removing the file deletes the empty queue. Access removed in the same deploy: its owners and developers
    (Group eval-eng, Group eval-leads, User contractor-jo@acme.dev) keep read access only, as viewers (the Roles
    tenant-owner and tenant-developer lose every write, exec and role binding, and no longer read Secrets); no
    member creates pods, Ingresses or RoleBindings there any more. Guards that stay until the namespaces are gone
    (removing the file deletes the namespaces first, then these): ValidatingAdmissionPolicyBinding
    gpu-tenancy-guard-eval, ValidatingAdmissionPolicyBinding gpu-tenancy-placement-eval, TenantGrant eval
    """
    name = tenant.name
    objects = tenant_objects(tenant, environment.view(tenant)) if environment is not None else []
    queue = ""
    # Asked of the objects, not of the scheduler: a `queue.admission: direct` tenant has no ClusterQueue to stop (#41).
    if any(o["kind"] == "ClusterQueue" and o["metadata"]["name"] == name for o in objects):
        queue = (f"; its ClusterQueue {name} is stopped (stopPolicy: HoldAndDrain), not deleted: admitted workloads "
                 f"must finish before Kueue lets a ClusterQueue go, so Kueue evicts them now, and removing the file "
                 f"deletes the empty queue")
    writers = write_subjects(tenant)
    access = (
        f" Access removed in the same deploy: its owners and developers ({', '.join(writers)}) keep read access only, "
        f"as viewers (the Roles tenant-owner and tenant-developer lose every write, exec and role binding, and no "
        f"longer read Secrets); no member creates pods, Ingresses or RoleBindings there any more."
        if writers else " Nobody of it could write there (no owners, developers or writing CI ServiceAccounts)."
    )
    guards = ""
    if environment is not None:
        kept = sorted((_GUARDS.index(o["kind"]), o["kind"], o["metadata"]["name"])
                      for o in objects if o["kind"] in _GUARDS and not o["metadata"].get("namespace"))
        guards = (" Guards that stay until the namespaces are gone (removing the file deletes the namespaces first, "
                  f"then these): {', '.join(f'{kind} {obj}' for _, kind, obj in kept)}")
    return (f"tenant {name} is decommissioned: `pulumi up` lifts retain and protect on its namespaces "
            f"({', '.join(tenant.all_namespaces)}); removing its file afterwards DELETES them and all data in them"
            f"{queue}.{access}{guards}")


def _tenant_warnings(stack: str, detail: TenantDetail, before: Tenant | None, after: Tenant | None,
                     before_env: Environment | None, after_env: Environment | None) -> list[DiffWarning]:
    warnings: list[DiffWarning] = []
    tenant = detail["tenant"]
    if detail["change"] == "removed" and after_env is not None:
        kind, message = _removal_warning(tenant, before, before_env, tenant in after_env.disabled_tenants)
        _warn(warnings, stack, tenant, kind, message)
    if detail["renamedFrom"] and after is not None and after_env is not None:
        _warn(warnings, stack, tenant, "tenant-renamed", rename_message(
            detail["renamedFrom"], after, tenant_objects(after, after_env.view(after)), after_env.platform.protect_namespaces,
        ))
    if after is not None and after.is_decommissioned and (before is None or not before.is_decommissioned):
        _warn(warnings, stack, tenant, "tenant-decommissioned", decommission_message(after, after_env))
    for grant in detail["access"]:
        if grant["role"] == "owner" and grant["change"] == "granted" and before is not None:
            _warn(warnings, stack, tenant, "owner-granted", (
                f"{grant['subject']} becomes owner of tenant {tenant} (manages workloads, secrets and role bindings "
                f"in {', '.join(after.all_namespaces)})"
            ))
    return (warnings + _object_warnings(stack, detail, after) + _egress_warnings(stack, detail)
            + _image_warnings(stack, tenant, before, after, before_env, after_env)
            + _ingress_host_warnings(stack, tenant, before, after, before_env, after_env)
            + placement_narrowed_warnings(stack, tenant, before, after, before_env, after_env))


def _capacity_warnings(stack: str, capacity: list[CapacityRow], judged_before: Mapping, judged_after: Mapping) -> list[DiffWarning]:
    """A class or MIG profile the capacity check (`crowded_commodities`) reports on the head, with more
    demand or less capacity than on the base: the same judgement as `tenants validate`, so a pool
    dedicated to a tenant that fills it is no warning here either."""
    warnings: list[DiffWarning] = []
    for row in capacity:
        before, after = row["from"], row["to"]
        commodity = _ROW_COMMODITY.get(row["kind"], ""), row["name"]
        if not after or commodity not in judged_after:
            continue
        worse = (before is None or commodity not in judged_before or after["requested"] > before["requested"]
                 or after["limit"] < before["limit"])
        if not worse:
            continue
        status, message = judged_after[commodity]
        subject = f"GPU class {row['name']}" if row["kind"] == "gpuClass" else f"MIG profile {row['name']}"
        if after["status"] == "ok":
            # The class as a whole has room (in pools dedicated to others): what is crowded is a group of its pools.
            _warn(warnings, stack, None, "capacity", message if status == "over" else f"{subject}: {message.split(': ', 1)[1]}")
            continue
        state = "exceeds" if after["status"] == "over" else "is in the warning band (capacityWarningRatio) of"
        _warn(warnings, stack, None, "capacity", (
            f"{subject}: quotas add up to {after['requested']}, which {state} the limit {after['limit']} "
            f"(capacity {after['capacity']} x overcommit {after['overcommit']})"
        ))
    return warnings


_ROW_COMMODITY = {"gpuClass": "class", "migProfile": "mig"}


def quota_lowered_warnings(stack: str, before: dict[str, list[KubeObject]], after: dict[str, list[KubeObject]],
                           own_quota_kept: frozenset[str] = frozenset(), gpu_keys: frozenset[str] = frozenset(),
                           explained: frozenset[tuple[str, str]] = frozenset()) -> list[DiffWarning]:
    """A warning per namespace whose ResourceQuotas go down (or to zero) on a key both sides set.

    Workloads already running keep running, but every pod created afterwards (a restart, a rollout,
    the next job) is refused beyond the new value: the most harmful change a diff can hide, so
    these warnings come first. Keys that appear (a new GPU resource pinned at 0) are not
    decreases; ResourceQuotas that appear or vanish are shown with their objects. A tenant in
    `own_quota_kept` did not change its quota: a GPU key of it (`gpu_keys`, the only ones a queue's
    borrowing raises: quota.py's GPU ceiling) that goes down is what its queue may borrow from the
    cohort (another tenant's change), said as such (`borrowing-lowered`). The (namespace, key) pairs
    in `explained` are said by the GPU stack cutover's warnings instead (`gpu_cutover.py`).

    >>> rq = lambda cpu: {"x": [{"kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": "x"},
    ...     "spec": {"hard": {"requests.cpu": cpu}}}]}
    >>> quota_lowered_warnings("dev", rq("8"), rq("0"))[0]["message"]
    'namespace x: ResourceQuota goes DOWN TO ZERO (tenant-quota requests.cpu 8 → 0); pods that run there keep running, but new pods beyond the quota are refused'
    """
    warnings: list[DiffWarning] = []
    old, new = resource_quotas(before), resource_quotas(after)
    by_namespace: dict[str, tuple[str, list[tuple[str, list[tuple[str, str, str, bool]]]]]] = {}
    # The namespace's own budget first, then its PriorityClass caps.
    for (namespace, name) in sorted(set(old) & set(new), key=lambda k: (k[0], k[1] != "tenant-quota", k[1])):
        owner, hard = new[(namespace, name)]
        _, previous = old[(namespace, name)]
        lowered = []
        for key in sorted(set(previous) & set(hard) - {k for ns, k in explained if ns == namespace}):
            left, right = quota_amount(previous[key]), quota_amount(hard[key])
            if left is not None and right is not None and right < left:
                lowered.append((key, previous[key], hard[key], right == Quantity.parse(0)))
        if lowered:
            by_namespace.setdefault(namespace, (owner, []))[1].append((name, lowered))
    for namespace, (owner, quotas) in by_namespace.items():
        if owner in own_quota_kept and all(key in gpu_keys for _, lowered in quotas for key, *_ in lowered):
            _warn(warnings, stack, owner, "borrowing-lowered", (
                f"namespace {namespace}: what tenant {owner} may borrow from its cohort goes down ("
                + "; ".join(f"{name} {', '.join(f'{key} {left} → {right}' for key, left, right, _ in lowered)}" for name, lowered in quotas)
                + "); its own quota is unchanged (another tenant's change): only pods beyond it, on borrowed GPUs, "
                  "are refused on their next start"))
            continue
        how = "DOWN TO ZERO" if all(zero for _, lowered in quotas for *_, zero in lowered) else "DOWN"
        changes = "; ".join(
            f"{name} {', '.join(f'{key} {left} → {right}' for key, left, right, _ in lowered)}" for name, lowered in quotas
        )
        _warn(warnings, stack, owner, "quota-lowered", (
            f"namespace {namespace}: ResourceQuota goes {how} ({changes}); pods that run there keep running, "
            f"but new pods beyond the quota are refused"
        ))
    return warnings


def unchanged_tenants(before: Environment | None, after: Environment | None) -> set[str]:
    """Tenants whose spec and view of the fleet are equal on both sides.

    A tenant's builders read its spec and its view (`components.fleet.facts.TenantView`) and nothing
    else, so such a tenant's objects are equal by construction: the diff need not build them. A
    platform that changes changes every view: then no tenant is skipped. Under one platform an
    equal spec has equal views when what they read of the fleet is equal (`fleet_inputs`), so the
    views themselves are not made (at 10,000 tenants, 20,000 views).

    >>> unchanged_tenants(prod, prod) == {t.name for t in prod.tenants}
    True
    """
    if before is None or after is None or before.platform != after.platform:
        return set()
    old = {loaded.name: loaded.spec for loaded in before.tenants}
    result = set()
    for loaded in after.tenants:
        spec = old.get(loaded.name)
        if spec is not None and spec == loaded.spec \
                and before.facts.fleet_inputs(spec) == after.facts.fleet_inputs(loaded.spec):
            result.add(loaded.name)
    return result


def release_objects(environment: Environment, skip: Collection[str] = ()) -> dict[str, list[KubeObject]]:
    """Each tenant's Helm releases (its vCluster) as pseudo-objects of kind `HelmRelease`, so they diff
    like the rest; they are not Kubernetes objects (`tenants render` writes them to `<tenant>.helm.yaml`).

    >>> release_objects(dev)["llm-finetune"][0]["kind"]
    'HelmRelease'
    """
    result = {}
    for loaded in environment.tenants:
        if loaded.name in skip:
            continue
        result[loaded.name] = [
            {"apiVersion": "helm", "kind": "HelmRelease",
             "metadata": {"name": release["name"], "namespace": release["namespace"]},
             "spec": {key: value for key, value in release.items() if key not in ("name", "namespace")}}
            for release in helm_releases(loaded.spec, environment.view(loaded.spec))
        ]
    return result


def _objects(environment: Environment, skip: Collection[str] = ()) -> dict[str, list[KubeObject]]:
    objects = environment_objects(environment, skip)
    for owner, releases in release_objects(environment, skip).items():
        objects[owner] = [*objects.get(owner, []), *releases]
    return objects


def _pairs(old: dict[str, Tenant], new: dict[str, Tenant]) -> list[tuple[str | None, str | None]]:
    """(base name, head name) per tenant; a head tenant listing a vanished name in previousNames pairs with it."""
    vanished = set(old) - set(new)
    renamed = {}
    for name in sorted(set(new) - set(old)):
        match = next((p for p in new[name].previous_names if p in vanished and p not in renamed), None)
        if match:
            renamed[match] = name
    pairs = [(name if name in old else None, name if name in new else None) for name in sorted(set(old) | set(new))
             if name not in renamed and name not in renamed.values()]
    pairs += list(renamed.items())
    return sorted(pairs, key=lambda p: p[1] or p[0])


def _safe(compute: Callable[[], Any], fallback: Any, notes: list[str], what: str) -> Any:
    try:
        return compute()
    except Exception as err:  # the lenient base may hold what the builders cannot take
        notes.append(f"could not compute {what} ({type(err).__name__}: {err}); that part of the diff is incomplete")
        return fallback


# --- the phases of one stack's comparison ------------------------------------------------------------
# Each phase reads the sides it is given and returns its part of the StackDiff with its warnings;
# `notes` collects, in phase order, what could not be computed from a lenient base.


@dataclass(frozen=True)
class Built:
    """One stack's two sides, built: the tenants' specs, and the objects of every tenant but the unchanged ones."""

    name: str
    before: Environment | None
    after: Environment | None
    unchanged: set[str]
    old_objects: dict[str, list[KubeObject]]
    new_objects: dict[str, list[KubeObject]]
    old_tenants: dict[str, Tenant]
    new_tenants: dict[str, Tenant]
    pairs: list[tuple[str | None, str | None]]   # (base name, head name) per tenant: `_pairs`


def build_sides(name: str, base: Side, head: Side, notes: list[str], incremental: bool = True) -> Built:
    """Both sides' specs and objects; with `incremental`, the `unchanged_tenants` are not built.

    >>> built = build_sides("dev", Side(dev), Side(dev), [])
    >>> sorted(built.unchanged) == sorted(built.new_tenants), list(built.new_objects)
    (True, ['_platform'])
    """
    before, after = base.environment, head.environment
    same = _safe(lambda: unchanged_tenants(before, after), set(), notes, f"the unchanged tenants of stack {name}") \
        if incremental else set()
    old_objects = _safe(lambda: _objects(before, same), {}, notes, f"the base objects of stack {name}") if before else {}
    old_tenants = {t.name: t.spec for t in before.tenants} if before else {}
    new_tenants = {t.name: t.spec for t in after.tenants} if after else {}
    return Built(name, before, after, same, old_objects, _objects(after, same) if after else {},
                 old_tenants, new_tenants, _pairs(old_tenants, new_tenants))


def _tenant_detail(built: Built, old_name: str | None, new_name: str | None, notes: list[str]) -> TenantDetail | None:
    before, after = built.old_tenants.get(old_name), built.new_tenants.get(new_name)
    old_objects, new_objects = built.old_objects.get(old_name, []), built.new_objects.get(new_name, [])
    objects = object_changes(old_objects, new_objects)
    _safe(lambda: summarise(objects, before, built.before.view(before) if before and built.before else None,
                            after, built.after.view(after) if after and built.after else None, (old_objects, new_objects)),
          None, notes, f"the inventory summary of tenant {new_name or old_name}")
    return tenant_changes(before, built.before, after, built.after, objects)


def compare_tenants(built: Built, notes: list[str]) -> tuple[list[TenantDetail], list[DiffWarning]]:
    """Each tenant that changes (renames paired by previousNames), with its warnings and those of a possible rename.

    >>> compare_tenants(build_sides("dev", Side(dev), Side(dev), []), [])
    ([], [])
    """
    details, warnings = [], []
    for old_name, new_name in built.pairs:
        if old_name == new_name and new_name in built.unchanged:
            continue   # nothing of it changes (see unchanged_tenants)
        detail = _tenant_detail(built, old_name, new_name, notes)
        if detail is not None:
            details.append(detail)
            warnings += _tenant_warnings(built.name, detail, built.old_tenants.get(old_name), built.new_tenants.get(new_name),
                                         built.before, built.after)
    return details, warnings + _rename_warnings(built.name, details, built.after)


def _rename_warnings(stack: str, details: list[TenantDetail], after_env: Environment | None) -> list[DiffWarning]:
    added = [d["tenant"] for d in details if d["change"] == "added"]
    if not added or after_env is None:
        return []
    warnings: list[DiffWarning] = []
    for old in (d["tenant"] for d in details if d["change"] == "removed"):
        _warn(warnings, stack, old, "possible-rename", (
            f"tenant {old} disappears while {', '.join(added)} appears: if this is a rename, add "
            f"`previousNames: [{old}]` to the new tenant's file so its resources are adopted, instead of "
            f"{old}'s namespaces being retained and new ones created"
        ))
    return warnings


def not_deployed(built: Built) -> list[str]:
    """Tenant files the stack's `tenants` list leaves out, that the base did not leave out already
    (those deployed in the base show as removed, with their own warning), and that the stack does not
    leave out on purpose (`tenantsLeftOut`: by name, or `others` for every tenant it does not list).

    >>> not_deployed(build_sides("dev", Side(dev), Side(None), []))
    []
    """
    if built.after is None:
        return []
    platform = built.after.platform
    new = set(built.after.disabled_tenants) - set(built.before.disabled_tenants if built.before else [])
    return sorted(t for t in new if not platform.leaves_out_on_purpose(t))


def _not_deployed_warnings(stack: str, tenants: list[str]) -> list[DiffWarning]:
    warnings: list[DiffWarning] = []
    for tenant in tenants:
        _warn(warnings, stack, tenant, "not-deployed", (
            f"tenant {tenant} is not deployed in {stack}: the stack lists its tenants (`tenants:` in "
            f"stacks/Pulumi.{stack}.yaml) and {tenant} is not among them; add it there to deploy it"
        ))
    return warnings


def compare_capacity(built: Built, notes: list[str]) -> tuple[list[CapacityRow], list[SplitMove], list[DiffWarning]]:
    """The capacity rows of both sides and the quota splits that move between pools, with their warnings.

    >>> rows, moves, warnings = compare_capacity(build_sides("dev", Side(dev), Side(dev), []), [])
    >>> any(r["changed"] for r in rows), moves, warnings
    (False, [], [])
    """
    name, before, after = built.name, built.before, built.after
    capacity = _safe(lambda: capacity_changes(before, after), [], notes, f"capacity of stack {name}")
    moved = _safe(lambda: split_moves(before, after), [], notes, f"the quota splits of stack {name}")
    judged = [_safe(lambda env=env: crowded_commodities(env) if env else {}, {}, notes, f"the capacity check of stack {name}")
              for env in (before, after)]
    warnings = _capacity_warnings(name, capacity, *judged) + _split_move_warnings(name, moved, after.platform.scheduler if after else "none")
    return capacity, moved, warnings


@dataclass(frozen=True)
class PlatformChanges:
    """What changes of the cluster-wide objects: node patches, MIG layouts, the other objects, autoscaled pools."""

    nodes: list[NodeChange]
    mig: list[FieldChange]
    objects: list[ObjectChange]
    node_groups: list[NodeGroupChange]
    warnings: list[DiffWarning]

    def __bool__(self) -> bool:
        return bool(self.nodes or self.mig or self.objects or self.node_groups)


def compare_platform(built: Built, notes: list[str]) -> PlatformChanges:
    """The cluster-wide objects' changes, nodes and MIG layouts read apart, with the drain and node group warnings.

    >>> bool(compare_platform(build_sides("dev", Side(dev), Side(dev), []), []))
    False
    """
    name = built.name
    old, new = built.old_objects.get(PLATFORM, []), built.new_objects.get(PLATFORM, [])
    mig_names = mig_config_names(built.before, built.after)
    warnings = _drain_warnings(name, mig_drain_nodes(old, new, mig_names))
    objects = [
        c for c in object_changes(old, new)
        if not (c["kind"] == "Node" and c["id"].startswith("v1/")) and not (c["kind"] == "ConfigMap" and c["name"] in mig_names)
    ]
    node_groups = _safe(lambda: node_group_changes(built.before, built.after), [], notes, f"node groups of stack {name}")
    for group in node_groups:
        _warn(warnings, name, None, "node-group", (
            f"autoscaled pool {group['pool']}: the labels or taints its node group must set change; update the "
            f"node group definition outside this project (see the nodeGroupRequirements stack output)"
        ))
    return PlatformChanges(node_changes(old, new), mig_changes(old, new, mig_names), objects, node_groups, warnings)


def _drain_warnings(stack: str, drain: list[str]) -> list[DiffWarning]:
    warnings: list[DiffWarning] = []
    if drain:
        _warn(warnings, stack, None, "mig-drain", (
            f"the MIG layout of {len(drain)} node(s) changes: MIG Manager re-partitions a node's GPUs only while no "
            f"pod uses them, and pods there lose their MIG slices; drain them before `pulumi up` "
            f"(`kubectl drain <node> --ignore-daemonsets`): {', '.join(drain)}"
        ))
    return warnings


def compare_pulumi_stacks(built: Built, details: list[TenantDetail], platform_changed: bool, notes: list[str],
                          project: str = "gpu-tenancy") -> tuple[list[str], list[ShardMove], list[DiffWarning]]:
    """The Pulumi stacks the change touches and the tenants that move between them, with the move warnings;
    a removed stack file leaves its stacks as they are: nothing to preview.

    >>> compare_pulumi_stacks(build_sides("dev", Side(dev), Side(dev), []), [], False, [])
    ([], [], [])
    """
    if built.after is None:
        return [], [], []
    stacks, moves = _safe(lambda: touched_stacks(built.before, built.after, built.pairs, details, project=project,
                                                 platform_changed=platform_changed or built.before is None),
                          ([], []), notes, f"the Pulumi stacks of {built.name}")
    warnings: list[DiffWarning] = []
    for move in moves:
        _warn(warnings, built.name, move["tenant"], "shard-move", move_warning(move))
    return stacks, moves, warnings


def _stack_change(built: Built, base: Side, details: list[TenantDetail], platform: PlatformChanges,
                  moves: list[ShardMove], capacity: list[CapacityRow]) -> str:
    if built.after is None:
        return "removed"
    if built.before is None and not base.problems:
        return "added"
    return "changed" if details or platform or moves or any(r["changed"] for r in capacity) else "unchanged"


def _stack_removed(stack: str, warnings: list[DiffWarning]) -> list[DiffWarning]:
    # Nothing is deployed any more, so nothing can be over capacity.
    kept = [w for w in warnings if w["kind"] != "capacity"]
    _warn(kept, stack, None, "stack-removed", (
        f"the stack file of {stack} is removed: nothing changes on that cluster until someone runs "
        f"`pulumi destroy` or `pulumi stack rm` (tenant namespaces are retained either way)"
    ))
    return kept


def _tenant_names(details: list[TenantDetail], left_out: list[str]) -> TenantNames:
    return {
        "added": [d["tenant"] for d in details if d["change"] == "added"],
        "removed": [d["tenant"] for d in details if d["change"] == "removed"],
        "renamed": [{"from": d["renamedFrom"], "to": d["tenant"]} for d in details if d["renamedFrom"]],
        "changed": [d["tenant"] for d in details if d["change"] == "changed"],
        "notDeployed": left_out,
        "lifecycle": [
            {"tenant": d["tenant"], **d["lifecycle"]}
            for d in details if d["change"] == "changed" and d["lifecycle"]["from"] != d["lifecycle"]["to"]
        ],
    }


def _object_totals(details: list[TenantDetail], platform: PlatformChanges) -> ObjectTotals:
    totals: ObjectTotals = {"added": 0, "changed": 0, "removed": 0}
    for change in [*(o for d in details for o in d["objects"]), *platform.objects, *platform.nodes]:
        totals[change["change"]] += 1
    return totals


def compare_stack(name: str, base: Side, head: Side, *, project: str = "gpu-tenancy", incremental: bool = True) -> StackDiff:
    """Everything that changes in one stack, with the warnings a reviewer must not miss.

    `incremental` builds only the tenants that are not `unchanged_tenants` (the same result as
    building all of them, checked by tests/hardening/test_incremental_diff.py).

    >>> compare_stack("dev", Side(dev), Side(dev))["change"]
    'unchanged'
    """
    notes = [f"stack {name}: {p}" for p in base.problems]
    built = build_sides(name, base, head, notes, incremental)
    details, tenant_warnings = compare_tenants(built, notes)
    left_out = not_deployed(built)
    capacity, moved, capacity_warnings = compare_capacity(built, notes)
    platform = compare_platform(built, notes)
    pulumi_stacks, moves, move_warnings = compare_pulumi_stacks(built, details, bool(platform), notes, project)
    # Lowered namespace quotas first: the change most likely to break running teams unnoticed; the
    # expiry of every tenant, changed or not: the next deploy suspends an expired one, whatever the PR changes.
    kept = frozenset(t for t, spec in built.new_tenants.items()
                     if t in built.old_tenants and built.old_tenants[t].quota == spec.quota)
    gpu_keys = frozenset(cap.quota_key(r) for side in (built.before, built.after) if side for r in side.facts.quota_gpu_resources)
    cutover, explained = cutover_warnings(name, built.before, built.after, built.old_objects, built.new_objects, kept)
    warnings = [*quota_lowered_warnings(name, built.old_objects, built.new_objects, kept, gpu_keys, explained),
                *cutover, *tenant_warnings,
                *expiry_warnings(name, built.after), *_not_deployed_warnings(name, left_out),
                *capacity_warnings, *platform.warnings, *move_warnings]
    change = _stack_change(built, base, details, platform, moves, capacity)
    return {
        "name": name,
        "change": change,
        "tenants": _tenant_names(details, left_out),
        "objectTotals": _object_totals(details, platform),
        "capacity": capacity,
        "splitMoves": moved,
        "nodes": platform.nodes,
        "nodeGroups": platform.node_groups,
        "mig": platform.mig,
        "platformObjects": platform.objects,
        "pulumiStacks": pulumi_stacks,
        "shardMoves": moves,
        "tenantDetails": details,
        "warnings": _stack_removed(name, warnings) if change == "removed" else warnings,
        "notes": notes,
    }


def report(stacks: list[StackDiff], base: Mapping[str, str], head: str = "working tree") -> DiffDocument:
    """The whole diff document (`tenants diff --format json`), stable key order, version 1.

    >>> report([], {"ref": "HEAD", "commit": "0" * 40})["changed"]
    False
    """
    warnings = [w for s in stacks for w in s["warnings"]]
    warnings.sort(key=lambda w: w["kind"] != "quota-lowered")  # stable: lowered quotas first, else as found
    notes = [n for s in stacks for n in s["notes"]]
    return {
        "formatVersion": FORMAT_VERSION,
        "base": dict(base),
        "head": head,
        "changed": any(s["change"] != "unchanged" for s in stacks),
        "warnings": warnings,
        "notes": notes,
        "shardMoves": [m for s in stacks for m in s["shardMoves"]],
        "stacks": stacks,
        "touchedStacks": [t for s in stacks for t in s["pulumiStacks"]],
    }


def to_json(document: Mapping[str, object]) -> str:
    """The document as indented JSON, keys sorted, so equal diffs print equal bytes.

    >>> to_json({"b": 1, "a": [2]})
    '{\\n  "a": [\\n    2\\n  ],\\n  "b": 1\\n}\\n'
    """
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
