"""What only the KAI queue decides: a staging copy where a tenant's ResourceQuota admits more than its queue deserves.

Where a tenant's ResourceQuota equals its queue's quota, a whole-GPU pod over it is refused at
creation and KAI never sees it (test_kai_scheduling.py covers that). Here `research` (4 A100s)
shares the A100 pool and its department with eval (6), and its ResourceQuota holds what the pools
it may reach hold (10, docs/queues-and-vclusters.md "one rule"): pods
between 4 and 10 GPUs reach KAI, which applies its own queue semantics (kai.py starts it).
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e.scheduling.kai import KaiPods, kai_pod, on_pool, running_kai_stack, write_kai_borrowing_project

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

PREEMPTIBILITY = "kai.scheduler/preemptibility"   # a pod-grouper label (its plugins' constants)


@pytest.fixture(scope="module")
def kai_borrowing_stack(e2e_summary, tmp_path_factory):
    """Staging with `research` beside eval on the A100 pool (kai.write_kai_borrowing_project)."""
    root = write_kai_borrowing_project(tmp_path_factory.mktemp("kai-borrowing") / "project")
    yield from running_kai_stack("staging", e2e_summary, root, what="staging + research beside eval")


@pytest.fixture
def borrowing_pods(kai_borrowing_stack):
    created = KaiPods(kai_borrowing_stack)
    yield created
    created.cleanup()


def _scheduling_reasons(group: dict | None) -> list[str]:
    """The reasons KAI gave in the PodGroup's scheduling conditions (e.g. NonPreemptibleOverQuota)."""
    conditions = (group or {}).get("status", {}).get("schedulingConditions", [])
    return [r.get("reason", "") for c in conditions for r in c.get("reasons", [])]


# --------------------------------------------------------------------------
# research beside eval: a ResourceQuota above the queue's quota, so KAI decides
# --------------------------------------------------------------------------


def test_research_may_hold_more_than_its_queue_quota(kai_borrowing_stack):
    """The premise of the tests below: research's queue deserves 4 GPUs, its ResourceQuota admits 10."""
    queue = kai_borrowing_stack.find("Queue", "research")
    quota = kai_borrowing_stack.find("ResourceQuota", "tenant-quota", "research")
    assert queue["spec"]["resources"]["gpu"]["quota"] == 4
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"


def test_a_pod_over_the_queue_quota_stays_pending(kai_borrowing_stack, borrowing_pods):
    """6 GPUs in a queue that deserves 4, with the tenant's defaults: admitted by the API server, held by KAI.

    KAI lets only preemptible workloads go over quota, and derives preemptibility from the
    priority when the pod does not say: below 100 preemptible. The stack's default PriorityClass
    (`batch`, 10000, globalDefault) is above, so an ordinary tenant pod is non-preemptible.
    """
    target = on_pool(kai_borrowing_stack, "research", "a100-shared")
    name = borrowing_pods.submit("research", kai_pod(6, queue="research", **target))

    def held():
        group = borrowing_pods.pod_group("research", name)
        return group if "NonPreemptibleOverQuota" in _scheduling_reasons(group) else None

    group = kai_borrowing_stack.plane.cp.wait_for(held, timeout=90, interval=0.5, what="KAI to hold research's pod over its quota")
    assert group["spec"]["priorityClassName"] == "batch"
    assert borrowing_pods.core.read_namespaced_pod(name, "research").spec.node_name is None
    assert borrowing_pods.bind_request("research", name) is None
    # Within the quota, the same pod is bound (the pool is idle).
    within = borrowing_pods.submit("research", kai_pod(4, queue="research", **target))
    assert kai_borrowing_stack.node_pool[borrowing_pods.wait_bound("research", within).spec.node_name] == "a100-shared"


def test_a_preemptible_pod_borrows_and_the_next_waits_off_the_idle_dedicated_pools(kai_borrowing_stack, borrowing_pods):
    """Preemptible, research borrows the whole A100 pool (8 of a 4-GPU quota); its next pod waits, H100s idle."""
    stack = kai_borrowing_stack
    target = on_pool(stack, "research", "a100-shared")
    preemptible = {PREEMPTIBILITY: "preemptible"}
    per_node = stack.environment.platform.node_pools["a100-shared"].gpus_per_node
    full = [borrowing_pods.submit("research", kai_pod(per_node // 2, queue="research", labels=preemptible, **target))
            for _ in range(2)]
    assert {stack.node_pool[borrowing_pods.wait_bound("research", n).spec.node_name] for n in full} == {"a100-shared"}
    spill = borrowing_pods.submit("research", kai_pod(1, queue="research", labels=preemptible, **target))
    borrowing_pods.wait_event("research", spill, "Unschedulable")
    assert borrowing_pods.core.read_namespaced_pod(spill, "research").spec.node_name is None
    dedicated = {n for n, p in stack.node_pool.items() if p in ("h100-train", "h100-serve")}
    on_dedicated = [p.metadata.name for p in client.CoreV1Api(stack.plane.cp.api_client).list_pod_for_all_namespaces().items
                    if p.spec.node_name in dedicated]
    assert on_dedicated == []
