"""Splitting an environment's tenants across Pulumi stacks, so that a change previews only the
stacks it touches (docs/sharding.md).

An environment `prod` without `sharding` is one Pulumi stack, `prod`, holding everything. With

    sharding:
      shards: [a, b]
      assignments: {llm-finetune: a}

the stack `prod` holds the platform objects only, and the shard stacks `prod.a` and `prod.b`
each hold their tenants. A tenant goes to the shard `assignments` names, else to the shard its
name hashes to among those not `reserved` (a reserved shard holds only the tenants pinned to it) (rendezvous hashing: adding a shard moves only the tenants the new shard wins,
removing one moves only its own tenants; the assignment never depends on the other tenants).

What each stack of a loaded environment holds: shard_stacks.py.

>>> assigned_shard("team-a", Sharding(shards=["a", "b"], assignments={"team-a": "b"}))
'b'
>>> split_stack_name("prod.a")
('prod', 'a')
"""

from __future__ import annotations

import functools
import hashlib
from typing import Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from .base import DnsLabel, Model, TenantName

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
    reserved: list[DnsLabel] = Field(
        [],
        description="shards kept for the tenants pinned to them in `assignments` (e.g. a SaaS shard): no "
        "unpinned tenant hashes into a reserved shard, so it holds only its pins; at least one shard must stay "
        "unreserved for the others",
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

    @field_validator("reserved")
    @classmethod
    def _reserved_shards(cls, reserved: list[str], info: ValidationInfo) -> list[str]:
        # Checked here rather than after the model so that the error points at `reserved`.
        shards, assignments = info.data.get("shards"), info.data.get("assignments")
        if shards is None or assignments is None:
            return reserved  # `shards` or `assignments` is itself invalid and reported
        for shard in reserved:
            if shard not in shards:
                raise ValueError(
                    f"shard '{shard}' is reserved but not in `shards` ({', '.join(shards)}); add it to `shards` "
                    f"or remove it from `reserved`"
                )
            if shard not in assignments.values():
                raise ValueError(
                    f"shard '{shard}' is reserved for its pinned tenants, but `assignments` pins none to it, so "
                    f"its stack would be empty; pin a tenant to it (`assignments: {{<tenant>: {shard}}}`) or "
                    f"remove it from `reserved`"
                )
        if set(shards) <= set(reserved):
            raise ValueError(
                f"every shard is reserved ({', '.join(shards)}), so a tenant without a pin would have no shard; "
                f"leave at least one shard out of `reserved`, or add an unreserved shard to `shards`"
            )
        return reserved

    def hashed_shards(self) -> list[str]:
        """The shards an unpinned tenant may hash into: all but the reserved ones.

        >>> Sharding(shards=["saas", "a"], assignments={"acme": "saas"}, reserved=["saas"]).hashed_shards()
        ['a']
        """
        return [shard for shard in self.shards if shard not in self.reserved]


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


def shard_score(shard: str, tenant: str) -> int:
    """The rendezvous score of (shard, tenant): a tenant hashes to the shard that scores highest.

    >>> shard_score("a", "team-a") == shard_score("a", "team-a") != shard_score("b", "team-a")
    True
    """
    digest = hashlib.sha256(f"{shard}\0{tenant}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def hashed_shard(tenant: str, shards: list[str]) -> str:
    """The shard a tenant's name hashes to: the one with the highest score for (shard, tenant).

    Stable across runs and machines (SHA-256, not Python's salted `hash`), and independent of
    the order of `shards` and of every other tenant.

    >>> hashed_shard("team-a", ["a", "b"]) == hashed_shard("team-a", ["b", "a"])
    True
    """
    return _highest_scoring(tenant, tuple(shards))


@functools.lru_cache(maxsize=65536)
def _highest_scoring(tenant: str, shards: tuple[str, ...]) -> str:
    # Cached: the program, validation and the diff ask for the same tenants' shards several times,
    # and each answer is one digest per shard.
    return max(shards, key=lambda shard: (shard_score(shard, tenant), shard))


def assigned_shard(tenant: str, sharding: Sharding) -> str:
    """A tenant's shard: its pin in `assignments`, else where its name hashes among the shards
    that are not `reserved`.

    >>> assigned_shard("team-a", Sharding(shards=["only"]))
    'only'
    """
    return sharding.assignments.get(tenant) or hashed_shard(tenant, sharding.hashed_shards())
