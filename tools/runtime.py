"""The runtime plane: the scheduling plane (tools/scheduling.py) with kwok as every node's kubelet.

On the scheduling lane no kubelet runs: pods are bound and stay Pending. Here **kwok**
(`sigs.k8s.io/kwok` at `KWOK_VERSION`, built by `tools/build.sh kwok` from tools/controllers) plays
the kubelet of the stack's inventory nodes, driven by the Stages kwok itself ships, read from its
module source in the Go module cache (never copied into the repository):

* `node/fast` (node-initialize): a registered node that is not Ready becomes Ready and Running,
  its capacity and allocatable kept as registered (the GPU resources of its pool);
* `node/heartbeat`: its conditions' heartbeat refreshed every 20-45 s, inside the 50 s the node
  lifecycle controller allows (its `--node-monitor-grace-period`). Not Leases: kwok v0.8.0 with
  `--node-lease-duration-seconds` set and nodes chosen by annotation created no Lease and managed
  no node at all here (no status written, nothing logged), so the lane keeps kwok's default of none;
* `pod/general`: a bound pod is created, becomes Running (`status.startTime`), a Job's pod
  Succeeds after the delay its `pod-complete.stage.kwok.x-k8s.io/delay` annotation states, and a
  deleted pod is removed once its grace period is over (`run_for` writes the annotations).

kwok manages only the nodes with `KWOK_NODE_ANNOTATION` (`register_kwok_nodes` sets it on the
inventory's nodes; a CPU node a test adds stays as it was). kube-controller-manager runs the
scheduling lane's controllers plus the **node lifecycle controller**, which removes the `not-ready`
taint once kwok reports a node Ready and would taint a node whose heartbeat went stale (a test checks
it never does).

`PodLedger` watches every pod and keeps when each ran and what GPUs it held (a KAI share its
fraction of a GPU, `KAI_SHARE`), for the lane summary (`runtime_summary`): per stack the Jobs Kueue
admitted and that finished, the preemptions, and the device-seconds per tenant and resource (a GPU, MIG slice or share as the nodes advertise it; chargeback weighs them).

The lane (`make e2e-runtime`) is tests/e2e/runtime.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from tools.control_plane import BIN_DIR, REPO_ROOT, VERSIONS, ControlPlane, free_port
from tools.scheduling import (
    SCHEDULING_BINARIES,
    SCHEDULING_CONTROLLERS,
    SchedulingPlane,
    SchedulingStack,
    _cache_dir,
    inventory_nodes,
    running_scheduling_stack,
    scheduling_unavailable_reason,
)

KWOK_VERSION = VERSIONS["KWOK_VERSION"]
RUNTIME_BINARIES = (*SCHEDULING_BINARIES, "kwok")
# Set by `make e2e-runtime`: a runtime lane that cannot run fails instead of skipping.
REQUIRED_ENV = "GPU_TENANCY_RUNTIME_REQUIRED"
# kwok's own convention for the nodes it fakes (its docs, kwokctl's nodes).
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# The Stage sets of kwok's module, each a kustomization listing its Stage files.
STAGE_SETS = ("node/fast", "node/heartbeat", "pod/general")
# The node lifecycle controller turns kwok's Ready and heartbeats into the taints scheduling reads.
RUNTIME_CONTROLLERS = (*SCHEDULING_CONTROLLERS, "node-lifecycle-controller")
STAGE_ANNOTATION = "{stage}.stage.kwok.x-k8s.io/{knob}"
# The client rate limits of a plane that must keep up with a replay or a scale run (ControlPlane's
# `flags`), as kwokctl's `disableQPSLimits` sets them for its scale clusters: kube-controller-manager's
# default 20 requests/s (its job, quota and garbage collectors share them) and kube-scheduler's 50
# would meter the components' throughput instead of the queues'. kwok's own client has no limiter
# and Kueue's defaults are 300/500.
UNTHROTTLED: dict[str, tuple[str, ...]] = {
    component: ("--kube-api-qps=5000", "--kube-api-burst=10000") for component in ("kube-controller-manager", "kube-scheduler")
}
GPU_RESOURCE_PREFIX = "nvidia.com/"
# A KAI GPU share asks by annotation, not by resource (its reservation pod, in KAI's namespace, holds
# the whole GPU): the ledger counts it as its fraction of a GPU, under a name of its own.
KAI_FRACTION, KAI_FRACTION_DEVICES = "gpu-fraction", "gpu-fraction-num-devices"
KAI_SHARE = "nvidia.com/gpu (KAI share)"


def kwok_module_dir() -> Path:
    """kwok's module source in the shared Go module cache (tools/build.sh downloads it)."""
    return _cache_dir() / "go" / "mod" / "sigs.k8s.io" / f"kwok@{KWOK_VERSION}"


