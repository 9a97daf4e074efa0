"""Queues, placement and quota together, on a real kube-scheduler and a real Kueue.

The example prod stack (`scheduler: kueue`) is applied as rendered. Jobs go to a tenant's
LocalQueue with no node selector or toleration of their own: Kueue picks a ResourceFlavor,
injects its node labels and tolerations, unsuspends the Job; the job controller creates the
pods; the tenant's placement policy and ResourceQuota admit them; kube-scheduler binds them.
"""

from __future__ import annotations


import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.placement_policy import placement
from components.fleet import gpu_capacity as cap
from tools.applied_stack import AppliedStack
from tools.control_plane import REPO_ROOT
from tools.scheduling import kueue_module_dir
from tests.e2e.scheduling.jobs import KUEUE, Jobs, job

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

ENVIRONMENT, _ = AppliedStack.render("prod")


def _pools_offering(resource: str) -> set[str]:
    platform = ENVIRONMENT.platform
    return {name for name, pool in platform.node_pools.items()
            if cap.node_gpu_resources(platform, pool).get(resource, 0) > 0}


def _cases() -> list[tuple[str, str, str]]:
    """(tenant, GPU class, resource) for every class each tenant may use and resource it offers."""
    platform = ENVIRONMENT.platform
    cases = []
    for loaded in ENVIRONMENT.tenants:
        allowed = set(placement(loaded.spec, ENVIRONMENT.view(loaded.spec)).pools)
        for name in sorted({platform.node_pools[p].gpu_class for p in allowed}):
            offered = set()
            for pool in sorted(allowed):
                if platform.node_pools[pool].gpu_class == name:
                    offered |= set(cap.node_gpu_resources(platform, platform.node_pools[pool]))
            for resource in sorted(offered):
                if cap.gpu_quota_by_resource(loaded.spec, platform).get(resource, 0) > 0:
                    cases.append((loaded.name, name, resource))
    return cases


def _forbidden_classes() -> list[tuple[str, str]]:
    platform = ENVIRONMENT.platform
    out = []
    for loaded in ENVIRONMENT.tenants:
        allowed = {platform.node_pools[p].gpu_class for p in placement(loaded.spec, ENVIRONMENT.view(loaded.spec)).pools}
        out += [(loaded.name, c) for c in sorted(platform.gpu_classes) if c not in allowed]
    return out


@pytest.fixture
def jobs(kueue_stack):
    j = Jobs(kueue_stack)
    yield j
    j.cleanup()


def _pools_of(stack, pods: list[client.V1Pod]) -> set[str]:
    return {stack.node_pool[p.spec.node_name] for p in pods}


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------


def test_stack_applies_cleanly_with_kueue_webhooks(kueue_stack, e2e_summary):
    """Every rendered object is accepted, with Kueue's validating webhooks in the path."""
    rejected = [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}: {r.reason} {r.body}"
                for o, r in kueue_stack.results if isinstance(r, ApiException)]
    assert not rejected, "\n".join(rejected)
    cqs = kueue_stack.of_kind("ClusterQueue")
    flavors = kueue_stack.of_kind("ResourceFlavor")
    e2e_summary.append(f"scheduling lane (prod): {len(cqs)} ClusterQueues, {len(flavors)} ResourceFlavors, "
                       f"{len(kueue_stack.node_pool)} ready nodes")


def test_cluster_queues_are_active(kueue_stack):
    """Kueue accepts every ClusterQueue: its flavors exist and its quotas are well-formed."""
    cp = kueue_stack.plane.cp
    res = cp.dynamic.resources.get(api_version="/".join(KUEUE), kind="ClusterQueue")

    def active(name: str) -> bool:
        conds = cp.dynamic.get(res, name=name).to_dict().get("status", {}).get("conditions", [])
        return any(c["type"] == "Active" and c["status"] == "True" for c in conds)

    for cq in kueue_stack.of_kind("ClusterQueue"):
        name = cq["metadata"]["name"]
        cp.wait_for(lambda n=name: active(n), timeout=60, what=f"ClusterQueue {name} Active")


