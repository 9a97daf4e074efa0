"""Splitting an environment's tenants across Pulumi stacks, so that a change previews only the
stacks it touches (docs/sharding.md).

An environment `prod` without `sharding` is one Pulumi stack, `prod`, holding everything. With

    sharding:
      shards: [a, b]
      assignments: {llm-finetune: a}

the stack `prod` holds the platform objects only, and the shard stacks `prod.a` and `prod.b`
each hold their tenants. A tenant goes to the shard `assignments` names, else to the shard its
name hashes to (rendezvous hashing: adding a shard moves only the tenants the new shard wins,
removing one moves only its own tenants; the assignment never depends on the other tenants).

>>> assigned_shard("team-a", Sharding(shards=["a", "b"], assignments={"team-a": "b"}))
'b'
>>> split_stack_name("prod.a")
('prod', 'a')
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from pydantic import Field, field_validator, model_validator

from .base import DnsLabel, Model, TenantName

if TYPE_CHECKING:  # load.py imports the stack model, which imports this module
    from .load import Environment, LoadedTenant

SHARD_SEPARATOR = "."


class Sharding(Model):
    """The environment's tenants live in shard stacks `<env>.<shard>`; the stack `<env>` keeps
    the platform objects. Every shard's program still loads and checks the whole fleet."""

    shards: list[DnsLabel] = Field(
        min_length=1,
        description="names of the shard stacks, `<env>.<name>` each; adding or removing one moves only the "
        "tenants that hash to it (tenants diff lists the `pulumi state move` each move needs)",
    )
    assignments: dict[TenantName, DnsLabel] = Field(
        {},
        description="tenants pinned to a shard (e.g. to keep a renamed tenant where it is); the others go "
        "where their name hashes",
    )

    @field_validator("shards")
    @classmethod
    def _unique(cls, shards: list[str]) -> list[str]:
        repeated = sorted({s for s in shards if shards.count(s) > 1})
        if repeated:
            raise ValueError(f"shard {', '.join(repeated)} is listed twice; each shard is one Pulumi stack")
        return shards

    @model_validator(mode="after")
    def _pins_name_shards(self) -> "Sharding":
        for tenant, shard in sorted(self.assignments.items()):
            if shard not in self.shards:
                raise ValueError(
                    f"assignments.{tenant} names shard '{shard}', which is not in `shards` "
                    f"({', '.join(self.shards)}); add it to `shards` or pin the tenant to one of them"
                )
        return self


def shard_stack_name(environment: str, shard: str) -> str:
    """The Pulumi stack of one shard.

    >>> shard_stack_name("prod", "a")
    'prod.a'
    """
    return f"{environment}{SHARD_SEPARATOR}{shard}"


def split_stack_name(stack: str) -> tuple[str, Optional[str]]:
    """`(environment, shard)` of a Pulumi stack name; the shard is None for an environment's own stack.

    >>> split_stack_name("prod")
    ('prod', None)
    """
    environment, separator, shard = stack.partition(SHARD_SEPARATOR)
    return (environment, shard) if separator else (stack, None)


