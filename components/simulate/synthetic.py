"""A seeded synthetic trace from the tenants' quotas (`tenants simulate --synthetic N --seed S`).

Each tenant gets jobs in proportion to its GPU quota, on each class and MIG profile it holds quota
of; a job's pod asks for a power of two that fits one node and the quota; durations are whole
minutes. Submissions are spread so that each (tenant, device) is offered `load` times its quota on
average over the trace: at 1.0 a tenant alone fills its quota, so queues form where quotas
meet bursts, and a lowered quota shows as a longer wait. The same seed gives the same trace.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..fleet.environment import Environment
from ..fleet.isolation import mode_of
from .trace import MIG_RESOURCE_PREFIX, Trace, TraceJob

SIZES = (1, 2, 4, 8)
DURATION_MINUTES = (5, 60)   # a job runs 5 to 60 minutes


@dataclass(frozen=True)
class Demand:
    """One tenant's quota of one `gpu` (a class or a MIG profile) and the most one pod may ask."""

    tenant: str
    gpu: str
    quota: int
    per_pod: int


def node_devices(environment: Environment) -> dict[str, int]:
    """The most devices one node offers, per GPU class and MIG profile.

    >>> node_devices(prod)["h100"], node_devices(prod)["1g.10gb"]
    (8, 28)
    """
    platform, most = environment.platform, {}
    for pool in platform.node_pools.values():
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        if gpu_class is None:
            continue
        units, profiles = mode_of(gpu_class).node_devices(platform, pool, gpu_class)
        for gpu, n in ((pool.gpu_class, units), *profiles.items()):
            most[gpu] = max(most.get(gpu, 0), n)
    return most


def demands(environment: Environment) -> list[Demand]:
    """Every (tenant, gpu) with quota, in name order.

    >>> [(d.tenant, d.gpu, d.quota) for d in demands(prod)][:3]
    [('eval', 'a100', 20), ('eval', '1g.10gb', 48), ('eval', '3g.40gb', 16)]
    """
    per_node, out = node_devices(environment), []
    for loaded in environment.tenants:
        if not loaded.spec.is_active:
            continue
        view = environment.facts.view(loaded.spec)
        held = [*view.gpu_quota_by_class.items(),
                *((r.removeprefix(MIG_RESOURCE_PREFIX), n) for r, n in view.gpu_quota_by_resource.items()
                  if r.startswith(MIG_RESOURCE_PREFIX))]
        for gpu, quota in held:
            if quota > 0 and per_node.get(gpu, 0) > 0:
                out.append(Demand(loaded.name, gpu, int(quota), min(int(quota), per_node[gpu])))
    return out


def synthetic_trace(environment: Environment, jobs: int, seed: int, load: float = 1.0) -> Trace:
    """`jobs` jobs over the tenants' quotas, the same for the same seed.

    >>> t = synthetic_trace(prod, 20, seed=7)
    >>> len(t.jobs), t == synthetic_trace(prod, 20, seed=7), t == synthetic_trace(prod, 20, seed=8)
    (20, True, False)
    """
    rng = random.Random(seed)
    wanted = demands(environment)
    if not wanted or jobs <= 0:
        return Trace(jobs=[])
    weights = [d.quota for d in wanted]
    picks = rng.choices(range(len(wanted)), weights=weights, k=jobs)
    drafts = [_draft(wanted[i], rng) for i in picks]
    offered: dict[int, float] = {}
    for i, (count, minutes) in zip(picks, drafts):
        offered[i] = offered.get(i, 0.0) + count * minutes * 60
    out = []
    for n, (i, (count, minutes)) in enumerate(zip(picks, drafts)):
        horizon = max(offered[i] / (wanted[i].quota * load), minutes * 60)
        out.append(TraceJob(tenant=wanted[i].tenant, submit=round(rng.uniform(0, horizon)), gpu=wanted[i].gpu,
                            count=count, duration=minutes * 60, name=f"job-{n:05d}"))
    return Trace(jobs=sorted(out, key=lambda j: (j.submit, j.name)))


def _draft(demand: Demand, rng: random.Random) -> tuple[int, int]:
    sizes = [s for s in SIZES if s <= demand.per_pod] or [1]
    return rng.choice(sizes), rng.randint(*DURATION_MINUTES)
