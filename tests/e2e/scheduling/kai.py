"""The real KAI Scheduler on the scheduling lane's control plane (stacks with `scheduler: kai`).

`tools/build.sh kai` builds KAI's scheduler, binder and pod-grouper from the source snapshot
`tools/versions.env` pins (`KAI_SOURCE`, checked against `KAI_SOURCE_SHA256`, extracted into the
cache, never into the checkout). On top of a `SchedulingStack` (control plane, kube-scheduler,
Ready nodes with GPU capacity, the stack's objects applied) this:

* installs every CRD of KAI's chart (`deployments/kai-scheduler/crds` of that snapshot: Queue,
  PodGroup, BindRequest, Topology and the operator's Config/SchedulingShard). The Queue CRD is the
  one `components/data/kai-scheduler` vendors (a test checks they are the same bytes);
* starts the three processes the operator would deploy, each with its own kubeconfig, leader
  election off (their default), every listener on a free loopback port:
  - **pod-grouper**: creates a PodGroup for every pod with `schedulerName: kai-scheduler`, its
    `spec.queue` from the `kai.scheduler/queue` label of the pod's top owner, else of the pod,
    else `default-queue`;
  - **scheduler** (`--scheduler-conf` unset: KAI's built-in default actions and plugins, the
    ones the operator writes for a default SchedulingShard): allocates PodGroups through their
    queues (proportion plugin: quota, over-quota weight, limit) onto nodes whose predicates
    (node selector, taints, resources) fit, and records each decision as a BindRequest;
  - **binder**: turns BindRequests into the pod's `binding`;
* no admission webhook runs: KAI's (GPU-sharing mutation of fraction pods, Queue and Topology
  validation) matter only to fraction pods, which this lane does not submit (the runtime lane does,
  shaped as the webhook leaves them: tests/e2e/runtime/kai_shares.py).

Whole-GPU pods need nothing else: the binder reserves GPUs (reservation pods, which only a
kubelet would run) only for fractional requests; on the runtime lane kwok runs them and
tools/kai_reservation.py publishes the GPU each holds, as their program would.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.e2e.scheduling.borrowing import RESEARCH
from tests.e2e.scheduling.jobs import event_lines, wait_or_explain
from tests.project_edits import replace_once
from tools.control_plane import REPO_ROOT
from tools.kai import BINDREQUEST_VERSION, GROUP, KAI_VERSION, PODGROUP_VERSION, SCHEDULER_NAME, KaiScheduler, kai_unavailable_reason
from tools.scheduling import REQUIRED_ENV, SchedulingStack, running_scheduling_stack


def require_kai(required_env: str) -> None:
    """Skip, saying what to build, when KAI's binaries are missing; with `required_env`=1 (the lane's
    make target sets it) fail instead, so a lane cannot pass by skipping."""
    reason = kai_unavailable_reason()
    if reason:
        if os.environ.get(required_env) == "1":
            pytest.fail(f"{required_env}=1 but {reason}")
        pytest.skip(reason)


def running_kai_stack(stack: str, e2e_summary: list[str], root: Path = REPO_ROOT, what: str = "") -> Iterator[SchedulingStack]:
    """A scheduling stack (control plane, kube-scheduler, Ready nodes, the stack applied) plus KAI.

    Skips with the reason when KAI is not built; with GPU_TENANCY_SCHEDULING_REQUIRED=1 (`make
    e2e-scheduling`) that is a failure instead, so the lane cannot pass by skipping.
    """
    require_kai(REQUIRED_ENV)
    for applied in running_scheduling_stack(stack, e2e_summary, root, what):
        try:
            seconds = KaiScheduler(applied.plane.cp).start()
        except BaseException:
            applied.plane.cp.stop()
            raise
        e2e_summary.append(f"scheduling lane ({what or stack}): KAI Scheduler {KAI_VERSION} started in {seconds:.1f}s")
        yield applied


# --------------------------------------------------------------------------
# Pods submitted to KAI as a tenant member would, and what KAI made of them
# --------------------------------------------------------------------------


def kai_pod(gpus: int, *, queue: str | None, selector: dict | None = None, toleration: dict | None = None,
            labels: dict | None = None) -> dict[str, Any]:
    """A whole-GPU pod for KAI (Pod Security `restricted`), in `queue` unless None.

    >>> kai_pod(1, queue="eval")["spec"]["schedulerName"]
    'kai-scheduler'
    """
    import uuid

    from components.manifests.meta import GPU_TAINT_TOLERATION

    values = {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "registry.invalid/cuda:12",   # never pulled: no kubelet
                        "resources": {"requests": dict(values), "limits": dict(values)},
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    }
    if selector:
        spec["nodeSelector"] = selector
    # On a KAI stack no Kueue flavor adds the shared GPU pools' taint toleration: the tenant's GPU pod
    # carries it (docs/gpu-sharing.md), as the placement policy allows for pods that request GPUs.
    tolerations = [dict(GPU_TAINT_TOLERATION)] if gpus else []
    if toleration:
        tolerations.append(toleration)
    if tolerations:
        spec["tolerations"] = tolerations
    meta_labels = dict(labels or {})
    if queue is not None:
        meta_labels["kai.scheduler/queue"] = queue
    meta: dict[str, Any] = {"name": f"e2e-kai-{uuid.uuid4().hex[:8]}"}
    if meta_labels:
        meta["labels"] = meta_labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def developer_of(stack: Any, tenant: str) -> tuple[str, list[str]]:
    """(user, groups) of one of the tenant's developers, as the stack grants them."""
    groups = stack.tenant(tenant).access.developers.groups
    assert groups, f"tenant {tenant} has no developer group to act as"
    return f"e2e-dev-{tenant}", [groups[0]]


