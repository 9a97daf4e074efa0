"""Whole lifecycles on the prod stack (Kueue), pods run by kwok: admitted, Running, Succeeded, quota
released; borrowing and its reclaim; a priority preemption; a MIG tenant's slices; a suspended
tenant's running and queued Jobs, and its restart.

The stack is the prod example in cohort `shared` (`write_borrowing_project`: eval holds 12 and
research 8 of the shared A100 pool, the pool holds 16 x overcommit 1.25 = 20, neither with a
borrowing limit); llm-finetune's queue holds the 40 H100s of its dedicated pool. Everything is
asserted on the cluster's own objects: the Workloads' conditions, the pods' phases, the
ClusterQueues' and ResourceQuotas' usage.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from components.fleet import gpu_capacity as cap
from tests.e2e.runtime.runs import RuntimeJobs, timed_job
from tests.e2e.scheduling.borrowing import write_borrowing_project
from tools.applied_stack import AppliedStack
from tools.runtime import running_runtime_stack

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

LF = "llm-finetune"
GPU = cap.GPU
GPU_QUOTA_KEY = cap.quota_key(GPU)
# The taints the node lifecycle controller sets (not-ready, unreachable, ...).
NODE_TAINTS = "node.kubernetes.io/"
HEARTBEAT_MIN_SECONDS = 20   # kwok's node-heartbeat Stage: delay 20 s, jitter to 45 s


@pytest.fixture(scope="module")
def runtime_stack(e2e_summary, runtime_totals, tmp_path_factory):
    root = write_borrowing_project(tmp_path_factory.mktemp("runtime") / "project")
    yield from running_runtime_stack("prod", e2e_summary, root, what="prod + cohort 'shared'", totals=runtime_totals)


@pytest.fixture
def jobs(runtime_stack):
    j = RuntimeJobs(runtime_stack)
    yield j
    j.cleanup()


def _since(condition: dict) -> str:
    return condition["lastTransitionTime"]


def test_jobs_run_up_to_the_quota_and_the_next_is_admitted_when_one_finishes(runtime_stack, jobs):
    quota = cap.gpu_quota_by_resource(runtime_stack.tenant(LF), runtime_stack.environment.platform)[GPU]
    assert quota == 40   # llm-finetune's whole dedicated pool: 5 nodes x 8
    # Two Jobs of 5 x 4 GPUs fill the quota; a third of the same size must wait for one of them.
    first, second = (jobs.submit(LF, timed_job({GPU: 4}, 5, parallelism=5)) for _ in range(2))
    for name in (first, second):
        jobs.wait_condition(LF, name, "Admitted")
    third = jobs.submit(LF, timed_job({GPU: 4}, 5, parallelism=5))
    assert "insufficient" in jobs.wait_pending_in_queue(LF, third)["message"].lower()
    for name in (first, second):
        jobs.wait_pod_phase(LF, name, "Running", 5)
    jobs.wait_quota(LF, GPU_QUOTA_KEY, str(quota))
    jobs.wait_cluster_queue_usage(LF, "h100-train", GPU, str(quota))
    assert jobs.pods(LF, third) == []

    finished = [jobs.wait_condition(LF, name, "Finished") for name in (first, second)]
    for name in (first, second):
        jobs.wait_complete(LF, name)
        assert {p.status.phase for p in jobs.pods(LF, name)} == {"Succeeded"}
    admitted = jobs.wait_condition(LF, third, "Admitted")
    assert _since(admitted) >= min(_since(c) for c in finished)   # only a finished Job's quota let it in
    jobs.wait_complete(LF, third)
    assert jobs.wait_condition(LF, third, "Finished")["reason"] == "Succeeded"
    jobs.wait_quota(LF, GPU_QUOTA_KEY, "0")
    jobs.wait_cluster_queue_usage(LF, "h100-train", GPU, "0")


def test_a_borrower_is_preempted_when_the_lender_reclaims_and_readmitted_after(runtime_stack, jobs):
    borrower = jobs.submit("research", timed_job({GPU: 4}, 60, parallelism=3))   # 12 > research's nominal 8
    jobs.wait_pod_phase("research", borrower, "Running", 3)
    assert jobs.wait_cluster_queue_usage("research", "a100-shared", GPU, "12")["borrowed"] == "4"

    lender = jobs.submit("eval", timed_job({GPU: 4}, 4, parallelism=3))   # eval's nominal 12: 4 of it lent
    preempted = jobs.wait_condition("research", borrower, "Preempted")
    assert preempted["reason"] == "InCohortReclamation", preempted
    jobs.wait_pod_phase("eval", lender, "Running", 3)
    assert {runtime_stack.node_pool[p.spec.node_name] for p in jobs.pods("eval", lender)} == {"a100-shared"}
    jobs.wait_complete("eval", lender)

    # Its quota back, the lender lends again: the borrower's requeued Workload runs once more.
    readmitted = jobs.wait_condition("research", borrower, "Admitted")
    assert _since(readmitted) >= _since(jobs.wait_condition("eval", lender, "Finished"))
    jobs.wait_pod_phase("research", borrower, "Running", 3)


def test_a_higher_priority_job_preempts_a_lower_one_of_the_same_tenant(runtime_stack, jobs):
    low = jobs.submit(LF, timed_job({GPU: 8}, 60, parallelism=5))   # `batch`, the default class: all 40 GPUs
    jobs.wait_pod_phase(LF, low, "Running", 5)
    high = jobs.submit(LF, timed_job({GPU: 8}, 4, priority_class="training"))
    preempted = jobs.wait_condition(LF, low, "Preempted")
    assert preempted["reason"] == "InClusterQueue", preempted
    [pod] = jobs.wait_pod_phase(LF, high, "Running", 1)
    assert pod.spec.priority == runtime_stack.find("PriorityClass", "training")["value"]
    jobs.wait_complete(LF, high)
    readmitted = jobs.wait_condition(LF, low, "Admitted")
    assert _since(readmitted) >= _since(jobs.wait_condition(LF, high, "Finished"))
    jobs.wait_pod_phase(LF, low, "Running", 5)


def test_a_mig_tenants_slices_run_on_the_mig_pool_and_are_counted_by_profile(runtime_stack, jobs):
    small = jobs.submit("eval", timed_job({"nvidia.com/mig-1g.10gb": 14}, 4, parallelism=2))
    large = jobs.submit("eval", timed_job({"nvidia.com/mig-3g.40gb": 4}, 4, parallelism=2))
    for name, resource in ((small, "nvidia.com/mig-1g.10gb"), (large, "nvidia.com/mig-3g.40gb")):
        jobs.wait_condition("eval", name, "Admitted")
        [assignment] = jobs.workload("eval", name)["status"]["admission"]["podSetAssignments"]
        assert assignment["flavors"][resource] == "a100-mig"
        pods = jobs.wait_pod_phase("eval", name, "Running", 2)
        assert {runtime_stack.node_pool[p.spec.node_name] for p in pods} == {"a100-mig"}
    jobs.wait_quota("eval", cap.quota_key("nvidia.com/mig-1g.10gb"), "28")
    jobs.wait_quota("eval", cap.quota_key("nvidia.com/mig-3g.40gb"), "8")
    jobs.wait_cluster_queue_usage("eval", "a100-mig", "nvidia.com/mig-1g.10gb", "28")
    for name in (small, large):
        jobs.wait_complete("eval", name)
    jobs.wait_quota("eval", cap.quota_key("nvidia.com/mig-1g.10gb"), "0")
    jobs.wait_quota("eval", cap.quota_key("nvidia.com/mig-3g.40gb"), "0")


def _key(o: dict) -> tuple:
    return o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]


def _suspension(stack, tenant: str, root) -> tuple[list[dict], list[dict], list[dict]]:
    """What `lifecycle: suspended` changes of the tenant's objects, as an update of the stack would:
    (objects to apply to suspend, objects to apply back to restart, objects the restart deletes)."""
    write_borrowing_project(root)
    path = root / "tenants" / f"{tenant}.yaml"
    text = path.read_text()
    assert text.count("\ncostCenter: ") == 1
    path.write_text(text.replace("\ncostCenter: ", "\nlifecycle: suspended\ncostCenter: "))
    _, objects = AppliedStack.render("prod", root)
    suspended = {_key(o): o for o in objects[tenant]}
    active = {_key(o): o for o in stack.objects[tenant]}
    changed = [o for k, o in suspended.items() if active.get(k) != o]
    return changed, [active[k] for k in suspended if k in active and active[k] != suspended[k]], \
        [o for k, o in suspended.items() if k not in active]


def test_a_suspended_tenants_running_job_keeps_running_and_its_queued_one_waits_for_the_restart(
        runtime_stack, jobs, tmp_path):
    cp = runtime_stack.plane.cp
    suspend, restore, added = _suspension(runtime_stack, LF, tmp_path / "suspended")
    assert {o["kind"] for o in added} == {"ResourceQuota"}   # `suspended`: pods 0, one per namespace
    running = jobs.submit(LF, timed_job({GPU: 8}, 15, parallelism=2))
    jobs.wait_pod_phase(LF, running, "Running", 2)
    try:
        assert [r for _, r in cp.apply_rendered(suspend) if isinstance(r, Exception)] == []
        queued = jobs.submit(LF, timed_job({GPU: 8}, 3))
        held = jobs.wait_pending_in_queue(LF, queued)
        assert "inactive" in held["message"].lower() or "stop" in held["message"].lower(), held
        assert len(jobs.wait_pod_phase(LF, running, "Running", 2)) == 2   # nothing stops what runs
        assert jobs.condition(LF, running, "Admitted")["status"] == "True"
        assert jobs.pods(LF, queued) == []
    finally:   # the restart: the suspended quotas go, the objects are as before
        core = client.CoreV1Api(cp.api_client)
        for quota in added:
            core.delete_namespaced_resource_quota(quota["metadata"]["name"], quota["metadata"]["namespace"])
        assert [r for _, r in cp.apply_rendered(restore) if isinstance(r, Exception)] == []
    jobs.wait_condition(LF, queued, "Admitted")
    jobs.wait_complete(LF, queued)
    jobs.wait_complete(LF, running, timeout=90)


def test_kwok_kept_every_node_ready_and_the_lifecycle_controller_never_tainted_one(runtime_stack):
    """Last in the module: by now the stack has run for over a minute, beyond the node lifecycle
    controller's grace period (50 s) and kwok's heartbeat interval (20-45 s)."""
    cp = runtime_stack.plane.cp
    core = client.CoreV1Api(cp.api_client)
    for name in runtime_stack.node_pool:
        node = core.read_node(name)
        [ready] = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready.status == "True", (name, ready)
        # kwok's heartbeat came again since it initialised the node (its Stage waits 20-45 s)
        assert (ready.last_heartbeat_time - node.metadata.creation_timestamp).total_seconds() >= HEARTBEAT_MIN_SECONDS, (name, ready)
        assert not [t.key for t in node.spec.taints or [] if t.key.startswith(NODE_TAINTS)], (name, node.spec.taints)
    unhealthy = [f"{e.involved_object.name}: {e.reason}" for e in core.list_event_for_all_namespaces().items
                 if e.reason in ("NodeNotReady", "NodeNotSchedulable", "TaintManagerEviction")]
    assert unhealthy == []
