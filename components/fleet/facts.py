"""What every tenant's builders need to know about the rest of the fleet, as one value per environment.

A tenant's objects depend on other tenants in a few ways only: a dedicated pool belongs to one
owner (so it is no one else's), the capacity check's flow splits each quota across the pools the
tenant reaches, cohort (KAI: department) members lend each other idle quota, what no tenant holds
of a shared pool is the spare cohort's to lend (Kueue), and tenants grant each other network
ingress. `FleetFacts` holds those facts, the environment label and what the platform alone answers
(its capacity, its GPU resources, the role bundles it offers); `FleetFacts.view(tenant)` is what
one tenant's builders read: those facts as they concern it and the answers its own numbers give
here (quota by class and resource, limits, GPU ceiling, queue amounts), so that no builder works
them out again. Each rule exists once: who owns a dedicated pool is `feasibility.pool_owners`,
which pools a tenant reaches `feasibility.reachable_pools`.

Every fact is computed at most once per `FleetFacts` (on first use: validation needs only some of
them, and an invalid stack must not break the facts it does not need), from sums over the fleet,
so building every tenant stays linear in the fleet size; a member's view is made once too.

>>> from components.spec.stack import Platform
>>> facts = FleetFacts("dev", Platform(labelDomain="gpu.example.com"), ())
>>> facts.environment_label, dict(facts.pool_owners)
('dev', {})
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Mapping

from ..spec.role_bundles import RoleBundle, effective_bundles
from ..spec.stack import Platform
from ..spec.tenant import LimitRangeSpec, Tenant
from . import feasibility as feas
from . import gpu_capacity as cap
from . import mig
from .budget import effective_limits
from .queue_arithmetic import (
    KaiAmounts,
    borrowing_limits,
    cohort_root,
    dedicated_only_classes,
    kai_amounts,
    kueue_compute_nominal,
    lending_limits,
    queue_borrows,
    queue_group,
    spare_cohort,
)

Commodity = feas.Commodity
Split = Mapping[Commodity, Mapping[str, int]]   # commodity -> pool -> units


@dataclass(frozen=True)
class FleetFacts:
    """The facts of one environment's fleet: `members` are its (name, spec) pairs in load order."""

    environment_label: str
    platform: Platform
    members: tuple[tuple[str, Tenant], ...]

    @cached_property
    def capacity(self) -> cap.Capacity:
        """How many devices the stack's nodes hold per GPU class and per MIG profile (`gpu_capacity.capacity`):
        worked out once per environment, for every check and builder that needs it."""
        return cap.capacity(self.platform)

    @cached_property
    def cluster_gpu_resources(self) -> tuple[str, ...]:
        """Which GPU extended resources the cluster's classes advertise (whole GPUs, shares, MIG slices), sorted."""
        resources = {cap.class_resource(gpu_class) for gpu_class in self.platform.gpu_classes.values()}
        resources |= {mig.resource_name(profile) for profile in self.capacity.per_mig_profile}
        return tuple(sorted(resources))

    @cached_property
    def quota_gpu_resources(self) -> tuple[str, ...]:
        """Which GPU resources every ResourceQuota pins: each the cluster's GPUs *could* advertise.

        `cluster_gpu_resources` plus both share resources (`nvidia.com/gpu`, `nvidia.com/gpu.shared`)
        and every MIG profile of every GPU model of the stack's classes: a resource with no quota key
        is not limited at all, so a profile no layout offers today (or a share no class renames) is
        pinned at "0" rather than left open for the day someone re-partitions a node by hand.
        """
        if not self.platform.gpu_classes:
            return ()
        resources = set(self.cluster_gpu_resources) | {cap.GPU, cap.GPU_SHARED}
        table = mig.geometry()
        for gpu_class in self.platform.gpu_classes.values():
            geometry = table.get(gpu_class.model)
            if geometry is not None:
                resources |= {mig.resource_name(profile) for profile in geometry.profiles}
        return tuple(sorted(resources))

    @cached_property
    def role_bundles(self) -> Mapping[str, RoleBundle]:
        """Which role bundles the stack offers tenants: the shipped ones, then its `roleBundles` (`effective_bundles`)."""
        return MappingProxyType(effective_bundles(self.platform))

    @cached_property
    def specs(self) -> Mapping[str, Tenant]:
        """Tenant name -> spec, every member (decommissioned ones too)."""
        return MappingProxyType(dict(self.members))

    @cached_property
    def active(self) -> tuple[tuple[str, Tenant], ...]:
        """The members whose quotas count: all but the decommissioned."""
        return tuple((name, spec) for name, spec in self.members if not spec.is_decommissioned)

    @cached_property
    def vcluster_namespaces(self) -> tuple[str, ...]:
        """The namespaces a vCluster runs in (each active tenant with `vcluster.enabled` has one, its own), sorted."""
        return tuple(sorted(name for name, spec in self.active if spec.vcluster.enabled))

    @cached_property
    def pool_owners(self) -> Mapping[str, str]:
        """Dedicated pool -> its owner, by name."""
        return MappingProxyType(feas.pool_owners(self.members, self.platform))

    @cached_property
    def placement(self) -> Mapping[Commodity, feas.CommodityResult]:
        """The capacity check's flow problem of every commodity some active tenant holds quota of, solved."""
        return MappingProxyType(feas.feasibility(self.active, self.platform, self.pool_owners, self.capacity))

    @cached_property
    def quota_split(self) -> Mapping[str, Split]:
        """Active tenant -> how its quota is spread over the pools it reaches (`feasibility.split_of`).

        When quotas do not fit (validation refuses such a stack) the units the flow could not place
        go to the tenant's first reachable pool, so the split always adds up to the quota.
        """
        return MappingProxyType(feas.split_of(self.placement))

    @cached_property
    def pool_spare(self) -> Mapping[Commodity, Mapping[str, int]]:
        """Per commodity and shared pool: what quotas may promise there (capacity x overcommit) minus
        what active tenants hold there nominally (`quota_split`). Dedicated pools have none: only
        their owner's pods can land there, and it holds them nominally or not at all."""
        return MappingProxyType(feas.pool_spare(self.platform, self.placement, self.pool_owners))

    @cached_property
    def spare_cohort(self) -> str | None:
        """The Kueue cohort that holds `pool_spare` (`queue_arithmetic.spare_cohort`), or None."""
        return spare_cohort(self.platform)

    @cached_property
    def pool_reach(self) -> Mapping[str, tuple[str, ...]]:
        """GPU pool -> the active tenants whose pods may land on it (whose ClusterQueues list its flavor)."""
        reach: dict[str, list[str]] = {}
        for name, spec in self.active:
            for pool in feas.reachable_pools(name, spec, self.platform, self.pool_owners):
                reach.setdefault(pool, []).append(name)
        return MappingProxyType({pool: tuple(sorted(names)) for pool, names in sorted(reach.items())})

    @cached_property
    def spare_borrowers(self) -> Mapping[str, tuple[str, ...]]:
        """Shared pool -> the active tenants reaching it whose queues can borrow the spare cohort's quota."""
        if self.spare_cohort is None:
            return MappingProxyType({})
        tree = cohort_root(self.spare_cohort, self.platform)
        return MappingProxyType({
            pool: tuple(t for t in names if self.queue_groups.get(t) == tree)
            for pool, names in self.pool_reach.items() if pool not in self.pool_owners
        })

    @cached_property
    def unqueued_pools(self) -> Mapping[str, str]:
        """Kueue: GPU pool -> why nothing queued can ever be admitted on it: no ClusterQueue holds
        nominal quota there and none can borrow the pool's capacity from the spare cohort."""
        platform = self.platform
        if platform.scheduler != "kueue":
            return MappingProxyType({})
        reach = self.pool_reach
        held = {pool for split in self.quota_split.values() for by_pool in split.values() for pool, n in by_pool.items() if n}
        spare_pools = {pool for by_pool in self.pool_spare.values() for pool in by_pool}
        result = {}
        for name, pool in sorted(platform.node_pools.items()):
            if pool.gpu_class not in platform.gpu_classes or name in held:
                continue
            tenants = sorted(reach.get(name, []))
            owner = self.pool_owners.get(name)
            if not tenants:
                result[name] = f"no tenant lists GPU class '{pool.gpu_class}' in gpu.classes, so no ClusterQueue lists the pool's flavor"
            elif owner is not None:
                result[name] = f"it is dedicated to '{owner}', whose quota places nothing on it"
            elif name in spare_pools and self.spare_borrowers.get(name):
                continue
            else:
                cohort = f"cohort '{self.spare_cohort}' lends it to none of them" if self.spare_cohort else "no cohort lends its capacity (set queues.spareCohort or queues.defaultCohort)"
                result[name] = f"the tenants whose ClusterQueues list it ({', '.join(tenants)}) hold no quota on it, and {cohort}"
        return MappingProxyType(result)

    @cached_property
    def queue_groups(self) -> Mapping[str, str | None]:
        """Active tenant -> whom its queue borrows from (Kueue cohort, KAI department; None: nobody)."""
        return MappingProxyType({name: queue_group(spec, self.platform) for name, spec in self.active})

    @cached_property
    def lent(self) -> Mapping[str, Split]:
        """Active tenant in a queue group -> what its queue lends while idle, per commodity and pool."""
        return MappingProxyType({
            name: lendable_on_pools(spec, self.platform, self.quota_split.get(name, {}))
            for name, spec in self.active
            if self.queue_groups[name] is not None
        })

    @cached_property
    def lent_in_group(self) -> Mapping[str, Split]:
        """Queue group -> what all its members lend together, per commodity and pool."""
        totals: dict[str, dict[Commodity, dict[str, int]]] = {}
        for name, by_commodity in self.lent.items():
            group = totals.setdefault(self.queue_groups[name], {})
            for commodity, by_pool in by_commodity.items():
                pools = group.setdefault(commodity, {})
                for pool, units in by_pool.items():
                    pools[pool] = pools.get(pool, 0) + units
        return MappingProxyType(totals)

    @cached_property
    def group_members(self) -> Mapping[str, tuple[str, ...]]:
        """Queue group -> its active members, in load order."""
        members: dict[str, list[str]] = {}
        for name, group in self.queue_groups.items():
            if group is not None:
                members.setdefault(group, []).append(name)
        return MappingProxyType({group: tuple(names) for group, names in members.items()})

    @cached_property
    def namespaces(self) -> Mapping[str, list[str]]:
        """Active tenant -> all its namespaces (what a network grant to it opens)."""
        return MappingProxyType({name: spec.all_namespaces for name, spec in self.active})

    @cached_property
    def accepting(self) -> Mapping[str, list[str]]:
        """Tenant -> the active tenants (by name) that accept ingress from it."""
        result: dict[str, list[str]] = {}
        for name, spec in sorted(self.active, key=lambda member: member[0]):
            for source in set(spec.network.ingress_from.tenants) - {name}:
                result.setdefault(source, []).append(name)
        return MappingProxyType(result)

    def __reduce__(self):
        # Copies and pickles carry what the facts are made of, not the facts already worked out.
        return (FleetFacts, (self.environment_label, self.platform, self.members))

    @cached_property
    def _member_views(self) -> dict[str, TenantView]:
        # Each member's view, made on first use: validation and every builder of it read the same one.
        return {}

    def view(self, tenant: Tenant) -> TenantView:
        """What `tenant`'s builders need to know of the fleet (the tenant need not be a member; a
        member's view is made once).

        >>> from components.spec.stack import Platform
        >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
        >>> FleetFacts("dev", Platform(labelDomain="gpu.example.com"), ()).view(t).reachable_pools
        ()
        >>> prod.facts.view(tenant) is prod.facts.view(tenant)
        True
        """
        if self.specs.get(tenant.name) is not tenant:
            return self._view_of(tenant)
        made = self._member_views.get(tenant.name)
        if made is None:
            made = self._member_views[tenant.name] = self._view_of(tenant)
        return made

    def fleet_inputs(self, tenant: Tenant) -> tuple:
        """What `tenant`'s view reads of the fleet beyond its spec and the platform (`VIEW_FIELDS`:
        the fields made of the fleet): one spec under one platform has equal views in two fleets
        exactly when these are equal, so `tenants diff` compares them instead of making both views.

        >>> prod.facts.fleet_inputs(tenant) == prod.facts.fleet_inputs(tenant)
        True
        """
        return (self.environment_label, tuple(self.pool_owners.items()), self._quota_split_of(tenant),
                self._granted_namespaces(tenant), self._accepting_of(tenant))

    def _granted_namespaces(self, tenant: Tenant) -> tuple[tuple[str, tuple[str, ...]], ...]:
        granted = sorted(set(tenant.network.ingress_from.tenants) - {tenant.name})
        return tuple((name, tuple(self.namespaces[name])) for name in granted if name in self.namespaces)

    def _accepting_of(self, tenant: Tenant) -> tuple[tuple[str, tuple[str, ...], tuple], ...]:
        return tuple(
            (other, tuple(self.namespaces[other]), tuple(self.specs[other].network.ingress_from.ports))
            for other in self.accepting.get(tenant.name, ())
        )

    def _view_of(self, tenant: Tenant) -> TenantView:
        platform = self.platform
        reachable = tuple(feas.reachable_pools(tenant.name, tenant, platform, self.pool_owners))
        by_resource = MappingProxyType(cap.gpu_quota_by_resource(tenant, platform))
        borrowing, dedicated = borrowing_limits(tenant, platform), frozenset(dedicated_only_classes(tenant, platform))
        borrows = queue_borrows(tenant, platform)
        return TenantView(
            tenant=tenant.name,
            platform=platform,
            environment_label=self.environment_label,
            pool_owners=tuple(self.pool_owners.items()),
            reachable_pools=reachable,
            quota_split=self._quota_split_of(tenant),
            granted_namespaces=self._granted_namespaces(tenant),
            accepting=self._accepting_of(tenant),
            allowed_classes=tuple(cap.allowed_classes(tenant, platform)),
            gpu_quota_by_class=MappingProxyType(cap.gpu_quota_by_class(tenant, platform)),
            gpu_quota_by_resource=by_resource,
            quota_gpu_resources=self.quota_gpu_resources,
            dedicated_only_classes=dedicated,
            borrowing_limits=_read_only(borrowing),
            lending_limits=_read_only(lending_limits(tenant, platform)),
            queue_borrows=borrows,
            gpu_ceiling_by_resource=MappingProxyType(
                self._gpu_ceiling(tenant, reachable, by_resource, borrowing or {}, dedicated) if borrows else dict(by_resource)
            ),
            effective_limits=effective_limits(tenant, platform),
            role_bundles=self.role_bundles,
            kai_quota=kai_amounts(tenant, platform, by_resource),
            kueue_compute_nominal=MappingProxyType(kueue_compute_nominal(tenant, platform)),
        )

    def _gpu_ceiling(self, tenant: Tenant, reachable, by_resource, limits, dedicated) -> dict[str, int]:
        """Most GPUs per extended resource the tenant's pods may hold: the ResourceQuota's GPU keys.

        The one rule (docs/queues-and-vclusters.md, "The quota under a queue"). The nominal quota, plus,
        when the tenant's queue can borrow (a cohort or KAI department, `queue.admission: queued`), a
        headroom read from the tenant's own spec and the stack only: per GPU class its `borrowingLimit`,
        never more than the pools it may reach hold beyond its quota (capacity x overcommit); with no
        limit, and for MIG profiles, all of that. Every GPU pod of such a tenant went through its queue
        (the queue-pinning policy), so the queue, not this ceiling, is what limits borrowing; the
        ceiling only never depends on what other tenants lend, so a quota edit changes one tenant.
        Without a queueing scheduler, with Kueue and no cohort, or with `admission: direct` (pods may
        bypass the queue, and ResourceQuota cannot tell them apart), it is the nominal quota.
        """
        platform = self.platform
        totals = dict(by_resource)
        own = feas.tenant_demand(tenant, platform, self.capacity.mig_profile_classes)
        reach: dict[Commodity, int] = {}
        for name in reachable:
            pool = platform.node_pools[name]
            for commodity, units in feas.pool_supply(platform, pool).items():
                reach[commodity] = reach.get(commodity, 0) + feas.pool_limit(platform, pool, units)
        for commodity, units in sorted(reach.items()):
            kind, name = commodity
            if kind == "class" and name in dedicated:
                continue
            headroom = max(0, units - own.get(commodity, 0))
            if kind == "class" and name in limits:
                headroom = min(headroom, limits[name])
            if headroom:
                resource = feas.commodity_resource(platform, commodity)
                totals[resource] = totals.get(resource, 0) + headroom
        return dict(sorted(totals.items()))

    def _quota_split_of(self, tenant: Tenant) -> tuple[tuple[Commodity, tuple[tuple[str, int], ...]], ...]:
        # A tenant the fleet does not count (not a member, or decommissioned) gets its own flow alone.
        split = self.quota_split.get(tenant.name)
        if split is None:
            alone = feas.feasibility([(tenant.name, tenant)], self.platform, self.pool_owners, self.capacity)
            split = feas.split_of(alone).get(tenant.name, {})
        return tuple((commodity, tuple(by_pool.items())) for commodity, by_pool in split.items())

    def lenders(self, tenant: Tenant) -> dict[str, dict[Commodity, int]]:
        """Per other member of the tenant's queue group: what it lends on pools the tenant may reach.

        Borrowing happens flavor by flavor, and a flavor is a pool: quota lent on a pool the tenant
        cannot reach is no use to it. Walks the group: for error messages; `lent_to` is the sum.
        """
        group = queue_group(tenant, self.platform)
        if group is None:
            return {}
        reach = set(feas.reachable_pools(tenant.name, tenant, self.platform, self.pool_owners))
        result: dict[str, dict[Commodity, int]] = {}
        for member in self.group_members.get(group, ()):
            if member == tenant.name:
                continue
            for commodity, by_pool in self.lent[member].items():
                units = sum(n for p, n in by_pool.items() if p in reach)
                if units:
                    result.setdefault(member, {})[commodity] = units
        for commodity, units in self._spare_for(group, reach).items():
            result.setdefault(f"cohort {self.spare_cohort} (spare)", {})[commodity] = units
        return result

    def _spare_for(self, group: str, reach) -> dict[Commodity, int]:
        # The spare cohort's quota is borrowable from anywhere in its tree, on the pools a queue lists.
        if self.spare_cohort is None or cohort_root(self.spare_cohort, self.platform) != group:
            return {}
        totals = {}
        for commodity, by_pool in self.pool_spare.items():
            units = sum(by_pool.get(p, 0) for p in reach)
            if units:
                totals[commodity] = units
        return totals

    def lent_to(self, tenant: Tenant) -> dict[Commodity, int]:
        """What the other members of the tenant's queue group lend, in all, on pools it may reach,
        plus the spare cohort's quota there when the group is the spare cohort's tree.

        The group's total minus the tenant's own share: the same sums as `lenders`, without the walk.
        """
        group = queue_group(tenant, self.platform)
        if group is None:
            return {}
        reach = feas.reachable_pools(tenant.name, tenant, self.platform, self.pool_owners)
        own = self.lent.get(tenant.name, {}) if self.queue_groups.get(tenant.name) == group else {}
        totals: dict[Commodity, int] = {}
        for commodity, by_pool in self.lent_in_group.get(group, {}).items():
            mine = own.get(commodity, {})
            units = sum(by_pool.get(p, 0) - mine.get(p, 0) for p in reach)
            if units:
                totals[commodity] = units
        for commodity, units in self._spare_for(group, reach).items():
            totals[commodity] = totals.get(commodity, 0) + units
        return dict(sorted(totals.items()))


