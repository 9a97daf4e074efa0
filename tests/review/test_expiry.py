"""Expiry in every diff (issue 34 B): `expires-soon` from 14 days ahead, `expired` once past, for
tenants the change does not touch too. The date is the loaded environment's (`today=`), never the clock."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest

from components.load import environment_from_data
from components.review.diff import Side, compare_stack, report
from components.review.diff_format import format_markdown, format_text
from components.review.expiry import NOTICE_DAYS, expiry_warnings

EXPIRES = date(2027, 3, 31)
STACK = {"labelDomain": "gpu.example.com"}


def _tenant(name: str, **fields) -> dict:
    return {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": name, "displayName": name,
            "costCenter": "cc-1", **fields}


def _fleet(today: date, *, trial: dict | None = None, other_cc: str = "cc-1", **platform):
    tenants = {"trial": _tenant("trial", **{"expires": EXPIRES.isoformat(), **(trial or {})}),
               "steady": {**_tenant("steady"), "costCenter": other_cc}}
    return environment_from_data("prod", {**STACK, **platform}, tenants, today=today)


def _diff(today: date, **head) -> dict:
    """A PR that only changes `steady` (its cost centre) while `trial` sits in the file untouched."""
    base = _fleet(today)
    after = _fleet(today, other_cc="cc-2", **head)
    return compare_stack("prod", Side(base), Side(after))


def _expiry(document: dict) -> list[tuple[str, str | None]]:
    return [(w["kind"], w["tenant"]) for w in document["warnings"] if w["kind"] in ("expires-soon", "expired")]


@pytest.mark.parametrize("today, left", [(date(2027, 3, 17), 14), (date(2027, 3, 30), 1), (EXPIRES, 0)])
def test_from_fourteen_days_ahead_to_the_last_day_every_diff_says_expires_soon(today, left):
    document = _diff(today)
    assert document["tenants"]["changed"] == ["steady"]       # the PR does not touch trial
    assert _expiry(document) == [("expires-soon", "trial")]
    (warning,) = [w for w in document["warnings"] if w["kind"] == "expires-soon"]
    assert warning["message"].startswith(f"tenant trial expires on 2027-03-31 ({left} day(s) left): the first deploy of stack prod")


def test_fifteen_days_ahead_nothing_yet():
    assert NOTICE_DAYS == 14
    assert _expiry(_diff(date(2027, 3, 16))) == []


@pytest.mark.parametrize("today", [date(2027, 4, 1), date(2027, 6, 1)])
def test_once_expired_every_diff_says_this_deploy_suspends_it(today):
    document = _diff(today)
    assert document["tenants"]["changed"] == ["steady"]
    assert document["tenants"]["lifecycle"] == []           # both sides suspend it: no change of its own
    (warning,) = [w for w in document["warnings"] if w["kind"] == "expired"]
    assert warning["tenant"] == "trial" and warning["stack"] == "prod"
    assert warning["message"].startswith("tenant trial expired on 2027-03-31: this deploy suspends trial (")
    assert "already so if stack prod was deployed since 2027-04-01" in warning["message"]


def test_the_warnings_show_in_an_otherwise_unchanged_diff_and_in_every_format():
    environment = _fleet(date(2027, 4, 1))
    document = compare_stack("prod", Side(environment), Side(environment))
    assert document["change"] == "unchanged" and _expiry(document) == [("expired", "trial")]
    whole = report([document], {"ref": "HEAD", "commit": "0" * 40})
    assert "this deploy suspends trial" in format_text(whole)
    assert "this deploy suspends trial" in format_markdown(whole)


@pytest.mark.parametrize("lifecycle", ["suspended", "decommissioned"])
def test_a_tenant_already_suspended_or_decommissioned_by_its_file_is_not_suspended_by_the_deploy(lifecycle):
    fields = {"lifecycle": lifecycle, **({"decommission": {"confirm": "trial"}} if lifecycle == "decommissioned" else {})}
    for today in (date(2027, 3, 30), date(2027, 4, 2)):
        environment = _fleet(today, trial=fields)
        assert expiry_warnings("prod", environment) == []


def test_a_tenant_the_stack_does_not_deploy_gets_no_warning():
    environment = _fleet(date(2027, 4, 2), tenants=["steady"])
    assert environment.disabled_tenants == ["trial"] and environment.expired == []
    assert expiry_warnings("prod", environment) == []


def test_the_date_is_the_loaded_environments_and_nothing_else():
    """The same files on two days: the environment carries its date, so the warning follows it."""
    assert _fleet(date(2027, 4, 1)).as_of == date(2027, 4, 1)
    assert _fleet(date(2027, 4, 1)).expired == ["trial"]
    assert _fleet(date(2027, 3, 31)).expired == []
    # Built by hand (no date judged): no expiry warnings, rather than a guess from the clock.
    hand_made = dataclasses.replace(_fleet(date(2027, 4, 1)), as_of=None)
    assert expiry_warnings("prod", hand_made) == []


def test_an_extension_in_the_pr_ends_the_warning_and_shows_the_lifecycle_change():
    today = date(2027, 4, 1)
    base = _fleet(today)
    after = _fleet(today, trial={"expires": "2027-06-30"})
    document = compare_stack("prod", Side(base), Side(after))
    assert _expiry(document) == []
    assert document["tenants"]["lifecycle"] == [{"tenant": "trial", "from": "suspended", "to": "active"}]
