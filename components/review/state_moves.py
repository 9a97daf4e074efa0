"""The `pulumi state move`s a sharded environment needs, read from what its stacks hold now.

`tenants diff` finds moves by comparing two commits; that misses a move whose deploy failed or
never ran (a manual deploy, a skipped push). Here the source of truth is Pulumi's state: each
stack's `pulumi stack export` says which Tenant components it holds, the working tree says which
stack each tenant belongs to, and every tenant held by another stack than its own is moved, by
the URN the state has (after an earlier move the CLI parents it to the stack's root, so the URN is
read, never rebuilt). A tenant found under a previous name (`previousNames`) moves by that URN;
the destination's aliases adopt it. Tenants whose file is gone stay where they are: leaving a
stack retains them (docs/offboarding.md).

>>> planned_moves(environment, {"prod": {"eval": "urn:pulumi:prod::p::gpu-tenancy:index:Tenant::eval"}})   # doctest: +SKIP
[{'tenant': 'eval', 'from': 'prod', 'to': 'prod.a', ...}]
"""

from __future__ import annotations

from typing import Any, Mapping

from ..fleet.environment import Environment
from ..fleet.shard_stacks import tenant_stack
from ..spec.sharding import split_stack_name
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

    >>> planned_moves(environment, {"prod": {}})   # doctest: +SKIP
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
