"""Kueue objects: a flavor per node pool, a ClusterQueue per tenant listing the pools it may reach, LocalQueues."""

from __future__ import annotations

import copy

import pytest

from components.load import load_environment
from components.manifests import kueue, queues
from components.manifests.placement_policy import placement
from components.fleet.environment import Environment
from tests.e2e.scheduling.borrowing import write_spare_project
from tests.project_edits import replace_once

from .cel_admission import ENGINES
from .cel_admission import admit as replay
from .test_queues_crds import LAB_PLATFORM, queue_lab


def _queue(environment: Environment, name: str) -> dict:
    loaded = next(t for t in environment.tenants if t.name == name)
    return kueue.cluster_queue(loaded.spec, environment.view(loaded.spec))


def _groups(queue: dict) -> dict[str, dict[str, dict[str, dict]]]:
    """resource group index -> flavor -> resource -> entry, for reading assertions."""
    return {
        index: {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}
        for index, group in enumerate(queue["spec"]["resourceGroups"])
    }


def test_a_flavor_per_node_pool_pins_to_it_plus_one_for_cpu_and_memory():
    flavors = {f["metadata"]["name"]: f["spec"] for f in kueue.resource_flavors(queue_lab("kueue").facts)}
    assert sorted(flavors) == ["a100-solo", "default-flavor", "h100-shared", "h100-train", "l4", "mig"]
    assert flavors["default-flavor"] == {}
    shared = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}]
    assert flavors["l4"] == {"nodeLabels": {"gpu.example.com/gpu-class": "l4", "gpu.example.com/pool": "l4"}, "tolerations": shared}
    # h100 has a dedicated and a shared pool: each is its own flavor tolerating its own pool's taint.
    assert flavors["h100-shared"]["tolerations"] == shared
    assert flavors["h100-train"]["tolerations"] == [
        {"effect": "NoSchedule", "key": "gpu.example.com/tenant", "operator": "Equal", "value": "train"}
    ]


def test_a_queue_lists_only_the_pools_its_tenant_may_reach():
    lab = queue_lab("kueue")
    assert list(_groups(_queue(lab, "train"))[1]) == ["h100-train", "l4"]
    assert list(_groups(_queue(lab, "bench"))[1]) == ["a100-solo", "h100-shared", "l4", "mig"]


def test_prod_eval_gets_its_classes_and_slices_as_nominal_quotas(prod):
    queue = _queue(prod, "eval")
    spec = queue["spec"]
    assert queue["metadata"]["name"] == "eval"
    assert spec["namespaceSelector"] == {"matchLabels": {"gpu-tenancy.dev/tenant": "eval"}}
    assert "cohortName" not in spec and "stopPolicy" not in spec
    cpu_group, gpu_group = spec["resourceGroups"]
    assert cpu_group["coveredResources"] == ["cpu", "ephemeral-storage", "memory"]
    assert gpu_group["coveredResources"] == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"]
    nominal = {f: {r: e["nominalQuota"] for r, e in rs.items()} for f, rs in _groups(queue)[1].items()}
    assert nominal == {
        "a100-shared": {"nvidia.com/gpu": "20", "nvidia.com/mig-1g.10gb": "0", "nvidia.com/mig-3g.40gb": "0"},
        "a100-mig": {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "48", "nvidia.com/mig-3g.40gb": "16"},
    }
    assert _groups(queue)[0]["default-flavor"]["memory"]["nominalQuota"] == "768Gi"


def test_every_flavor_lists_the_covered_resources_in_order():
    for loaded in queue_lab("kueue").tenants:
        for group in kueue.resource_groups(loaded.spec, queue_lab("kueue").view(loaded.spec)):
            for flavor in group["flavors"]:
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]


def test_cohort_borrowing_and_lending_limits_per_class():
    lab = queue_lab("kueue")
    bench = _groups(_queue(lab, "bench"))[1]
    assert _queue(lab, "bench")["spec"]["cohortName"] == "research"  # the stack's default cohort
    assert bench["h100-shared"]["nvidia.com/gpu"]["borrowingLimit"] == "2"
    assert bench["l4"]["nvidia.com/gpu.shared"] == {"name": "nvidia.com/gpu.shared", "nominalQuota": "4", "borrowingLimit": "2"}
    assert bench["a100-solo"]["nvidia.com/gpu"]["borrowingLimit"] == "0"
    # a class without a limit borrows freely, and limits never land on resources of other classes
    assert "borrowingLimit" not in bench["mig"]["nvidia.com/mig-1g.10gb"]
    assert "borrowingLimit" not in bench["h100-shared"]["nvidia.com/gpu.shared"]
    train = _groups(_queue(lab, "train"))[1]
    assert train["l4"]["nvidia.com/gpu.shared"]["lendingLimit"] == "1"


