"""Checks of an environment's `sharding` against what it deploys and the shard stack files present
(which stack holds what is `components.fleet.shard_stacks`)."""

from __future__ import annotations

from ..fleet.environment import Environment
from ..fleet.shard_stacks import stack_parts
from ..spec.problems import Problem
from ..spec.sharding import SHARD_SEPARATOR, shard_stack_name
from .platform import platform_path


def check_sharding(environment: Environment, shard_files: list[str]) -> list[Problem]:
    """Warnings about `sharding`: pins of tenants this environment does not deploy, shards that
    hold no tenant, and shard stack files (`stacks/Pulumi.<env>.<shard>.yaml`) of shards it does
    not list (their stacks may still hold tenants: move those before removing the stack).

    >>> check_sharding(environment, [])   # doctest: +SKIP
    []
    """
    doc, sharding = environment.platform_doc, environment.platform.sharding
    where = platform_path("sharding")
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

