"""The capacity check: quotas that cannot all be honoured at once on the pools their tenants may
reach, and pools whose quotas are near full (the max-flow itself is `components.fleet.feasibility`);
and, given the inventory before an edit of the stack file, the over-promises that edit causes,
located at the edited setting (`stack_edit_problems`, for tenants diff); given the tenants before,
those a new dedicated pool causes, located at the new `gpu.dedicatedPools` entry
(`dedication_edit_problems`)."""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from ..fleet import feasibility as feas
from ..fleet import gpu_capacity as cap
from ..fleet.environment import Environment, LoadedTenant
from ..spec.problems import Problem
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from ..spec.yaml_source import SourceDocument, yaml_text
from .platform import platform_path


def capacity_problems(environment: Environment) -> list[Problem]:
    """Quotas that cannot all be honoured at once on the pools their tenants may reach (errors, on
    every involved tenant's quota line), and groups of pools whose quotas are near full (warnings;
not for a tenant filling pools dedicated to it, which is what they are for).

    See `components.fleet.feasibility`: per GPU class and MIG profile, a max-flow over tenants x
    reachable pools; dedicated pools are capacity for their owner only.

    >>> [(p.severity, p.field) for p in capacity_problems(prod)][:1]
    [('warning', 'config.gpu-tenancy:platform.nodePools.a100-shared')]
    """
    return [problem for _, _, found in _judgements(environment) for problem in found]


def crowded_commodities(environment: Environment) -> dict[feas.Commodity, tuple[str, str]]:
    """GPU class or MIG profile -> (`over` or `warning`, the first message) for each one the
    capacity check reports: the one judgement `tenants diff`'s capacity warning asks too, so that
    pools dedicated to a tenant that fills them count the same in both.

    >>> crowded_commodities(prod)[("class", "a100")][0], ("class", "h100") in crowded_commodities(prod)
    ('warning', False)
    """
    return {commodity: (kind, found[0].message) for commodity, kind, found in _judgements(environment)
            if found and kind in ("over", "warning")}


def _judgements(environment: Environment):
    """(commodity, `over`, `warning` or `absent` (quotas on autoscaled nodes not yet there), its problems)
    per commodity some tenant holds quota of."""
    platform: Platform = environment.platform
    doc: SourceDocument = environment.platform_doc
    active = [t for t in environment.tenants if t.spec.holds_capacity]
    by_name = {t.name: t for t in active}
    # The fleet facts' flow: the same tenants (those holding capacity), owners and capacity,
    # solved once per environment for validation, the diff's capacity warning and the builders.
    owners = environment.facts.pool_owners
    ratio = Fraction(platform.capacity_warning_ratio)
    # A tenant listing a pool that another tenant already holds gets that error; the capacity it
    # then lacks is a consequence, not a second problem to report.
    contested = {t.name for t in active if any(owners.get(p, t.name) != t.name for p in t.spec.gpu.dedicated_pools)}
    for commodity, result in environment.facts.placement.items():
        if result.violators and set(result.violators) & contested:
            continue
        if result.violators:
            yield commodity, "over", _over_promised(platform, doc, by_name, commodity, result)
        else:
            yield commodity, "warning", _near_full(platform, doc, owners, ratio, commodity, result)
            yield commodity, "absent", _not_yet_present(platform, doc, commodity, result)


def _over_promised(platform: Platform, doc: SourceDocument, by_name: dict[str, LoadedTenant], commodity: feas.Commodity,
                   result: feas.CommodityResult) -> list[Problem]:
    """Errors on each quota line of tenants whose quotas cannot all be placed at once."""
    subject = feas.commodity_text(commodity)
    tenants = result.violators
    pools = result.pools_of(tenants)
    asked = sum(result.demand[t] for t in tenants)
    held = sum(result.limit[p] for p in pools)
    who = ", ".join(f"{t}: {result.demand[t]}" for t in tenants)
    where = ", ".join(f"{p}: {_pool_bound(platform, result, p)}" for p in pools) or "none"
    # The pools' lines too: the stack may be what changed (tenants diff then says so at that line).
    lines = ", ".join(f"{p}: {doc.file}:{doc.position(platform_path('nodePools', p))[0]}" for p in pools)
    message = (
        f"{subject} is over-promised: tenant{'s' if len(tenants) > 1 else ''} {who} "
        f"{'ask' if len(tenants) > 1 else 'asks'} for {asked} on the pools {'they' if len(tenants) > 1 else 'it'} may use "
        f"({where}), which hold {held}; lower a quota, add nodes to these pools{f' ({lines})' if lines else ''} "
        f"or raise overcommit"
    )
    return [by_name[name].doc.problem(quota_path(by_name[name].spec, commodity), message) for name in tenants]