def test_a_dedicated_only_class_is_neither_lent_nor_borrowed():
    train = _groups(_queue(queue_lab("kueue"), "train"))[1]
    assert train["h100-train"]["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "0", "lendingLimit": "0"}


def test_without_a_cohort_there_are_no_limits(make_tenant):
    lab = queue_lab("kueue", queues={"defaultCohort": None})
    tenant = make_tenant(gpu={"classes": ["h100"]}, quota={"gpu": {"h100": 2}, "cpu": {"requests": "1"}, "memory": {"requests": "1Gi"}},
                         queue={"borrowingLimit": {"h100": 1}, "lendingLimit": {"h100": 1}})
    spec = kueue.cluster_queue(tenant, lab.view(tenant))["spec"]
    assert "cohortName" not in spec
    assert spec["resourceGroups"][1]["flavors"][0]["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]


def test_weight_preemption_and_hold_while_suspended():
    lab = queue_lab("kueue")
    assert _queue(lab, "train")["spec"]["fairSharing"] == {"weight": 3}
    assert "fairSharing" not in _queue(lab, "bench")["spec"]
    assert _queue(lab, "bench")["spec"]["preemption"] == {
        "borrowWithinCohort": {"policy": "LowerPriority"}, "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"
    }
    paused = _queue(lab, "paused")["spec"]
    assert paused["stopPolicy"] == "Hold" and paused["cohortName"] == "solo"


def test_cpu_and_memory_fall_back_to_cluster_capacity_or_are_left_out(make_tenant):
    lab = queue_lab("kueue")
    paused = _groups(_queue(lab, "paused"))[0]["default-flavor"]
    assert (paused["cpu"]["nominalQuota"], paused["memory"]["nominalQuota"]) == ("512", "4Ti")
    bare = queue_lab("kueue", cpuMemoryCapacity={})
    # Ephemeral storage is always covered: every LimitRange gives containers a request for it.
    assert kueue.resource_groups(make_tenant(), bare.view(make_tenant())) == [{
        "coveredResources": ["ephemeral-storage"],
        "flavors": [{"name": "default-flavor", "resources": [{"name": "ephemeral-storage", "nominalQuota": "100Gi"}]}],
    }]
    off = queue_lab("kueue", cpuMemoryCapacity={}, guardRails={"ephemeralStorage": {"quota": {}}})
    assert kueue.resource_groups(make_tenant(), off.view(make_tenant())) == []


def test_a_default_local_queue_in_each_namespace(prod):
    inference = next(t.spec for t in prod.tenants if t.name == "inference")
    queues = kueue.local_queues(inference, prod.view(inference))
    assert [(q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]) for q in queues] == [
        ("inference", "default", {"clusterQueue": "inference"}),
        ("inference-canary", "default", {"clusterQueue": "inference"}),
    ]
    assert queues[0]["metadata"]["labels"]["gpu-tenancy.dev/tenant"] == "inference"


def test_objects_are_deterministic(prod):
    first = [kueue.tenant_kueue_objects(t.spec, prod.view(t.spec)) for t in prod.tenants]
    again = [kueue.tenant_kueue_objects(t.spec, prod.view(t.spec)) for t in prod.tenants]
    assert first == again
    assert list(first[0][0]["spec"]) == sorted(first[0][0]["spec"])


def test_mig_slices_go_to_the_pools_offering_the_profile_as_the_capacity_check_places_them(make_tenant):
    platform = copy.deepcopy(LAB_PLATFORM)
    platform["gpuClasses"]["b100-mig"] = dict(platform["gpuClasses"]["a100-mig"])
    platform["nodePools"]["mig2"] = {"gpuClass": "b100-mig", "gpusPerNode": 8, "nodes": ["m2"], "migLayout": "all-1g.10gb"}
    lab = queue_lab("kueue", gpuClasses=platform["gpuClasses"], nodePools=platform["nodePools"])
    tenant = make_tenant(gpu={"classes": ["b100-mig", "a100-mig"]}, quota={"mig": {"1g.10gb": 5}})
    assert kueue.gpu_flavor_quotas(tenant, lab.view(tenant)) == {
        "mig": {"nvidia.com/mig-1g.10gb": 5},
        "mig2": {"nvidia.com/mig-1g.10gb": 0},
    }


def test_a_pool_without_an_owning_tenant_tolerates_the_shared_gpu_taint():
    lab = queue_lab("kueue")
    # the owner of a dedicated pool is the tenant that lists it; without tenants nobody owns h100-train
    empty = Environment(lab.name, lab.platform, None, [])
    keys = {f["metadata"]["name"]: [t["key"] for t in f["spec"].get("tolerations", [])] for f in kueue.resource_flavors(empty.facts)}
    assert keys["h100-train"] == ["nvidia.com/gpu"] and keys["default-flavor"] == []
    owned = {f["metadata"]["name"]: f["spec"]["tolerations"] for f in kueue.resource_flavors(lab.facts) if "tolerations" in f["spec"]}
    assert [t["key"] for t in owned["h100-train"]] == ["gpu.example.com/tenant"]


def test_placement_and_queue_flavors_reach_the_same_pools(environments):
    for environment in environments.values():
        for loaded in environment.tenants:
            view = environment.view(loaded.spec)
            assert placement(loaded.spec, view).pools == kueue.flavor_pools(loaded.spec, view) == list(view.reachable_pools)


# ---- Cohorts: spare capacity and nesting ---------------------------------------------------------


def test_a_pool_no_tenant_holds_is_the_spare_cohorts_quota_and_research_may_borrow_it(tmp_path):
    # the measured case: a shared pool of 16 H100s appended to the stack, every ClusterQueue at 0 there
    environment = load_environment(write_spare_project(tmp_path / "p"), "prod")
    cohorts = {o["metadata"]["name"]: o["spec"] for o in kueue.cohorts(environment.facts)}
    assert list(cohorts) == ["shared"]
    spare = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in cohorts["shared"]["resourceGroups"][0]["flavors"]}
    # h100-spare whole; a100-mig's 8 1g.10gb slices eval does not hold; a100-shared (eval holds all 20) has none
    assert spare == {
        "a100-mig": {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-3g.40gb": "0"},
        "h100-spare": {"nvidia.com/gpu": "16", "nvidia.com/mig-1g.10gb": "0", "nvidia.com/mig-3g.40gb": "0"},
    }
    research = next(t.spec for t in environment.tenants if t.name == "research")
    assert _groups(_queue(environment, "research"))[1] == {"h100-spare": {"nvidia.com/gpu": {"name": "nvidia.com/gpu", "nominalQuota": "0"}}}
    # the ResourceQuota admits the pods of what the queue can borrow there (the one rule)
    assert queues.gpu_ceiling_by_resource(research, environment.view(research))["nvidia.com/gpu"] == 16
    assert environment.facts.unqueued_pools == {}


def test_a_spare_cohort_outside_a_tenants_tree_lends_it_nothing(tmp_path):
    root = write_spare_project(tmp_path / "p")
    replace_once(root / "stacks" / "Pulumi.prod.yaml", "      defaultCohort: shared\n", "      spareCohort: elsewhere\n")
    environment = load_environment(root, "prod")
    (cohort,) = kueue.cohorts(environment.facts)
    assert cohort["metadata"]["name"] == "elsewhere" and cohort["spec"]["resourceGroups"]
    research = next(t.spec for t in environment.tenants if t.name == "research")
    assert queues.gpu_ceiling_by_resource(research, environment.view(research)).get("nvidia.com/gpu", 0) == 0
    assert environment.facts.unqueued_pools == {"h100-spare": (
        "the tenants whose ClusterQueues list it (research) hold no quota on it, and cohort 'elsewhere' lends it to none of them")}


def test_nested_cohorts_name_their_parent_and_the_root_holds_the_spare():
    lab = queue_lab("kueue")   # defaultCohort research, nested under org
    cohorts = {o["metadata"]["name"]: o["spec"] for o in kueue.cohorts(lab.facts)}
    assert sorted(cohorts) == ["org", "research", "solo"]
    assert cohorts["research"] == {"parentName": "org"} and cohorts["solo"] == {}
    flavors = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in cohorts["org"]["resourceGroups"][0]["flavors"]}
    # a100-solo: 8 x 1.5 = 12, bench holds 8; never the dedicated h100-train
    assert flavors["a100-solo"]["nvidia.com/gpu"] == "4" and "h100-train" not in flavors
    assert [o["kind"] for o in kueue.platform_kueue_objects(lab.facts)].count("Cohort") == 3


