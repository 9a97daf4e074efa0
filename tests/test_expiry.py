"""`expires:` on a tenant: a warning ahead of time, suspension after the date, nothing deleted.

The date is injected (`today=`, or GPU_TENANCY_TODAY for commands): no test depends on the clock.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from components.load import load_environment, utc_today
from components.manifests.build import environment_objects
from components.spec.problems import InvalidInput
from tests.cli.running import run


def _expiring(project: Path, day: str, lifecycle: str | None = None) -> None:
    path = project / "tenants" / "eval.yaml"
    extra = f"expires: {day}\n" + (f"lifecycle: {lifecycle}\n" if lifecycle else "")
    path.write_text(path.read_text().replace("costCenter:", extra + "costCenter:", 1))


def _eval(project: Path, today: date):
    environment = load_environment(project, "dev", today=today)
    return environment, next(t.spec for t in environment.tenants if t.name == "eval")


def _quota_names(environment) -> list[str]:
    return sorted(o["metadata"]["name"] for o in environment_objects(environment)["eval"]
                  if o["kind"] == "ResourceQuota" and o["metadata"]["namespace"] == "eval")


def test_the_last_day_is_active_and_the_next_day_suspended(project_copy):
    _expiring(project_copy, "2027-03-31")
    environment, spec = _eval(project_copy, date(2027, 3, 31))
    assert spec.lifecycle == "active" and "suspended" not in _quota_names(environment)
    environment, spec = _eval(project_copy, date(2027, 4, 1))
    assert spec.lifecycle == "suspended"
    suspended = [o for o in environment_objects(environment)["eval"] if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "suspended"]
    assert [q["spec"]["hard"] for q in suspended] == [{"pods": "0"}]
    # Nothing is deleted: every object of the active tenant is still there.
    active, _ = _eval(project_copy, date(2027, 3, 31))
    kept = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in environment_objects(environment)["eval"]}
    assert {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in environment_objects(active)["eval"]} <= kept
    assert any("expired on 2027-03-31" in p.message and p.field == "expires" for p in environment.warnings)


def test_validate_warns_thirty_days_ahead_and_not_before(project_copy):
    _expiring(project_copy, "2027-03-31")
    assert not [p for p in load_environment(project_copy, "dev", today=date(2027, 2, 28)).warnings if p.field == "expires"]
    warned = [p for p in load_environment(project_copy, "dev", today=date(2027, 3, 1)).warnings if p.field == "expires"]
    assert [p.message.split(":")[0] for p in warned] == ["expires on 2027-03-31 (30 day(s) from 2027-03-01)"]


def test_an_expired_decommission_stays_a_decommission(project_copy):
    path = project_copy / "tenants" / "eval.yaml"
    path.write_text(path.read_text().replace("costCenter:", "decommission: {confirm: eval}\ncostCenter:", 1))
    _expiring(project_copy, "2027-03-31", lifecycle="decommissioned")
    _, spec = _eval(project_copy, date(2028, 1, 1))
    assert spec.lifecycle == "decommissioned"


def test_commands_take_today_from_the_environment(project_copy, capsys, monkeypatch):
    _expiring(project_copy, "2027-03-31")
    monkeypatch.setenv("GPU_TENANCY_TODAY", "2027-04-02")
    assert utc_today() == date(2027, 4, 2)
    code, _, err = run(capsys, "--root", str(project_copy), "validate", "--stack", "dev")
    assert code == 0 and "tenants/eval.yaml:" in err and "expired on 2027-03-31" in err
    monkeypatch.setenv("GPU_TENANCY_TODAY", "April")
    with pytest.raises(InvalidInput):
        utc_today()


def test_not_a_date_is_refused_at_its_line(project_copy, capsys):
    _expiring(project_copy, "next-june")
    code, _, err = run(capsys, "--root", str(project_copy), "validate", "--stack", "dev")
    assert code == 1 and "tenants/eval.yaml:" in err and "expires" in err