def _near_full(platform: Platform, doc: SourceDocument, owners: Mapping[str, str], ratio: Fraction, commodity: feas.Commodity,
               result: feas.CommodityResult) -> list[Problem]:
    """Warnings on the first pool of each group of pools whose quotas are near what they hold."""
    subject = feas.commodity_text(commodity)
    problems: list[Problem] = []
    for tenants, pools in feas.components(result):
        asked = sum(result.demand[t] for t in tenants)
        held = sum(result.limit[p] for p in pools)
        # A pool dedicated to one tenant is there to be filled by it: not worth a warning.
        owned_whole = len(tenants) == 1 and all(owners.get(p) == tenants[0] for p in pools)
        if held and asked >= held * ratio and not owned_whole:
            who = ", ".join(f"{t}: {result.demand[t]}" for t in tenants)
            where = ", ".join(f"{p}: {_pool_bound(platform, result, p)}" for p in pools)
            bound = f"{where}; {held} in all" if len(pools) > 1 else _pool_bound(platform, result, pools[0])
            problems.append(doc.problem(platform_path("nodePools", pools[0]), (
                f"{subject}: tenant quotas on pool{'s' if len(pools) > 1 else ''} {', '.join(pools)} add up to {asked} "
                f"({who}), {float(100 * Fraction(asked, held)):.0f}% of what {'they hold' if len(pools) > 1 else 'it holds'} "
                f"({bound})"), severity="warning"))
    return problems


def _pool_bound(platform: Platform, result, pool: str) -> str:
    overcommit = Fraction(platform.gpu_classes[platform.node_pools[pool].gpu_class].overcommit)
    if overcommit == 1:
        return str(result.limit[pool])
    return f"capacity {result.supply[pool]} x overcommit {cap.ratio_text(overcommit)} = {result.limit[pool]}"


def quota_path(tenant, commodity) -> tuple:
    """The path of a tenant's quota line for a GPU class or MIG profile (a plain count is `quota.gpu`).

    >>> quota_path(tenant, ("class", "a100")), quota_path(tenant, ("mig", "1g.10gb"))
    (('quota', 'gpu', 'a100'), ('quota', 'mig', '1g.10gb'))
    """
    kind, name = commodity
    if kind == "mig":
        return ("quota", "mig", name)
    return ("quota", "gpu", name) if isinstance(tenant.quota.gpu, dict) else ("quota", "gpu")


# Pool settings that change what a pool holds; the order is the order they are reported in.
_POOL_CAPACITY_FIELDS = ("nodes", "maxNodes", "gpusPerNode", "gpuClass", "migLayout", "sharing")


def _setting_text(key: str, value) -> str:
    if key == "nodes" and isinstance(value, list):
        return f"{len(value)} node{'s' if len(value) != 1 else ''}"
    return yaml_text(value, quote=False)


def _capacity_edits(before: Platform, after: Platform, pools: list[str], classes: set[str]) -> list[tuple[tuple, str, str]]:
    """(path, what changed, how to change it back) for each stack setting, among these pools and
    GPU classes, that differs between the two inventories."""
    edits = []
    for pool in pools:
        if pool not in after.node_pools:
            edits.append((platform_path("nodePools"), f"pool {pool} is removed", f"restore pool {pool}"))
            continue
        if pool not in before.node_pools:
            continue
        old = before.node_pools[pool].model_dump(by_alias=True, mode="json")
        new = after.node_pools[pool].model_dump(by_alias=True, mode="json")
        for key in _POOL_CAPACITY_FIELDS:
            if old.get(key) != new.get(key):
                was, now = _setting_text(key, old.get(key)), _setting_text(key, new.get(key))
                back = f"{key}: {yaml_text(old.get(key), quote=False)}"
                if key == "nodes":
                    removed = sorted(set(old.get(key) or []) - set(new.get(key) or []))
                    back = f"nodes: {was}" + (f", with {', '.join(removed)}" if removed else "")
                edits.append((platform_path("nodePools", pool, key), f"nodePools.{pool}.{key} {was} → {now}", back))
        layout = new.get("migLayout")
        if isinstance(layout, str) and before.mig_layouts.get(layout) != after.mig_layouts.get(layout):
            edits.append((platform_path("migLayouts", layout), f"MIG layout {layout} is re-cut", f"migLayouts.{layout} as before"))
    for name in sorted(classes):
        old_class, new_class = before.gpu_classes.get(name), after.gpu_classes.get(name)
        if old_class is not None and new_class is not None and old_class.overcommit != new_class.overcommit:
            edits.append((platform_path("gpuClasses", name, "overcommit"),
                          f"gpuClasses.{name}.overcommit {old_class.overcommit} → {new_class.overcommit}",
                          f"overcommit: {old_class.overcommit}"))
    return edits


