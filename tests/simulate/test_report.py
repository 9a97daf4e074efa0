"""The report: the changes that matter called out (each FINDINGS row and the idle pool), within the
tolerance nothing; the three formats carry the same figures and say it is a simulation."""

from __future__ import annotations

import json

from components.simulate.outcome import JobOutcome, Outcome
from components.simulate.report import FINDINGS, Tolerance, compare, format_markdown, format_text, to_json

TOL = Tolerance(seconds=60, ratio=0.1)
POOLS = {"p": 8}


def _side(waits: dict[str, list[float | None]], borrowed=None, preempt=0, used=800.0, devices=1) -> Outcome:
    jobs = tuple(JobOutcome(t, f"{t}-{i}", 0, w, preemptions=preempt if t == "a" else 0, devices=devices)
                 for t, ws in waits.items() for i, w in enumerate(ws))
    return Outcome(jobs, borrowed=borrowed or {}, pool_used={"p": used}, pool_devices=POOLS, span=100)


def _kinds(base: Outcome, change: Outcome) -> list[tuple[str, str]]:
    return [(f["kind"], f.get("tenant") or f.get("pool")) for f in compare(base, change, TOL, {})["findings"]]


def test_nothing_is_called_out_within_the_tolerance():
    assert _kinds(_side({"a": [10, 100], "b": [0]}), _side({"a": [20, 150], "b": [50]})) == []


def test_a_longer_p95_wait_beyond_the_tolerance_is_called_out_for_that_tenant_only():
    assert _kinds(_side({"a": [10, 100], "b": [0]}), _side({"a": [10, 400], "b": [0]})) == [("longer-wait", "a")]


def test_a_tenant_whose_jobs_are_no_longer_admitted_is_starved():
    kinds = _kinds(_side({"a": [10, 10]}), _side({"a": [10, None]}))
    assert ("starved", "a") in kinds


def test_borrowing_moved_and_more_preemptions_are_called_out():
    kinds = _kinds(_side({"a": [0]}, borrowed={"a": 0.0}), _side({"a": [0]}, borrowed={"a": 7200.0}, preempt=2))
    assert kinds == [("borrowing-moved", "a"), ("more-preemptions", "a")]


def test_borrowing_by_a_wide_job_is_compared_per_device():
    # An 8-GPU job borrowing a wall second longer on one side (60 trace s at speed 60) moves 480
    # device-seconds: noise, not a finding; a whole extra job's borrowing still is one.
    wide = {"devices": 8}
    assert _kinds(_side({"a": [0]}, borrowed={"a": 2400.0}, **wide), _side({"a": [0]}, borrowed={"a": 2880.0}, **wide)) == []
    assert _kinds(_side({"a": [0]}, borrowed={"a": 2400.0}, **wide),
                  _side({"a": [0]}, borrowed={"a": 4800.0}, **wide)) == [("borrowing-moved", "a")]
    assert _kinds(_side({"a": [0]}, borrowed={"a": 2400.0}), _side({"a": [0]}, borrowed={"a": 2880.0})) == [("borrowing-moved", "a")]


def test_a_pool_the_change_leaves_idle_is_called_out():
    assert _kinds(_side({"a": [0]}), _side({"a": [0]}, used=0.0)) == [("idle-pool", "p")]


def test_a_new_idle_pool_is_called_out_and_one_idle_on_both_sides_is_not():
    base = _side({"a": [0]}, used=0.0)
    change = Outcome(base.jobs, pool_used={}, pool_devices={"p": 8, "new": 8}, span=100)
    findings = compare(base, change, TOL, {})["findings"]
    assert [(f["kind"], f["pool"]) for f in findings] == [("idle-pool", "new")]
    assert "new pool" in findings[0]["text"]


def test_every_finding_kind_has_a_test_above():
    assert set(FINDINGS) == {"longer-wait", "starved", "borrowing-moved", "more-preemptions"}


def test_the_formats_say_it_is_a_simulation_and_state_the_assumptions():
    document = compare(_side({"a": [10, 100]}), _side({"a": [10, 400]}), TOL,
                       {"stack": "prod", "base": "main", "trace": "t.csv", "speed": 60})
    text, markdown = format_text(document), format_markdown(document)
    assert json.loads(to_json(document))["simulation"] is True
    assert "simulation" in text and "**simulation**" in markdown
    for out in (text, markdown):
        assert "a: p95 wait 4.0 times longer (1m40s -> 6m40s)" in out
        assert "time compressed 60x" in out and "±1m00s plus 10%" in out
    assert "| a | 2 | 2 | 10s | 1m40s -> 6m40s |" in markdown


def test_the_markdown_names_the_scheduler_that_decided():
    context = {"stack": "staging", "base": "main", "trace": "t.csv", "speed": 60}
    kai = format_markdown(compare(_side({"a": [10]}), _side({"a": [10]}), TOL, {**context, "scheduler": "kai"}))
    kueue = format_markdown(compare(_side({"a": [10]}), _side({"a": [10]}), TOL, context))
    assert "cluster of the real scheduler and the KAI Scheduler." in kai
    assert "cluster of the real scheduler and Kueue." in kueue
