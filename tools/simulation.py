"""`tenants simulate`'s replay: a trace run on a throw-away runtime plane of the real components.

For one side (a project directory: the base exported from git, or the working tree) this starts
the runtime lane's plane (tools/runtime.py: etcd, kube-apiserver, kube-controller-manager with the
job and node lifecycle controllers, kube-scheduler, Kueue and JobSet, kwok as the kubelet of every
inventory node), applies the stack's objects as `tenants render` builds them, then submits each
job of the trace as a batch Job to its tenant's LocalQueue at `submit / speed` wall seconds, its
pods annotated to run `duration / speed` (kwok's pod-complete Stage). What decides is the cluster:
Kueue admits, borrows and preempts, kube-scheduler binds, kwok runs and completes.

What is recorded, each from the component that knows it:
* admission: a watch on Workloads, the local time the `Admitted` condition is first seen True
  (API timestamps have whole seconds only; at speed 60 that would be a minute of trace time);
  preemptions: the Workload's `Preempted` condition turning True (each transition once);
* GPU use: the pods' runs (`PodLedger`: Running to Succeeded or deletion) times their devices;
* borrowing: every second, each ClusterQueue's `flavorsUsage[].resources[].borrowed` of GPU
  resources, integrated over time.

On a KAI stack (`SCHEDULERS`, one row per scheduler) the plane also runs KAI (tools/kai.py), the
Jobs name its scheduler and their tenant's Queue, and admission is KAI binding a Job's first pod
(`KaiJobWatch`), borrowing what a tenant's bound pods hold beyond its Queue's GPU quota
(`KaiBorrowSampler`).

All of it is turned into trace seconds (wall seconds times the speed) and handed to the pure
`components.simulate.outcome.Outcome`.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from components.simulate.outcome import JobOutcome, Outcome
from components.simulate.report import Tolerance
from components.simulate.trace import Trace, TraceJob, request_of
from components.manifests.meta import GPU_TAINT_TOLERATION, KAI_QUEUE_LABEL, gpu_class_label, pool_label, tenant_label
from tools.runtime import (
    GPU_RESOURCE_PREFIX,
    RUNTIME_CONTROLLERS,
    UNTHROTTLED,
    PodLedger,
    kwok_nodes,
    pod_gpus,
    run_for,
    runtime_unavailable_reason,
    tenant_of,
)
from tools.kai import SCHEDULER_NAME as KAI_SCHEDULER_NAME
from tools.scheduling import SchedulingStack, inventory_nodes, start_scheduling_stack

KUEUE_GROUP, KUEUE_API = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_LABEL = "gpu-tenancy.dev/simulated-job"
GRACE_SECONDS = 1      # a preempted pod's devices are free a second after Kueue evicts it
BACKOFF_LIMIT = 6      # a preempted Job's pods count as failed: requeued, not failed at 0
SAMPLE_SECONDS = 1.0   # ClusterQueue borrowing is sampled this often (wall time)
# The components' own reaction time per job on a Kueue stack (Kueue's admission cycle, the job
# controller creating pods, the scheduler binding, kwok's Stages): measured at under a second here,
# stated as three. A KAI stack's row in `SCHEDULERS` states its own.
WALL_LATENCY_SECONDS = 3.0
# KAI's chain is longer: the pod-grouper's PodGroup, a scheduling cycle (`--schedule-period=1s`),
# the binder, and this replay's poll: a job's first bind came 2.8 s (p50) after its creation here.
# A GPU share's first bind also waits for its GPU group's reservation pod (the binder creates it,
# kwok starts it at once, the stand-in publishes its GPU, the binder's watch sees it): 1.2-1.3 s
# after creation with both cores busy (2026-12-07, tools/kai_reservation.py), inside this budget.
KAI_WALL_LATENCY_SECONDS = 5.0
# With nothing admitted and running, jobs still waiting this long (wall) can never be admitted
# (larger than what their queue may ever hold): the replay ends, and the report says starved.
QUIET_SECONDS = 5.0
SUBMITTERS = 8         # Jobs created at once
POLL_SECONDS = 0.25    # how often KAI's bindings and the Jobs' completion are read (wall time)


def unavailable_reason(scheduler: str = "kueue") -> str:
    """Why a replay of a stack with `scheduler` cannot run here ("" if it can): a scheduler without
    queues, the runtime lane's binaries and kwok's Stages, KAI's binaries for a KAI stack.

    >>> unavailable_reason("none")
    "the stack's scheduler is 'none': no queue to replay on (tenants simulate replays kueue and kai stacks)"
    """
    if scheduler not in SCHEDULERS:
        return (f"the stack's scheduler is '{scheduler}': no queue to replay on "
                f"(tenants simulate replays {' and '.join(SCHEDULERS)} stacks)")
    reason = runtime_unavailable_reason().replace("runtime lane", "tenants simulate")
    if not reason and scheduler == "kai":
        from tools.kai import kai_unavailable_reason

        reason = kai_unavailable_reason()
    return reason


def job_body(job: TraceJob, index: int, queue: str, environment: Any, speed: float) -> dict[str, Any]:
    """The batch Job a trace job becomes: restricted Pod Security, its devices, its class's node
    selector, its priority, kwok's annotations to run `duration / speed` seconds, and what the
    stack's scheduler needs of it (`SCHEDULERS`: its queue label; for KAI its scheduler name and the
    tolerations no Kueue flavor adds).

    >>> from components.load import load_environment
    >>> env = load_environment(Path("."), "prod")
    >>> body = job_body(TraceJob(tenant="eval", submit=0, gpu="a100", count=2, duration=600), 3, "default", env, 60)
    >>> body["metadata"]["name"], body["spec"]["template"]["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"]
    ('job-00003', '10s')
    """
    request = request_of(job.gpu, environment)
    values = {"cpu": "100m", "memory": "128Mi", request.resource: str(job.count)}
    pod: dict[str, Any] = {
        "restartPolicy": "Never", "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "registry.invalid/simulated:1",
                        "resources": {"requests": dict(values), "limits": dict(values)},
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    }
    if request.node_selector:
        pod["nodeSelector"] = dict(request.node_selector)
    if job.priority:
        pod["priorityClassName"] = job.priority
    name = job.name or f"job-{index:05d}"
    scheduler = SCHEDULERS[environment.platform.scheduler]
    labels = {scheduler.queue_label: queue, JOB_LABEL: name}
    template = {"metadata": {"annotations": run_for(job.duration / speed),
                             "labels": {JOB_LABEL: name, **scheduler.pod_labels(queue)}},
                "spec": pod}
    scheduler.shape_pod(template, name, job, environment)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"parallelism": job.pods, "completions": job.pods, "backoffLimit": BACKOFF_LIMIT,
                     "template": template}}


def _as_share(template: dict[str, Any], job: str, fraction: float) -> None:
    """A trace job's `fraction` (only on a KAI stack: the trace's checks say so): its pods become
    shares of one GPU each, asking by annotation, not by resource (`tools.kai.make_gpu_share`). The ConfigMap prefix KAI's webhook would make per pod
    is made per Job, from its name (the binder updates the ConfigMap for a Job's later pods), cut so
    that the volume name stays a 63-character label as the webhook cuts it.

    >>> t = {"metadata": {}, "spec": {"containers": [{"resources": {"requests": {}, "limits": {}}}]}}
    >>> _as_share(t, "job-00001", 0.25)
    >>> t["metadata"]["annotations"]["gpu-fraction"], t["spec"]["volumes"][0]["name"]
    ('0.25', 'job-00001-5fc3739-shared-gpu-0-vol')
    """
    from components.manifests.meta import KAI_SHARED_GPU_PREFIX_SUFFIX
    from tools.kai import make_gpu_share

    tail = f"-{hashlib.sha256(job.encode()).hexdigest()[:7]}{KAI_SHARED_GPU_PREFIX_SUFFIX}"
    make_gpu_share(template["metadata"], template["spec"], fraction, job[:63 - len(tail) - len("-0-vol")] + tail)


def _kueue_pod(template: dict[str, Any], name: str, job: TraceJob, environment: Any) -> None:
    """Kueue's flavors add the pool's selector and tolerations when it admits the Job."""


def _kai_pod(template: dict[str, Any], name: str, job: TraceJob, environment: Any) -> None:
    """KAI schedules pods that name it, and no flavor places them: the pod selects the pools of its
    class the tenant may reach (a class selector alone could reach another tenant's dedicated pool,
    which the placement policy refuses) and tolerates their taints (the shared GPU pools', the
    tenant's own dedicated pools'). A job with `fraction` asks for a share (`_as_share`)."""
    pod = template["spec"]
    platform = environment.platform
    spec = next(t.spec for t in environment.tenants if t.name == job.tenant)
    reachable = environment.view(spec).reachable_pools
    gpu_class = dict(pod.pop("nodeSelector", {})).get(gpu_class_label(platform))

    def serves(pool: str) -> bool:   # the job's class, or (a MIG profile: no class selector) a MIG class
        name = platform.node_pools[pool].gpu_class
        return name == gpu_class if gpu_class else platform.gpu_classes[name].sharing == "mig"

    pools = sorted(name for name in reachable if serves(name))
    pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": pool_label(platform), "operator": "In", "values": pools}]}]}}}
    pod["schedulerName"] = KAI_SCHEDULER_NAME
    pod["tolerations"] = [dict(GPU_TAINT_TOLERATION),
                          {"key": tenant_label(platform), "operator": "Equal", "value": job.tenant, "effect": "NoSchedule"}]
    if job.fraction is not None:
        _as_share(template, name, job.fraction)


def queues_of(objects: dict[str, list[dict[str, Any]]], scheduler: str = "kueue") -> dict[str, tuple[str, str]]:
    """Tenant -> (namespace, queue) it submits to: with Kueue its first LocalQueue by namespace; with
    KAI its leaf Queue (named like the tenant) from the namespace named like it, else its first.

    >>> queues_of({"eval": [{"kind": "LocalQueue", "metadata": {"namespace": "eval", "name": "default"}}]})
    {'eval': ('eval', 'default')}
    >>> queues_of({"eval": [{"kind": "Queue", "metadata": {"name": "eval"}},
    ...                     {"kind": "Namespace", "metadata": {"name": "eval"}}]}, "kai")
    {'eval': ('eval', 'eval')}
    """
    out = {}
    for owner, objs in sorted(objects.items()):
        if owner == "_platform":
            continue
        if scheduler == "kai":
            namespaces = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "Namespace")
            queue = any(o["kind"] == "Queue" and o["metadata"]["name"] == owner for o in objs)
            if queue and namespaces:
                out[owner] = (owner if owner in namespaces else namespaces[0], owner)
            continue
        queues = sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs if o["kind"] == "LocalQueue")
        if queues:
            out[owner] = queues[0]
    return out


class _Background:
    """A daemon thread running `_run` until `stop`: the Workload watch and the borrowing sampler."""

    _thread: threading.Thread
    _stop: threading.Event

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class WorkloadWatch(_Background):
    """When each Job's Workload was first admitted and how often it was preempted (local monotonic
    time), from a watch on every Workload."""

    def __init__(self, cp: Any) -> None:
        from kubernetes import client as k8s_client

        self.api = k8s_client.CustomObjectsApi(cp.client_for("simulate-workloads", ["system:masters"]))
        self.admitted: dict[tuple[str, str], float] = {}
        self.finished: set[tuple[str, str]] = set()
        self.preempted: dict[tuple[str, str], set[str]] = {}
        self.changed = time.monotonic()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="workload-watch", daemon=True)

    def settled(self, created: set[tuple[str, str]], quiet: float = QUIET_SECONDS) -> bool:
        """Every created Job finished, or none runs and none was admitted or finished for `quiet` seconds."""
        with self._lock:
            if created <= self.finished:
                return True
            running = (set(self.admitted) & created) - self.finished
            return not running and time.monotonic() - self.changed >= quiet

    def _record(self, workload: dict[str, Any]) -> None:
        owners = [o["name"] for o in workload["metadata"].get("ownerReferences", []) if o.get("kind") == "Job"]
        if not owners:
            return
        key, now = (workload["metadata"]["namespace"], owners[0]), time.monotonic()
        with self._lock:
            for c in workload.get("status", {}).get("conditions", []):
                if c["status"] != "True":
                    continue
                if c["type"] == "Admitted" and key not in self.admitted:
                    self.admitted[key], self.changed = now, now
                elif c["type"] == "Finished" and key not in self.finished:
                    self.finished.add(key)
                    self.changed = now
                elif c["type"] == "Preempted":
                    self.preempted.setdefault(key, set()).add(c["lastTransitionTime"])

    def _run(self) -> None:
        from kubernetes import watch

        while not self._stop.is_set():
            try:
                listed = self.api.list_cluster_custom_object(KUEUE_GROUP, KUEUE_API, "workloads")
                for item in listed["items"]:
                    self._record(item)
                stream = watch.Watch()
                for event in stream.stream(self.api.list_cluster_custom_object, KUEUE_GROUP, KUEUE_API, "workloads",
                                           timeout_seconds=5, resource_version=listed["metadata"]["resourceVersion"]):
                    self._record(event["object"])
                    if self._stop.is_set():
                        stream.stop()
            except Exception:   # an expired watch (410) or a reset connection: list again
                time.sleep(0.2)


class BorrowSampler(_Background):
    """Each ClusterQueue's borrowed GPU devices, sampled every SAMPLE_SECONDS and summed into
    device-seconds (wall) per tenant (the queue's `gpu-tenancy.dev/tenant` label)."""

    def __init__(self, cp: Any) -> None:
        from kubernetes import client as k8s_client

        self.api = k8s_client.CustomObjectsApi(cp.client_for("simulate-borrowing", ["system:masters"]))
        self.seconds: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="borrow-sampler", daemon=True)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(SAMPLE_SECONDS):
            now = time.monotonic()
            try:
                queues = self.api.list_cluster_custom_object(KUEUE_GROUP, KUEUE_API, "clusterqueues")["items"]
            except Exception:
                continue
            for cq in queues:
                tenant = cq["metadata"].get("labels", {}).get("gpu-tenancy.dev/tenant", cq["metadata"]["name"])
                borrowed = sum(int(r.get("borrowed", "0") or 0) for f in cq.get("status", {}).get("flavorsUsage", [])
                               for r in f["resources"] if r["name"].startswith(GPU_RESOURCE_PREFIX))
                if borrowed:
                    self.seconds[tenant] = self.seconds.get(tenant, 0.0) + borrowed * (now - last)
            last = now


