"""Idle guaranteed quota (`components/review/idle_quota.py`) on the example's prod stack and canned answers."""

from __future__ import annotations

from fractions import Fraction

from components.load import load_environment
from components.review.idle_quota import guaranteed_quota, idle_rows
from tests.project_edits import line_of

from pathlib import Path

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
