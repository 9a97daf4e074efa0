"""Can every tenant's GPU quota be honoured at the same time, on the pools it may reach?

A quota is a promise on specific nodes: a tenant's pods may only land on the pools the placement
policy allows it (its dedicated pools, and the shared pools of the classes it lists), and a
dedicated pool is capacity for its owner alone. So capacity is not checked per GPU class but as a
flow problem, one per *commodity* -- a whole-GPU class (`("class", "h100")`) or a MIG profile
(`("mig", "1g.10gb")`):

    source --quota--> tenant --(may reach)--> pool --floor(capacity x overcommit)--> sink

Every quota fits simultaneously exactly when the maximum flow equals the sum of the quotas
(Hall's condition: every set of tenants T asks for at most what the pools T can reach hold).
When it does not, the tenants reachable from the source in the residual graph form a violating
set; it is shrunk to an inclusion-minimal one (no tenant can be dropped), which is what validation
reports together with the pools that set shares.

The flow of a feasible commodity is also how the Kueue builders split a tenant's class quota
across the flavors (one per pool) of its ClusterQueue: a split the pools can honour together.
Everything is deterministic (sorted names, breadth-first augmenting paths).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Mapping

from . import gpu_capacity as cap
from . import mig
from ..spec.stack import NodePool, Platform
from ..spec.tenant import Tenant

Commodity = tuple[str, str]   # ("class", <gpu class>) or ("mig", <profile>)


def commodity_text(commodity: Commodity) -> str:
    """
    >>> commodity_text(("class", "h100")), commodity_text(("mig", "1g.10gb"))
    ("GPU class 'h100'", 'MIG profile 1g.10gb')
    """
    kind, name = commodity
    return f"GPU class '{name}'" if kind == "class" else f"MIG profile {name}"


def commodity_resource(platform: Platform, commodity: Commodity) -> str:
    """The extended resource a commodity is requested as.

    >>> commodity_resource(prod.platform, ("class", "h100")), commodity_resource(prod.platform, ("mig", "3g.40gb"))
    ('nvidia.com/gpu', 'nvidia.com/mig-3g.40gb')
    """
    kind, name = commodity
    return cap.class_resource(platform.gpu_classes[name]) if kind == "class" else mig.resource_name(name)


# --- who may reach which pool ----------------------------------------------------------------


def pool_owners(tenants: Iterable[tuple[str, Tenant]], platform: Platform) -> dict[str, str]:
    """Pool -> the first (not decommissioned) tenant that lists it in `gpu.dedicatedPools`: the one rule
    of who owns a dedicated pool (builders read it as the fleet fact `FleetFacts.pool_owners`).

    >>> pool_owners([(t.name, t.spec) for t in prod.tenants], prod.platform)
    {'h100-serve': 'inference', 'h100-train': 'llm-finetune'}
    """
    owners: dict[str, str] = {}
    for name, tenant in tenants:
        if tenant.is_decommissioned:
            continue
        for pool in tenant.gpu.dedicated_pools:
            if pool in platform.node_pools:
                owners.setdefault(pool, name)
    return dict(sorted(owners.items()))


def reachable_pools(name: str, tenant: Tenant, platform: Platform, owners: Mapping[str, str]) -> list[str]:
    """Pools the tenant's pods may land on: its dedicated pools and the shared pools of its listed classes.

    The one rule: the placement policy, the Kueue flavors and this capacity check all read it
    (builders through `components.fleet.facts.TenantView.reachable_pools`).

    >>> owners = pool_owners([(t.name, t.spec) for t in prod.tenants], prod.platform)
    >>> reachable_pools("eval", tenant, prod.platform, owners), reachable_pools("inference", prod.tenants[1].spec, prod.platform, owners)
    (['a100-mig', 'a100-shared'], ['h100-serve'])
    """
    listed = set(tenant.gpu.classes)
    return sorted(
        pool_name
        for pool_name, pool in platform.node_pools.items()
        if pool.gpu_class in platform.gpu_classes
        and (owners.get(pool_name) == name or (pool_name not in owners and pool.gpu_class in listed))
    )


def preference_order(name: str, pools: Iterable[str], platform: Platform, owners: Mapping[str, str]) -> list[str]:
    """The order in which a tenant's quota fills the pools it reaches: its dedicated pools, then the
    shared ones, each in the order the stack lists them. A pool added at the end of `nodePools`
    therefore takes only quota that fits nowhere before it: nobody's placement moves to it.

    >>> owners = pool_owners([(t.name, t.spec) for t in prod.tenants], prod.platform)
    >>> preference_order("eval", ["a100-mig", "a100-shared"], prod.platform, owners)
    ['a100-shared', 'a100-mig']
    """
    rank = {pool: index for index, pool in enumerate(platform.node_pools)}
    return sorted(set(pools), key=lambda p: (owners.get(p) != name, rank.get(p, len(rank)), p))


# --- supply and demand -----------------------------------------------------------------------


def pool_supply(platform: Platform, pool: NodePool) -> dict[Commodity, int]:
    """Units of each commodity the whole pool holds, before overcommit.

    >>> pool_supply(prod.platform, prod.platform.node_pools["a100-mig"])
    {('mig', '1g.10gb'): 56, ('mig', '3g.40gb'): 16}
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    if gpu_class is None:
        return {}
    result: dict[Commodity, int] = {}
    units = cap.node_class_units(platform, pool)
    if units:
        result[("class", pool.gpu_class)] = units * pool.node_count
    for profile, count in cap.node_mig_profiles(platform, pool).items():
        result[("mig", profile)] = count * pool.node_count
    return result


