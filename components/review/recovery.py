"""What a crash left in the stacks' state, and the state without it (docs/when-things-fail.md).

Read from `pulumi stack export` documents, written back with `pulumi stack import`; nothing here
touches a cluster, and the objects on the cluster stay as they are:

* pending operations: a `pulumi up` killed mid-way leaves the steps it had started in the state
  (`pending_operations`: creating, updating, deleting). The engine warns about them on every later
  `up` until they are cleared; clearing them is safe for this program's objects, because the
  provider's creates are server-side applies that adopt an object the killed run had already
  created, and `up --refresh` reads what the updates and deletes did;
* a half-done `pulumi state move`: killed between its two writes, the tenant is in the state of
  the stack it left and of the stack it went to. The copy in the stack the tenant's file assigns
  it to is the one kept (the move writes it whole before it touches the source); the other is
  stale and is removed with every resource under it.

>>> document = {"version": 3, "deployment": {"resources": [], "pending_operations": [
...     {"type": "creating", "resource": {"urn": "urn:pulumi:prod::p::kubernetes:core/v1:Namespace::a"}}]}}
>>> pending_operations(document), pending_operations(without_pending(document))
([('creating', 'urn:pulumi:prod::p::kubernetes:core/v1:Namespace::a')], [])
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from ..fleet.environment import Environment
from ..fleet.shard_stacks import tenant_stack


def pending_operations(export: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`(operation, urn)` of each operation a killed `pulumi up` left pending in a stack export.

    >>> pending_operations({"version": 3, "deployment": {"resources": []}})
    []
    """
    pending = (export.get("deployment") or {}).get("pending_operations") or []
    return [(op.get("type", "?"), (op.get("resource") or {}).get("urn", "?")) for op in pending]


def without_pending(export: Mapping[str, Any]) -> dict[str, Any]:
    """The export with its pending operations cleared (what `pulumi stack import` then writes).

    >>> without_pending({"version": 3, "deployment": {"pending_operations": [{"type": "deleting"}]}})
    {'version': 3, 'deployment': {}}
    """
    cleared = copy.deepcopy(dict(export))
    cleared["deployment"].pop("pending_operations", None)
    return cleared


def stale_copies(environment: Environment, deployed: Mapping[str, Mapping[str, str]]) -> list[dict[str, str]]:
    """One entry per copy of a tenant that a half-done `pulumi state move` left in a stack other
    than its own, when its own stack holds it too: `{"tenant", "stale", "kept", "urn"}` (the urn
    in the stale stack). `deployed` maps each stack to its `{tenant: urn}` (state_moves.deployed_tenants).
    A tenant held twice but not by its own stack is not a half-done move and is left to the caller.

    >>> stale_copies(lab, {"lab.blue": {"vision": "urn:pulumi:lab.blue::p::gpu-tenancy:index:Tenant::vision"},
    ...                    "lab.green": {"vision": "urn:pulumi:lab.green::p::gpu-tenancy:index:Tenant::vision"}})
    [{'tenant': 'vision', 'stale': 'lab.blue', 'kept': 'lab.green', 'urn': 'urn:pulumi:lab.blue::p::gpu-tenancy:index:Tenant::vision'}]
    """
    known = {t.name for t in environment.tenants}
    stale = []
    for tenant in sorted(known):
        holders = sorted(stack for stack, tenants in deployed.items() if tenant in tenants)
        own = tenant_stack(environment, tenant)
        if len(holders) > 1 and own in holders:
            stale += [{"tenant": tenant, "stale": s, "kept": own, "urn": deployed[s][tenant]} for s in holders if s != own]
    return stale


def without_resource_tree(export: Mapping[str, Any], urn: str) -> tuple[dict[str, Any], int]:
    """The export without the resource `urn` and every resource parented under it (a Tenant
    component and its objects), and without the references the others kept to them; returns
    (export, how many resources were removed).

    >>> doc = {"version": 3, "deployment": {"resources": [
    ...     {"urn": "t", "type": "gpu-tenancy:index:Tenant"}, {"urn": "ns", "parent": "t"},
    ...     {"urn": "other", "dependencies": ["ns"], "propertyDependencies": {"x": ["ns"]}}]}}
    >>> cleaned, removed = without_resource_tree(doc, "t")
    >>> removed, cleaned["deployment"]["resources"]
    (2, [{'urn': 'other', 'dependencies': [], 'propertyDependencies': {'x': []}}])
    """
    cleaned = copy.deepcopy(dict(export))
    resources = cleaned["deployment"].get("resources") or []
    gone = {urn}
    for resource in resources:   # a state lists parents before their children
        if resource.get("parent") in gone:
            gone.add(resource["urn"])
    kept = [r for r in resources if r["urn"] not in gone]
    for resource in kept:
        if "dependencies" in resource:
            resource["dependencies"] = [d for d in resource["dependencies"] if d not in gone]
        for key, deps in (resource.get("propertyDependencies") or {}).items():
            resource["propertyDependencies"][key] = [d for d in deps if d not in gone]
        if resource.get("deletedWith") in gone:
            del resource["deletedWith"]
    cleaned["deployment"]["resources"] = kept
    return cleaned, len(resources) - len(kept)
