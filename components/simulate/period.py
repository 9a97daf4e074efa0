"""A past period as a trace: the Jobs a cluster ran, from kube-state-metrics' series in Prometheus
(`tenants simulate --from-prometheus URL --since T --until T`; docs/simulate.md).

Pure: `period_trace` takes the series Prometheus answered for `queries` (each the last sample of
every series seen in the period, `last_over_time(...[period])` at its end) and returns the trace
in the documented format, so `--trace` replays what it writes. Per Job (kube-state-metrics' names
and labels, `job_name`/`namespace`):

* the tenant: its namespace's `gpu-tenancy.dev/tenant` label (`kube_namespace_labels`);
* queued through Kueue: `kube_job_labels` carries `kueue.x-k8s.io/queue-name` (allow-listed);
* submit: `kube_job_created` after the period's start; duration: `kube_job_status_completion_time`
  minus `kube_job_status_start_time` (the job controller resets the start when Kueue unsuspends
  the Job, so this is its run, not its wait); pods: `kube_job_spec_parallelism`;
* GPUs: its pods (`kube_pod_owner`, `owner_kind="Job"`) and their GPU
  `kube_pod_container_resource_requests` (whole GPUs, shares, MIG slices, DRA-backed extended
  resources: whatever resource the stack's classes and profiles name), the class from the pod's
  node (`kube_node_labels`, the class label) where several classes share a resource;
* priority: the pods' `priority_class` (`kube_pod_info`); the stack's default class is left
  unnamed, as a pod that names none gets it.

A Job still running at the end (`kube_job_status_active` above 0 in its last sample, no completion
time) is replayed as running until the end: its duration is a lower bound, and `notes` says how
many. What cannot be replayed is left out and said in `notes` (a Job still queued at the end, one
that failed, one without GPUs or outside Kueue, a tenant the stack no longer has); what cannot be read at all
(no series, GPUs no class or profile of the stack names) is an `InvalidInput` saying how to fix it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..fleet import gpu_capacity as cap
from ..fleet.environment import Environment
from ..manifests.meta import KUEUE_QUEUE_NAME_LABEL, TENANT_LABEL, gpu_class_label
from ..manifests.monitoring_rules import ksm_label, sanitize
from ..spec.problems import InvalidInput, Problem
from ..spec.yaml_source import SourceDocument
from .trace import MIG_RESOURCE_PREFIX, Trace, TraceJob, mig_profiles, trace_problems

GPU_RESOURCE_PREFIX = "nvidia_com_"   # `nvidia.com/...` as kube-state-metrics writes a resource
ALLOWLIST = ("namespaces=[gpu-tenancy.dev/tenant],nodes=[<labelDomain>/gpu-class],jobs=[kueue.x-k8s.io/queue-name]")

# (labels, value) of each series Prometheus answered, per metric.
Series = Mapping[str, list[tuple[dict[str, str], float]]]


def queries(environment: Environment, seconds: float) -> dict[str, str]:
    """The PromQL of each metric the reader needs: every series seen in the `seconds` before the
    period's end, with its last value (asked at the end).

    >>> queries(prod, 3600)["kube_job_labels"]
    'last_over_time(kube_job_labels{label_kueue_x_k8s_io_queue_name!=""}[3600s])'
    """
    window = f"[{max(1, int(seconds + 0.999))}s]"
    selectors = {
        "kube_namespace_labels": f'{{{ksm_label(TENANT_LABEL)}!=""}}',
        "kube_node_labels": f'{{{ksm_label(gpu_class_label(environment.platform))}!=""}}',
        "kube_job_created": "",
        "kube_job_status_start_time": "",
        "kube_job_status_completion_time": "",
        "kube_job_status_active": "",
        "kube_job_labels": f'{{{ksm_label(KUEUE_QUEUE_NAME_LABEL)}!=""}}',
        "kube_job_spec_parallelism": "",
        "kube_pod_owner": '{owner_kind="Job"}',
        "kube_pod_container_resource_requests": f'{{resource=~"{GPU_RESOURCE_PREFIX}.*"}}',
        "kube_pod_info": "",
    }
    return {metric: f"last_over_time({metric}{selector}{window})" for metric, selector in selectors.items()}


@dataclass(frozen=True)
class PeriodTrace:
    """The trace of a period and what of the period it leaves out, one line per reason."""

    trace: Trace
    notes: list[str] = field(default_factory=list)


def gpu_names(environment: Environment) -> dict[str, list[str]]:
    """Each GPU resource as kube-state-metrics writes it -> the classes or MIG profile a trace's
    `gpu` names for it (several classes may share `nvidia.com/gpu`; their nodes tell them apart).

    >>> gpu_names(prod)["nvidia_com_gpu"], gpu_names(prod)["nvidia_com_mig_1g_10gb"]
    (['a100', 'a100-mig', 'h100'], ['1g.10gb'])
    """
    out: dict[str, list[str]] = {}
    for name, gpu_class in sorted(environment.platform.gpu_classes.items()):
        out.setdefault(sanitize(cap.class_resource(gpu_class)), []).append(name)
    for profile in sorted(mig_profiles(environment)):
        out.setdefault(sanitize(MIG_RESOURCE_PREFIX + profile), []).append(profile)
    return out


def _by_job(samples: Iterable[tuple[dict[str, str], float]]) -> dict[tuple[str, str], tuple[dict[str, str], float]]:
    return {(labels.get("namespace", ""), labels.get("job_name", "")): (labels, value) for labels, value in samples}


class _Pods:
    """The pods of each Job, their GPU requests, nodes and priority classes."""

    def __init__(self, series: Series) -> None:
        self.of_job: dict[tuple[str, str], list[str]] = {}
        for labels, _ in series.get("kube_pod_owner", []):
            if labels.get("owner_kind") == "Job":
                self.of_job.setdefault((labels.get("namespace", ""), labels.get("owner_name", "")), []).append(labels.get("pod", ""))
        self.requests: dict[tuple[str, str], Counter] = {}
        self.node: dict[tuple[str, str], str] = {}
        for labels, value in series.get("kube_pod_container_resource_requests", []):
            key = (labels.get("namespace", ""), labels.get("pod", ""))
            if labels.get("resource", "").startswith(GPU_RESOURCE_PREFIX):
                self.requests.setdefault(key, Counter())[labels["resource"]] += value
            if labels.get("node"):
                self.node[key] = labels["node"]
        self.priority: dict[tuple[str, str], str] = {}
        for labels, _ in series.get("kube_pod_info", []):
            key = (labels.get("namespace", ""), labels.get("pod", ""))
            self.priority[key] = labels.get("priority_class", "")
            if labels.get("node"):
                self.node.setdefault(key, labels["node"])

    def first_with_gpus(self, namespace: str, job: str) -> tuple[str, Counter] | None:
        """The first pod of the Job (by name) that requests GPUs, and its requests per resource."""
        for pod in sorted(self.of_job.get((namespace, job), [])):
            if self.requests.get((namespace, pod)):
                return pod, self.requests[(namespace, pod)]
        return None


class _Reading:
    """The period's series indexed by Job, and what the reading found: jobs, notes by reason, problems."""

    def __init__(self, series: Series, environment: Environment, source: str) -> None:
        self.environment, self.source = environment, source
        label = ksm_label(TENANT_LABEL)
        self.tenants = {s["namespace"]: s[label] for s, _ in series.get("kube_namespace_labels", []) if s.get(label)}
        self.known = {t.name for t in environment.tenants}
        self.queued = {key for key, (s, _) in _by_job(series.get("kube_job_labels", [])).items() if s.get(ksm_label(KUEUE_QUEUE_NAME_LABEL))}
        self.started = _by_job(series.get("kube_job_status_start_time", []))
        self.completed = _by_job(series.get("kube_job_status_completion_time", []))
        self.active = _by_job(series.get("kube_job_status_active", []))
        self.parallelism = _by_job(series.get("kube_job_spec_parallelism", []))
        self.pods = _Pods(series)
        class_label = ksm_label(gpu_class_label(environment.platform))
        self.class_of_node = {s.get("node", ""): s.get(class_label, "") for s, _ in series.get("kube_node_labels", [])}
        self.jobs: list[TraceJob] = []
        self.noted: Counter = Counter()
        self.problems: list[Problem] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(Problem(self.source, 0, 0, where, message))

    def read(self, namespace: str, job: str, created: float, since: float, until: float) -> None:
        """Add the Job created at `created` to the trace (one still running runs until `until`), or
        note why it is left out."""
        key = (namespace, job)
        running = key in self.started and key not in self.completed and self.active.get(key, ({}, 0.0))[1] > 0
        completed = self.completed.get(key) or (({}, until) if running else None)
        why = _left_out(self.tenants[namespace], self.known, key in self.queued, self.started.get(key), completed)
        gpus = None if why else self.pods.first_with_gpus(namespace, job)
        if why or gpus is None:
            self.noted[f"left out: {why or 'no pod of theirs requested GPUs'}"] += 1
            return
        spec = self._gpu(namespace, job, *gpus)
        if spec is None:
            return
        duration = completed[1] - self.started[key][1]
        if running:
            self.noted["replayed as running until --until, where they still ran (their durations a lower bound)"] += 1
        pods = int(self.parallelism[key][1]) if key in self.parallelism else 1
        self.jobs.append(TraceJob(tenant=self.tenants[namespace], submit=created - since, duration=max(1.0, duration),
                                  pods=max(1, pods), priority=self._priority(self.pods.priority.get((namespace, gpus[0]), "")),
                                  name=_name(job), **spec))

    def _gpu(self, namespace: str, job: str, pod: str, requests: Counter) -> dict | None:
        """The trace's `gpu` and `count` of a Job's pod (one GPU resource), or None with a problem said."""
        where, environment = f"Job {namespace}/{job}", self.environment
        if len(requests) > 1:
            self.problem(where, f"its pod {pod} requests several GPU resources ({', '.join(sorted(requests))}); "
                         "a trace job asks for one: split the Job or leave it out of the period")
            return None
        (resource, amount), = requests.items()
        shared = gpu_names(environment).get(resource, [])
        node = self.pods.node.get((namespace, pod), "")
        names = shared if len(shared) <= 1 else [n for n in shared if n == self.class_of_node.get(node)]
        if not shared:
            self.problem(where, f"its pod {pod} requests {resource}, which no GPU class or MIG profile of stack "
                         f"{environment.name} names (known: {', '.join(sorted(gpu_names(environment)))}); add the class "
                         "to the stack or leave the Job's period out")
        elif not names:
            self.problem(where, f"its pod {pod} requests {resource}, which GPU classes {', '.join(shared)} share, and its "
                         f"node {node or '(none)'} has no class label of the stack in kube_node_labels; allow-list the "
                         f"class label (--metric-labels-allowlist={ALLOWLIST})")
        return {"gpu": names[0], "count": max(1, int(amount))} if names else None

    def _priority(self, name: str) -> str | None:
        """The trace's `priority`: None for the stack's default class (what a pod naming none gets, as
        the trace's default does) and, said, for a class the stack does not have."""
        classes = self.environment.platform.priority_classes
        if name and name not in classes:
            self.noted[f"replayed at the stack's default priority: their priority class {name} is not the stack's"] += 1
            return None
        return None if not name or classes[name].global_default else name


