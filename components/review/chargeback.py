"""`tenants report`: GPU-hours per cost centre, tenant and GPU class over a period, from Prometheus.

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

from ..manifests import monitoring_rules as r

ALLOCATED, USED = "allocated", "used"
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
    window = f"{period_seconds(start, end, step_seconds)}s"
    return {ALLOCATED: r.gpu_hours_expr(r.TENANT_ALLOCATED_GPUS, window, step_seconds),
            USED: r.gpu_hours_expr(r.TENANT_USED_GPUS, window, step_seconds)}


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