@dataclass(frozen=True)
class TenantView:
    """One tenant's window on the fleet: everything its builders read besides its own spec, as plain
    values, and the answers its own numbers give in this environment (worked out once, here, so that
    builders read them instead of working them out). Two equal views and two equal specs build the
    same objects (`tenants diff` relies on it).

    >>> v = prod.view(tenant)
    >>> v.allowed_classes, dict(v.gpu_quota_by_class), v.queue_borrows
    (('a100', 'a100-mig'), {'a100': 20}, False)
    """

    tenant: str
    platform: Platform
    environment_label: str
    pool_owners: tuple[tuple[str, str], ...]                                    # every dedicated pool, by name
    reachable_pools: tuple[str, ...]                                            # where its pods may land
    quota_split: tuple[tuple[Commodity, tuple[tuple[str, int], ...]], ...]      # commodity -> pool -> units
    granted_namespaces: tuple[tuple[str, tuple[str, ...]], ...]                 # tenants it admits -> their namespaces
    accepting: tuple[tuple[str, tuple[str, ...], tuple], ...]                   # tenants that admit it: namespaces, ports
    # The tenant's own numbers (docs/architecture.md, "The fleet facts", says what each answers).
    allowed_classes: tuple[str, ...]
    gpu_quota_by_class: Mapping[str, int]
    gpu_quota_by_resource: Mapping[str, int]
    quota_gpu_resources: tuple[str, ...]
    dedicated_only_classes: frozenset[str]
    borrowing_limits: Mapping[str, int] | None
    lending_limits: Mapping[str, int] | None
    queue_borrows: bool
    gpu_ceiling_by_resource: Mapping[str, int]
    effective_limits: LimitRangeSpec
    role_bundles: Mapping[str, RoleBundle]
    kai_quota: KaiAmounts
    kueue_compute_nominal: Mapping[str, str]

    @property
    def dedicated_pools(self) -> list[str]:
        """The pools the fleet gives this tenant alone, by name."""
        return [pool for pool, owner in self.pool_owners if owner == self.tenant]