class KaiJobWatch(_Background):
    """The KAI counterpart of `WorkloadWatch`: a Job is admitted when KAI binds its first pod (KAI
    decides placement and quota in one step), finished when the job controller says Complete, and
    preempted once per pod of it that was bound and ended without succeeding (KAI evicts to
    reclaim or preempt). Polled every POLL_SECONDS: the replay's Jobs are few."""

    def __init__(self, cp: Any) -> None:
        from kubernetes import client as k8s_client

        api = cp.client_for("simulate-kai-jobs", ["system:masters"])
        self.core, self.batch = k8s_client.CoreV1Api(api), k8s_client.BatchV1Api(api)
        self.admitted: dict[tuple[str, str], float] = {}
        self.finished: set[tuple[str, str]] = set()
        self.preempted: dict[tuple[str, str], set[str]] = {}
        self.changed = time.monotonic()
        self._bound: dict[str, tuple[str, str]] = {}   # pod uid -> its Job, once bound
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="kai-job-watch", daemon=True)

    settled = WorkloadWatch.settled

    def _poll(self) -> None:
        now = time.monotonic()
        pods = self.core.list_pod_for_all_namespaces(label_selector=JOB_LABEL).items
        jobs = self.batch.list_job_for_all_namespaces(label_selector=JOB_LABEL).items
        with self._lock:
            seen = set()
            for pod in pods:
                key = (pod.metadata.namespace, pod.metadata.labels[JOB_LABEL])
                seen.add(pod.metadata.uid)
                if pod.spec.node_name and pod.metadata.uid not in self._bound:
                    self._bound[pod.metadata.uid] = key
                    if key not in self.admitted:
                        self.admitted[key], self.changed = now, now
                if pod.metadata.uid in self._bound and (pod.status.phase == "Failed" or pod.metadata.deletion_timestamp):
                    self.preempted.setdefault(key, set()).add(pod.metadata.uid)
            for uid, key in self._bound.items():
                if uid not in seen and key not in self.finished:
                    self.preempted.setdefault(key, set()).add(uid)   # gone before its Job completed
            for job in jobs:
                key = (job.metadata.namespace, job.metadata.labels[JOB_LABEL])
                complete = any(c.type == "Complete" and c.status == "True" for c in (job.status.conditions or []))
                if complete and key not in self.finished:
                    self.finished.add(key)
                    self.changed = now

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self._poll()
            except Exception:   # a reset connection under load: poll again
                continue


