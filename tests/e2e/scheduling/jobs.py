"""Submitting Jobs to a tenant's LocalQueue and watching what Kueue, the job controller and
kube-scheduler make of them (helpers of the scheduling lane's tests)."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from tools.control_plane import pod_usage

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = ("kueue.x-k8s.io", "v1beta2")


def job(resources: dict[str, int], *, parallelism: int = 1, node_selector: dict | None = None,
        queue: str | None = "default") -> dict[str, Any]:
    """A Job whose pods satisfy Pod Security `restricted` and carry no placement of their own."""
    values = {"cpu": "100m", "memory": "128Mi", **{r: str(n) for r, n in resources.items()}}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "main", "image": "registry.invalid/cuda:12",   # never pulled: no kubelet
            "resources": {"requests": dict(values), "limits": dict(values)},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }],
    }
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    meta: dict[str, Any] = {"name": f"e2e-{uuid.uuid4().hex[:8]}"}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                     "template": {"spec": pod_spec}}}


def wait_or_explain(cp: Any, predicate: Any, what: str, explain: Any, timeout: float) -> Any:
    """`cp.wait_for(predicate)`; on timeout an AssertionError that adds `explain()` (events, status) to the message.

    >>> wait_or_explain(cp, lambda: pod.spec.node_name, "pod bound", lambda: "no node fits", 90)   # doctest: +SKIP
    """
    try:
        return cp.wait_for(predicate, timeout=timeout, interval=0.5, what=what)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{explain()}") from None


def event_lines(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    """`Kind/name: reason: message` of every event in `namespace` about an object whose name contains `name`.

    >>> event_lines(core, "eval", "e2e-1234")   # doctest: +SKIP
    ['Pod/e2e-1234-x7k: FailedScheduling: 0/12 nodes are available: ...']
    """
    return [f"{e.involved_object.kind}/{e.involved_object.name}: {e.reason}: {e.message}"
            for e in core.list_namespaced_event(namespace).items if name in (e.involved_object.name or "")]


class Jobs:
    """Submit Jobs as the tenant's developers would; deleted (with pods and Workloads) after the test."""

    KIND = "Job"   # the kind a Workload names as its owner

    def __init__(self, stack) -> None:
        self.stack = stack
        self.cp = stack.plane.cp
        self.batch = client.BatchV1Api(self.cp.api_client)
        self.core = client.CoreV1Api(self.cp.api_client)
        self.created: list[tuple[str, str]] = []
        self.quota_used_before: dict[str, dict] = {}

    def submit(self, namespace: str, body: dict) -> str:
        self.quota_used_before.setdefault(namespace, self.cp.quota_used(namespace))
        self.batch.create_namespaced_job(namespace, body)
        self.created.append((namespace, body["metadata"]["name"]))
        return body["metadata"]["name"]

    def pods(self, namespace: str, name: str) -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items

    def workload(self, namespace: str, name: str) -> dict | None:
        res = self.cp.dynamic.resources.get(api_version="/".join(KUEUE), kind="Workload")
        for wl in self.cp.dynamic.get(res, namespace=namespace).to_dict()["items"]:
            if any(o["kind"] == self.KIND and o["name"] == name for o in wl["metadata"].get("ownerReferences", [])):
                return wl
        return None

    def condition(self, namespace: str, name: str, kind: str) -> dict | None:
        wl = self.workload(namespace, name)
        for c in (wl or {}).get("status", {}).get("conditions", []):
            if c["type"] == kind:
                return c
        return None

    def wait_bound(self, namespace: str, name: str, count: int, timeout: float = 90) -> list[client.V1Pod]:
        def bound():
            pods = self.pods(namespace, name)
            return pods if len(pods) == count and all(p.spec.node_name for p in pods) else None

        return wait_or_explain(self.cp, bound, f"{count} bound pods of job {namespace}/{name}",
                               lambda: self.explain(namespace, name), timeout)

    def wait_pending_in_queue(self, namespace: str, name: str, timeout: float = 60) -> dict:
        """Until Kueue has looked at the Workload and not reserved quota for it (the reason is in the message)."""
        def evaluated():
            c = self.condition(namespace, name, "QuotaReserved")
            return c if c and c["status"] == "False" and c.get("message") else None

        return wait_or_explain(self.cp, evaluated, f"Kueue to evaluate {namespace}/{name}",
                               lambda: self.explain(namespace, name), timeout)

    def explain(self, namespace: str, name: str) -> str:
        """Events and workload status, to say why a job is not where the test expected it."""
        lines = event_lines(self.core, namespace, name)
        wl = self.workload(namespace, name)
        lines.append(f"workload status: {(wl or {}).get('status')}")
        for pod in self.pods(namespace, name):
            lines.append(f"pod {pod.metadata.name}: node={pod.spec.node_name} conditions={pod.status.conditions}")
        return "\n".join(lines)

    def delete(self, namespace: str, name: str) -> None:
        self.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")

    def cleanup(self) -> None:
        for namespace, name in self.created:
            try:
                self.delete(namespace, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        # Pods bound to a node wait for its kubelet to confirm their end; there is none, so delete
        # them at once (what the pod GC controller does for pods on nodes that are gone).
        for namespace, name in self.created:
            for pod in self.pods(namespace, name):
                try:
                    self.core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
        for namespace, name in self.created:
            self.cp.wait_for(lambda n=namespace, j=name: not self.pods(n, j) and self.workload(n, j) is None,
                             timeout=60, interval=0.5, what=f"pods and Workload of {self.KIND} {namespace}/{name} deleted")
        # The quota controller releases their usage asynchronously: the next test's pods in the
        # namespace would otherwise be refused (and the job controller retry them with backoff).
        for namespace, used in self.quota_used_before.items():
            self.cp.wait_for(lambda n=namespace, u=pod_usage(used): pod_usage(self.cp.quota_used(n)) == u, timeout=60, interval=0.5,
                             what=f"quota of {namespace} released after the test's jobs")


