"""The runtime lane at fleet size (issue 36 item 4): N tenants, their GPU nodes on kwok, J Jobs run to the end.

    .venv/bin/python -m bench.scale [--tenants 1000] [--jobs 20000] [--seconds 30] [--out FILE]

The fleet is tools/synthetic.py's (N tenants; for 1,000 of them 515 GPU nodes: H100 whole GPUs, L4
time-sliced shares, A100 MIG 1g.10gb slices; its quotas about 80% of the pools), applied as
`tenants render` builds it to the runtime plane (tools/runtime.py: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, Kueue, JobSet, kwok as every node's kubelet), the
controllers' client rate limits raised (`UNTHROTTLED`, as kwokctl does for its scale clusters).
Then every tenant submits J/N Jobs at once to its LocalQueue, one pod each, asking one device of
its classes in turn (an H100, an L4 share, a MIG slice), each running `--seconds` on kwok; Kueue
admits them up to the tenant's quota, the next ones as the first finish.

Measured, each from the component that knows it: the plane's start and the stack's apply; the
Workloads admitted per second (Kueue's `Admitted` condition seen on a watch), overall (first
submission to last admission) and steady (between the 10th and 90th percentile admission); the
Jobs finished (Workload `Finished`) and preempted; the CPU seconds and peak resident memory
(VmHWM) of each process of the plane, and this process's; the load average. Prints one JSON line
and writes it to `--out`. Kueue's own scheduler performance test (its module's
test/performance/scheduler/configs) is beside it in `kueue_published`: it runs Kueue's core
controllers alone on envtest, Workloads without pods or nodes. Exit code 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from components.simulate.trace import TraceJob
from tools.runtime import RUNTIME_CONTROLLERS, UNTHROTTLED, kwok_nodes
from tools.scheduling import KUEUE_VERSION, start_scheduling_stack
from tools.simulation import WorkloadWatch, job_body, queues_of, unavailable_reason
from tools.synthetic import H100_PER_TENANT, L4_PER_TENANT, MIG_PER_TENANT, STACK, tenant_name, write_project

CLASSES = ("h100", "l4", "1g.10gb")   # the synthetic fleet's three ways to a device
SUBMITTERS = 8
PROGRESS_SECONDS = 30.0
# Kueue's published scheduler performance test at KUEUE_VERSION (test/performance/scheduler/configs/
# */rangespec.yaml and generator.yaml): Workloads only, on envtest with its core controllers.
KUEUE_PUBLISHED = {
    "source": f"sigs.k8s.io/kueue@{KUEUE_VERSION} test/performance/scheduler/configs",
    "baseline": {"cluster_queues": 30, "workloads": 15000, "mean_wall_seconds": 351.1, "workloads_per_second": 42.7},
    "large-scale": {"cluster_queues": 1000, "workloads": 50000, "mean_wall_seconds": 1179.4, "workloads_per_second": 42.4},
}


def jobs_of(tenants: int, jobs: int, seconds: float) -> list[TraceJob]:
    """`jobs` one-pod Jobs spread over `tenants`, each tenant's asking CLASSES in turn.

    >>> [(j.tenant, j.gpu) for j in jobs_of(2, 4, 30)]
    [('team-00000', 'h100'), ('team-00001', 'h100'), ('team-00000', 'l4'), ('team-00001', 'l4')]
    """
    return [TraceJob(tenant=tenant_name(i % tenants), submit=0, gpu=CLASSES[(i // tenants) % len(CLASSES)], count=1,
                     duration=seconds, name=f"scale-{i:05d}") for i in range(jobs)]


def rates(submitted_at: float, admitted: list[float]) -> dict[str, float]:
    """Admissions per second: overall (from the first submission) and steady (10th to 90th percentile).

    >>> rates(0.0, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    {'overall_per_second': 1.0, 'steady_per_second': 1.0}
    """
    if not admitted:
        return {"overall_per_second": 0.0, "steady_per_second": 0.0}
    times = sorted(admitted)
    low, high = times[len(times) // 10], times[(len(times) * 9) // 10 - 1]
    steady = ((len(times) * 9) // 10 - 1 - len(times) // 10) / (high - low) if high > low else 0.0
    return {"overall_per_second": round(len(times) / max(times[-1] - submitted_at, 1e-9), 2),
            "steady_per_second": round(steady, 2)}


def _peak_memory_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _submit(cp: Any, applied: Any, jobs: list[TraceJob], watch: WorkloadWatch) -> tuple[set[tuple[str, str]], list[str]]:
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException

    batch = k8s_client.BatchV1Api(cp.api_client)
    queues = queues_of(applied.objects)
    created: set[tuple[str, str]] = set()
    refused: list[str] = []

    def create(index: int, job: TraceJob) -> None:
        namespace, queue = queues[job.tenant]
        body = job_body(job, index, queue, applied.environment, 1.0)
        try:
            batch.create_namespaced_job(namespace, body)
            created.add((namespace, body["metadata"]["name"]))
        except ApiException as exc:
            refused.append(f"{namespace}/{body['metadata']['name']}: {exc.status} {exc.reason}")

    with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
        list(pool.map(lambda p: create(*p), enumerate(jobs)))
    return created, refused


def _wait(watch: WorkloadWatch, created: set[tuple[str, str]], timeout: float, started: float) -> bool:
    last = 0.0
    while time.monotonic() - started < timeout:
        with watch._lock:
            finished, admitted = len(watch.finished & created), len(set(watch.admitted) & created)
        if finished >= len(created):
            return True
        if time.monotonic() - last >= PROGRESS_SECONDS:
            last = time.monotonic()
            print(f"bench.scale: {time.monotonic() - started:.0f}s: {admitted} admitted, {finished} finished "
                  f"of {len(created)}; load {os.getloadavg()[0]:.1f}", flush=True)
        time.sleep(1.0)
    return False


def measure(tenants: int, jobs: int, seconds: float, timeout: float) -> dict[str, Any]:
    """Start the fleet's runtime plane, run the Jobs to the end (or `timeout`), return the figures."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    try:
        root = write_project(scratch / "project", tenants)
        t0 = time.monotonic()
        applied = start_scheduling_stack(STACK, scratch / "plane", root, controllers=RUNTIME_CONTROLLERS,
                                         nodes=kwok_nodes, flags=UNTHROTTLED)
        cp = applied.plane.cp
        try:
            up = time.monotonic() - t0
            print(f"bench.scale: {tenants} tenants, {len(applied.node_pool)} nodes up in {up:.0f}s "
                  f"({', '.join(f'{k} {v:.0f}s' for k, v in applied.timings.items())})", flush=True)
            cpu_before, load_before = cp.cpu_seconds(), os.getloadavg()
            watch = WorkloadWatch(cp).start()
            started = time.monotonic()
            created, refused = _submit(cp, applied, jobs_of(tenants, jobs, seconds), watch)
            submitted = time.monotonic() - started
            done = _wait(watch, created, timeout, started)
            wall = time.monotonic() - started
            watch.stop()
            cpu_after = cp.cpu_seconds()
            admitted = [at for key, at in watch.admitted.items() if key in created]
            return {
                "tenants": tenants, "nodes": len(applied.node_pool), "jobs": jobs, "job_seconds": seconds,
                "objects": len(applied.all_objects),
                "plane_up_seconds": round(up, 1), "plane_timings": {k: round(v, 1) for k, v in applied.timings.items()},
                "submitted_seconds": round(submitted, 1), "created": len(created), "refused": refused[:20],
                "admitted": len(admitted), "finished": len(watch.finished & created),
                "preempted": sum(1 for key in watch.preempted if key in created), "all_finished": done,
                "run_wall_seconds": round(wall, 1), "admission": rates(started, admitted),
                "floor_wall_seconds": floor(jobs, tenants, seconds),
                "cpu_seconds": {n: round(cpu_after[n] - cpu_before.get(n, 0.0), 1) for n in sorted(cpu_after)},
                "peak_memory_mb": {p.name: _peak_memory_mb(p.popen.pid) for p in cp._procs if p.alive()},
                "bench_peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "load_average": {"before": [round(x, 1) for x in load_before], "after": [round(x, 1) for x in os.getloadavg()]},
                "cpus": os.cpu_count(), "kueue_published": KUEUE_PUBLISHED,
            }
        finally:
            cp.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def floor(jobs: int, tenants: int, seconds: float) -> float:
    """The run's wall time if admission and start were instant: the busiest tenant runs as many of
    its Jobs at once as its quota of each class allows (tools/synthetic: 2 H100, 1 L4 share, 2 MIG
    slices), one wave after the other.

    >>> floor(30, 3, 30.0)   # 10 Jobs a tenant: 4 H100 (2 waves), 3 L4 (3 waves), 3 MIG (2 waves)
    90.0
    """
    busiest = -(-jobs // tenants)
    quotas = dict(zip(CLASSES, (H100_PER_TENANT, L4_PER_TENANT, MIG_PER_TENANT)))
    waves = max(-(-sum(1 for k in range(busiest) if CLASSES[k % len(CLASSES)] == c) // quota) for c, quota in quotas.items())
    return float(waves * seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=30.0, help="each Job's run on kwok")
    parser.add_argument("--timeout", type=float, default=5400.0, help="wall seconds to wait for the Jobs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        raise SystemExit(reason.replace("tenants simulate", "bench.scale"))
    figures = measure(args.tenants, args.jobs, args.seconds, args.timeout)
    line = json.dumps(figures, sort_keys=True)
    print(line)
    if args.out:
        args.out.write_text(line + "\n")


if __name__ == "__main__":
    main()
