"""`tenants report`: GPU-hours per cost centre, tenant and GPU class over a period, from Prometheus;
with `--idle`, the idle guaranteed quota (showback, below).

Pure: `period_queries` says what to ask Prometheus (the chargeback recording rules integrated
over the period, `monitoring_rules.gpu_hours_expr`), `chargeback_rows` turns its answers (the
`data.result` of `/api/v1/query`) into rows, and the formatters lay them out. The HTTP call is the
command's (components/cli/reports.py), so all of this is tested on canned answers.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Optional

import math
from fractions import Fraction

from ..fleet import gpu_capacity as cap
from ..fleet.environment import Environment, LoadedTenant
from ..manifests import monitoring_rules as r
from ..validate.capacity import quota_path

ALLOCATED, USED, PEAK = r.ALLOCATED, r.USED, r.PEAK   # names of the figures asked (monitoring_rules.PERIOD_FIGURES)
IDLE_BELOW = r.IDLE_BELOW
CSV_COLUMNS = ("cost_center", "tenant", "gpu_class", "allocated_gpu_hours", "used_gpu_hours")


@dataclass(frozen=True)
class ChargebackRow:
    cost_center: str
    tenant: str
    gpu_class: str
    allocated_gpu_hours: float
    used_gpu_hours: Optional[float]  # None when Prometheus has no DCGM-based series for the row

    @property
    def used_share(self) -> Optional[float]:
        """Used over allocated GPU-hours, None when either is missing or nothing was allocated."""
        if self.used_gpu_hours is None or not self.allocated_gpu_hours:
            return None
        return self.used_gpu_hours / self.allocated_gpu_hours


DEFAULT_STEP_SECONDS = 60 * r.GPU_HOURS_RESOLUTION_MINUTES


def period_seconds(start: datetime, end: datetime, step_seconds: int = DEFAULT_STEP_SECONDS) -> int:
    """Length of the period in whole seconds; the period must be at least one step (a minute unless asked).

    >>> from datetime import timezone
    >>> period_seconds(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
    2592000
    """
    seconds = int((end - start).total_seconds())
    if seconds < step_seconds:
        raise ValueError(f"the period from {start.isoformat()} to {end.isoformat()} is shorter than the {step_seconds} s step; "
                         "--to must be after --from")
    return seconds


def period_queries(start: datetime, end: datetime, step_seconds: int = DEFAULT_STEP_SECONDS) -> dict[str, str]:
    """The instant queries (evaluated at `end`) whose answers are the period's GPU-hours allocated and
    used, integrated at `step_seconds` (`monitoring_rules.gpu_hours_expr`; ValueError when it does not divide an hour).

    >>> from datetime import timezone
    >>> print(period_queries(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, 3, tzinfo=timezone.utc))["allocated"])
    sum by (cost_center, tenant, gpu_class) (sum_over_time(gpu_tenancy:tenant_gpu_allocated:gpus[10800s:1m])) / 60
    """
    return r.figure_queries(r.Period.of_seconds(period_seconds(start, end, step_seconds), step_seconds), (ALLOCATED, USED))


def _by_key(result: list[dict[str, Any]]) -> dict[tuple[str, ...], float]:
    return {tuple(sample["metric"].get(label, "") for label in r.CHARGEBACK_LABELS): float(sample["value"][1]) for sample in result}


def chargeback_rows(answers: dict[str, list[dict[str, Any]]]) -> list[ChargebackRow]:
    """Rows sorted by cost centre, tenant and class, from the vectors Prometheus answered per query.

    >>> chargeback_rows({"allocated": [{"metric": {"cost_center": "cc-1", "tenant": "a", "gpu_class": "h100"},
    ...     "value": [1796083200, "6"]}], "used": []})
    [ChargebackRow(cost_center='cc-1', tenant='a', gpu_class='h100', allocated_gpu_hours=6.0, used_gpu_hours=None)]
    """
    allocated, used = _by_key(answers.get(ALLOCATED, [])), _by_key(answers.get(USED, []))
    return [
        ChargebackRow(*key, allocated_gpu_hours=allocated.get(key, 0.0), used_gpu_hours=used.get(key))
        for key in sorted(allocated.keys() | used.keys())
    ]


def _hours(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.3f}"


def format_csv(rows: list[ChargebackRow], start: datetime, end: datetime) -> str:
    """One line per row under a header (GPU-hours with three decimals; used empty without DCGM data).

    >>> from datetime import datetime, timezone
    >>> start, end = datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc)
    >>> print(format_csv([ChargebackRow("cc-ml", "eval", "a100", 120.0, 90.5)], start, end), end="")
    cost_center,tenant,gpu_class,allocated_gpu_hours,used_gpu_hours
    cc-ml,eval,a100,120.000,90.500
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow((row.cost_center, row.tenant, row.gpu_class, _hours(row.allocated_gpu_hours), _hours(row.used_gpu_hours)))
    return out.getvalue()


