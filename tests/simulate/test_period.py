"""A past period read as a trace (`components.simulate.period`) from small fixture series, as
kube-state-metrics names them: the jobs that ran come back in the trace format with their tenant,
GPUs, pods, priority, submit time and duration; what cannot be replayed is left out and counted;
what cannot be read is an error naming the Job and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from components import load_environment
from components.simulate.period import period_trace, queries
from components.simulate.trace import TraceJob, read_trace, trace_yaml
from components.spec.problems import InvalidInput

REPO = Path(__file__).resolve().parents[2]
SINCE, UNTIL = 1_000_000.0, 1_010_000.0
CLASS = "label_gpu_acme_dev_gpu_class"


@pytest.fixture(scope="module")
def prod():
    return load_environment(REPO, "prod")


def _series(*jobs: dict) -> dict:
    """The series of `jobs` (namespace, name, created, start, end, queue, pods, pod GPUs, node, priority)."""
    series: dict = {
        "kube_namespace_labels": [({"namespace": ns, "label_gpu_tenancy_dev_tenant": ns}, 1.0)
                                  for ns in ("eval", "llm-finetune", "inference", "retired")]
        + [({"namespace": "kube-system"}, 1.0)],
        "kube_node_labels": [({"node": "h1", CLASS: "h100"}, 1.0), ({"node": "a1", CLASS: "a100"}, 1.0), ({"node": "x1"}, 1.0)],
    }

    def add(metric: str, labels: dict, value: float) -> None:
        series.setdefault(metric, []).append((labels, value))

    for job in jobs:
        ident = {"namespace": job["ns"], "job_name": job["name"]}
        add("kube_job_created", ident, job["created"])
        add("kube_job_labels", {**ident, **({"label_kueue_x_k8s_io_queue_name": "default"} if job.get("queue", True) else {})}, 1.0)
        for metric, key in (("kube_job_status_start_time", "start"), ("kube_job_status_completion_time", "end"),
                            ("kube_job_status_active", "active")):
            if job.get(key) is not None:
                add(metric, ident, job[key])
        add("kube_job_spec_parallelism", ident, job.get("pods", 1))
        for i in range(job.get("pods", 1)):
            pod = {"namespace": job["ns"], "pod": f"{job['name']}-{i}", "uid": f"u-{job['name']}-{i}"}
            add("kube_pod_owner", {**pod, "owner_kind": "Job", "owner_name": job["name"], "owner_is_controller": "true"}, 1.0)
            add("kube_pod_info", {**pod, "node": job.get("node", ""), "priority_class": job.get("priority", "")}, 1.0)
            for resource, amount in job.get("gpus", {}).items():
                add("kube_pod_container_resource_requests", {**pod, "container": "main", "node": job.get("node", ""),
                                                             "resource": resource, "unit": "integer"}, amount)
    return series


RAN = [
    {"ns": "llm-finetune", "name": "train", "created": SINCE + 10, "start": SINCE + 12, "end": SINCE + 3612, "pods": 4,
     "gpus": {"nvidia_com_gpu": 8}, "node": "h1"},
    {"ns": "eval", "name": "sweep", "created": SINCE + 120, "start": SINCE + 400, "end": SINCE + 1000, "pods": 2,
     "gpus": {"nvidia_com_gpu": 4}, "node": "a1", "priority": "training"},
    {"ns": "eval", "name": "probe", "created": SINCE + 300, "start": SINCE + 300, "end": SINCE + 1200,
     "gpus": {"nvidia_com_mig_1g_10gb": 7}},
]


def test_the_jobs_that_ran_come_back_as_the_trace(prod):
    read = period_trace(_series(*RAN), prod, SINCE, UNTIL)

    assert read.trace.jobs == [
        TraceJob(tenant="llm-finetune", submit=10, gpu="h100", count=8, duration=3600, pods=4, name="train"),
        TraceJob(tenant="eval", submit=120, gpu="a100", count=4, duration=600, pods=2, priority="training", name="sweep"),
        TraceJob(tenant="eval", submit=300, gpu="1g.10gb", count=7, duration=900, name="probe"),
    ]
    assert read.notes == []


def test_what_cannot_be_replayed_is_left_out_and_counted(prod):
    left = [
        {"ns": "eval", "name": "before", "created": SINCE - 5, "start": SINCE, "end": SINCE + 60, "gpus": {"nvidia_com_gpu": 1}, "node": "a1"},
        {"ns": "eval", "name": "after", "created": UNTIL, "start": UNTIL + 1, "end": UNTIL + 60, "gpus": {"nvidia_com_gpu": 1}, "node": "a1"},
        {"ns": "eval", "name": "queued", "created": SINCE + 1, "gpus": {"nvidia_com_gpu": 1}},
        {"ns": "eval", "name": "failed", "created": SINCE + 1, "start": SINCE + 2, "active": 0, "gpus": {"nvidia_com_gpu": 1}, "node": "a1"},
        {"ns": "eval", "name": "cpu-only", "created": SINCE + 1, "start": SINCE + 2, "end": SINCE + 9},
        {"ns": "eval", "name": "unqueued", "created": SINCE + 1, "start": SINCE + 2, "end": SINCE + 9, "queue": False,
         "gpus": {"nvidia_com_gpu": 1}, "node": "a1"},
        {"ns": "retired", "name": "old-team", "created": SINCE + 1, "start": SINCE + 2, "end": SINCE + 9, "gpus": {"nvidia_com_gpu": 1}, "node": "a1"},
        {"ns": "kube-system", "name": "system", "created": SINCE + 1, "start": SINCE + 2, "end": SINCE + 9, "gpus": {"nvidia_com_gpu": 1}},
    ]
    read = period_trace(_series(*RAN, *left), prod, SINCE, UNTIL)

    assert [j.name for j in read.trace.jobs] == ["train", "sweep", "probe"]
    assert read.notes == [
        "1 Job(s) left out: failed, or deleted before completing (no completion time: no duration to replay)",
        "1 Job(s) left out: never started in the period (still queued at --until: no duration to replay)",
        "1 Job(s) left out: no pod of theirs requested GPUs",
        "1 Job(s) left out: not submitted to a Kueue queue (no kueue.x-k8s.io/queue-name label)",
        "1 Job(s) left out: of a tenant the stack does not have",
    ]


def test_a_job_still_running_at_the_end_is_replayed_as_running_until_then_and_said(prod):
    running = {"ns": "eval", "name": "long", "created": SINCE + 100, "start": SINCE + 160, "active": 2, "pods": 2,
               "gpus": {"nvidia_com_gpu": 4}, "node": "a1"}
    read = period_trace(_series(*RAN, running), prod, SINCE, UNTIL)

    long = next(j for j in read.trace.jobs if j.name == "long")
    assert (long.submit, long.duration, long.pods, long.count) == (100, UNTIL - SINCE - 160, 2, 4)
    assert read.notes == ["1 Job(s) replayed as running until --until, where they still ran (their durations a lower bound)"]


def test_the_stacks_default_priority_class_is_left_unnamed_as_a_pod_naming_none_gets_it(prod):
    read = period_trace(_series({**RAN[0], "priority": "batch"}), prod, SINCE, UNTIL)
    assert prod.platform.priority_classes["batch"].global_default
    assert read.trace.jobs[0].priority is None and read.notes == []


def test_a_priority_class_the_stack_lacks_is_replayed_at_the_default_and_said(prod):
    job = {**RAN[0], "priority": "gone-class"}
    read = period_trace(_series(job), prod, SINCE, UNTIL)
    assert read.trace.jobs[0].priority is None
    assert read.notes == ["1 Job(s) replayed at the stack's default priority: their priority class gone-class is not the stack's"]


def _errors(series: dict, prod) -> list[str]:
    with pytest.raises(InvalidInput) as err:
        period_trace(series, prod, SINCE, UNTIL, source="http://prom:9090")
    return [str(p) for p in err.value.problems]


def test_gpus_no_class_names_are_an_error_naming_the_job_and_the_fix(prod):
    unknown = {"ns": "eval", "name": "odd", "created": SINCE + 1, "start": SINCE + 2, "end": SINCE + 9,
               "gpus": {"nvidia_com_mig_7g_80gb": 1}}
    unlabelled = {"ns": "eval", "name": "where", "created": SINCE + 1, "start": SINCE + 2, "end": SINCE + 9,
                  "gpus": {"nvidia_com_gpu": 2}, "node": "x1"}
    errors = _errors(_series(*RAN, unknown, unlabelled), prod)
    assert len(errors) == 2
    assert errors[0].startswith("http://prom:9090: Job eval/odd: its pod odd-0 requests nvidia_com_mig_7g_80gb, which no GPU class "
                                "or MIG profile of stack prod names")
    assert "add the class to the stack" in errors[0]
    assert errors[1].startswith("http://prom:9090: Job eval/where: its pod where-0 requests nvidia_com_gpu, which GPU classes "
                                "a100, a100-mig, h100 share, and its node x1 has no class label")
    assert "--metric-labels-allowlist=" in errors[1]


def test_a_job_on_a_class_its_tenant_may_not_use_is_refused_like_a_trace_file(prod):
    job = {**RAN[0], "ns": "inference", "gpus": {"nvidia_com_gpu": 1}, "node": "a1"}
    errors = _errors(_series(job), prod)
    assert len(errors) == 1 and "tenant inference may not use GPU class 'a100'" in errors[0]


@pytest.mark.parametrize(("drop", "says"), [
    ("kube_namespace_labels", "no namespace carries the tenant label"),
    ("kube_job_created", "no Job was created in the period"),
    ("kube_job_labels", "no Job carries the Kueue queue label"),
])
def test_missing_series_say_what_to_switch_on(prod, drop, says):
    series = _series(*RAN)
    series[drop] = []
    errors = _errors(series, prod)
    assert len(errors) == 1 and errors[0].startswith(f"http://prom:9090: {says}")


def test_the_trace_it_makes_is_the_documented_format(prod, tmp_path):
    trace = period_trace(_series(*RAN), prod, SINCE, UNTIL).trace
    path = tmp_path / "period.yaml"
    path.write_text(trace_yaml(trace, "read from a fixture"))
    assert read_trace(path, prod) == trace
    assert path.read_text().splitlines()[:2] == ["# read from a fixture", "jobs:"]


def test_the_queries_ask_each_series_seen_in_the_period_at_its_end(prod):
    asked = queries(prod, 7 * 86400)
    assert set(asked) == {"kube_namespace_labels", "kube_node_labels", "kube_job_created", "kube_job_status_start_time",
                          "kube_job_status_completion_time", "kube_job_status_active", "kube_job_labels", "kube_job_spec_parallelism", "kube_pod_owner",
                          "kube_pod_container_resource_requests", "kube_pod_info"}
    assert all(expr.startswith(f"last_over_time({metric}") and expr.endswith("[604800s])") for metric, expr in asked.items())
    assert asked["kube_node_labels"] == f'last_over_time(kube_node_labels{{{CLASS}!=""}}[604800s])'
