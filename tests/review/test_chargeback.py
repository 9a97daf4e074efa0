"""`tenants report` rows and layouts, on canned Prometheus answers (tests/review/chargeback/)."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from components.review.chargeback import ChargebackRow, chargeback_rows, format_csv, format_text, period_queries, period_seconds
from fractions import Fraction
from components.load import load_environment
from components.review.chargeback import guaranteed_quota, idle_rows
from tests.project_edits import line_of

CANNED = Path(__file__).resolve().parent / "chargeback"
START, END = datetime(2026, 12, 1, 0, 0, tzinfo=timezone.utc), datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)


def canned() -> dict[str, list]:
    return {name: json.loads((CANNED / f"{name}.json").read_text())["data"]["result"] for name in ("allocated", "used")}


def test_rows_join_allocated_and_used_per_cost_centre_tenant_and_class():
    rows = chargeback_rows(canned())
    assert [(row.cost_center, row.tenant, row.gpu_class) for row in rows] == [
        ("cc-1", "alpha", "h100"), ("cc-2", "beta", "a100-mig"), ("cc-2", "beta", "h100"), ("cc-3", "gamma", "l4"),
    ]
    assert rows[0] == ChargebackRow("cc-1", "alpha", "h100", 51.0, 40.83)
    assert rows[1].allocated_gpu_hours == pytest.approx(11 / 7) and rows[1].used_gpu_hours == pytest.approx(6 / 7)
    # No DCGM series for gamma: used is unknown, not zero, and so is its share.
    assert rows[3].used_gpu_hours is None and rows[3].used_share is None
    assert rows[0].used_share == pytest.approx(40.83 / 51)


def test_csv_has_a_header_and_one_line_per_row():
    lines = list(csv.reader(io.StringIO(format_csv(chargeback_rows(canned()), START, END))))
    assert lines[0] == ["cost_center", "tenant", "gpu_class", "allocated_gpu_hours", "used_gpu_hours"]
    assert lines[1:] == [
        ["cc-1", "alpha", "h100", "51.000", "40.830"],
        ["cc-2", "beta", "a100-mig", "1.571", "0.857"],
        ["cc-2", "beta", "h100", "12.000", "6.000"],
        ["cc-3", "gamma", "l4", "2.000", ""],
    ]


def test_text_table_totals_per_cost_centre_and_overall():
    text = format_text(chargeback_rows(canned()), START, END)
    lines = text.splitlines()
    assert lines[0] == "GPU-hours from 2026-12-01T00:00:00+00:00 to 2026-12-01T03:00:00+00:00"
    cc2_total = next(line for line in lines if line.startswith("cc-2") and "(total)" in line).split()
    assert cc2_total[-3:] == ["13.571", "6.857", "51%"]  # 12 + 11/7 allocated, 6 + 6/7 used
    overall = lines[-1].split()
    # gamma's unknown use adds nothing to the used sum.
    assert overall[0] == "(all)" and overall[1:] == ["66.571", "47.687", "72%"]


def test_text_says_when_nothing_was_recorded():
    assert "no GPU-hours recorded" in format_text([], START, END)


def test_period_queries_integrate_the_rules_over_the_period():
    queries = period_queries(START, END)
    assert set(queries) == {"allocated", "used"}
    assert "gpu_tenancy:tenant_gpu_allocated:gpus[10800s:1m]" in queries["allocated"]
    assert "gpu_tenancy:tenant_gpu_used:gpus[10800s:1m]" in queries["used"]


def test_a_period_must_be_at_least_a_minute():
    with pytest.raises(ValueError, match="--to must be after --from"):
        period_seconds(END, START)


def test_a_finer_step_integrates_per_step_and_divides_by_the_steps_in_an_hour():
    queries = period_queries(START, END, step_seconds=5)
    assert queries["allocated"].endswith("(sum_over_time(gpu_tenancy:tenant_gpu_allocated:gpus[10800s:5s])) / 720")


def test_a_step_that_does_not_divide_an_hour_is_refused():
    with pytest.raises(ValueError, match="does not divide an hour"):
        period_queries(START, END, step_seconds=7)


# --- idle guaranteed quota ---
REPO = Path(__file__).resolve().parents[2]


def _answers(held: dict, peak: dict) -> dict:
    def vector(values: dict) -> list:
        return [{"metric": {"tenant": t, "gpu_class": c, "cost_center": "cc"}, "value": [0, str(v)]} for (t, c), v in values.items()]
    return {"allocated": vector(held), "peak": vector(peak), "used": []}


def test_quota_gpu_equivalents_weigh_devices_as_chargeback_does():
    environment = load_environment(REPO, "prod")
    quota = guaranteed_quota(environment)
    assert quota[("llm-finetune", "h100")][:2] == (Fraction(40), Fraction(1))
    # eval's MIG quota: 48 x 1g.10gb (1/7 each) and 16 x 3g.40gb (3/7 each) = 96/7 GPUs, several keys.
    assert quota[("eval", "a100-mig")][:2] == (Fraction(96, 7), None)


def test_a_tenant_holding_less_than_the_threshold_is_listed_with_its_quota_line_and_peak():
    environment = load_environment(REPO, "prod")
    held = {("llm-finetune", "h100"): 40 * 10 * 0.49, ("inference", "h100"): 24 * 10, ("eval", "a100"): 20 * 10,
            ("eval", "a100-mig"): 96 / 7 * 10}
    rows = idle_rows(environment, _answers(held, {("llm-finetune", "h100"): 30.2}), hours=10, below=0.5)
    [row] = rows
    assert (row.tenant, row.gpu_class, row.quota_gpu_hours, row.lower_to) == ("llm-finetune", "h100", 400.0, 31)
    assert row.quota_line == f"tenants/llm-finetune.yaml:{line_of(REPO / 'tenants' / 'llm-finetune.yaml', '  gpu: 40')}"
    # At the threshold it is not idle.
    held[("llm-finetune", "h100")] = 40 * 10 * 0.5
    assert idle_rows(environment, _answers(held, {}), hours=10, below=0.5) == []


def test_a_tenant_with_no_series_held_nothing_and_is_idle():
    environment = load_environment(REPO, "prod")
    rows = idle_rows(environment, _answers({}, {}), hours=1, below=0.5)
    assert {(r.tenant, r.gpu_class) for r in rows} == set(guaranteed_quota(environment))
    assert all(r.held_gpu_hours == 0 and r.lower_to in (0, None) for r in rows)
