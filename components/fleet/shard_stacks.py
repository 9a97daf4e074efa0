"""Which Pulumi stack of an environment holds what: the platform objects and each tenant
(docs/sharding.md; the assignment rule itself is in sharding.py).

>>> [(p.stack, p.tenants) for p in stack_parts(lab)]
[('lab', ()), ('lab.blue', ('audio', 'speech')), ('lab.green', ('robotics', 'vision'))]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .environment import Environment, LoadedTenant
from ..spec.sharding import assigned_shard, shard_stack_name, split_stack_name


def tenant_stack(environment: Environment, tenant: str) -> str:
    """The Pulumi stack that holds a tenant: `<env>` when unsharded, else `<env>.<shard>`.

    >>> tenant_stack(lab, "vision"), tenant_stack(prod, "eval")
    ('lab.green', 'prod')
    """
    sharding = environment.platform.sharding
    if sharding is None:
        return environment.name
    return shard_stack_name(environment.name, assigned_shard(tenant, sharding))


@dataclass(frozen=True)
class StackPart:
    """What one Pulumi stack of an environment registers."""

    stack: str
    shard: Optional[str]            # None: the environment's own stack
    platform: bool                  # the cluster-wide objects
    tenants: tuple[str, ...]        # enabled tenants, by name
    pinned: tuple[str, ...] = ()    # those placed by `assignments` rather than by hash
    needs: tuple[str, ...] = ()     # stacks that must be deployed first (a shard: its environment's stack)
    reserved: bool = False          # a shard that holds only the tenants pinned to it


def stack_parts(environment: Environment) -> list[StackPart]:
    """The environment's Pulumi stacks in deploy order: its own stack (the platform, and every
    tenant when unsharded), then one per shard, in the order `shards` lists them. That order is
    one walk of the deploy graph (`needs`): every shard needs the environment's stack (its
    PriorityClasses, node labels and shared policies) and nothing else, so shards may deploy
    concurrently.

    >>> [p.stack for p in stack_parts(lab)]
    ['lab', 'lab.blue', 'lab.green']
    """
    names = [t.name for t in environment.tenants]
    sharding = environment.platform.sharding
    if sharding is None:
        return [StackPart(environment.name, None, True, tuple(names))]
    # One assignment per tenant, then grouped: asking every shard about every tenant hashed each
    # tenant against every shard once per shard (3.2M digests at 1,000 tenants in 40 shards).
    members_of: dict[str, list[str]] = {shard: [] for shard in sharding.shards}
    for name in names:
        members_of[assigned_shard(name, sharding)].append(name)
    parts = [StackPart(environment.name, None, True, ())]
    for shard in sharding.shards:
        members = tuple(members_of[shard])
        pinned = tuple(n for n in members if n in sharding.assignments)
        parts.append(StackPart(shard_stack_name(environment.name, shard), shard, False, members, pinned,
                               (environment.name,), shard in sharding.reserved))
    return parts


def stack_part(environment: Environment, stack: str) -> StackPart:
    """What the Pulumi stack `stack` of this environment registers; `ValueError` (with the fix)
    for a shard the environment does not have.

    >>> stack_part(lab, "lab").platform, stack_part(lab, "lab.blue").platform
    (True, False)
    """
    for part in stack_parts(environment):
        if part.stack == stack:
            return part
    _, shard = split_stack_name(stack)
    sharding = environment.platform.sharding
    if sharding is None:
        raise ValueError(
            f"stack {stack} is a shard of {environment.name}, but {environment.name} is not sharded; add "
            f"`sharding: {{shards: [{shard}]}}` to its inventory, or use the stack {environment.name}"
        )
    raise ValueError(
        f"stack {stack}: shard '{shard}' is not in {environment.name}'s `sharding.shards` "
        f"({', '.join(sharding.shards)}); add it there, or move its tenants out (tenants diff lists the "
        f"`pulumi state move` commands) and remove the stack"
    )


def stack_tenants(environment: Environment, stack: str) -> list[LoadedTenant]:
    """The loaded tenants one Pulumi stack registers.

    >>> [t.name for t in stack_tenants(lab, "lab.blue")]
    ['audio', 'speech']
    """
    members = set(stack_part(environment, stack).tenants)
    return [t for t in environment.tenants if t.name in members]
