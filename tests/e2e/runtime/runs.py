"""Jobs that run for a stated time on kwok's nodes, and what the cluster says of them (helpers of the
runtime lane's tests)."""

from __future__ import annotations

from typing import Any

from tests.e2e.scheduling.jobs import KUEUE, Jobs, job, wait_or_explain
from tools.runtime import run_for

# The grace period of the lane's pods: kwok removes a deleted pod when it is over, and the
# default 30 s would hold a preempted Job's GPUs that long.
GRACE_SECONDS = 1
# The job controller counts a pod deleted while running as failed, also when Kueue suspends the Job
# to preempt it: at `jobs.job`'s backoffLimit 0 a preempted Job would fail instead of being requeued.
BACKOFF_LIMIT = 6   # Kubernetes' default


def timed_job(resources: dict[str, int], seconds: float, *, parallelism: int = 1, priority_class: str | None = None,
              queue: str | None = "default", node_selector: dict | None = None,
              tolerations: list[dict] | None = None) -> dict[str, Any]:
    """`jobs.job` whose pods kwok runs for `seconds` and then completes.

    >>> timed_job({"nvidia.com/gpu": 1}, 3)["spec"]["template"]["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"]
    '3s'
    """
    body = job(resources, parallelism=parallelism, node_selector=node_selector, queue=queue)
    body["spec"]["backoffLimit"] = BACKOFF_LIMIT
    template = body["spec"]["template"]
    template["metadata"] = {"annotations": run_for(seconds)}
    template["spec"]["terminationGracePeriodSeconds"] = GRACE_SECONDS
    if priority_class:
        template["spec"]["priorityClassName"] = priority_class
    if tolerations:
        template["spec"]["tolerations"] = tolerations
    return body


class RuntimeJobs(Jobs):
    """`Jobs` that also wait for what only a running cluster does: pods Running, Jobs finishing."""

    def workload(self, namespace: str, name: str) -> dict | None:
        """The Job's Workload; None on a stack without Kueue (whose API the plane then does not serve)."""
        if self.stack.environment.platform.scheduler != "kueue":
            return None
        return super().workload(namespace, name)

    def wait_pod_phase(self, namespace: str, name: str, phase: str, count: int, timeout: float = 60) -> list[Any]:
        """Until `count` pods of the Job are in `phase`; returns them."""
        def reached():
            pods = [p for p in self.pods(namespace, name) if p.status.phase == phase]
            return pods if len(pods) >= count else None

        return wait_or_explain(self.cp, reached, f"{count} {phase} pods of job {namespace}/{name}",
                               lambda: self.explain(namespace, name), timeout)

    def wait_condition(self, namespace: str, name: str, kind: str, status: str = "True", timeout: float = 60) -> dict:
        """Until the Job's Workload has condition `kind` at `status`; returns the condition."""
        def reached():
            c = self.condition(namespace, name, kind)
            return c if c and c["status"] == status else None

        return wait_or_explain(self.cp, reached, f"Workload of {namespace}/{name} {kind}={status}",
                               lambda: self.explain(namespace, name), timeout)

    def wait_complete(self, namespace: str, name: str, timeout: float = 60) -> Any:
        """Until the job controller marks the Job Complete; returns the Job."""
        def complete():
            j = self.batch.read_namespaced_job(name, namespace)
            return j if any(c.type == "Complete" and c.status == "True" for c in j.status.conditions or []) else None

        return wait_or_explain(self.cp, complete, f"job {namespace}/{name} Complete",
                               lambda: self.explain(namespace, name), timeout)

    def cluster_queue_usage(self, queue: str, flavor: str, resource: str) -> dict[str, str]:
        """`total` and `borrowed` of one resource of one flavor in the ClusterQueue's status ("0" when absent)."""
        cq = self.cp.get_object({"apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": queue}})
        for f in cq.get("status", {}).get("flavorsUsage", []):
            for r in f["resources"] if f["name"] == flavor else []:
                if r["name"] == resource:
                    return {"total": r.get("total", "0"), "borrowed": r.get("borrowed", "0")}
        return {"total": "0", "borrowed": "0"}

    def wait_cluster_queue_usage(self, queue: str, flavor: str, resource: str, total: str, timeout: float = 60) -> dict:
        """Until the ClusterQueue reports `total` of the resource in use (its status follows admission shortly)."""
        return wait_or_explain(
            self.cp, lambda: (u := self.cluster_queue_usage(queue, flavor, resource))["total"] == total and u,
            f"ClusterQueue {queue} using {total} {resource} of {flavor}",
            lambda: f"usage: {self.cluster_queue_usage(queue, flavor, resource)}", timeout)

    def quota_gpus(self, namespace: str, key: str, quota: str = "tenant-quota") -> str:
        """`status.used[key]` of the namespace's ResourceQuota `quota`."""
        return self.cp.quota_used(namespace)[quota].get(key, "0")

    def wait_quota(self, namespace: str, key: str, value: str, timeout: float = 60) -> str:
        """Until the ResourceQuota's usage of `key` is `value` (the quota controller follows pods shortly)."""
        return wait_or_explain(self.cp, lambda: self.quota_gpus(namespace, key) == value and value,
                               f"{namespace}'s ResourceQuota using {key}={value}",
                               lambda: f"used: {self.quota_gpus(namespace, key)}", timeout)
