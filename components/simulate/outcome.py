"""What one replay gave, as figures: per tenant jobs admitted, wait p50/p95, GPU-hours used and
borrowed, preemptions; per pool utilisation. Built from what the real components recorded (the
Workloads' admission times, the pods' runs, the ClusterQueues' borrowed usage), all in trace
seconds (wall seconds times the replay's speed)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional


@dataclass(frozen=True)
class JobOutcome:
    """One job of the trace as the cluster treated it (times in trace seconds from the trace's start)."""

    tenant: str
    name: str
    submitted: float
    admitted: Optional[float]        # first admission by the queue; None: never admitted
    preemptions: int = 0
    rejected: str = ""               # why the API server refused the Job ("": it was created)
    devices: int = 0                 # devices its pods ask for together (count x pods)


@dataclass(frozen=True)
class Outcome:
    """Everything one side's replay measured.

    `used` and `borrowed` are device-seconds per tenant, `pool_used` per pool, `pool_devices` the
    devices each pool offers, `span` the trace seconds the replay covered, `lag` how late (trace
    seconds) the latest Job was created against its `submit` (the replay's own delay, not the cluster's).
    """

    jobs: tuple[JobOutcome, ...]
    used: Mapping[str, float] = field(default_factory=dict)
    borrowed: Mapping[str, float] = field(default_factory=dict)
    pool_used: Mapping[str, float] = field(default_factory=dict)
    pool_devices: Mapping[str, int] = field(default_factory=dict)
    span: float = 0.0
    lag: float = 0.0


@dataclass(frozen=True)
class TenantFigures:
    """One tenant's figures; a wait of a job never admitted counts as its time in the queue so far
    (so `wait_p95` is then a lower bound, and `starved` says so)."""

    submitted: int
    admitted: int
    rejected: int
    wait_p50: float
    wait_p95: float
    gpu_hours: float
    borrowed_hours: float
    preemptions: int
    devices: int = 0   # devices its admitted jobs asked for: the scale of its GPU-hours' tolerance

    @property
    def starved(self) -> bool:
        """Some of its created jobs were never admitted.

        >>> TenantFigures(3, 2, 0, 0, 0, 0, 0, 0).starved
        True
        """
        return self.admitted < self.submitted - self.rejected


def percentile(values: Iterable[float], p: float) -> float:
    """The nearest-rank percentile (0 of nothing).

    >>> percentile([4, 1, 3, 2], 50), percentile([4, 1, 3, 2], 95), percentile([], 95)
    (2, 4, 0.0)
    """
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def tenant_figures(outcome: Outcome, tenant: str) -> TenantFigures:
    """The figures of one tenant of a replay.

    >>> o = Outcome((JobOutcome("eval", "a", 0, 10), JobOutcome("eval", "b", 5, None)), used={"eval": 7200}, span=100)
    >>> tenant_figures(o, "eval")
    TenantFigures(submitted=2, admitted=1, rejected=0, wait_p50=10, wait_p95=95, gpu_hours=2.0, borrowed_hours=0.0, preemptions=0, devices=0)
    """
    jobs = [j for j in outcome.jobs if j.tenant == tenant]
    created = [j for j in jobs if not j.rejected]
    waits = [(j.admitted if j.admitted is not None else outcome.span) - j.submitted for j in created]
    return TenantFigures(
        submitted=len(jobs),
        admitted=sum(j.admitted is not None for j in created),
        rejected=len(jobs) - len(created),
        wait_p50=percentile(waits, 50),
        wait_p95=percentile(waits, 95),
        gpu_hours=outcome.used.get(tenant, 0.0) / 3600,
        borrowed_hours=outcome.borrowed.get(tenant, 0.0) / 3600,
        preemptions=sum(j.preemptions for j in jobs),
        devices=sum(j.devices for j in created if j.admitted is not None),
    )


def utilisation(outcome: Outcome, span: float | None = None) -> dict[str, float]:
    """Per pool: device-seconds used over devices times the span (0..1; a MIG slice is one device);
    `span` defaults to the replay's own (two sides compare over the longer of theirs).

    >>> utilisation(Outcome((), pool_used={"a": 50.0}, pool_devices={"a": 2, "b": 4}, span=100))
    {'a': 0.25, 'b': 0.0}
    """
    span = outcome.span if span is None else span
    return {pool: (outcome.pool_used.get(pool, 0.0) / (devices * span) if devices and span else 0.0)
            for pool, devices in sorted(outcome.pool_devices.items())}


def tenants_of(*outcomes: Outcome) -> list[str]:
    """Every tenant with a job in any of the outcomes, sorted.

    >>> tenants_of(Outcome((JobOutcome("b", "x", 0, 0),)), Outcome((JobOutcome("a", "y", 0, 0),)))
    ['a', 'b']
    """
    return sorted({j.tenant for o in outcomes for j in o.jobs})