class KaiBorrowSampler(_Background):
    """What each tenant holds beyond its KAI queue's GPU quota (KAI's over-quota use, what it
    reclaims first), sampled every SAMPLE_SECONDS from the bound, unfinished pods of the replay, in
    device-seconds (wall) per tenant."""

    def __init__(self, cp: Any, objects: dict[str, list[dict[str, Any]]]) -> None:
        from kubernetes import client as k8s_client

        self.core = k8s_client.CoreV1Api(cp.client_for("simulate-kai-borrowing", ["system:masters"]))
        self.owners = tenant_of(objects)
        self.quota = {o["metadata"]["name"]: float(o["spec"]["resources"]["gpu"]["quota"])
                      for objs in objects.values() for o in objs if o["kind"] == "Queue" and o["metadata"]["name"] in objects}
        self.seconds: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kai-borrow-sampler", daemon=True)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(SAMPLE_SECONDS):
            now = time.monotonic()
            try:
                pods = self.core.list_pod_for_all_namespaces(label_selector=JOB_LABEL).to_dict()["items"]
            except Exception:
                continue
            held: dict[str, float] = {}
            for pod in pods:
                tenant = self.owners.get(pod["metadata"]["namespace"])
                if tenant and pod["spec"].get("node_name") and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                    held[tenant] = held.get(tenant, 0.0) + sum(n for _, n in pod_gpus(pod))
            for tenant, devices in held.items():
                over = devices - self.quota.get(tenant, 0.0)
                if over > 0:
                    self.seconds[tenant] = self.seconds.get(tenant, 0.0) + over * (now - last)
            last = now