def period_trace(series: Series, environment: Environment, since: float, until: float, source: str = "prometheus") -> PeriodTrace:
    """The trace of the Jobs of the stack's tenants created from `since` to `until` (Unix seconds)
    that ran to completion or still ran at `until` (as if they ended then), submit times counted
    from `since`; raise `InvalidInput` with every problem.

    >>> s = {"kube_namespace_labels": [({"namespace": "eval", "label_gpu_tenancy_dev_tenant": "eval"}, 1)],
    ...      "kube_job_created": [({"namespace": "eval", "job_name": "j"}, 1030)],
    ...      "kube_job_status_start_time": [({"namespace": "eval", "job_name": "j"}, 1040)],
    ...      "kube_job_status_completion_time": [({"namespace": "eval", "job_name": "j"}, 1640)],
    ...      "kube_job_labels": [({"namespace": "eval", "job_name": "j", "label_kueue_x_k8s_io_queue_name": "default"}, 1)],
    ...      "kube_pod_owner": [({"namespace": "eval", "pod": "j-1", "owner_kind": "Job", "owner_name": "j"}, 1)],
    ...      "kube_pod_container_resource_requests": [({"namespace": "eval", "pod": "j-1", "resource": "nvidia_com_mig_1g_10gb"}, 7)]}
    >>> period_trace(s, prod, 1000, 2000).trace.jobs[0]
    TraceJob(tenant='eval', submit=30.0, gpu='1g.10gb', count=7, duration=600.0, priority=None, pods=1, name='j', fraction=None)
    """
    _check_series(series, source, since, until)
    reading = _Reading(series, environment, source)
    for (namespace, job), (_, created) in sorted(_by_job(series.get("kube_job_created", [])).items()):
        if since <= created < until and namespace in reading.tenants:   # else: outside the period, or not a tenant's Job
            reading.read(namespace, job, created, since, until)
    trace = Trace(jobs=sorted(reading.jobs, key=lambda j: (j.submit, j.name or "")))
    problems = reading.problems or trace_problems(trace, SourceDocument(source, {}), environment)
    if problems:
        raise InvalidInput(problems)
    notes = [f"{n} Job(s) {why}" for why, n in sorted(reading.noted.items())]
    return PeriodTrace(trace, notes)


