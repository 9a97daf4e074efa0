"""The `pulumi state move`s a sharded environment needs, read from what its stacks hold now.

`tenants diff` finds moves by comparing two commits; that misses a move whose deploy failed or
never ran (a manual deploy, a skipped push). Here the source of truth is Pulumi's state: each
stack's `pulumi stack export` says which Tenant components it holds, the working tree says which
stack each tenant belongs to, and every tenant held by another stack than its own is moved, by
the URN the state has (after an earlier move the CLI parents it to the stack's root, so the URN is
read, never rebuilt). A tenant found under a previous name (`previousNames`) moves by that URN;
the destination's aliases adopt it. Tenants whose file is gone stay where they are: leaving a
stack retains them (docs/offboarding.md).

>>> [(m["tenant"], m["from"], m["to"]) for m in planned_moves(lab, {
...     "lab.blue": {"vision": "urn:pulumi:lab.blue::p::gpu-tenancy:index:Tenant::vision"}})]
[('vision', 'lab.blue', 'lab.green')]

The same exports also say what a crash left in the state, and the state without it
(docs/when-things-fail.md).

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

from ...fleet.environment import Environment
from ...fleet.shard_stacks import tenant_stack
from ...spec.sharding import split_stack_name
from .stack_changes import TENANT_TYPE, shard_move


class StateExportError(ValueError):
    """A file that is not a usable `pulumi stack export`, or states that contradict each other."""


def stack_of_urn(urn: str) -> str:
    """The stack a URN belongs to.

    >>> stack_of_urn("urn:pulumi:prod.a::gpu-tenancy::gpu-tenancy:index:Tenant::eval")
    'prod.a'
    """
    if not urn.startswith("urn:pulumi:") or "::" not in urn:
        raise StateExportError(f"'{urn}' is not a Pulumi URN (urn:pulumi:<stack>::<project>::<type>::<name>)")
    return urn[len("urn:pulumi:"):].split("::", 1)[0]


def deployed_tenants(export: Any, source: str = "<export>") -> tuple[str | None, dict[str, str]]:
    """`(stack, {tenant: urn})` of one `pulumi stack export` document; the stack is None for an
    empty state (a stack that was created but never deployed holds nothing to move).

    >>> deployed_tenants({"version": 3, "deployment": {"resources": [
    ...     {"urn": "urn:pulumi:prod::gpu-tenancy::gpu-tenancy:index:Tenant::eval", "type": "gpu-tenancy:index:Tenant"}]}})
    ('prod', {'eval': 'urn:pulumi:prod::gpu-tenancy::gpu-tenancy:index:Tenant::eval'})
    """
    deployment = export.get("deployment") if isinstance(export, Mapping) else None
    if not isinstance(deployment, Mapping):
        raise StateExportError(
            f"{source}: not a `pulumi stack export` document (no `deployment` object); "
            f"write it with `pulumi stack export --stack <stack> --file {source}`"
        )
    resources = deployment.get("resources") or []
    stacks = {stack_of_urn(r["urn"]) for r in resources if isinstance(r, Mapping) and "urn" in r}
    if len(stacks) > 1:
        raise StateExportError(f"{source}: resources of several stacks ({', '.join(sorted(stacks))}) in one export")
    return (stacks.pop() if stacks else None), tenant_urns(resources)


def tenant_urns(resources: list[Mapping[str, Any]]) -> dict[str, str]:
    """The URN of each Tenant component among a state's resources, by tenant name.

    >>> tenant_urns([{"urn": "urn:pulumi:prod::p::gpu-tenancy:index:Tenant::eval", "type": "gpu-tenancy:index:Tenant"}])
    {'eval': 'urn:pulumi:prod::p::gpu-tenancy:index:Tenant::eval'}
    """
    return {r["urn"].rsplit("::", 1)[-1]: r["urn"] for r in resources if r.get("type") == TENANT_TYPE}


def planned_moves(environment: Environment, deployed: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """One move per tenant of `environment` that a stack other than its own holds, in the order
    (source stack, tenant); `deployed` maps each stack to its `{tenant: urn}` (deployed_tenants).
    Stacks of other environments are refused, and so is a tenant held by two stacks.

    >>> planned_moves(prod, {"prod": {}})
    []
    """
    foreign = sorted(s for s in deployed if split_stack_name(s)[0] != environment.name)
    if foreign:
        raise StateExportError(
            f"stack(s) {', '.join(foreign)} are not stacks of environment {environment.name}: "
            f"pass only the exports of {environment.name} and {environment.name}.<shard>"
        )
    names = {}
    for loaded in environment.tenants:
        for name in (loaded.name, *loaded.spec.previous_names):
            names[name] = loaded.name
    holders: dict[str, list[tuple[str, str, str]]] = {}
    for stack in sorted(deployed):
        for held, urn in sorted(deployed[stack].items()):
            if held in names:
                holders.setdefault(names[held], []).append((stack, held, urn))
    moves = []
    for tenant, held_by in sorted(holders.items()):
        if len(held_by) > 1:
            raise StateExportError(
                f"tenant {tenant} is in the state of several stacks ("
                + ", ".join(f"{s} as {h}" for s, h, _ in held_by)
                + "): remove the stale copy with `pulumi state delete --stack <stack> <urn> --target-dependents` "
                "(the cluster keeps the objects), then plan again"
            )
        source, _, urn = held_by[0]
        dest = tenant_stack(environment, tenant)
        if source != dest:
            moves.append(shard_move(environment, tenant, source, dest, urn))
    return sorted(moves, key=lambda m: (m["from"], m["tenant"]))


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