def stage_paths(module: Path, sets: Iterable[str] = STAGE_SETS) -> list[Path]:
    """The Stage files of `sets`, in the order their kustomizations list them.

    >>> [p.name for p in stage_paths(kwok_module_dir(), ["node/fast"])]   # doctest: +SKIP
    ['node-initialize.yaml']
    """
    import yaml

    paths = []
    for name in sets:
        folder = module / "kustomize" / "stage" / name
        kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
        paths += [folder / resource for resource in kustomization["resources"]]
    return paths


def runtime_unavailable_reason() -> str:
    """Why the runtime lane cannot run here ("" if it can)."""
    reason = scheduling_unavailable_reason()
    if reason:
        return reason.replace("scheduling lane", "runtime lane").replace("make e2e-scheduling", "make e2e-runtime")
    if not os.access(BIN_DIR / "kwok", os.X_OK):
        return f"runtime lane: kwok not built in {BIN_DIR}; run `make e2e-runtime` (or `tools/build.sh kwok`)"
    try:
        missing = [str(p) for p in stage_paths(kwok_module_dir()) if not p.is_file()]
    except OSError as exc:
        missing = [str(exc)]
    if missing:
        return (f"runtime lane: kwok's Stages are read from its module source {kwok_module_dir()}: "
                f"missing {', '.join(missing)}; run `tools/build.sh kwok` (it downloads the module)")
    return ""


def run_for(seconds: float, start_after: float = 0.0) -> dict[str, str]:
    """Pod annotations that make kwok run a Job's pod for `seconds` (after `start_after` to start).

    kwok waits a random time between a Stage's `delay` and its `jitter-delay`, and the latter
    wins when it is shorter: its default (5 s) would cut a longer run short, so both are set.

    >>> run_for(4)["pod-complete.stage.kwok.x-k8s.io/delay"], run_for(4)["pod-complete.stage.kwok.x-k8s.io/jitter-delay"]
    ('4s', '4s')
    """
    return {**_knobs("pod-create", 0), **_knobs("pod-ready", start_after), **_knobs("pod-complete", seconds)}


def start_at_once() -> dict[str, str]:
    """Pod annotations that make kwok start a pod as soon as it is bound, and leave it running: for
    pods the replay does not create (KAI's reservation pods), which kwok's Stages would otherwise
    start 2-10 s later (its defaults: 1 s plus up to 5 s of jitter, twice).

    >>> sorted(start_at_once().values())
    ['0s', '0s', '0s', '0s']
    """
    return {**_knobs("pod-create", 0), **_knobs("pod-ready", 0)}


def _knobs(stage: str, value: float) -> dict[str, str]:
    text = f"{value:g}s"
    return {STAGE_ANNOTATION.format(stage=stage, knob=k): text for k in ("delay", "jitter-delay")}


# --------------------------------------------------------------------------
# kwok and its nodes
# --------------------------------------------------------------------------


def start_kwok(cp: ControlPlane, timeout: float = 60.0) -> float:
    """Start kwok against `cp` with the Stages of STAGE_SETS, managing the annotated nodes; wait
    until it serves its health check. Returns seconds."""
    started = time.monotonic()
    address = f"127.0.0.1:{free_port()}"
    kubeconfig = cp.kubeconfig_for("kwok-controller", ["system:masters"], name="kwok")
    key, value = KWOK_NODE_ANNOTATION
    cp._start("kwok", [
        f"--kubeconfig={kubeconfig}",
        *(f"--config={path}" for path in stage_paths(kwok_module_dir())),
        f"--manage-nodes-with-annotation-selector={key}={value}",
        f"--server-address={address}",
        "--v=INFO",
    ])

    def healthy() -> bool:
        cp._check_alive()
        try:
            with urllib.request.urlopen(f"http://{address}/healthz", timeout=2) as r:
                return r.status == 200
        except Exception:
            return False

    cp.wait_for(healthy, timeout=timeout, interval=0.5, what="kwok serving /healthz")
    return time.monotonic() - started