# Each TenantView field by what it is made of: "spec" (the tenant's own spec), "platform" (the
# stack alone, or the spec and the stack), "fleet" (what `FleetFacts.fleet_inputs` reads: the other
# tenants, the dedicated pools, the capacity check's split). A new field joins this table; the
# facts' tests check it against the view's fields and that equal fleet inputs give equal views.
VIEW_FIELDS: dict[str, str] = {
    "tenant": "spec",
    "platform": "platform",
    "environment_label": "fleet",
    "pool_owners": "fleet",
    "reachable_pools": "fleet",          # the spec, the stack and `pool_owners`
    "quota_split": "fleet",
    "granted_namespaces": "fleet",
    "accepting": "fleet",
    "allowed_classes": "platform",
    "gpu_quota_by_class": "platform",
    "gpu_quota_by_resource": "platform",
    "quota_gpu_resources": "platform",   # the stack's classes and their models' MIG geometry
    "dedicated_only_classes": "platform",
    "borrowing_limits": "platform",
    "lending_limits": "platform",
    "queue_borrows": "platform",
    "gpu_ceiling_by_resource": "fleet",  # `reachable_pools`, the stack's capacity and the spec's own numbers
    "effective_limits": "platform",
    "role_bundles": "platform",
    "kai_quota": "platform",
    "kueue_compute_nominal": "platform",
}


