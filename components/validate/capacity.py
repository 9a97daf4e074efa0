"""The capacity check: quotas that cannot all be honoured at once on the pools their tenants may
reach, and pools whose quotas are near full (the max-flow itself is `components.fleet.feasibility`)."""

from __future__ import annotations

from fractions import Fraction

from ..fleet import feasibility as feas
from ..fleet import gpu_capacity as cap
from ..fleet.environment import Environment
from ..spec.problems import Problem
from ..spec.stack import Platform
from ..spec.yaml_source import SourceDocument
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
    platform: Platform = environment.platform
    doc: SourceDocument = environment.platform_doc
    active = [t for t in environment.tenants if t.spec.lifecycle == "active"]
    by_name = {t.name: t for t in active}
    owners = feas.pool_owners([(t.name, t.spec) for t in environment.tenants], platform)
    problems: list[Problem] = []
    ratio = Fraction(platform.capacity_warning_ratio)
    # A tenant listing a pool that another tenant already holds gets that error; the capacity it
    # then lacks is a consequence, not a second problem to report.
    contested = {t.name for t in active if any(owners.get(p, t.name) != t.name for p in t.spec.gpu.dedicated_pools)}
    for commodity, result in feas.feasibility([(t.name, t.spec) for t in active], platform, owners).items():
        subject = feas.commodity_text(commodity)
        if result.violators and set(result.violators) & contested:
            continue
        if result.violators:
            tenants = result.violators
            pools = result.pools_of(tenants)
            asked = sum(result.demand[t] for t in tenants)
            held = sum(result.limit[p] for p in pools)
            who = ", ".join(f"{t}: {result.demand[t]}" for t in tenants)
            where = ", ".join(f"{p}: {_pool_bound(platform, result, p)}" for p in pools) or "none"
            message = (
                f"{subject} is over-promised: tenant{'s' if len(tenants) > 1 else ''} {who} "
                f"{'ask' if len(tenants) > 1 else 'asks'} for {asked} on the pools {'they' if len(tenants) > 1 else 'it'} may use "
                f"({where}), which hold {held}; lower a quota, add nodes to these pools or raise overcommit"
            )
            for name in tenants:
                problems.append(by_name[name].doc.problem(_quota_path(by_name[name].spec, commodity), message))
            continue
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


def _quota_path(tenant, commodity) -> tuple:
    kind, name = commodity
    if kind == "mig":
        return ("quota", "mig", name)
    return ("quota", "gpu", name) if isinstance(tenant.quota.gpu, dict) else ("quota", "gpu")
