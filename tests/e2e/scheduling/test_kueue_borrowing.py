"""Borrowing within a cohort on a real Kueue: the ResourceQuota admits the pods Kueue admits.

A copy of the prod example (see `write_borrowing_project` in conftest.py): every tenant in cohort
`shared`; eval holds 12 and research 8 of the shared A100 pool, neither with a borrowingLimit. With
eval idle, research runs 12 A100s: 8 of its own and 4 borrowed from eval, all on the pool both may
reach. Before the quota-under-a-queue rule, research's ResourceQuota stayed at 8 and the pods of
the borrowed GPUs were refused at creation.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from components.manifests.quota import TENANT_QUOTA

from tests.e2e.scheduling.jobs import Jobs, job

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]


@pytest.fixture
def jobs(borrowing_stack):
    j = Jobs(borrowing_stack)
    yield j
    j.cleanup()


def test_research_borrows_eval_gpus_and_its_pods_pass_the_resource_quota(borrowing_stack, jobs):
    core = client.CoreV1Api(borrowing_stack.plane.cp.api_client)
    hard = core.read_namespaced_resource_quota(TENANT_QUOTA, "research").spec.hard
    assert hard["requests.nvidia.com/gpu"] == "20"   # nominal 8 + the 12 more a100-shared holds (16 x 1.25)
    name = jobs.submit("research", job({"nvidia.com/gpu": 4}, parallelism=3))   # 12 > its nominal 8
    pods = jobs.wait_bound("research", name, 3)
    assert {borrowing_stack.node_pool[p.spec.node_name] for p in pods} == {"a100-shared"}
    usage = jobs.workload("research", name)["status"]["admission"]["podSetAssignments"][0]
    assert usage["flavors"] == {"cpu": "default-flavor", "ephemeral-storage": "default-flavor", "memory": "default-flavor",
                                "nvidia.com/gpu": "a100-shared"}   # ephemeral-storage: every LimitRange gives a request
    cp = borrowing_stack.plane.cp

    def borrowed() -> str | None:   # the ClusterQueue's status follows admission with a short delay
        cq = cp.get_object({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "research"}})
        usage = [r for f in cq.get("status", {}).get("flavorsUsage", []) if f["name"] == "a100-shared"
                 for r in f["resources"] if r["name"] == "nvidia.com/gpu"]
        return usage[0]["borrowed"] if usage and usage[0]["total"] != "0" else None

    assert cp.wait_for(borrowed, timeout=60, what="research's ClusterQueue usage") == "4"


def test_beyond_what_the_cohort_lends_a_job_waits_without_pods(borrowing_stack, jobs):
    # 8 own + 12 lendable = 20; 24 cannot be admitted even with eval idle
    name = jobs.submit("research", job({"nvidia.com/gpu": 8}, parallelism=3))
    jobs.wait_pending_in_queue("research", name)
    assert jobs.pods("research", name) == []
