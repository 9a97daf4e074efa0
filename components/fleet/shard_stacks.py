"""Which Pulumi stack of an environment holds what: the platform objects and each tenant
(docs/sharding.md; the assignment rule itself is in sharding.py).

>>> [(p.stack, p.tenants) for p in stack_parts(lab)]
[('lab', ()), ('lab.blue', ('audio', 'speech')), ('lab.green', ('robotics', 'vision'))]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Optional

from .environment import Environment, LoadedTenant
from ..spec.sharding import assigned_shard, shard_score, shard_stack_name, split_stack_name


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


# --- balanced shards ---------------------------------------------------------------------------
# Balanced shards: the fewest pins (`sharding.assignments`) that bring every hashed shard within
# ±20% of the target size (its tenants over the hashed shards), moving no other tenant.
#
# Hashing spreads tenants unevenly (7 / 19 / 11 at ~12 a shard); the assignment itself stays
# rendezvous hashing, which never moves a tenant when another is added (docs/sharding.md), and
# a rebalance is a handful of pins, each moving one tenant once: `tenants moves --rebalance` prints
# them as the one `assignments` line to write. Reserved shards and their pins are left out: they
# hold what they were reserved for. Tenants already pinned are never moved.
#
# >>> plan = rebalance(["t1", "t2", "t3", "t4"], {"t1": "a", "t2": "a", "t3": "a", "t4": "a"}, ["a", "b"], set())
# >>> plan.pins, plan.after
# ({'t1': 'b', 't2': 'b'}, {'a': 2, 'b': 2})



BAND = Fraction(1, 5)   # ±20% of the target size


@dataclass(frozen=True)
class Rebalance:
    """The sizes of the hashed shards before and after the pins that balance them."""

    target: Fraction            # tenants of the hashed shards / their number
    low: int                    # the band of sizes kept to: ±20% of the target, or the nearest
    high: int                   # whole numbers around it when that band holds none
    before: dict[str, int]
    pins: dict[str, str]        # tenant -> shard, the new pins
    after: dict[str, int]

    @property
    def balanced(self) -> bool:
        return all(self.low <= size <= self.high for size in self.before.values())


def band(tenants: int, shards: int) -> tuple[int, int]:
    """The sizes within ±20% of the target (`tenants` / `shards`), or the whole numbers around it
    when no spread of the tenants fits that band (few tenants a shard).

    >>> band(28, 3), band(3, 2), band(5, 3)
    ((8, 11), (1, 2), (1, 2))
    """
    target = Fraction(tenants, shards)
    low, high = math.ceil(target * (1 - BAND)), math.floor(target * (1 + BAND))
    return (low, high) if low * shards <= tenants <= high * shards else (math.floor(target), math.ceil(target))


def rebalance(tenants: list[str], placed: Mapping[str, str], shards: list[str], pinned: set[str]) -> Rebalance:
    """The pins that bring every shard of `shards` within the band: `placed` is where each tenant
    is now; `pinned` those already pinned (never moved). Each step moves one unpinned tenant from
    the largest shard to the smallest: the one that scores highest there (so the pin goes where its
    name hashes best among the candidates), until every shard is in the band or no move helps.

    >>> plan = rebalance(["p", "x", "y", "z"], {"p": "a", "x": "a", "y": "a", "z": "b"}, ["a", "b"], {"p"})
    >>> plan.before, plan.pins, plan.after, (plan.low, plan.high)
    ({'a': 3, 'b': 1}, {'x': 'b'}, {'a': 2, 'b': 2}, (2, 2))
    """
    members = {shard: sorted(t for t in tenants if placed.get(t) == shard) for shard in shards}
    before = {shard: len(names) for shard, names in members.items()}
    target = Fraction(sum(before.values()), len(shards))
    low, high = band(sum(before.values()), len(shards))
    pins: dict[str, str] = {}
    while True:
        sizes = {shard: len(names) for shard, names in members.items()}
        largest = max(shards, key=lambda s: (sizes[s], s))
        smallest = min(shards, key=lambda s: (sizes[s], s))
        in_band = all(low <= size <= high for size in sizes.values())
        movable = [t for t in members[largest] if t not in pinned and t not in pins]
        if in_band or sizes[largest] - sizes[smallest] <= 1 or not movable:
            return Rebalance(target, low, high, before, dict(sorted(pins.items())), sizes)
        tenant = max(movable, key=lambda t: (shard_score(smallest, t), t))
        members[largest].remove(tenant)
        members[smallest].append(tenant)
        pins[tenant] = smallest


def environment_rebalance(environment) -> Rebalance | None:
    """The rebalance of a loaded environment's hashed shards (None when it is not sharded).

    >>> environment_rebalance(lab).balanced, environment_rebalance(prod)
    (True, None)
    """
    sharding = environment.platform.sharding
    if sharding is None:
        return None
    parts = [p for p in stack_parts(environment) if p.shard is not None and not p.reserved]
    placed = {tenant: part.shard for part in parts for tenant in part.tenants}
    return rebalance(sorted(placed), placed, [p.shard for p in parts], set(sharding.assignments))
