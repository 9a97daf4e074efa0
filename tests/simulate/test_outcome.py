"""The figures of one replay, from recorded admissions and runs."""

from __future__ import annotations

from components.simulate.outcome import JobOutcome, Outcome, percentile, tenant_figures, utilisation


def test_waits_count_a_never_admitted_job_up_to_the_end_and_call_the_tenant_starved():
    o = Outcome((JobOutcome("a", "1", 0, 30), JobOutcome("a", "2", 100, None), JobOutcome("b", "3", 0, 0)), span=400)
    a = tenant_figures(o, "a")
    assert (a.admitted, a.wait_p50, a.wait_p95, a.starved) == (1, 30, 300, True)
    assert not tenant_figures(o, "b").starved


def test_a_rejected_job_is_counted_but_has_no_wait_and_does_not_starve():
    o = Outcome((JobOutcome("a", "1", 0, 5), JobOutcome("a", "2", 0, None, rejected="Forbidden")), span=100)
    a = tenant_figures(o, "a")
    assert (a.submitted, a.admitted, a.rejected, a.wait_p95, a.starved) == (2, 1, 1, 5, False)


def test_preemptions_gpu_hours_and_borrowing_are_per_tenant():
    o = Outcome((JobOutcome("a", "1", 0, 0, preemptions=2), JobOutcome("a", "2", 0, 0, preemptions=1)),
                used={"a": 1800.0}, borrowed={"a": 7200.0}, span=10)
    a = tenant_figures(o, "a")
    assert (a.preemptions, a.gpu_hours, a.borrowed_hours) == (3, 0.5, 2.0)


def test_utilisation_is_device_seconds_over_devices_and_span():
    o = Outcome((), pool_used={"p": 400.0, "q": 0.0}, pool_devices={"p": 8, "q": 4}, span=100)
    assert utilisation(o) == {"p": 0.5, "q": 0.0}
    assert utilisation(Outcome((), pool_devices={"p": 8}, span=0)) == {"p": 0.0}


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 95), percentile([7], 95)) == (50, 95, 7)