@dataclass(frozen=True)
class Scheduler:
    """What the replay does differently per stack scheduler: the queue label a Job carries, what its
    pods need, the components started beside the plane, and who says admitted and borrowed."""

    queue_label: str
    pod_labels: Callable[[str], dict[str, str]]
    shape_pod: Callable[[dict[str, Any], str, TraceJob, Any], None]   # (pod template, Job name, job, environment)
    start: Callable[[Any], Callable[[], None] | None]   # the applied stack -> what stops what it started
    watch: Callable[[Any], Any]
    borrowing: Callable[[Any, dict[str, list[dict[str, Any]]]], Any]
    latency_seconds: float   # its reaction time per job, wall seconds: the report's tolerance (`tolerance`)


def _start_kai(applied: Any) -> Callable[[], None]:
    """KAI's three processes (the binder with the plugins the stack's KAI `Config` turns on) and the
    stand-in for its GPU reservation pods' program, which GPU shares wait for (tools/kai_reservation.py)."""
    from tools.kai import KaiScheduler, binder_args
    from tools.kai_reservation import ReservationStandIn

    cp = applied.plane.cp
    KaiScheduler(cp).start(binder_args=binder_args(applied))
    return ReservationStandIn(cp).start().stop


# One row per scheduler `tenants simulate` replays on; a stack with another is refused (cli/diff.py).
SCHEDULERS: dict[str, Scheduler] = {
    "kueue": Scheduler(QUEUE_LABEL, lambda queue: {}, _kueue_pod, lambda applied: None, WorkloadWatch,
                       lambda cp, objects: BorrowSampler(cp), WALL_LATENCY_SECONDS),
    "kai": Scheduler(KAI_QUEUE_LABEL, lambda queue: {KAI_QUEUE_LABEL: queue}, _kai_pod, _start_kai, KaiJobWatch,
                     KaiBorrowSampler, KAI_WALL_LATENCY_SECONDS),
}


