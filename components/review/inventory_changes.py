"""A tenant's placement (its TenantGrant) and ClusterQueue changes in inventory terms, e.g. `allowed pools:
+ h100-train-b` or `flavor h100-train-b nvidia.com/gpu nominal 0 → 4`, rather than the CEL and
resource-group text that carries them: an inventory edit (a pool added, a node moved) rewrites
these objects for many tenants, and what a reviewer checks is what each tenant may now reach.

The placement facts come from the functions that build the policy (`placement`,
`pinning_resources`), so the summary says what the policy enforces; the queue's from the
ClusterQueue itself. The field-level text stays in the document (`fields`; `tenants diff --fields`).

>>> summary_lines({"allowed pools": ["a"]}, {"allowed pools": ["a", "b"]})
['allowed pools: + b']
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..fleet.facts import TenantView
from ..manifests.meta import KubeObject
from ..manifests.placement_policy import pinning_resources, placement
from ..manifests.tenant_grant import KIND as GRANT_KIND
from ..spec.tenant import Tenant
from .object_changes import field_changes


def placement_facts(tenant: Tenant, view: TenantView) -> dict[str, list[str]]:
    """What a tenant's placement policy lets its pods select and refuses, as named lists.

    >>> placement_facts(prod.tenants[1].spec, prod.view(prod.tenants[1].spec))["allowed pools"]
    ['h100-serve']
    """
    p = placement(tenant, view)
    foreign = [(pool, owner) for pool, owner in view.pool_owners if owner != tenant.name]
    facts = {
        "allowed GPU classes": list(p.classes),
        "allowed pools": list(p.pools),
        "own dedicated pools": list(p.dedicated_pools),
        "allowed GPU products": list(p.products),
        "GPU classes that pin a pod": list(p.pinning_classes),
        "GPU products that pin a pod": list(p.pinning_products),
        "GPU resources that pin a pod": pinning_resources(p, view),
        "other tenants' dedicated pools (refused)": [f"{pool} ({owner})" for pool, owner in foreign],
    }
    for pool, _ in foreign:
        facts[f"nodes of {pool} (refused by name)"] = sorted(view.platform.node_pools[pool].nodes)
    return facts


def summary_lines(before: Mapping[str, list[str]], after: Mapping[str, list[str]]) -> list[str]:
    """One line per named list that changes: what it gains (+) and loses (-).

    >>> summary_lines({"allowed pools": ["a", "b"]}, {"allowed pools": ["c", "a"]})
    ['allowed pools: + c, - b']
    """
    lines = []
    for key in dict.fromkeys([*before, *after]):
        old, new = before.get(key, []), after.get(key, [])
        added, removed = [x for x in new if x not in old], [x for x in old if x not in new]
        parts = ([f"+ {', '.join(added)}"] if added else []) + ([f"- {', '.join(removed)}"] if removed else [])
        if parts:
            lines.append(f"{key}: {', '.join(parts)}")
    return lines


_LIMITS = (("nominalQuota", "nominal"), ("borrowingLimit", "borrowing limit"), ("lendingLimit", "lending limit"))


def _flavors(queue: Optional[KubeObject]) -> dict[str, dict[str, dict[str, Any]]]:
    flavors: dict[str, dict[str, dict[str, Any]]] = {}
    for group in ((queue or {}).get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            resources = flavors.setdefault(flavor["name"], {})
            for resource in flavor.get("resources") or []:
                resources[resource["name"]] = resource
    return flavors


def _text(value: Any) -> str:
    return "unset" if value is None else str(value)


def queue_lines(before: Optional[KubeObject], after: Optional[KubeObject]) -> list[str]:
    """A ClusterQueue's change by flavor and resource (quota a flavor does not list is 0), then any
    other spec field that changes.

    >>> cq = lambda flavors: {"spec": {"resourceGroups": [{"flavors": [
    ...     {"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": n}]} for f, n in flavors]}]}}
    >>> queue_lines(cq([("a", "4")]), cq([("a", "2"), ("b", "2")]))
    ['flavors: + b', 'flavor a nvidia.com/gpu nominal 4 → 2', 'flavor b nvidia.com/gpu nominal 0 → 2']
    """
    old, new = _flavors(before), _flavors(after)
    lines = summary_lines({"flavors": list(old)}, {"flavors": list(new)})
    for flavor in dict.fromkeys([*new, *old]):
        left, right = old.get(flavor, {}), new.get(flavor, {})
        for resource in sorted(set(left) | set(right)):
            for key, label in _LIMITS:
                was, now = (left.get(resource) or {}).get(key), (right.get(resource) or {}).get(key)
                if key == "nominalQuota":
                    was, now = was or "0", now or "0"
                if str(was) != str(now):
                    lines.append(f"flavor {flavor} {resource} {label} {_text(was)} → {_text(now)}")
    rest = lambda queue: {k: v for k, v in ((queue or {}).get("spec") or {}).items() if k != "resourceGroups"}
    lines += [f"{c['path']}: {_text(c['from'])} → {_text(c['to'])}" for c in field_changes(rest(before), rest(after), "spec")]
    return lines


def summarise(objects: list[dict[str, Any]], before: Optional[Tenant], before_view: Optional[TenantView],
              after: Optional[Tenant], after_view: Optional[TenantView],
              queues: tuple[list[KubeObject], list[KubeObject]]) -> None:
    """Add `summary` (lines in inventory terms) to the changed TenantGrant (what the placement policy reads) and ClusterQueue
    among one tenant's object changes; a change the summary cannot name keeps its fields alone.

    >>> changes = [{"kind": "TenantGrant", "name": "eval", "change": "changed"}]
    >>> spec = prod.tenants[0].spec
    >>> summarise(changes, spec, prod.view(spec), spec, prod.view(spec), ([], []))
    >>> "summary" in changes[0]
    False
    """
    name = (after or before).name if (after or before) else None
    for change in objects:
        if change["change"] != "changed":
            continue
        lines: list[str] = []
        if change["kind"] == GRANT_KIND and name and change["name"] == name \
                and before and after and before_view and after_view:
            lines = summary_lines(placement_facts(before, before_view), placement_facts(after, after_view))
        elif change["kind"] == "ClusterQueue":
            find = lambda items: next((o for o in items if o.get("kind") == "ClusterQueue"
                                       and o["metadata"]["name"] == change["name"]), None)
            lines = queue_lines(find(queues[0]), find(queues[1]))
        if lines:
            change["summary"] = lines