# --- the queue-pinning policy: no GPU pod outside the tenant's queue ---------------------------

TENANT_NS = {"metadata": {"name": "bench", "labels": {"gpu-tenancy.dev/tenant": "bench"}}}
DIRECT_NS = {"metadata": {"name": "svc", "labels": {"gpu-tenancy.dev/tenant": "svc", "gpu-tenancy.dev/queue-admission": "direct"}}}
MEMBER = {"scheduler": False, "jobController": False}   # what `authorizer` answers for a tenant member


def _pod(gpus: int = 1, queue: str | None = "default", gates: bool = False, claims: bool = False) -> dict:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    pod: dict = {"kind": "Pod", "metadata": {"name": "p", "labels": {}},
                 "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}}
    if queue is not None:
        pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if gates:
        pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    if claims:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    return pod


def _job(queue: str | None = "default", suspend: bool | None = None, gpus: int = 1, annotations: dict | None = None) -> dict:
    job = {"kind": "Job", "metadata": {"name": "j", "labels": {}}, "spec": {"template": {"spec": _pod(gpus=gpus, queue=None)["spec"]}}}
    if annotations:
        job["spec"]["template"]["metadata"] = {"annotations": annotations}
    if queue is not None:
        job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if suspend is not None:
        job["spec"]["suspend"] = suspend
    return job


@pytest.fixture(scope="module")
def pinning() -> dict:
    return kueue.queue_pinning_policy(queue_lab("kueue").facts)[0]


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_gpu_pod_must_name_the_local_queue(engine, pinning):
    def admit(obj, namespace=TENANT_NS, given=MEMBER, resource="pods"):
        return replay(engine, pinning, obj, resource=resource, namespace=namespace, given=given)

    assert admit(_pod(queue="default", gates=True)) == []
    (refused,) = admit(_pod(queue=None))
    assert "the label kueue.x-k8s.io/queue-name: default (got '') and Kueue's scheduling gate" in refused
    assert refused.startswith("a pod that requests GPUs must go through the tenant's queue")
    assert admit(_pod(queue="default", gates=False))                # labelled, but Kueue skipped it
    assert admit(_pod(gpus=0, claims=True, queue="other", gates=True))   # a DRA claim is a GPU request too
    assert admit(_pod(gpus=0, queue=None)) == []                    # CPU pods may run outside the queue
    assert admit(_pod(queue=None), namespace=DIRECT_NS) == []      # `queue.admission: direct`
    assert admit(_pod(queue=None), given={**MEMBER, "jobController": True}) == []   # a Job's pods: the Job was checked
    assert admit(_job(queue=None), resource="jobs")[0].startswith("a Job that requests GPUs must go through")
    assert admit(_job(), resource="jobs") == []


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_only_the_scheduler_changes_what_queues_a_pod(engine, pinning):
    def update(old, new, given=MEMBER, resource="pods"):
        return replay(engine, pinning, new, old=old, operation="UPDATE", resource=resource, namespace=TENANT_NS, given=given)

    assert update(_pod(gates=True), _pod(gates=True)) == []
    assert update(_pod(gates=True), _pod(gates=False)) == [
        "only Kueue lifts the scheduling gate kueue.x-k8s.io/admission: the pod starts when the tenant's queue admits it"]
    assert update(_pod(gates=True), _pod(gates=False), given={**MEMBER, "scheduler": True}) == []
    assert update(_pod(gpus=0, queue="default"), _pod(gpus=0, queue=None))[0].startswith("the label kueue.x-k8s.io/queue-name cannot")
    assert update(_job(suspend=True), _job(suspend=False), resource="jobs") == [
        "a queued Job starts when Kueue admits it: only Kueue sets its spec.suspend to false"]
    assert update(_job(suspend=True), _job(suspend=False), resource="jobs", given={**MEMBER, "scheduler": True}) == []


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_suspended_job_outside_the_queue_cannot_gain_gpus(engine, pinning):
    """A suspended Job's template may change; a CPU Job created without the label must not get GPUs
    added and then be unsuspended outside Kueue."""
    def update(old, new, given=MEMBER, namespace=TENANT_NS):
        return replay(engine, pinning, new, old=old, operation="UPDATE", resource="jobs", namespace=namespace, given=given)

    cpu = _job(queue=None, suspend=True, gpus=0)
    (refused,) = update(cpu, _job(queue=None, suspend=True))
    assert refused.startswith("GPU requests cannot be added to a Job outside the tenant's queue "
                              "(label kueue.x-k8s.io/queue-name: default, got '')")
    assert update(cpu, _job(queue=None, suspend=True, gpus=0, annotations={"team": "a"})) == []   # CPU edits pass
    assert update(cpu, _job(queue=None, suspend=False, gpus=0)) == []                            # and so does starting it
    assert update(_job(suspend=True, gpus=0), _job(suspend=True)) == []          # in the queue: Kueue meters it
    assert update(_job(queue=None, suspend=True), _job(queue=None, suspend=True)) == []   # GPUs it already had
    assert update(cpu, _job(queue=None, suspend=True), namespace=DIRECT_NS) == []          # `queue.admission: direct`
    assert update(cpu, _job(queue=None, suspend=True), given={**MEMBER, "scheduler": True}) == []