def tolerance(scheduler: str, speed: float) -> Tolerance:
    """The tolerance a replay on a stack with `scheduler` states: its reaction time per job (wall
    seconds) times the speed, plus 10%.

    >>> tolerance("kueue", 60), tolerance("kai", 60)
    (Tolerance(seconds=180.0, ratio=0.1), Tolerance(seconds=300.0, ratio=0.1))
    """
    return Tolerance(SCHEDULERS[scheduler].latency_seconds * speed)


@dataclass(frozen=True)
class Side:
    """One side to replay: a project directory and what to call it."""

    label: str
    root: Path


def replay(stack: str, side: Side, trace: Trace, speed: float, horizon: float | None = None,
           say: Callable[[str], None] = lambda _: None) -> Outcome:
    """Replay `trace` on `stack` of the project at `side.root`; the plane is stopped and removed after.

    The replay ends when every job finished, or when jobs still wait with nothing running (they can
    never be admitted), or at `horizon` trace seconds (default: ten times the last job's end). Returns the measured `Outcome` in trace seconds.
    """
    workdir = Path(tempfile.mkdtemp(prefix="tenants-simulate-"))
    try:
        t0 = time.monotonic()
        applied = start_scheduling_stack(stack, workdir, side.root, controllers=RUNTIME_CONTROLLERS, nodes=kwok_nodes,
                                         flags=UNTHROTTLED)
        try:
            stop = SCHEDULERS[applied.environment.platform.scheduler].start(applied)
            try:
                say(f"{side.label}: control plane of stack {stack} up in {time.monotonic() - t0:.0f}s")
                return _run_trace(applied, trace, speed, horizon, say, side.label)
            finally:
                if stop is not None:
                    stop()
        finally:
            applied.plane.cp.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_trace(applied: SchedulingStack, trace: Trace, speed: float, horizon: float | None,
               say: Callable[[str], None], label: str) -> Outcome:
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException

    cp, environment = applied.plane.cp, applied.environment
    batch = k8s_client.BatchV1Api(cp.api_client)
    scheduler = SCHEDULERS[environment.platform.scheduler]
    queues = queues_of(applied.objects, environment.platform.scheduler)
    jobs = sorted(enumerate(trace.jobs), key=lambda p: (p[1].submit, p[0]))
    limit = horizon if horizon is not None else 10 * max((j.submit + j.duration for j in trace.jobs), default=0)
    ledger, workloads = PodLedger(cp).start(), scheduler.watch(cp).start()
    borrowing = scheduler.borrowing(cp, applied.objects).start()
    submitted: dict[int, tuple[str, str, float, str]] = {}

    def create(index: int, job: TraceJob) -> None:
        if job.tenant not in queues:   # a tenant only the other side has
            submitted[index] = ("", job.name or f"job-{index:05d}", time.monotonic(), "no such tenant (or queue) on this side")
            return
        namespace, queue = queues[job.tenant]
        body = job_body(job, index, queue, environment, speed)
        asked = workloads.changed = time.monotonic()   # Kueue has not looked at it yet
        try:
            batch.create_namespaced_job(namespace, body)
            submitted[index] = (namespace, body["metadata"]["name"], asked, "")
        except ApiException as exc:
            submitted[index] = (namespace, body["metadata"]["name"], asked, exc.reason or str(exc.status))

    start = time.monotonic()
    try:
        # Creating a Job passes Kueue's webhooks and the admission policies (tens of ms under load):
        # several at once keep a dense trace on time; the lag that remains is reported.
        with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
            for index, job in jobs:
                _sleep_until(start + job.submit / speed)
                pool.submit(create, index, job)
        say(f"{label}: {len(jobs)} job(s) submitted in {time.monotonic() - start:.0f}s; waiting for them to finish (at most {limit / speed:.0f}s wall)")
        created = {(ns, name) for ns, name, _, why in submitted.values() if not why}
        cp.wait_for(lambda: workloads.settled(created) or time.monotonic() - start >= limit / speed,
                    timeout=limit / speed + 60, interval=0.5, what="the trace's jobs to finish")
        end = time.monotonic()
    finally:
        for watcher in (ledger, workloads, borrowing):
            watcher.stop()
    return _outcome(applied, trace, submitted, workloads, borrowing, ledger, start, end, speed)


