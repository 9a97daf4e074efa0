"""Which Pulumi stacks a change touches, and the tenants it moves between shard stacks.

A pull request is previewed only in the stacks it touches (docs/sharding.md): the environment's
own stack when platform objects change, and the stack of every tenant whose objects change, on
both sides of a move. A tenant that moves to another stack must be moved in Pulumi's state first
(`pulumi state move`), or the source stack forgets it and the destination adopts it (safe, since a
tenant that leaves a stack is retained on the cluster, but two steps instead of none).

>>> touched_stacks(None, None, [], [], platform_changed=False)
([], [])
"""

from __future__ import annotations

import shlex
from typing import Any, Optional

from ...fleet.environment import Environment
from ...fleet.shard_stacks import stack_parts, tenant_stack

FLEET_TYPE = "gpu-tenancy:index:Fleet"
TENANT_TYPE = "gpu-tenancy:index:Tenant"


def tenant_urn(stack: str, project: str, tenant: str) -> str:
    """The URN of a tenant's component (its children move with it).

    >>> tenant_urn("prod.a", "gpu-tenancy", "eval")
    'urn:pulumi:prod.a::gpu-tenancy::gpu-tenancy:index:Fleet$gpu-tenancy:index:Tenant::eval'
    """
    return f"urn:pulumi:{stack}::{project}::{FLEET_TYPE}${TENANT_TYPE}::{tenant}"


def state_move_command(source: str, dest: str, urns: list[str]) -> str:
    """The shell command that moves resources (and their children) between two stacks' states.

    >>> state_move_command("prod.a", "prod.b", [tenant_urn("prod.a", "gpu-tenancy", "eval")])
    "pulumi state move --source prod.a --dest prod.b --yes 'urn:pulumi:prod.a::gpu-tenancy::gpu-tenancy:index:Fleet$gpu-tenancy:index:Tenant::eval'"
    """
    return " ".join(["pulumi", "state", "move", "--source", source, "--dest", dest, "--yes", *map(shlex.quote, urns)])


def _order(stacks: set[str], *environments: Optional[Environment]) -> list[str]:
    """Deploy order: the head's stacks as `stack_parts` lists them, then any left only in the base."""
    ordered: list[str] = []
    for environment in environments:
        if environment is None:
            continue
        for part in stack_parts(environment):
            if part.stack in stacks and part.stack not in ordered:
                ordered.append(part.stack)
    return ordered + sorted(stacks - set(ordered))


def touched_stacks(
    before: Optional[Environment],
    after: Optional[Environment],
    pairs: list[tuple[Optional[str], Optional[str]]],
    details: list[dict[str, Any]],
    *,
    platform_changed: bool,
    project: str = "gpu-tenancy",
) -> tuple[list[str], list[dict[str, Any]]]:
    """`(stacks, moves)`: the Pulumi stacks whose resources change, in deploy order, and one move
    per tenant whose stack differs between base and head (its `command` moves it in the state).

    `pairs` are (base name, head name) per tenant, `details` the changed tenants' diffs
    (`tenant`, `renamedFrom`, `change`).

    >>> from dataclasses import replace
    >>> from components.spec.sharding import Sharding
    >>> to_blue = Sharding(shards=["blue", "green"], assignments={"vision": "blue"})
    >>> resharded = replace(lab, platform=lab.platform.model_copy(update={"sharding": to_blue}))
    >>> stacks, [move] = touched_stacks(lab, resharded, [("vision", "vision")], [], platform_changed=False)
    >>> stacks, move["command"]
    (['lab.blue', 'lab.green'], "pulumi state move --source lab.green --dest lab.blue --yes 'urn:pulumi:lab.green::gpu-tenancy::gpu-tenancy:index:Fleet$gpu-tenancy:index:Tenant::vision'")
    """
    stacks: set[str] = set()
    if platform_changed:
        stacks.add((after or before).name)  # type: ignore[union-attr]
    for detail in details:
        if detail["change"] != "removed" and after is not None:
            stacks.add(tenant_stack(after, detail["tenant"]))
        if detail["change"] != "added" and before is not None:
            stacks.add(tenant_stack(before, detail.get("renamedFrom") or detail["tenant"]))
    moves = []
    for old, new in pairs:
        if old is None or new is None or before is None or after is None:
            continue
        source, dest = tenant_stack(before, old), tenant_stack(after, new)
        if source == dest:
            continue
        stacks.update((source, dest))
        moves.append(shard_move(after, new, source, dest, tenant_urn(source, project, old)))
    return _order(stacks, after, before), moves


def shard_move(environment: Environment, tenant: str, source: str, dest: str, urn: str) -> dict[str, Any]:
    """One tenant's move between two stacks of `environment`, with the command that makes it.

    >>> shard_move(lab, "vision", "lab.blue", "lab.green", "urn:x")["command"]
    'pulumi state move --source lab.blue --dest lab.green --yes urn:x'
    """
    spec = next((t.spec for t in environment.tenants if t.name == tenant), None)
    return {
        "decommissioned": spec is not None and spec.is_decommissioned,
        "environment": environment.name,
        "tenant": tenant,
        "from": source,
        "to": dest,
        "urn": urn,
        "command": state_move_command(source, dest, [urn]),
    }


def move_warning(move: dict[str, Any]) -> str:
    """What a reviewer must do about a move, in plain words.

    >>> move_warning({"tenant": "eval", "from": "prod", "to": "prod.a", "command": "pulumi state move ..."})[:38]
    'tenant eval moves from stack prod to p'
    """
    return (
        f"tenant {move['tenant']} moves from stack {move['from']} to {move['to']} (shard assignment): move it in "
        f"Pulumi's state before either stack is deployed, so that neither deletes nor recreates anything: "
        f"`{move['command']}` (the deploy workflow runs it). Without the move, {move['from']} lets go of the "
        f"tenant (kept on the cluster) and {move['to']} adopts it; with protectNamespaces the first step refuses"
        + (f". {move['tenant']} is decommissioned: without the move, {move['from']} DELETES it" if move.get("decommissioned") else "")
    )
