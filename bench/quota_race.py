"""How far a ResourceQuota's `pods` can be exceeded under churn on a real kube-apiserver (issue #39).

    python -m bench.quota_race --rounds 4 --seconds 15 --quotas 2 > bench/results/quota_race_2.json

Each round: a fresh namespace with a quota of `--hard` pods (and, with `--quotas 2`, a second,
PriorityClass-scoped one, as a tenant's namespace has), 8 clients creating pods for `--seconds`
(every other one of PriorityClass `x`) while 2 more delete the `x` pods, so the quota controller's
replenishments race the admissions' charges. A watch records how many pods exist at each resource
version; a round's `peak` above `hard` is an over-admission that really existed. Prints JSON.
The control plane is the e2e lane's (tools/control_plane.py, binaries from tools/build.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from kubernetes import client
from kubernetes.client.rest import ApiException

from tools.control_plane import BIN_DIR, ControlPlane
from tools.pod_census import PodCensus, reap


def _pod(priority_class: str | None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "registry.invalid/a:1"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{uuid.uuid4().hex[:8]}", "labels": {"class": priority_class or "none"}},
            "spec": spec}


def _quotas(core: client.CoreV1Api, namespace: str, hard: int, count: int) -> None:
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "budget"}, "spec": {"hard": {"pods": str(hard)}}})
    if count > 1:
        core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "priority-x"}, "spec": {
            "hard": {"pods": "1000"},
            "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["x"]}]}}})


def _round(cp: ControlPlane, index: int, hard: int, quotas: int, seconds: float) -> dict:
    core = client.CoreV1Api(cp.api_client)
    namespace = f"race-{index}"
    core.create_namespace({"metadata": {"name": namespace}})
    _quotas(core, namespace, hard, quotas)
    cp.wait_for(lambda: all(q.status and q.status.hard for q in core.list_namespaced_resource_quota(namespace).items))
    stop, counts, lock = threading.Event(), {"admitted": 0, "refused": 0}, threading.Lock()
    census = PodCensus(client.CoreV1Api(cp.client_for("census", ["system:masters"])), namespace, seconds + 10)
    time.sleep(0.5)

    def create(worker: int) -> None:
        api, n = client.CoreV1Api(cp.client_for(f"creator-{worker}", ["system:masters"])), 0
        while not stop.is_set():
            try:
                api.create_namespaced_pod(namespace, _pod("x" if (worker + n) % 2 else None))
                key = "admitted"
            except ApiException:
                key = "refused"
            n += 1
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)] + [
        threading.Thread(target=reap, args=(client.CoreV1Api(cp.client_for(f"reaper-{i}", ["system:masters"])), namespace,
                                            "class=x", stop, i)) for i in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    core.delete_namespace(namespace)
    census.join()
    return {"round": index, "peak": census.peak["pods"], "hard": hard, **counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--hard", type=int, default=6)
    parser.add_argument("--quotas", type=int, choices=(1, 2), default=2)
    args = parser.parse_args(argv)
    cp = ControlPlane(BIN_DIR, Path(tempfile.mkdtemp(prefix="quota-race-")))
    cp.start()
    try:
        client.SchedulingV1Api(cp.api_client).create_priority_class(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 1000})
        rounds = [_round(cp, i, args.hard, args.quotas, args.seconds) for i in range(args.rounds)]
    finally:
        cp.stop()
    over = [r for r in rounds if r["peak"] > r["hard"]]
    json.dump({"quotas_per_namespace": args.quotas, "seconds": args.seconds, "rounds": rounds,
               "rounds_over_hard": len(over), "load_average": os.getloadavg()[0]}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