def pool_limit(platform: Platform, pool: NodePool, units: int) -> int:
    """What quotas may promise on `units` of the pool: floor(units x the class's overcommit).

    >>> pool_limit(prod.platform, prod.platform.node_pools["a100-shared"], 16)
    20
    """
    return math.floor(units * Fraction(platform.gpu_classes[pool.gpu_class].overcommit))


def tenant_demand(tenant: Tenant, platform: Platform, providers: Mapping[str, list[str]] | None = None) -> dict[Commodity, int]:
    """The tenant's GPU quota per commodity. `providers`: MIG profile -> the GPU classes that offer
    it (`Capacity.mig_profile_classes`; default: worked out from `platform`).

    Quotas that per-tenant validation already refuses -- a class the tenant may not use or the
    stack does not define, a MIG profile no class it may use provides -- are left out.

    >>> tenant_demand(tenant, prod.platform)
    {('class', 'a100'): 20, ('mig', '1g.10gb'): 48, ('mig', '3g.40gb'): 16}
    """
    allowed = set(cap.allowed_classes(tenant, platform))
    result: dict[Commodity, int] = {}
    for name, count in cap.gpu_quota_by_class(tenant, platform).items():
        if name in platform.gpu_classes and name in allowed and count:
            result[("class", name)] = count
    providers = cap.capacity(platform).mig_profile_classes if providers is None else providers
    for profile, count in sorted(tenant.quota.mig.items()):
        if count and set(providers.get(profile, [])) & allowed:
            result[("mig", profile)] = count
    return result


# --- max flow --------------------------------------------------------------------------------


@dataclass
class CommodityResult:
    """The flow problem of one commodity and its answer."""

    commodity: Commodity
    demand: dict[str, int]                    # tenant -> quota
    edges: dict[str, list[str]]               # tenant -> pools it may reach that hold the commodity
    supply: dict[str, int]                    # pool -> units (capacity, before overcommit)
    limit: dict[str, int]                     # pool -> floor(units x overcommit)
    flow: dict[str, dict[str, int]] = field(default_factory=dict)   # tenant -> pool -> units
    violators: list[str] = field(default_factory=list)              # inclusion-minimal over-promised set

    @property
    def feasible(self) -> bool:
        return not self.violators

    def pools_of(self, tenants: Iterable[str]) -> list[str]:
        return sorted({p for t in tenants for p in self.edges.get(t, [])})

    def assigned(self, pool: str) -> int:
        return sum(by_pool.get(pool, 0) for by_pool in self.flow.values())


