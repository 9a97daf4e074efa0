"""The simulation report: base and change side by side, the changes that matter called out, the
assumptions and the tolerance stated; as text, Markdown (the PR comment) or JSON (formatVersion 1).

What counts as "a change that matters" is one row of FINDINGS each (a predicate over the two
sides' figures and its sentence), so adding a call-out is adding a row.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

from .outcome import Outcome, TenantFigures, tenant_figures, tenants_of, utilisation

FORMAT_VERSION = 1
IDLE_BELOW = 0.01            # a pool below 1% utilisation is idle
WAIT_RATIO = 2.0             # a p95 wait at least twice the base's is called out


@dataclass(frozen=True)
class Tolerance:
    """How far two replays of the same trace may differ and still be "the same": `seconds` of
    trace time (the components' own reaction time, a second or two of wall time, times the speed)
    plus `ratio` of the larger value.

    >>> Tolerance(30, 0.1).same(100, 125), Tolerance(30, 0.1).same(100, 150)
    (True, False)
    """

    seconds: float
    ratio: float = 0.1

    def same(self, a: float, b: float) -> bool:
        """Whether `a` and `b` differ by no more than the tolerance."""
        return abs(a - b) <= self.seconds + self.ratio * max(abs(a), abs(b))

    def same_device_seconds(self, a: float, b: float, devices: int) -> bool:
        """Whether two device-seconds figures agree: a job holding `devices` devices that runs
        `seconds` longer on one side adds `seconds` times `devices`, so the margin scales with them.

        >>> Tolerance(30, 0.1).same_device_seconds(2400, 2880, 8), Tolerance(30, 0.1).same(2400, 2880)
        (True, False)
        """
        return abs(a - b) <= self.seconds * max(devices, 1) + self.ratio * max(abs(a), abs(b))


def _longer_wait(t: str, b: TenantFigures, c: TenantFigures, tol: Tolerance) -> str | None:
    if c.wait_p95 >= WAIT_RATIO * max(b.wait_p95, 1) and not tol.same(b.wait_p95, c.wait_p95):
        times = f"{c.wait_p95 / b.wait_p95:.1f} times" if b.wait_p95 >= 1 else "up from 0 to"
        return f"{t}: p95 wait {times} longer ({_duration(b.wait_p95)} -> {_duration(c.wait_p95)})"
    return None


def _starved(t: str, b: TenantFigures, c: TenantFigures, tol: Tolerance) -> str | None:
    if c.starved and c.admitted < b.admitted:
        return f"{t}: starved, {c.submitted - c.rejected - c.admitted} of its {c.submitted} job(s) never admitted (base: {b.admitted} admitted)"
    return None


def _borrowing(t: str, b: TenantFigures, c: TenantFigures, tol: Tolerance) -> str | None:
    if not tol.same_device_seconds(b.borrowed_hours * 3600, c.borrowed_hours * 3600, max(b.devices, c.devices)):
        return f"{t}: borrows {c.borrowed_hours:.1f} GPU-hours (base {b.borrowed_hours:.1f})"
    return None


def _preempted(t: str, b: TenantFigures, c: TenantFigures, tol: Tolerance) -> str | None:
    if c.preemptions > b.preemptions:
        return f"{t}: preempted {c.preemptions} time(s) (base {b.preemptions})"
    return None


# What decided admission on each side, by the stack's `scheduler` (the report's `scheduler` field).
QUEUEING_NAMES = {"kueue": "Kueue", "kai": "the KAI Scheduler"}


# kind -> (tenant predicate and sentence); the report lists them in this order.
FINDINGS: dict[str, Callable[[str, TenantFigures, TenantFigures, Tolerance], str | None]] = {
    "longer-wait": _longer_wait,
    "starved": _starved,
    "borrowing-moved": _borrowing,
    "more-preemptions": _preempted,
}


def compare(base: Outcome, change: Outcome, tolerance: Tolerance, context: Mapping[str, Any]) -> dict[str, Any]:
    """The report document of two replays of one trace; `context` says what ran (stack, refs, speed, ...).

    >>> from components.simulate.outcome import JobOutcome
    >>> b = Outcome((JobOutcome("eval", "a", 0, 10),), pool_devices={"p": 8}, pool_used={"p": 800}, span=100)
    >>> c = Outcome((JobOutcome("eval", "a", 0, 60),), pool_devices={"p": 8}, span=100)
    >>> [f["text"] for f in compare(b, c, Tolerance(5), {})["findings"]]
    ['eval: p95 wait 6.0 times longer (10s -> 1m00s)', 'pool p: idle (0% used; base 100%)']
    """
    tenants = {}
    findings = []
    for t in tenants_of(base, change):
        b, c = tenant_figures(base, t), tenant_figures(change, t)
        tenants[t] = {"base": asdict(b), "change": asdict(c)}
        findings += [{"kind": kind, "tenant": t, "text": text} for kind, rule in FINDINGS.items()
                     if (text := rule(t, b, c, tolerance))]
    pools = {}
    span = max(base.span, change.span)   # one window for both: a longer replay is not a less busy one
    ub, uc = utilisation(base, span), utilisation(change, span)
    for pool in sorted(set(ub) | set(uc)):
        pools[pool] = {"base": ub.get(pool), "change": uc.get(pool)}
        # Called out when the change leaves it idle: new, or busy on the base (idle on both is no change).
        if uc.get(pool) is not None and uc[pool] < IDLE_BELOW and not (pool in ub and ub[pool] < IDLE_BELOW):
            was = f"; base {ub[pool]:.0%}" if pool in ub else "; new pool"
            findings.append({"kind": "idle-pool", "pool": pool, "text": f"pool {pool}: idle ({uc[pool]:.0%} used{was})"})
    return {"formatVersion": FORMAT_VERSION, "simulation": True, **dict(context),
            "tolerance": asdict(tolerance), "span": span,
            "lag": max(base.lag, change.lag), "tenants": tenants, "pools": pools, "findings": findings}


def _duration(seconds: float | None) -> str:
    """Trace seconds as `1h02m`, `3m05s`, `40s`.

    >>> _duration(3725), _duration(185), _duration(40.4)
    ('1h02m', '3m05s', '40s')
    """
    s = round(seconds or 0)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


ASSUMPTIONS = (
    "a simulation: the trace replayed on a throw-away control plane (kwok nodes from the stack's inventory, the real "
    "kube-scheduler and Kueue), not on the cluster",
    "durations as given in the trace (a job runs exactly its duration once its pods start); no node failures, no image pulls",
    "time compressed {speed:g}x: trace seconds are wall seconds times {speed:g}; utilisation over the longer side's span ({span})",
    "jobs created up to {lag} after their submit time (the replay's own delay); waits count from creation",
    "figures agree between runs of the same trace within the tolerance: {tolerance}; GPU-hours within that "
    "many seconds per device a tenant's jobs hold",
    "MIG slices and shared GPUs count as one device each in utilisation and GPU-hours",
)


def _rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[str]], list[list[str]]]:
    header = ["tenant", "jobs", "admitted", "wait p50", "wait p95", "GPU-h", "borrowed GPU-h", "preempted"]
    rows = []
    for t, sides in document["tenants"].items():
        b, c = sides["base"], sides["change"]
        def pair(key, fmt=str):
            before, after = fmt(b[key]), fmt(c[key])
            return after if before == after else f"{before} -> {after}"
        rows.append([t, pair("submitted"), pair("admitted"), pair("wait_p50", _duration), pair("wait_p95", _duration),
                     pair("gpu_hours", lambda v: f"{v:.1f}"), pair("borrowed_hours", lambda v: f"{v:.1f}"), pair("preemptions")])
    pools = [[p, "-" if s["base"] is None else f"{s['base']:.0%}", "-" if s["change"] is None else f"{s['change']:.0%}"]
             for p, s in document["pools"].items()]
    return header, rows, pools


def _assumptions(document: Mapping[str, Any]) -> list[str]:
    tol = document["tolerance"]
    text = f"±{_duration(tol['seconds'])} plus {tol['ratio']:.0%} of the larger value"
    return [a.format(speed=document.get("speed", 1), tolerance=text, span=_duration(document.get("span")),
                     lag=_duration(document.get("lag"))) for a in ASSUMPTIONS]


def format_text(document: Mapping[str, Any]) -> str:
    """The report for a terminal.

    >>> print(format_text(compare(Outcome(()), Outcome(()), Tolerance(5), {"stack": "prod", "speed": 60})))
    simulation of stack prod (base -> change); no change that matters
    <BLANKLINE>
    tenant  jobs  admitted  wait p50  wait p95  GPU-h  borrowed GPU-h  preempted
    <BLANKLINE>
    pool  base  change
    <BLANKLINE>
    assumptions:
    ...
    """
    header, rows, pools = _rows(document)
    findings = document["findings"]
    lines = [f"simulation of stack {document.get('stack', '?')} (base -> change); "
             + (f"{len(findings)} change(s) that matter:" if findings else "no change that matters")]
    lines += [f"  ! {f['text']}" for f in findings]
    lines += ["", *_table(header, rows), "", *_table(["pool", "base", "change"], pools), "", "assumptions:"]
    lines += [f"  - {a}" for a in _assumptions(document)]
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]


def format_markdown(document: Mapping[str, Any]) -> str:
    """The report as a PR comment.

    >>> print(format_markdown(compare(Outcome(()), Outcome(()), Tolerance(5), {"stack": "prod"})).splitlines()[0])
    ### Queue simulation: stack `prod`
    """
    header, rows, pools = _rows(document)
    out = [f"### Queue simulation: stack `{document.get('stack', '?')}`", "",
           f"> A **simulation**: the trace `{document.get('trace', '?')}` replayed on the base "
           f"(`{document.get('base', '?')}`) and on this change, each on a throw-away cluster of the real scheduler and "
           f"{QUEUEING_NAMES.get(document.get('scheduler', 'kueue'), 'Kueue')}.", ""]
    findings = document["findings"]
    out += [f"- :warning: {f['text']}" for f in findings] or ["No change that matters (within the tolerance)."]
    out += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out += ["", "| pool | utilisation (base) | utilisation (change) |", "|---|---|---|"]
    out += ["| " + " | ".join(p) + " |" for p in pools]
    out += ["", "<details><summary>Assumptions</summary>", ""] + [f"- {a}" for a in _assumptions(document)] + ["", "</details>"]
    return "\n".join(out) + "\n"


def to_json(document: Mapping[str, Any]) -> str:
    """The report document as JSON (formatVersion 1).

    >>> json.loads(to_json({"formatVersion": 1}))["formatVersion"]
    1
    """
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


FORMATS = {"text": format_text, "markdown": format_markdown, "json": to_json}
