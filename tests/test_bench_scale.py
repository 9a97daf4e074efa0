"""bench/scale.py's pure parts: the Jobs it submits fit the synthetic fleet, its rates and its floor.

The run itself needs the runtime plane and minutes (`python -m bench.scale`); the runtime lane's
tests prove the same plane runs Jobs to the end."""

from __future__ import annotations

from pathlib import Path

from bench.scale import CLASSES, floor, jobs_of, rates
from components.load import load_environment
from components.simulate.trace import request_of
from tools.synthetic import STACK, tenant_name, write_project


def test_every_job_asks_a_device_the_synthetic_fleet_offers(tmp_path: Path):
    environment = load_environment(write_project(tmp_path, 3), STACK)
    jobs = jobs_of(3, 30, 30)
    assert {request_of(j.gpu, environment) is not None for j in jobs} == {True}
    assert {j.tenant for j in jobs} == {tenant_name(i) for i in range(3)}
    per_tenant = {(j.tenant, j.gpu) for j in jobs}
    assert len(per_tenant) == 3 * len(CLASSES)   # each tenant asks every class in turn
    assert len({j.name for j in jobs}) == 30


def test_rates_count_from_the_first_submission_and_steady_between_the_deciles():
    admitted = [10.0 + i for i in range(100)]   # nothing for 10 s, then one a second
    figures = rates(0.0, admitted)
    assert figures["overall_per_second"] == round(100 / 109, 2)
    assert figures["steady_per_second"] == 1.0
    assert rates(0.0, []) == {"overall_per_second": 0.0, "steady_per_second": 0.0}


def test_the_floor_is_the_waves_the_tightest_quota_allows():
    # 3 tenants, 30 Jobs: 10 each, 4 H100 / 3 L4 / 3 MIG; one L4 share at a time makes 3 waves of 30 s.
    assert floor(30, 3, 30.0) == 90.0
    assert floor(31, 3, 30.0) == 120.0   # the busiest tenant has 11: 4 L4
    assert floor(3, 3, 30.0) == 30.0   # one Job a tenant: one wave