def preferred_placement(demand: Mapping[str, int], order: Mapping[str, list[str]],
                        limit: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Where each tenant's quota goes when nobody else contends: its pools in its order of
    preference (`preference_order`), each filled up to the pool's limit, the tenant's alone.

    A tenant's preferred placement depends on its own quota and its pools only. Where the preferred
    placements of all tenants on a pool fit in it, they are kept as they are; the tenants of an
    over-subscribed pool take it in name order, and the flow search places the rest.

    >>> preferred_placement({"a": 6, "b": 3}, {"a": ["p", "q"], "b": ["q"]}, {"p": 4, "q": 8})
    {'a': {'p': 4, 'q': 2}, 'b': {'q': 3}}
    """
    result: dict[str, dict[str, int]] = {}
    for tenant, want in sorted(demand.items()):
        placed: dict[str, int] = {}
        for pool in order.get(tenant, []):
            if want <= 0:
                break
            units = min(want, limit.get(pool, 0))
            if units > 0:
                placed[pool] = units
                want -= units
        result[tenant] = placed
    return result


def _kept_placement(demand: Mapping[str, int], order: Mapping[str, list[str]],
                    limit: Mapping[str, int]) -> dict[str, dict[str, int]]:
    # Preferred placements kept whole on every pool they fit together; on an over-subscribed pool
    # the tenants take what is left of it in name order.
    preferred = preferred_placement(demand, order, limit)
    asked: dict[str, int] = {}
    for by_pool in preferred.values():
        for pool, units in by_pool.items():
            asked[pool] = asked.get(pool, 0) + units
    left = dict(limit)
    kept: dict[str, dict[str, int]] = {t: {} for t in preferred}
    for tenant, by_pool in preferred.items():
        for pool, units in by_pool.items():
            if asked[pool] <= limit[pool]:
                kept[tenant][pool] = units
                left[pool] -= units
    for tenant, by_pool in preferred.items():
        for pool, units in by_pool.items():
            if asked[pool] > limit[pool]:
                units = min(units, left[pool])
                if units > 0:
                    kept[tenant][pool] = units
                    left[pool] -= units
    return kept


def max_flow(demand: Mapping[str, int], edges: Mapping[str, list[str]],
             limit: Mapping[str, int],
             initial: Mapping[str, Mapping[str, int]] | None = None) -> tuple[dict[str, dict[str, int]], set[str]]:
    """(tenant -> pool -> flow, tenants still reachable from the source in the residual graph).

    Edmonds-Karp on the bipartite graph, from the `initial` flow (default none; it must respect
    demands and limits): an augmenting path moves a tenant's units from one pool to another only
    where that is needed to place someone's quota at all. Tenants and pools are visited in sorted
    order so the result is the same on every run. The reachable set is empty exactly when every
    demand is met.

    >>> flow, cut = max_flow({"a": 3, "b": 2}, {"a": ["p"], "b": ["p", "q"]}, {"p": 3, "q": 1})
    >>> flow, sorted(cut)
    ({'a': {'p': 3}, 'b': {'q': 1}}, ['a', 'b'])
    """
    state = _Residual(demand, edges, limit, initial or {})
    while True:
        end, parent, reached = state.search()
        if end is None:
            return state.result(), reached
        state.augment(end, parent)


_Node = tuple[str, str]   # ("t", tenant) or ("p", pool)


class _Residual:
    """The flow of `max_flow` and its residual graph: what one augmenting path reads and changes."""

    def __init__(self, demand: Mapping[str, int], edges: Mapping[str, list[str]], limit: Mapping[str, int],
                 initial: Mapping[str, Mapping[str, int]]) -> None:
        self.demand, self.limit = demand, limit
        self.tenants = sorted(demand)
        self.flow: dict[str, dict[str, int]] = {t: dict(initial.get(t, {})) for t in self.tenants}
        self.sent = {t: sum(self.flow[t].values()) for t in self.tenants}
        self.used = {p: 0 for p in limit}
        self.holders: dict[str, set[str]] = {}   # pool -> tenants with flow on it (the residual edges p -> t)
        for t in self.tenants:
            for p, units in self.flow[t].items():
                if units:
                    self.used[p] += units
                    self.holders.setdefault(p, set()).add(t)
        self.pools_of = {t: sorted(edges.get(t, [])) for t in self.tenants}
        # Tenants with demand left, in order. `sent` never decreases (an augmenting path only moves
        # intermediate tenants' flow between pools), so this list only shrinks.
        self.pending = [t for t in self.tenants if demand[t] > self.sent[t]]

    def result(self) -> dict[str, dict[str, int]]:
        return {t: dict(sorted((p, f) for p, f in self.flow[t].items() if f)) for t in self.tenants}

    def search(self) -> tuple[_Node | None, dict[_Node, _Node | None], set[str]]:
        """(the pool an augmenting path ends at or None, the path's parents, the tenants reached)."""
        # BFS from the source over: source->t (demand left), t->p (always), p->t (flow back), p->sink.
        # Every tenant with demand left is a root at the head of the queue, in order; they are
        # visited lazily, so that the common case (the first one has a pool with room) costs no more
        # than that tenant's pools, not a pass over the fleet.
        parent: dict[_Node, _Node | None] = {}
        queue: deque = deque()
        seen_t: set[str] = set()
        for t in self.pending:
            parent[("t", t)] = None
            seen_t.add(t)
            end = self._visit(t, parent, queue)
            if end:
                return end, parent, seen_t
        while queue:
            kind, node = queue.popleft()
            if kind == "t":
                end = self._visit(node, parent, queue)
                if end:
                    return end, parent, seen_t
            else:
                for t in sorted(self.holders.get(node, ())):
                    if ("t", t) not in parent:   # tenants with demand left are all roots already
                        parent[("t", t)] = ("p", node)
                        seen_t.add(t)
                        queue.append(("t", t))
        return None, parent, seen_t

    def _visit(self, t: str, parent: dict[_Node, _Node | None], queue: deque) -> _Node | None:
        for p in self.pools_of[t]:
            if ("p", p) not in parent:
                parent[("p", p)] = ("t", t)
                if self.used[p] < self.limit[p]:
                    return ("p", p)
                queue.append(("p", p))
        return None

    def augment(self, end: _Node, parent: dict[_Node, _Node | None]) -> None:
        path = []
        node: _Node | None = end
        while node is not None:
            path.append(node)
            node = parent[node]
        path.reverse()   # t0, p1, t1, p2, ..., pk
        start = path[0][1]
        amount = self.demand[start] - self.sent[start]
        amount = min(amount, self.limit[path[-1][1]] - self.used[path[-1][1]])
        for i in range(2, len(path), 2):   # backward edges p -> t: flow t->p can be cancelled
            amount = min(amount, self.flow[path[i][1]][path[i - 1][1]])
        self.sent[start] += amount
        self.used[path[-1][1]] += amount
        for i in range(0, len(path) - 1):
            (k1, a), (_, b) = path[i], path[i + 1]
            if k1 == "t":
                self.flow[a][b] = self.flow[a].get(b, 0) + amount
                self.holders.setdefault(b, set()).add(a)
            else:
                self.flow[b][a] -= amount
                if not self.flow[b][a]:
                    self.holders[a].discard(b)
        if self.sent[start] == self.demand[start]:
            self.pending.remove(start)


def hall_violated(tenants: Iterable[str], demand: Mapping[str, int], edges: Mapping[str, list[str]],
                  limit: Mapping[str, int]) -> bool:
    """Whether these tenants together ask for more than the pools they can reach hold.

    >>> edges = {"a": ["p"], "b": ["p", "q"]}
    >>> hall_violated(["a", "b"], {"a": 4, "b": 4}, edges, {"p": 4, "q": 4}), hall_violated(["a", "b"], {"a": 4, "b": 4}, edges, {"p": 4, "q": 0})
    (False, True)
    """
    tenants = list(tenants)
    pools = {p for t in tenants for p in edges.get(t, [])}
    return sum(demand[t] for t in tenants) > sum(limit[p] for p in pools)


def minimal_violators(candidates: Iterable[str], demand: Mapping[str, int], edges: Mapping[str, list[str]],
                      limit: Mapping[str, int]) -> list[str]:
    """Drop tenants from a violating set while it still violates: no tenant of the result can go.

    >>> minimal_violators(["a", "b", "c"], {"a": 5, "b": 1, "c": 1}, {"a": ["p"], "b": ["p"], "c": ["q"]}, {"p": 4, "q": 4})
    ['a']
    """
    current = sorted(candidates)
    changed = True
    while changed:   # until no single tenant can go (dropping one may make another droppable)
        changed = False
        for t in sorted(current, key=lambda t: (demand[t], t)):
            rest = [x for x in current if x != t]
            if rest and hall_violated(rest, demand, edges, limit):
                current, changed = rest, True
                break
    return current


def components(result: "CommodityResult") -> list[tuple[list[str], list[str]]]:
    """Connected groups of (tenants, pools) of one commodity: tenants linked by the pools they share.

    >>> r = CommodityResult(("class", "x"), {"a": 1, "b": 1, "c": 1}, {"a": ["p"], "b": ["p", "q"], "c": ["r"]},
    ...     {"p": 1, "q": 1, "r": 1}, {"p": 1, "q": 1, "r": 1})
    >>> components(r)
    [(['a', 'b'], ['p', 'q']), (['c'], ['r'])]
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for tenant in result.demand:
        find("t:" + tenant)
        for pool in result.edges.get(tenant, []):
            parent[find("t:" + tenant)] = find("p:" + pool)
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for node in sorted(parent):
        tenants, pools = groups.setdefault(find(node), ([], []))
        (tenants if node.startswith("t:") else pools).append(node[2:])
    return sorted(((sorted(t), sorted(p)) for t, p in groups.values() if t), key=lambda g: (g[1], g[0]))


def solve(commodity: Commodity, demand: dict[str, int], edges: dict[str, list[str]],
          supply: dict[str, int], limit: dict[str, int]) -> CommodityResult:
    """Place every tenant's demand of one commodity on the pools it reaches (max flow, from the
    preferred placements: `edges` lists each tenant's pools in its order of preference); name the
    over-promised tenants.

    >>> result = solve(("class", "h100"), {"a": 4, "b": 4}, {"a": ["p"], "b": ["p", "q"]}, {"p": 4, "q": 4}, {"p": 4, "q": 4})
    >>> result.flow, result.violators
    ({'a': {'p': 4}, 'b': {'q': 4}}, [])
    """
    result = CommodityResult(commodity, dict(sorted(demand.items())), edges, supply, limit)
    flow, reached = max_flow(demand, edges, limit, _kept_placement(demand, edges, limit))
    result.flow = flow
    if reached:
        result.violators = minimal_violators(reached, demand, edges, limit)
    return result


def feasibility(tenants: Iterable[tuple[str, Tenant]], platform: Platform,
                owners: Mapping[str, str] | None = None, capacity: cap.Capacity | None = None) -> dict[Commodity, CommodityResult]:
    """The flow problem of every commodity some tenant holds quota of, solved.

    `tenants` are (name, spec) pairs of the tenants whose quotas count (the active ones);
    `owners` the dedicated pools of every tenant that still holds one (default: from `tenants`);
    `capacity` the platform's (default: worked out here, once).

    >>> results = feasibility([(t.name, t.spec) for t in prod.tenants], prod.platform)
    >>> {commodity: result.violators for commodity, result in sorted(results.items())}
    {('class', 'a100'): [], ('class', 'h100'): [], ('mig', '1g.10gb'): [], ('mig', '3g.40gb'): []}
    """
    tenants = list(tenants)
    owners = pool_owners(tenants, platform) if owners is None else owners
    providers = (cap.capacity(platform) if capacity is None else capacity).mig_profile_classes
    supply: dict[Commodity, dict[str, int]] = {}
    for pool_name, pool in sorted(platform.node_pools.items()):
        for commodity, units in pool_supply(platform, pool).items():
            supply.setdefault(commodity, {})[pool_name] = units
    demand: dict[Commodity, dict[str, int]] = {}
    reach: dict[str, list[str]] = {}
    for name, tenant in tenants:
        reach[name] = preference_order(name, reachable_pools(name, tenant, platform, owners), platform, owners)
        for commodity, count in tenant_demand(tenant, platform, providers).items():
            demand.setdefault(commodity, {})[name] = count
    results = {}
    for commodity in sorted(demand):
        pools = supply.get(commodity, {})
        limit = {p: pool_limit(platform, platform.node_pools[p], units) for p, units in pools.items()}
        edges = {t: [p for p in reach[t] if p in pools] for t in demand[commodity]}
        results[commodity] = solve(commodity, demand[commodity], edges, dict(pools), limit)
    return results


def split_of(results: Mapping[Commodity, CommodityResult]) -> dict[str, dict[Commodity, dict[str, int]]]:
    """tenant -> commodity -> pool -> units, from solved flow problems (pools that carry nothing left out).

    >>> split_of(feasibility([(t.name, t.spec) for t in prod.tenants], prod.platform))["inference"]
    {('class', 'h100'): {'h100-serve': 24}}
    """
    split: dict[str, dict[Commodity, dict[str, int]]] = {}
    for commodity, result in sorted(results.items()):
        for tenant, want in result.demand.items():
            by_pool = dict(result.flow.get(tenant, {}))
            missing = want - sum(by_pool.values())
            pools = result.edges.get(tenant, [])
            if missing and pools:
                by_pool[pools[0]] = by_pool.get(pools[0], 0) + missing
            if by_pool:
                split.setdefault(tenant, {})[commodity] = dict(sorted(by_pool.items()))
    return split


def pool_spare(platform: Platform, results: Mapping[Commodity, CommodityResult],
               owners: Mapping[str, str]) -> dict[Commodity, dict[str, int]]:
    """Per commodity and shared pool: floor(capacity x overcommit) minus the quota the flow placed
    there; pools with nothing spare are left out. What no tenant holds nominally, and so what only a
    cohort-level quota can give a queue.

    >>> spare = pool_spare(prod.platform, feasibility([(t.name, t.spec) for t in prod.tenants], prod.platform), {})
    >>> spare[("mig", "1g.10gb")], ("class", "a100") in spare
    ({'a100-mig': 8}, False)
    """
    result: dict[Commodity, dict[str, int]] = {}
    for name, pool in sorted(platform.node_pools.items()):
        if name in owners:
            continue
        for commodity, units in sorted(pool_supply(platform, pool).items()):
            solved = results.get(commodity)
            free = pool_limit(platform, pool, units) - (solved.assigned(name) if solved is not None else 0)
            if free > 0:
                result.setdefault(commodity, {})[name] = free
    return dict(sorted(result.items()))