def _check_series(series: Series, source: str, since: float, until: float) -> None:
    def fail(message: str) -> None:
        raise InvalidInput([Problem(source, 0, 0, "", message)])

    if not series.get("kube_namespace_labels"):
        fail(f"no namespace carries the tenant label (kube_namespace_labels{{{ksm_label(TENANT_LABEL)}}}); run kube-state-metrics "
             f"with --metric-labels-allowlist={ALLOWLIST} and check that Prometheus scrapes it")
    if not any(since <= value < until for _, value in series.get("kube_job_created", [])):
        fail("no Job was created in the period (kube_job_created); check --since and --until, and that "
             "kube-state-metrics' jobs collector is on and scraped")
    if not series.get("kube_job_labels"):
        fail(f"no Job carries the Kueue queue label (kube_job_labels{{{ksm_label(KUEUE_QUEUE_NAME_LABEL)}}}); allow-list it: "
             f"--metric-labels-allowlist={ALLOWLIST}")


def _left_out(tenant: str, known: set[str], queued: bool, started, completed) -> str:
    if tenant not in known:
        return "of a tenant the stack does not have"
    if not queued:
        return "not submitted to a Kueue queue (no kueue.x-k8s.io/queue-name label)"
    if started is None:
        return "never started in the period (still queued at --until: no duration to replay)"
    if completed is None:
        return "failed, or deleted before completing (no completion time: no duration to replay)"
    return ""


def _name(job: str) -> str | None:
    try:
        return TraceJob.model_validate({"tenant": "x", "submit": 0, "gpu": "x", "count": 1, "duration": 1, "name": job}).name
    except ValueError:
        return None   # not a DNS label: the replay names it job-<index>