def stack_edit_problems(before: Platform, after: Platform, doc: SourceDocument,
                        tenants: list[tuple[str, Tenant]]) -> list[Problem]:
    """Over-promises that an edit of the stack file causes: `tenants` fit the `before` inventory
    and not the `after` one (the edited stack, `doc`). Each is located at the edited setting of a
    pool (or GPU class) the over-promised tenants may use, and "change it back" is the first fix;
    `tenants diff` reports these before the quota lines, which the edit did not touch.

    >>> shrunk = prod.platform.model_copy(deep=True)
    >>> shrunk.node_pools["h100-train"].nodes.pop()
    'gpu-h100-05'
    >>> [problem] = stack_edit_problems(prod.platform, shrunk, prod.platform_doc, [(t.name, t.spec) for t in prod.tenants])
    >>> problem.field, problem.message.split("; ")[1]
    ('config.gpu-tenancy:platform.nodePools.h100-train.nodes', 'change it back (nodes: 5 nodes, with gpu-h100-05), add nodes to these pools, lower a quota or raise overcommit')
    """
    active = [(name, spec) for name, spec in tenants if spec.holds_capacity]
    old, new = feas.feasibility(active, before), feas.feasibility(active, after)
    problems = []
    for commodity, result in new.items():
        if result.feasible or (commodity in old and not old[commodity].feasible):
            continue
        violators = result.violators
        pools = list(dict.fromkeys([*(old[commodity].pools_of(violators) if commodity in old else []),
                                    *result.pools_of(violators)]))
        classes = {after.node_pools[p].gpu_class for p in pools if p in after.node_pools}
        edits = _capacity_edits(before, after, pools, classes)
        if not edits:
            continue  # the inventory the tenants reach is as before: their quotas are what changed
        subject = feas.commodity_text(commodity)
        asked = sum(result.demand[t] for t in violators)
        held = sum(result.limit[p] for p in result.pools_of(violators))
        who = ", ".join(f"{t}: {result.demand[t]}" for t in violators)
        for path, what, back in edits:
            problems.append(doc.problem(path, (
                f"{subject} is over-promised by this edit ({what}): the pools tenant{'s' if len(violators) > 1 else ''} "
                f"{who} may use hold {held} for {asked} asked; change it back ({back}), add nodes to these pools, "
                f"lower a quota or raise overcommit"
            )))
    return problems


def _lowering_edits(before: Platform, after: Platform, doc: SourceDocument, commodity: feas.Commodity,
                    pools: list[str]) -> list[str]:
    """The stack edits among `pools` that leave less of `commodity` to promise, each with its line."""
    def limit(platform: Platform, pool: str) -> int:
        node_pool = platform.node_pools.get(pool)
        units = feas.pool_supply(platform, node_pool).get(commodity, 0) if node_pool is not None else 0
        return feas.pool_limit(platform, node_pool, units) if units else 0

    lowered = [p for p in pools if limit(after, p) < limit(before, p)]
    classes = {after.node_pools[p].gpu_class for p in lowered if p in after.node_pools}
    return [f"{what} ({doc.file}:{doc.position(path)[0]})" for path, what, _ in _capacity_edits(before, after, lowered, classes)]


