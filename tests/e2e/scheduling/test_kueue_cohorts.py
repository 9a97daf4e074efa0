"""Cohorts on a real Kueue: the spare cohort lends capacity no tenant holds, and a MIG layout change
moves no untouched tenant's nominal quota, so none of its admitted workloads turns into borrowing.

A copy of the prod example (`write_spare_project(mig_lab=True)` in borrowing.py): every tenant in
cohort `shared`, which therefore holds the spare capacity; a shared pool `h100-spare` of 16 H100s
that no tenant holds quota on, and `research`, listing class h100 with no GPU quota of its own;
two MIG pools, `mig-west` (listed first) and `mig-east`, where alpha and beta hold 14 1g.10gb
slices each.
"""

from __future__ import annotations

import copy

import pytest

from components.manifests.meta import pool_label
from tools.applied_stack import AppliedStack

from tests.e2e.scheduling.borrowing import shrink_mig_east, write_spare_project
from tests.e2e.scheduling.jobs import Jobs, job

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

KUEUE = "kueue.x-k8s.io/v1beta2"
SLICE = "nvidia.com/mig-1g.10gb"


@pytest.fixture
def jobs(cohort_stack):
    j = Jobs(cohort_stack)
    yield j
    j.cleanup()


def _usage(cp, queue: str, flavor: str, resource: str) -> dict | None:
    cq = cp.get_object({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": queue}})
    found = [r for f in cq.get("status", {}).get("flavorsUsage", []) if f["name"] == flavor
             for r in f["resources"] if r["name"] == resource]
    return found[0] if found else None


def _nominal(cq: dict, flavor: str, resource: str) -> str:
    return next(r["nominalQuota"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == flavor
                for r in f["resources"] if r["name"] == resource)


def test_a_job_is_admitted_on_a_pool_no_tenant_holds_quota_on(cohort_stack, jobs):
    cp = cohort_stack.plane.cp
    cohort = cp.get_object({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "shared"}})
    assert _nominal(cohort, "h100-spare", "nvidia.com/gpu") == "16"
    assert _nominal(cohort_stack.find("ClusterQueue", "research"), "h100-spare", "nvidia.com/gpu") == "0"
    name = jobs.submit("research", job({"nvidia.com/gpu": 4}, parallelism=2))
    pods = jobs.wait_bound("research", name, 2)
    assert {cohort_stack.node_pool[p.spec.node_name] for p in pods} == {"h100-spare"}

    def borrowed() -> str | None:   # the ClusterQueue's status follows admission with a short delay
        usage = _usage(cp, "research", "h100-spare", "nvidia.com/gpu")
        return usage["borrowed"] if usage and usage["total"] != "0" else None

    assert cp.wait_for(borrowed, timeout=60, what="research's usage of h100-spare") == "8"


def test_beyond_the_spare_a_job_waits_without_pods(cohort_stack, jobs):
    name = jobs.submit("research", job({"nvidia.com/gpu": 4}, parallelism=5))   # 20 > the 16 spare
    jobs.wait_pending_in_queue("research", name)
    assert jobs.pods("research", name) == []


def test_a_mig_layout_change_moves_no_untouched_tenants_admitted_workload_into_borrowing(cohort_stack, jobs, tmp_path):
    cp = cohort_stack.plane.cp
    west = {pool_label(cohort_stack.environment.platform): "mig-west"}
    name = jobs.submit("beta", job({SLICE: 7}, parallelism=2, node_selector=west))
    jobs.wait_bound("beta", name, 2)

    def usage_of_beta() -> tuple | None:
        usage = _usage(cp, "beta", "mig-west", SLICE)
        return (usage["total"], usage["borrowed"]) if usage and usage["total"] != "0" else None

    assert cp.wait_for(usage_of_beta, timeout=60, what="beta's usage of mig-west") == ("14", "0")

    # mig-east's layout drops to 14 slices; the Kueue objects of the changed stack are applied
    root = write_spare_project(tmp_path / "project", mig_lab=True)
    shrink_mig_east(root)
    _, objects = AppliedStack.render("prod", root)
    changed = [o for objs in objects.values() for o in objs if o["apiVersion"] == KUEUE and o["kind"] in ("ClusterQueue", "Cohort")]
    assert [r for _, r in cp.apply_objects(changed) if isinstance(r, Exception)] == []
    head_beta = next(o for o in changed if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "beta")
    base_beta = cohort_stack.find("ClusterQueue", "beta")
    # beta's nominal slices did not move; its mig-east flavor only lists the 3g.40gb slices mig-east now offers
    assert [(_nominal(q, "mig-west", SLICE), _nominal(q, "mig-east", SLICE)) for q in (base_beta, head_beta)] == [("14", "0")] * 2
    assert _nominal(head_beta, "mig-east", "nvidia.com/mig-3g.40gb") == "0"
    cp.wait_for(lambda: _usage(cp, "beta", "mig-east", "nvidia.com/mig-3g.40gb"), timeout=60,
                what="Kueue's status of beta's changed ClusterQueue")
    assert usage_of_beta() == ("14", "0")
    assert jobs.workload("beta", name)["status"]["admission"]["podSetAssignments"][0]["flavors"][SLICE] == "mig-west"

    # what a moved split does to the same workload: with beta's 14 on mig-east, it runs borrowed
    moved = copy.deepcopy(head_beta)
    for group in moved["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] == SLICE and flavor["name"] in ("mig-west", "mig-east"):
                    resource["nominalQuota"] = "14" if flavor["name"] == "mig-east" else "0"
    cp.apply(moved, field_manager="gpu-tenancy", force=True)
    assert cp.wait_for(lambda: usage_of_beta() if usage_of_beta() != ("14", "0") else None, timeout=60,
                       what="beta's usage with a moved split") == ("14", "14")
    cp.apply(head_beta, field_manager="gpu-tenancy", force=True)
    assert cp.wait_for(lambda: usage_of_beta() if usage_of_beta() == ("14", "0") else None, timeout=60,
                       what="beta's usage with its split back") == ("14", "0")