def register_kwok_nodes(cp: ControlPlane, environment: Any, timeout: float = 90.0) -> dict[str, str]:
    """Register every static node as a kubelet would (labels, capacity, not yet Ready) for kwok to
    manage, then wait until kwok has made each Ready and the node lifecycle controller has lifted
    its `not-ready` taint. Returns node -> pool."""
    from kubernetes import client as k8s_client

    from tools.scheduling import NOT_READY_TAINT

    core = k8s_client.CoreV1Api(cp.api_client)
    key, value = KWOK_NODE_ANNOTATION
    pools = {}
    for node, pool_name, labels, allocatable in inventory_nodes(environment):
        cp.create_node(node, labels, field_manager="kubelet")
        core.patch_node(node, {"metadata": {"annotations": {key: value}}}, field_manager="kubelet")
        core.patch_node_status(node, {"status": {"capacity": allocatable, "allocatable": allocatable}})
        pools[node] = pool_name

    def settled() -> bool:
        for node in core.list_node().items:
            if node.metadata.name not in pools:
                continue
            ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
            if not ready or any(t.key == NOT_READY_TAINT for t in node.spec.taints or []):
                return False
        return True

    cp.wait_for(settled, timeout=timeout, interval=0.5,
                what="kwok to report every inventory node Ready and the node lifecycle controller to lift not-ready")
    return pools


@contextlib.contextmanager
def kwok_cpu_node(cp: ControlPlane, name: str, cpu: str = "16", timeout: float = 60.0) -> Iterator[str]:
    """An untainted node without GPUs that kwok runs (what every real cluster has for CPU work and the
    stacks' inventories do not list), Ready while the block runs, deleted after it."""
    from kubernetes import client as k8s_client

    core = k8s_client.CoreV1Api(cp.api_client)
    key, value = KWOK_NODE_ANNOTATION
    cp.create_node(name, {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}, field_manager="kubelet")
    core.patch_node(name, {"metadata": {"annotations": {key: value}}}, field_manager="kubelet")
    allocatable = {"cpu": cpu, "memory": "64Gi", "ephemeral-storage": "1Ti", "pods": "110"}
    core.patch_node_status(name, {"status": {"capacity": allocatable, "allocatable": allocatable}})
    try:
        cp.wait_for(lambda: any(c.type == "Ready" and c.status == "True" for c in core.read_node(name).status.conditions or [])
                    and not core.read_node(name).spec.taints, timeout=timeout, interval=0.5, what=f"kwok to make {name} Ready")
        yield name
    finally:
        core.delete_node(name)


def kwok_nodes(plane: SchedulingPlane, environment: Any, timings: dict[str, float]) -> dict[str, str]:
    """The runtime lane's nodes (a `nodes` of `start_scheduling_stack`): kwok started, the inventory registered for it."""
    timings["kwok"] = start_kwok(plane.cp)
    t0 = time.monotonic()
    pools = register_kwok_nodes(plane.cp, environment)
    timings["nodes Ready"] = time.monotonic() - t0
    return pools


# --------------------------------------------------------------------------
# What ran: pods' intervals and GPUs
# --------------------------------------------------------------------------