def on_pool(stack: Any, tenant: str, pool: str) -> dict[str, Any]:
    """`kai_pod` arguments that target one pool: its nodeSelector and, on a dedicated pool, the toleration.

    >>> sorted(on_pool(stack, "eval", "a100-shared"))   # doctest: +SKIP
    ['selector', 'toleration']
    """
    from components.manifests.meta import pool_label, tenant_label
    from components.manifests.placement_policy import placement

    platform = stack.environment.platform
    spec = stack.tenant(tenant)
    allowed = placement(spec, stack.environment.view(spec))
    toleration = ({"key": tenant_label(platform), "operator": "Equal", "value": tenant, "effect": "NoSchedule"}
                  if pool in allowed.dedicated_pools else None)
    return {"selector": {pool_label(platform): pool}, "toleration": toleration}


class KaiPods:
    """Pods created as a tenant's developer; deleted (and their quota released) after the test."""

    def __init__(self, stack: Any) -> None:
        from kubernetes import client

        self.stack = stack
        self.cp = stack.plane.cp
        self.core = client.CoreV1Api(self.cp.api_client)
        self.created: list[tuple[str, str]] = []
        self.quota_used_before: dict[str, dict] = {}

    def member_core(self, tenant: str) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.cp.client_for(*developer_of(self.stack, tenant)))

    def submit(self, tenant: str, body: dict, namespace: str | None = None) -> str:
        """Create the pod in the tenant's namespace as its developer; returns its name."""
        namespace = namespace or tenant
        self.quota_used_before.setdefault(namespace, self.cp.quota_used(namespace))
        self.member_core(tenant).create_namespaced_pod(namespace, body)
        self.created.append((namespace, body["metadata"]["name"]))
        return body["metadata"]["name"]

    def _custom(self, version: str, kind: str, namespace: str) -> list[dict]:
        res = self.cp.dynamic.resources.get(api_version=f"{GROUP}/{version}", kind=kind)
        return self.cp.dynamic.get(res, namespace=namespace).to_dict()["items"]

    def pod_group(self, namespace: str, pod: str) -> dict | None:
        """The PodGroup the pod-grouper made for a bare pod (its owner reference names the pod)."""
        for group in self._custom(PODGROUP_VERSION, "PodGroup", namespace):
            if any(o["kind"] == "Pod" and o["name"] == pod for o in group["metadata"].get("ownerReferences", [])):
                return group
        return None

    def bind_request(self, namespace: str, pod: str) -> dict | None:
        """The scheduler's BindRequest for the pod: proof that KAI, not kube-scheduler, placed it."""
        return next((b for b in self._custom(BINDREQUEST_VERSION, "BindRequest", namespace)
                     if b["spec"].get("podName") == pod), None)

    def wait_bound(self, namespace: str, name: str, timeout: float = 90) -> Any:
        def bound():
            pod = self.core.read_namespaced_pod(name, namespace)
            return pod if pod.spec.node_name else None

        return wait_or_explain(self.cp, bound, f"pod {namespace}/{name} bound by KAI",
                               lambda: self.explain(namespace, name), timeout)

    def wait_event(self, namespace: str, name: str, reason: str, containing: str = "", timeout: float = 60) -> Any:
        """Until an event with `reason` (and `containing` in its message) about the pod or its PodGroup exists."""
        def found():
            return next((e for e in self.core.list_namespaced_event(namespace).items
                         if e.reason == reason and name in (e.involved_object.name or "")
                         and containing in (e.message or "")), None)

        return wait_or_explain(self.cp, found, f"a {reason} event about {namespace}/{name}",
                               lambda: self.explain(namespace, name), timeout)

    def explain(self, namespace: str, name: str) -> str:
        """Events, PodGroup status and pod conditions, to say why a pod is not where the test expected it."""
        lines = event_lines(self.core, namespace, name)
        group = self.pod_group(namespace, name)
        lines.append(f"podgroup: {(group or {}).get('spec')} status={(group or {}).get('status')}")
        pod = self.core.read_namespaced_pod(name, namespace)
        lines.append(f"pod {name}: node={pod.spec.node_name} conditions={pod.status.conditions}")
        return "\n".join(lines)

    def cleanup(self) -> None:
        by_namespace: dict[str, list[str]] = {}
        for namespace, name in self.created:
            by_namespace.setdefault(namespace, []).append(name)
        for namespace, names in by_namespace.items():
            self.cp.delete_pods(namespace, names, quota_used_before=self.quota_used_before[namespace])