def _read_only(mapping: Mapping | None) -> Mapping | None:
    """A read-only view of `mapping` (None stays None).

    >>> _read_only({"a100": 2})["a100"], _read_only(None)
    (2, None)
    """
    return None if mapping is None else MappingProxyType(mapping)


def lendable_on_pools(tenant: Tenant, platform: Platform, split: Split) -> dict[Commodity, dict[str, int]]:
    """What the tenant's queue lends while idle, per commodity and pool (its flavors).

    Its nominal quota on each pool (`split`, the fleet's quota split), capped per flavor by
    `lendingLimit` (Kueue; KAI lends all idle quota), and nothing of a class it reaches only through
    its dedicated pools (nobody else can be placed there).

    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", queue={"lendingLimit": {"h100": 1}})
    >>> lendable_on_pools(t, Platform(labelDomain="x.dev", scheduler="kueue"), {("class", "h100"): {"p": 4}})
    {('class', 'h100'): {'p': 1}}
    """
    dedicated = dedicated_only_classes(tenant, platform)
    limits = (lending_limits(tenant, platform) or {}) if platform.scheduler == "kueue" else {}
    result: dict[Commodity, dict[str, int]] = {}
    for commodity, by_pool in split.items():
        kind, name = commodity
        if kind == "class" and name in dedicated:
            continue
        limit = limits.get(name) if kind == "class" else None
        result[commodity] = {p: (n if limit is None else min(limit, n)) for p, n in by_pool.items()}
    return result