def _time(text: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


@dataclass(frozen=True)
class PodRun:
    """One pod's run: when it started and stopped (None: not yet) and the GPU resources it held."""

    namespace: str
    name: str
    node: str | None
    gpus: tuple[tuple[str, float], ...]
    start: datetime.datetime | None
    end: datetime.datetime | None

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds() if self.start and self.end else 0.0


def pod_gpus(pod: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """The GPU resources (nvidia.com/...) the pod's containers request, summed, by name; a KAI share
    (`gpu-fraction` annotation, on `gpu-fraction-num-devices` GPUs, default 1) as `KAI_SHARE` GPUs.

    >>> pod_gpus({"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"}}}]}})
    (('nvidia.com/gpu', 4),)
    >>> pod_gpus({"metadata": {"annotations": {"gpu-fraction": "0.5"}}, "spec": {"containers": []}})
    (('nvidia.com/gpu (KAI share)', 0.5),)
    """
    totals: dict[str, float] = {}
    for container in pod.get("spec", {}).get("containers", []):
        for resource, amount in ((container.get("resources") or {}).get("requests") or {}).items():
            if resource.startswith(GPU_RESOURCE_PREFIX):
                totals[resource] = totals.get(resource, 0) + int(amount)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if KAI_FRACTION in annotations:
        totals[KAI_SHARE] = float(annotations[KAI_FRACTION]) * int(annotations.get(KAI_FRACTION_DEVICES, "1"))
    return tuple(sorted(totals.items()))


def pod_run(pod: Mapping[str, Any], deleted_at: datetime.datetime | None = None) -> PodRun:
    """What a pod (as the API serves it, camelCase) ran: from `status.startTime` (kwok's Running) to
    its containers' `finishedAt`, else to when its deletion was asked (deletionTimestamp less the
    grace period: a preempted pod stops there), else to `deleted_at` if it is gone.

    >>> p = {"metadata": {"namespace": "eval", "name": "p"}, "spec": {"nodeName": "n", "containers": []},
    ...      "status": {"startTime": "2026-01-01T00:00:00Z", "containerStatuses": [
    ...          {"state": {"terminated": {"finishedAt": "2026-01-01T00:00:04Z"}}}]}}
    >>> pod_run(p).seconds
    4.0
    """
    meta, status = pod["metadata"], pod.get("status") or {}
    finished = [_time(s["state"]["terminated"].get("finishedAt")) for s in status.get("containerStatuses") or []
                if (s.get("state") or {}).get("terminated")]
    end = max(finished) if finished and all(finished) else None
    if end is None and meta.get("deletionTimestamp"):
        end = _time(meta["deletionTimestamp"]) - datetime.timedelta(seconds=meta.get("deletionGracePeriodSeconds") or 0)
    start = _time(status.get("startTime"))
    if end is None and start is not None:
        end = deleted_at
    return PodRun(meta["namespace"], meta["name"], pod.get("spec", {}).get("nodeName"), pod_gpus(pod), start, end)


def gpu_seconds(runs: Iterable[PodRun], tenant_of: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """GPU-seconds by tenant and resource: each run's seconds times the devices it held.

    >>> t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    >>> run = PodRun("eval", "p", "n", (("nvidia.com/gpu", 4),), t0, t0 + datetime.timedelta(seconds=3))
    >>> gpu_seconds([run, run], {"eval": "eval"})
    {'eval': {'nvidia.com/gpu': 24.0}}
    """
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        tenant = tenant_of.get(run.namespace)
        if tenant is None:
            continue
        for resource, count in run.gpus:
            per = out.setdefault(tenant, {})
            per[resource] = per.get(resource, 0.0) + count * run.seconds
    return {t: dict(sorted(r.items())) for t, r in sorted(out.items())}


class PodLedger:
    """Every pod of the cluster as last seen, kept after it is deleted: a watch in a thread."""

    def __init__(self, cp: ControlPlane) -> None:
        from kubernetes import client as k8s_client

        self.api = cp.client_for("e2e-ledger", ["system:masters"])   # its own connection pool
        self.core = k8s_client.CoreV1Api(self.api)
        self.pods: dict[str, tuple[dict[str, Any], datetime.datetime | None]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-ledger", daemon=True)

    def start(self) -> "PodLedger":
        self._thread.start()
        return self

    def _record(self, pod: dict[str, Any], deleted: bool) -> None:
        now = datetime.datetime.now(datetime.timezone.utc) if deleted else None
        with self._lock:
            self.pods[pod["metadata"]["uid"]] = (pod, now)

    def _run(self) -> None:
        from kubernetes import watch

        while not self._stop.is_set():
            try:
                listed = self.core.list_pod_for_all_namespaces()
                for pod in listed.items:
                    self._record(self.api.sanitize_for_serialization(pod), False)
                stream = watch.Watch()
                for event in stream.stream(self.core.list_pod_for_all_namespaces, timeout_seconds=5,
                                           resource_version=listed.metadata.resource_version):
                    self._record(self.api.sanitize_for_serialization(event["object"]), event["type"] == "DELETED")
                    if self._stop.is_set():
                        stream.stop()
            except Exception:   # a watch that expired (410) or a connection reset: list again
                time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def runs(self) -> list[PodRun]:
        """Every pod's run so far; one still running counts up to now."""
        now = datetime.datetime.now(datetime.timezone.utc)
        with self._lock:
            seen = list(self.pods.values())
        return [pod_run(pod, deleted_at or now) for pod, deleted_at in seen]


# --------------------------------------------------------------------------
# The stack and its summary
# --------------------------------------------------------------------------


class RuntimeStack(SchedulingStack):
    """A SchedulingStack whose nodes kwok runs, with the ledger of its pods (`.ledger`)."""

    ledger: PodLedger


def tenant_of(objects: Mapping[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Namespace -> tenant, from the rendered Namespaces (`AppliedStack.objects`: owner -> objects).

    >>> tenant_of({"_platform": [], "eval": [{"kind": "Namespace", "metadata": {"name": "eval"}}]})
    {'eval': 'eval'}
    """
    return {o["metadata"]["name"]: owner for owner, objs in objects.items() if owner != "_platform"
            for o in objs if o["kind"] == "Namespace"}


def event_counts(cp: ControlPlane) -> dict[tuple[str, str], int]:
    """(kind, reason) -> how many distinct objects got such an event, in every namespace."""
    from kubernetes import client as k8s_client

    seen: dict[tuple[str, str], set[str]] = {}
    for e in k8s_client.CoreV1Api(cp.api_client).list_event_for_all_namespaces().items:
        seen.setdefault((e.involved_object.kind, e.reason), set()).add(e.involved_object.uid or e.involved_object.name)
    return {k: len(v) for k, v in seen.items()}


# (kind, event reason) -> what the summary calls it: Kueue's Workload events, the job controller's
# and KAI's (its scheduler evicts a PodGroup to reclaim or preempt).
SUMMARY_EVENTS = {
    ("Workload", "Admitted"): "Jobs admitted by Kueue",
    ("Job", "Completed"): "Jobs finished",
    ("Workload", "Preempted"): "Kueue preemptions",
    ("PodGroup", "Evict"): "KAI evictions",
}


def runtime_summary(what: str, counts: Mapping[tuple[str, str], int], seconds: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The lane summary's lines for one stack. Seconds are per device as the nodes advertise it
    (a GPU, a MIG slice, a time-sliced or MPS replica), not GPU-equivalents: chargeback weighs those.

    >>> runtime_summary("prod", {("Workload", "Admitted"): 3, ("Job", "Completed"): 2},
    ...                 {"eval": {"nvidia.com/gpu": 12.04}})
    ['runtime lane (prod): 3 Jobs admitted by Kueue, 2 Jobs finished, 0 Kueue preemptions, 0 KAI evictions', 'runtime lane (prod): device-seconds eval: nvidia.com/gpu 12.0']
    """
    totals = ", ".join(f"{counts.get(key, 0)} {label}" for key, label in SUMMARY_EVENTS.items())
    lines = [f"runtime lane ({what}): {totals}"]
    for tenant, per in seconds.items():
        lines.append(f"runtime lane ({what}): device-seconds {tenant}: "
                     + ", ".join(f"{resource} {value:.1f}" for resource, value in per.items()))
    return lines


@dataclass(frozen=True)
class StackTotals:
    """What one stack's run added up to, from the cluster's objects: `event_counts` and `gpu_seconds`."""

    what: str
    counts: Mapping[tuple[str, str], int]
    seconds: Mapping[str, Mapping[str, float]]


def summary_table(totals: Iterable[StackTotals]) -> list[str]:
    """The lane summary: one row of SUMMARY_EVENTS counts per stack, then each stack's device-seconds per tenant.

    >>> for line in summary_table([StackTotals("dev", {("Job", "Completed"): 2}, {"eval": {"nvidia.com/gpu": 10.0}})]):
    ...     print(line)
    stack  Jobs admitted by Kueue  Jobs finished  Kueue preemptions  KAI evictions
    dev                         0              2                  0              0
    device-seconds, dev: eval nvidia.com/gpu 10.0
    """
    totals = list(totals)
    width = max([len("stack"), *(len(t.what) for t in totals)])
    lines = ["  ".join(["stack".ljust(width), *SUMMARY_EVENTS.values()])]
    for t in totals:
        lines.append("  ".join([t.what.ljust(width), *(str(t.counts.get(key, 0)).rjust(len(label))
                                                     for key, label in SUMMARY_EVENTS.items())]))
    for t in totals:
        per_tenant = "; ".join(f"{tenant} " + ", ".join(f"{r} {v:.1f}" for r, v in per.items())
                               for tenant, per in t.seconds.items())
        lines.append(f"device-seconds, {t.what}: {per_tenant or 'none'}")
    return lines


def running_runtime_stack(stack: str, e2e_summary: list[str], root: Path = REPO_ROOT, what: str = "",
                          totals: list[StackTotals] | None = None) -> Iterator[RuntimeStack]:
    """A started RuntimeStack for a fixture to yield; after its tests, what it added up to appended to
    `totals` (the lane summary's table, tests/e2e/runtime/conftest.py) or else as lines to `e2e_summary`,
    then it is stopped."""
    for applied in running_scheduling_stack(stack, e2e_summary, root, what, lane="runtime lane",
                                            controllers=RUNTIME_CONTROLLERS, nodes=kwok_nodes):
        applied.ledger = PodLedger(applied.plane.cp).start()
        try:
            yield applied
            done = StackTotals(what or stack, event_counts(applied.plane.cp),
                               gpu_seconds(applied.ledger.runs(), tenant_of(applied.objects)))
            if totals is not None:
                totals.append(done)
            else:
                e2e_summary.extend(runtime_summary(done.what, done.counts, done.seconds))
        finally:
            applied.ledger.stop()