def _score(shard: str, tenant: str) -> int:
    digest = hashlib.sha256(f"{shard}\0{tenant}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def hashed_shard(tenant: str, shards: list[str]) -> str:
    """The shard a tenant's name hashes to: the one with the highest score for (shard, tenant).

    Stable across runs and machines (SHA-256, not Python's salted `hash`), and independent of
    the order of `shards` and of every other tenant.

    >>> hashed_shard("team-a", ["a", "b"]) == hashed_shard("team-a", ["b", "a"])
    True
    """
    return max(shards, key=lambda shard: (_score(shard, tenant), shard))


def assigned_shard(tenant: str, sharding: Sharding) -> str:
    """A tenant's shard: its pin in `assignments`, else where its name hashes.

    >>> assigned_shard("team-a", Sharding(shards=["only"]))
    'only'
    """
    return sharding.assignments.get(tenant) or hashed_shard(tenant, sharding.shards)


def tenant_stack(environment: "Environment", tenant: str) -> str:
    """The Pulumi stack that holds a tenant: `<env>` when unsharded, else `<env>.<shard>`.

    >>> tenant_stack(environment, "team-a")   # doctest: +SKIP
    'prod.b'
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


def stack_parts(environment: "Environment") -> list[StackPart]:
    """The environment's Pulumi stacks in deploy order: its own stack (the platform, and every
    tenant when unsharded), then one per shard, in the order `shards` lists them.

    >>> [p.stack for p in stack_parts(environment)]   # doctest: +SKIP
    ['prod', 'prod.a', 'prod.b']
    """
    names = [t.name for t in environment.tenants]
    sharding = environment.platform.sharding
    if sharding is None:
        return [StackPart(environment.name, None, True, tuple(names))]
    parts = [StackPart(environment.name, None, True, ())]
    for shard in sharding.shards:
        members = tuple(n for n in names if assigned_shard(n, sharding) == shard)
        pinned = tuple(n for n in members if n in sharding.assignments)
        parts.append(StackPart(shard_stack_name(environment.name, shard), shard, False, members, pinned))
    return parts


def stack_part(environment: "Environment", stack: str) -> StackPart:
    """What the Pulumi stack `stack` of this environment registers; `ValueError` (with the fix)
    for a shard the environment does not have.

    >>> stack_part(environment, "prod").platform   # doctest: +SKIP
    True
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


def stack_tenants(environment: "Environment", stack: str) -> list["LoadedTenant"]:
    """The loaded tenants one Pulumi stack registers.

    >>> [t.name for t in stack_tenants(environment, "prod.a")]   # doctest: +SKIP
    ['eval']
    """
    members = set(stack_part(environment, stack).tenants)
    return [t for t in environment.tenants if t.name in members]


def check_sharding(environment: "Environment", shard_files: list[str]) -> list:
    """Warnings about `sharding`: pins of tenants this environment does not deploy, shards that
    hold no tenant, and shard stack files (`stacks/Pulumi.<env>.<shard>.yaml`) of shards it does
    not list (their stacks may still hold tenants: move those before removing the stack).

    >>> check_sharding(environment, [])   # doctest: +SKIP
    []
    """
    from .stack import CONFIG_KEY

    doc, sharding = environment.platform_doc, environment.platform.sharding
    where = ("config", CONFIG_KEY, "sharding")
    problems = []
    prefix = f"{environment.name}{SHARD_SEPARATOR}"
    listed = {shard_stack_name(environment.name, s) for s in (sharding.shards if sharding else [])}
    for stack in shard_files:
        if stack.startswith(prefix) and stack not in listed:
            problems.append(doc.problem(where, (
                f"stacks/Pulumi.{stack}.yaml is the file of shard stack {stack}, but {environment.name} "
                f"{'lists no such shard' if sharding else 'is not sharded'}; if that stack still holds tenants, "
                f"move them (`pulumi state move`, listed by tenants diff) before `pulumi stack rm {stack}`"
            ), severity="warning"))
    if sharding is None:
        return problems
    deployed = {t.name for t in environment.tenants}
    known = deployed | set(environment.disabled_tenants)
    for tenant in sorted(sharding.assignments):
        if tenant not in deployed:
            state = "is not deployed in this environment" if tenant in known else "has no tenant file"
            problems.append(doc.problem((*where, "assignments", tenant), (
                f"assignments pins tenant {tenant}, which {state}; remove the pin or fix the name"
            ), severity="warning"))
    for part in stack_parts(environment)[1:]:
        if not part.tenants:
            problems.append(doc.problem((*where, "shards"), (
                f"shard {part.shard} holds no tenant (stack {part.stack} would be empty); pin tenants to it in "
                f"`assignments` or remove it"
            ), severity="warning"))
    return problems