def dedication_edit_problems(before: Environment, after: Environment) -> list[Problem]:
    """Over-promises that a tenant's new `gpu.dedicatedPools` entry causes: a pool that tenants
    shared (or would share: a pool the stack splits off) is taken by one tenant, and those who
    shared it no longer fit. Each is located at the new entry (the line the change touched, not the
    quota lines of the teams that did not change), names the stack edits that left less to share,
    and "undedicate" is among the fixes; for `tenants diff`, given the base and the edited stack.

    >>> from dataclasses import replace
    >>> acme = prod.tenants[0].spec.model_copy(update={"name": "acme"}, deep=True)
    >>> acme.gpu.dedicated_pools.append("a100-shared")
    >>> edited = replace(prod, tenants=[*prod.tenants, replace(prod.tenants[0], spec=acme)])
    >>> [problem] = dedication_edit_problems(prod, edited)
    >>> problem.field, problem.message.split(": the pools")[0]
    ('environments.prod.gpu.dedicatedPools[0]', "GPU class 'a100' is over-promised by this edit (tenant acme takes pool a100-shared for itself, which tenant eval may use otherwise)")
    """
    was = {t.name: set(t.spec.gpu.dedicated_pools) for t in before.tenants}
    tenants = [(t.name, t.spec) for t in after.tenants]
    owners = feas.pool_owners(tenants, after.platform)
    taken = {pool: owner for pool, owner in owners.items() if pool not in was.get(owner, set())}
    if not taken:
        return []
    shared = {pool: owner for pool, owner in owners.items() if pool not in taken}
    by_name = {t.name: t for t in after.tenants}
    old = feas.feasibility([(t.name, t.spec) for t in before.tenants if t.spec.holds_capacity], before.platform)
    new = feas.feasibility([(n, s) for n, s in tenants if s.holds_capacity], after.platform, owners)
    problems = []
    for commodity, result in new.items():
        if result.feasible or (commodity in old and not old[commodity].feasible):
            continue
        violators = result.violators
        for pool, owner in taken.items():
            losers = [v for v in violators if v != owner and pool in feas.reachable_pools(v, by_name[v].spec, after.platform, shared)]
            if losers and commodity in feas.pool_supply(after.platform, after.platform.node_pools[pool]):
                problems.append(_dedication_problem(before, after, by_name, commodity, result, pool, owner, losers))
    return problems


def _dedication_problem(before: Environment, after: Environment, by_name: dict[str, LoadedTenant], commodity: feas.Commodity,
                        result: feas.CommodityResult, pool: str, owner: str, losers: list[str]) -> Problem:
    violators = result.violators
    pools = result.pools_of(violators)
    plural = len(violators) > 1
    stack_edits = _lowering_edits(before.platform, after.platform, after.platform_doc, commodity, [*pools, pool])
    quota_lines = ", ".join(
        f"{v}: {by_name[v].doc.file}:{by_name[v].doc.position(quota_path(by_name[v].spec, commodity))[0]}" for v in violators)
    what = (f"tenant {owner} takes pool {pool} for itself, which tenant{'s' if len(losers) > 1 else ''} {', '.join(losers)} "
            f"may use otherwise" + (f"; with {', '.join(stack_edits)}" if stack_edits else ""))
    message = (
        f"{feas.commodity_text(commodity)} is over-promised by this edit ({what}): the pools tenant{'s' if plural else ''} "
        f"{', '.join(f'{v}: {result.demand[v]}' for v in violators)} may use ({', '.join(pools) or 'none'}) hold "
        f"{sum(result.limit[p] for p in pools)} for {sum(result.demand[v] for v in violators)} asked; undedicate {pool}, "
        f"add nodes to {'these pools' if len(pools) != 1 else 'pool ' + pools[0]}, lower {'their quotas' if plural else 'its quota'} "
        f"({quota_lines}) or raise overcommit")
    index = list(by_name[owner].spec.gpu.dedicated_pools).index(pool)
    return by_name[owner].doc.problem(("gpu", "dedicatedPools", index), message)


def _not_yet_present(platform: Platform, doc: SourceDocument, commodity: feas.Commodity,
                     result: feas.CommodityResult) -> list[Problem]:
    """Warnings on each autoscaled pool whose placed quotas need more than its present nodes hold
    (static ones plus `minNodes`): capacity counts `maxNodes`, which the autoscaler may never have added."""
    problems: list[Problem] = []
    for name in sorted(result.limit):
        pool = platform.node_pools[name]
        placed = result.assigned(name)
        if pool.max_nodes is None or not pool.node_count or not placed:
            continue
        per_node = Fraction(result.limit[name], pool.node_count)
        present = int(per_node * pool.present_node_count)
        if placed <= present:
            continue
        who = ", ".join(f"{t}: {by_pool[name]}" for t, by_pool in sorted(result.flow.items()) if by_pool.get(name))
        needed = -(-placed * pool.node_count // result.limit[name]) - len(pool.nodes)   # group nodes the quotas need
        path = ("nodePools", name, "minNodes") if pool.min_nodes is not None else ("nodePools", name, "maxNodes")
        problems.append(doc.problem(platform_path(*path), (
            f"{feas.commodity_text(commodity)}: the quotas placed on autoscaled pool {name} ({who}) add up to {placed}, but "
            f"its present nodes ({len(pool.nodes)} static + minNodes {pool.min_nodes or 0}) hold {present}; the rest is "
            f"there only once the autoscaler adds nodes (up to maxNodes {pool.max_nodes}), so admitted pods may wait for a "
            f"scale-up; set `minNodes: {needed}` to keep them, or lower the quotas"), severity="warning"))
    return problems
