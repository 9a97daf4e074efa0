"""A rename with an admitted workload, on a real Kueue: the generated objects applied in the order
`pulumi up` applies them (creates and updates, objects that cannot change in place replaced, then
the deletes, each awaited as the engine awaits it) complete, instead of waiting on Kueue's finalizer.

A copy of the prod example renames llm-finetune to finetune (docs/renaming.md) while a Job of
llm-finetune is admitted. The old ClusterQueue is kept, stopped with `stopPolicy: HoldAndDrain`:
Kueue evicts the Job, which requeues through the (replaced) LocalQueue to finetune's ClusterQueue
and is admitted there; the drained queue is then deleted at once, while a ClusterQueue deleted
with an admitted workload stays, held by Kueue's finalizer (what made `pulumi up` hang).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.scheduling.jobs import KUEUE, Jobs, job, wait_or_explain
from tests.project_edits import rename_llm_finetune
from tools.applied_stack import AppliedStack
from tools.control_plane import REPO_ROOT
from tools.scheduling import SchedulingStack, running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

OLD, NEW = "llm-finetune", "finetune"
ENGINE_DELETE_WAIT = 60.0   # far below the engine's own timeout: a finalizer hold would show


def _copy(root: Path) -> Path:
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    return root


@pytest.fixture(scope="module")
def lifecycle_stack(e2e_summary: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulingStack]:
    root = _copy(tmp_path_factory.mktemp("lifecycle") / "project")
    yield from running_scheduling_stack("prod", e2e_summary, root, what="prod, for a rename")


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"]


class Cluster:
    def __init__(self, stack: SchedulingStack) -> None:
        self.cp = stack.plane.cp
        self.core = client.CoreV1Api(self.cp.api_client)
        self.custom = client.CustomObjectsApi(self.cp.api_client)

    def reap(self, namespace: str) -> None:
        """Confirm the end of terminating pods, as a kubelet would (none runs here)."""
        for pod in self.core.list_namespaced_pod(namespace).items:
            if pod.metadata.deletion_timestamp:
                try:
                    self.core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
                except ApiException as exc:
                    if exc.status != 404:
                        raise

    def cluster_queue(self, name: str) -> dict | None:
        try:
            return self.custom.get_cluster_custom_object(KUEUE[0], KUEUE[1], "clusterqueues", name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def get(self, obj: dict[str, Any]) -> Any:
        res = self.cp.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            return self.cp.dynamic.get(res, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def delete_and_wait(self, obj: dict[str, Any], timeout: float) -> float | None:
        """Delete as the engine does and wait until the object is gone: seconds taken, None on timeout."""
        res = self.cp.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        start = time.monotonic()
        try:
            self.cp.dynamic.delete(res, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        except ApiException as exc:
            if exc.status != 404:
                raise
        while time.monotonic() - start < timeout:
            if self.get(obj) is None:
                return time.monotonic() - start
            time.sleep(0.5)
        return None


def _apply_like_the_engine(cluster: Cluster, before: list[dict], after: list[dict]) -> dict[str, float | None]:
    """Creates and updates in order (a field that cannot change in place: delete, then create), then the
    deletes of what is no longer generated, in reverse order; returns the seconds each delete took."""
    for obj, result in cluster.cp.apply_rendered(after):
        if isinstance(result, ApiException):
            assert result.status == 422 and "immutable" in (result.body or ""), f"{_key(obj)}: {result.body}"
            assert cluster.delete_and_wait(obj, ENGINE_DELETE_WAIT) is not None, f"replacing {_key(obj)} hung"
            ((_, again),) = cluster.cp.apply_rendered([obj])
            assert not isinstance(again, ApiException), f"{_key(obj)}: {again.body}"
    kept = {_key(o) for o in after}
    taken: dict[str, float | None] = {}
    for obj in reversed(before):
        if _key(obj) not in kept and obj["kind"] != "Node":
            taken["/".join(_key(obj)[1:])] = cluster.delete_and_wait(obj, ENGINE_DELETE_WAIT)
    return taken


def test_renaming_a_tenant_with_an_admitted_workload_does_not_wait_on_kueue(lifecycle_stack, tmp_path):
    cluster = Cluster(lifecycle_stack)
    jobs = Jobs(lifecycle_stack)
    name = jobs.submit(OLD, job({"nvidia.com/gpu": 1}))
    jobs.wait_bound(OLD, name, 1)
    assert jobs.workload(OLD, name)["status"]["admission"]["clusterQueue"] == OLD

    head = _copy(tmp_path / "head")
    rename_llm_finetune(head)
    _, objects = AppliedStack.render("prod", head)
    after = [o for objs in objects.values() for o in objs]
    stopped = next(o for o in after if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == OLD)
    assert stopped["spec"] == {"stopPolicy": "HoldAndDrain"}

    taken = _apply_like_the_engine(cluster, lifecycle_stack.all_objects, after)
    assert taken and None not in taken.values(), f"deletes that waited over {ENGINE_DELETE_WAIT}s: {taken}"
    assert not any(key.startswith("ClusterQueue/") for key in taken)   # the old queue was updated, not deleted

    def drained() -> bool:
        cluster.reap(OLD)
        queue = cluster.cluster_queue(OLD)
        workload = jobs.workload(OLD, name)
        readmitted = ((workload or {}).get("status", {}).get("admission") or {}).get("clusterQueue") == NEW
        return bool(queue) and queue.get("status", {}).get("admittedWorkloads", 0) == 0 and readmitted

    wait_or_explain(cluster.cp, drained, f"ClusterQueue {OLD} drained, the Job admitted by {NEW}",
                    lambda: f"{cluster.cluster_queue(OLD)}\n{jobs.explain(OLD, name)}", 120)
    jobs.wait_bound(OLD, name, 1)   # its new pod, through the new queue

    # The next `pulumi up` after the name leaves previousNames: the drained queue goes at once.
    assert cluster.delete_and_wait(stopped, 30) is not None
    # What a delete with an admitted workload does instead: Kueue's finalizer holds it.
    busy = next(o for o in after if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == NEW)
    assert cluster.delete_and_wait(busy, 15) is None
    assert "kueue.x-k8s.io/resource-in-use" in cluster.cluster_queue(NEW)["metadata"]["finalizers"]