# --------------------------------------------------------------------------
# A staging copy where a tenant's ResourceQuota admits more than its queue's quota
# --------------------------------------------------------------------------

# In the example staging stack every tenant's ResourceQuota equals its queue's quota (nobody can
# borrow: each tenant is alone on its pools), so the ResourceQuota refuses a whole-GPU pod over it
# before KAI sees it. This copy adds `research` beside eval on the shared A100 pool, in eval's
# department: 4 A100s of quota, and what eval lends there (its 6) on top in the ResourceQuota
# (docs/queues-and-vclusters.md, "one rule"), so pods over research's queue quota reach KAI.
# The borrowing tenant of the Kueue lane (borrowing.RESEARCH) with half its A100s and a developer group to act as.
KAI_RESEARCH = RESEARCH.replace("  gpu: {a100: 8}\n", "  gpu: {a100: 4}\n") + "access:\n  developers:\n    groups: [research-eng]\n"


def write_kai_borrowing_project(root: Path) -> Path:
    """The example project with eval's staging A100 quota at 6 and `research` (4 A100s) beside it."""
    import shutil

    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    replace_once(root / "tenants" / "eval.yaml", "  staging:\n    quota:\n      gpu: {a100: 8}\n",
                 "  staging:\n    quota:\n      gpu: {a100: 6}\n")
    (root / "tenants" / "research.yaml").write_text(KAI_RESEARCH)
    return root