def format_text(rows: list[ChargebackRow], start: datetime, end: datetime) -> str:
    """An aligned table with a total per cost centre and one for all, headed by the period.

    >>> from datetime import datetime, timezone
    >>> start, end = datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc)
    >>> print(format_text([ChargebackRow("cc-ml", "eval", "a100", 120.0, 90.5), ChargebackRow("cc-ml", "inference", "h100", 10.0, None)], start, end), end="")
    GPU-hours from 2026-11-01T00:00:00+00:00 to 2026-12-01T00:00:00+00:00
    cost centre  tenant     GPU class  allocated GPU-h  used GPU-h  used
    cc-ml        eval       a100               120.000      90.500   75%
    cc-ml        inference  h100                10.000
    cc-ml        (total)                       130.000      90.500   70%
    (all)                                      130.000      90.500   70%
    """
    header = ("cost centre", "tenant", "GPU class", "allocated GPU-h", "used GPU-h", "used")
    lines: list[tuple[str, ...]] = []

    def line(cost_center: str, tenant: str, gpu_class: str, group: list[ChargebackRow]) -> tuple[str, ...]:
        total = ChargebackRow(cost_center, tenant, gpu_class, sum(row.allocated_gpu_hours for row in group),
                              None if all(row.used_gpu_hours is None for row in group)
                              else sum(row.used_gpu_hours or 0.0 for row in group))
        share = "" if total.used_share is None else f"{total.used_share:.0%}"
        return (cost_center, tenant, gpu_class, _hours(total.allocated_gpu_hours), _hours(total.used_gpu_hours), share)

    for cost_center in sorted({row.cost_center for row in rows}):
        group = [row for row in rows if row.cost_center == cost_center]
        lines += [line(row.cost_center, row.tenant, row.gpu_class, [row]) for row in group]
        lines.append(line(cost_center, "(total)", "", group))
    if rows:
        lines.append(line("(all)", "", "", rows))
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(len(header))]
    numeric = {3, 4, 5}

    def render(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    title = f"GPU-hours from {start.isoformat()} to {end.isoformat()}"
    if not rows:
        return f"{title}: no GPU-hours recorded (are the gpu-tenancy recording rules loaded for this period?)\n"
    return "\n".join([title, render(header), *(render(cells) for cells in lines)]) + "\n"


FORMATTERS: dict[str, Callable[[list[ChargebackRow], datetime, datetime], str]] = {"text": format_text, "csv": format_csv}


# --- idle guaranteed quota (`tenants report --idle --stack ENV`) ----------------------------------
# `tenants report --idle --stack ENV`: tenants holding guaranteed GPU quota they do not use.
#
# Per tenant and GPU class over a period: the quota's GPU-hours (what the stack guarantees it: its
# quota, in GPU-equivalents as chargeback weighs devices, for every hour of the period), the GPU-hours
# its scheduled pods held (the chargeback's allocated) and used (DCGM), and the most it held at once.
# A row whose held GPU-hours are below `--idle-below` of the quota's names the quota line of the
# tenant file and a value to lower it to: the most it held at once, so that nothing it ran in the
# period would have been refused. The quota is read from the files as they are now (a quota changed
# during the period is counted at its current value; the report says so).
IDLE_CSV_COLUMNS = ("tenant", "gpu_class", "quota_gpus", "quota_gpu_hours", "held_gpu_hours", "used_gpu_hours",
               "peak_held_gpus", "quota_line", "lower_to")


@dataclass(frozen=True)
class IdleRow:
    tenant: str
    gpu_class: str
    quota_gpus: float           # GPU-equivalents the quota guarantees
    quota_gpu_hours: float
    held_gpu_hours: float
    used_gpu_hours: Optional[float]
    peak_held_gpus: float
    quota_line: str             # file:line of the quota to lower
    lower_to: Optional[int]     # in the quota's own units (GPUs, shares or MIG instances); None: several keys


def idle_period_queries(start: datetime, end: datetime, step_seconds: int = DEFAULT_STEP_SECONDS) -> dict[str, str]:
    """The chargeback's queries plus the most GPU-equivalents each tenant held at once in the period
    (the figures the dashboard's row "Idle guaranteed quota" shows, from the same table).

    >>> from datetime import timezone
    >>> print(idle_period_queries(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, 3, tzinfo=timezone.utc))["peak"])
    max by (cost_center, tenant, gpu_class) (max_over_time(gpu_tenancy:tenant_gpu_allocated:gpus[10800s:1m]))
    """
    return r.figure_queries(r.Period.of_seconds(period_seconds(start, end, step_seconds), step_seconds), (ALLOCATED, USED, PEAK))


def guaranteed_quota(environment: Environment) -> dict[tuple[str, str], tuple[Fraction, Optional[Fraction], tuple]]:
    """(tenant, GPU class) -> (GPU-equivalents its quota guarantees, what one quota unit is of a
    GPU, the path of its quota line), for the tenants that hold capacity; MIG instance quotas count
    for the class that offers the profile (when one class does). A class whose quota is several
    keys (MIG profiles) has no one unit (None) and the path of its first key.

    >>> guaranteed_quota(prod)[("eval", "a100")][:2]
    (Fraction(20, 1), Fraction(1, 1))
    >>> guaranteed_quota(prod)[("eval", "a100-mig")][:2]
    (Fraction(96, 7), None)
    """
    platform = environment.platform
    fractions = r.device_gpu_fractions(platform)
    providers = environment.facts.capacity.mig_profile_classes
    result: dict[tuple[str, str], tuple[Fraction, Optional[Fraction], tuple]] = {}
    for loaded in (t for t in environment.tenants if t.spec.holds_capacity):
        for name, count in cap.gpu_quota_by_class(loaded.spec, platform).items():
            share = fractions.get((name, cap.class_resource(platform.gpu_classes[name])), Fraction(1))
            if count:
                result[(loaded.name, name)] = (count * share, share, quota_path(loaded.spec, ("class", name)))
        for profile, count in sorted(loaded.spec.quota.mig.items()):
            offering = providers.get(profile, [])
            if count and len(offering) == 1:
                share = fractions.get((offering[0], f"nvidia.com/mig-{profile}"), Fraction(1))
                key = (loaded.name, offering[0])
                if key in result:
                    gpus, _, path = result[key]
                    result[key] = (gpus + count * share, None, path)
                else:
                    result[key] = (count * share, share, quota_path(loaded.spec, ("mig", profile)))
    return result


def _per_tenant_class(result: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    totals: dict[tuple[str, str], float] = {}
    for sample in result:
        key = (sample["metric"].get("tenant", ""), sample["metric"].get("gpu_class", ""))
        totals[key] = totals.get(key, 0.0) + float(sample["value"][1])
    return totals


def idle_rows(environment: Environment, answers: dict[str, list[dict[str, Any]]], hours: float,
              below: float) -> list[IdleRow]:
    """The tenants and classes whose pods held less than `below` of the quota's GPU-hours over a
    period of `hours`, most idle GPU-hours first.

    >>> answers = {"allocated": [{"metric": {"tenant": "eval", "gpu_class": "a100"}, "value": [0, "120"]}],
    ...            "peak": [{"metric": {"tenant": "eval", "gpu_class": "a100"}, "value": [0, "6"]}]}
    >>> [(row.quota_gpu_hours, row.held_gpu_hours, row.quota_line, row.lower_to) for row in idle_rows(prod, answers, 24, 0.5)
    ...  if (row.tenant, row.gpu_class) == ("eval", "a100")]
    [(480.0, 120.0, 'tenants/eval.yaml:35', 6)]
    """
    held, used, peak = (_per_tenant_class(answers.get(name, [])) for name in (ALLOCATED, USED, PEAK))
    docs = {t.name: t for t in environment.tenants}
    rows = []
    for (tenant, gpu_class), (gpus, share, path) in sorted(guaranteed_quota(environment).items()):
        quota_hours = float(gpus) * hours
        if held.get((tenant, gpu_class), 0.0) >= below * quota_hours:
            continue
        most = peak.get((tenant, gpu_class), 0.0)
        rows.append(IdleRow(tenant, gpu_class, float(gpus), quota_hours, held.get((tenant, gpu_class), 0.0),
                            used.get((tenant, gpu_class)), most, _line(docs[tenant], path),
                            None if share is None else math.ceil(most / float(share) - 1e-9)))
    return sorted(rows, key=lambda row: (row.held_gpu_hours - row.quota_gpu_hours, row.tenant, row.gpu_class))


def _line(loaded: LoadedTenant, path: tuple) -> str:
    return f"{loaded.doc.file}:{loaded.doc.position(path)[0]}"


def _advice(row: IdleRow) -> str:
    if row.lower_to is None:
        return f"lower its MIG quotas to hold at most {_gpus(row.peak_held_gpus)} GPUs' worth (the most it held at once)"
    return f"lower to {row.lower_to} (the most it held at once)"




def _gpus(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def idle_format_text(rows: list[IdleRow], start: datetime, end: datetime, below: float) -> str:
    """An aligned table, each row with the quota line to lower and the value to lower it to.

    >>> from datetime import timezone
    >>> start, end = datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc)
    >>> print(idle_format_text([IdleRow("eval", "a100", 20, 480.0, 120.0, 60.0, 6.0, "tenants/eval.yaml:35", 6)], start, end, 0.5), end="")
    Idle guaranteed quota from 2026-11-01T00:00:00+00:00 to 2026-11-02T00:00:00+00:00 (held below 50% of the quota's GPU-hours)
    tenant  GPU class  quota GPUs  quota GPU-h  held GPU-h  used GPU-h  held  peak held  lower
    eval    a100               20      480.000     120.000      60.000   25%          6  tenants/eval.yaml:35: lower to 6 (the most it held at once)
    quotas are read from the files as they are now; a quota changed during the period is counted at its current value
    """
    title = (f"Idle guaranteed quota from {start.isoformat()} to {end.isoformat()} "
             f"(held below {below:.0%} of the quota's GPU-hours)")
    if not rows:
        return f"{title}: none\n"
    header = ("tenant", "GPU class", "quota GPUs", "quota GPU-h", "held GPU-h", "used GPU-h", "held", "peak held", "lower")
    lines = [(row.tenant, row.gpu_class, _gpus(row.quota_gpus), _hours(row.quota_gpu_hours), _hours(row.held_gpu_hours),
              _hours(row.used_gpu_hours), f"{row.held_gpu_hours / row.quota_gpu_hours:.0%}", _gpus(row.peak_held_gpus),
              f"{row.quota_line}: {_advice(row)}") for row in rows]
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(len(header))]
    numeric = {2, 3, 4, 5, 6, 7}

    def render(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    note = "quotas are read from the files as they are now; a quota changed during the period is counted at its current value"
    return "\n".join([title, render(header), *(render(cells) for cells in lines), note]) + "\n"


def idle_format_csv(rows: list[IdleRow], start: datetime, end: datetime, below: float) -> str:
    """One line per idle row under a header.

    >>> from datetime import timezone
    >>> start, end = datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc)
    >>> print(idle_format_csv([IdleRow("eval", "a100", 20, 480.0, 120.0, None, 6.0, "tenants/eval.yaml:35", 6)], start, end, 0.5), end="")
    tenant,gpu_class,quota_gpus,quota_gpu_hours,held_gpu_hours,used_gpu_hours,peak_held_gpus,quota_line,lower_to
    eval,a100,20,480.000,120.000,,6,tenants/eval.yaml:35,6
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(IDLE_CSV_COLUMNS)
    for row in rows:
        writer.writerow((row.tenant, row.gpu_class, _gpus(row.quota_gpus), _hours(row.quota_gpu_hours), _hours(row.held_gpu_hours),
                         _hours(row.used_gpu_hours), _gpus(row.peak_held_gpus), row.quota_line,
                         "" if row.lower_to is None else row.lower_to))
    return out.getvalue()


IDLE_FORMATTERS: dict[str, Callable[[list[IdleRow], datetime, datetime, float], str]] = {"text": idle_format_text, "csv": idle_format_csv}