@pytest.mark.parametrize("tenant,gpu_class,resource", _cases())
def test_job_without_selectors_lands_only_on_the_tenants_pools(kueue_stack, jobs, tenant, gpu_class, resource):
    spec = kueue_stack.tenant(tenant)
    allowed = set(placement(spec, ENVIRONMENT.view(spec)).pools)
    expected = {p for p in allowed if ENVIRONMENT.platform.node_pools[p].gpu_class == gpu_class} & _pools_offering(resource)
    name = jobs.submit(tenant, job({resource: 1}, parallelism=2))
    pods = jobs.wait_bound(tenant, name, 2)
    assert _pools_of(kueue_stack, pods) <= expected, jobs.explain(tenant, name)
    wl = jobs.workload(tenant, name)
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in wl["status"]["conditions"])


@pytest.mark.parametrize("tenant,gpu_class", _forbidden_classes())
def test_a_class_the_tenant_may_not_use_never_gets_a_pod(kueue_stack, jobs, tenant, gpu_class):
    """Asking for the class by its label: no flavor of the tenant's queue matches, nothing is admitted."""
    platform = ENVIRONMENT.platform
    from components.manifests.meta import gpu_class_label

    resource = cap.class_resource(platform.gpu_classes[gpu_class])
    name = jobs.submit(tenant, job({resource: 1}, node_selector={gpu_class_label(platform): gpu_class}))
    jobs.wait_pending_in_queue(tenant, name)
    assert jobs.pods(tenant, name) == []


def test_dedicated_pool_gets_no_other_tenants_pod_while_empty(kueue_stack, jobs):
    """Fill the shared A100 pool; eval's next pod waits unschedulable instead of taking an idle H100."""
    platform = ENVIRONMENT.platform
    pool = platform.node_pools["a100-shared"]
    per_pod = pool.gpus_per_node // 2
    full = jobs.submit("eval", job({cap.GPU: per_pod}, parallelism=pool.node_count * 2))
    pods = jobs.wait_bound("eval", full, pool.node_count * 2)
    assert _pools_of(kueue_stack, pods) == {"a100-shared"}
    # eval's quota (16 x overcommit 1.25 = 20) still admits 4 more: Kueue lets the Job run, the pod
    # gets the a100-shared selector from its flavor, and kube-scheduler finds no room for it.
    spill = jobs.submit("eval", job({cap.GPU: per_pod}))

    def unschedulable():
        found = jobs.pods("eval", spill)
        conds = found[0].status.conditions or [] if found else []
        return found if any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conds) else None

    waiting = jobs.cp.wait_for(unschedulable, timeout=90, interval=0.5, what="the extra eval pod to be unschedulable")
    assert waiting[0].spec.node_name is None
    dedicated = {n for n, p in kueue_stack.node_pool.items() if ENVIRONMENT.platform.node_pools[p].gpu_class == "h100"}
    on_dedicated = [p for p in jobs.core.list_pod_for_all_namespaces().items if p.spec.node_name in dedicated]
    assert on_dedicated == []   # empty, while eval waits


def test_over_quota_job_stays_pending_without_pods(kueue_stack, jobs):
    platform = ENVIRONMENT.platform
    quota = cap.gpu_quota_by_class(kueue_stack.tenant("llm-finetune"), platform)["h100"]
    per_pod = platform.node_pools["h100-train"].gpus_per_node
    name = jobs.submit("llm-finetune", job({cap.GPU: per_pod}, parallelism=quota // per_pod + 1))
    cond = jobs.wait_pending_in_queue("llm-finetune", name)
    assert "insufficient" in cond["message"].lower() or "quota" in cond["message"].lower(), cond
    assert jobs.pods("llm-finetune", name) == []


def test_mig_job_lands_on_mig_nodes_only(kueue_stack, jobs):
    mig_pools = _pools_offering("nvidia.com/mig-1g.10gb")
    assert mig_pools, "the prod example has no MIG pool offering 1g.10gb"
    name = jobs.submit("eval", job({"nvidia.com/mig-1g.10gb": 1}, parallelism=3))
    pods = jobs.wait_bound("eval", name, 3)
    assert _pools_of(kueue_stack, pods) <= mig_pools


def test_the_shipped_kueue_crds_are_those_of_the_kueue_we_run():
    """components/data/kueue must be the CRDs of the Kueue the lane builds (tools/versions.env)."""
    shipped = sorted((REPO_ROOT / "components" / "data" / "kueue").glob("*.yaml"))
    assert shipped
    bases = kueue_module_dir() / "config" / "components" / "crd" / "bases"
    for path in shipped:
        assert path.read_bytes() == (bases / path.name).read_bytes(), path.name