def _sleep_until(moment: float) -> None:
    delay = moment - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _outcome(applied, trace, submitted, workloads, borrowing, ledger, start, end, speed) -> Outcome:
    def trace_time(moment: float) -> float:
        return (moment - start) * speed

    jobs, lag = [], 0.0
    for index, job in enumerate(trace.jobs):
        namespace, name, at, why = submitted[index]
        admitted = workloads.admitted.get((namespace, name))
        created = trace_time(at)   # the wait starts when the Job exists, however late the replay made it
        lag = max(lag, created - job.submit)
        jobs.append(JobOutcome(job.tenant, name, created, None if admitted is None else max(trace_time(admitted), created),
                               len(workloads.preempted.get((namespace, name), ())), why, job.count * job.pods))
    owners = tenant_of(applied.objects)
    used: dict[str, float] = {}
    pool_used: dict[str, float] = {}
    for run in ledger.runs():
        devices = sum(n for _, n in run.gpus)
        tenant = owners.get(run.namespace)
        if tenant is None or not devices:
            continue
        seconds = devices * min(run.seconds, (end - start)) * speed
        used[tenant] = used.get(tenant, 0.0) + seconds
        pool = applied.node_pool.get(run.node or "")
        if pool:
            pool_used[pool] = pool_used.get(pool, 0.0) + seconds
    return Outcome(tuple(jobs), used, {t: s * speed for t, s in borrowing.seconds.items()},
                   pool_used, pool_devices(applied.environment), trace_time(end), lag)


def pool_devices(environment: Any) -> dict[str, int]:
    """GPU devices (every nvidia.com/ resource) each pool's nodes offer.

    >>> from components.load import load_environment
    >>> pool_devices(load_environment(Path("."), "prod"))["a100-mig"]
    72
    """
    out: dict[str, int] = {}
    for _, pool, _, allocatable in inventory_nodes(environment):
        out[pool] = out.get(pool, 0) + sum(int(v) for r, v in allocatable.items() if r.startswith(GPU_RESOURCE_PREFIX))
    return out
