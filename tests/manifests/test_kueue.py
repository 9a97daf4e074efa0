"""Kueue objects: a flavor per node pool, a ClusterQueue per tenant listing the pools it may reach, LocalQueues."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from components.load import load_environment
from components.manifests import kueue
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


@pytest.mark.parametrize("change", [{"previous_names": ["inference-old"]}, {"lifecycle": "decommissioned"}])
def test_a_direct_tenant_gets_no_cluster_queue_when_renamed_or_decommissioned(prod, change):
    # #41: a queue-less tenant got a stopped ClusterQueue (and a warning about evicting queued work it
    # never had) on rename and on decommission; a queued tenant still gets its stopped one.
    inference = next(t.spec for t in prod.tenants if t.name == "inference")
    direct = inference.model_copy(update={"queue": inference.queue.model_copy(update={"admission": "direct"}), **change})
    queued = inference.model_copy(update=change)
    assert kueue.tenant_kueue_objects(direct, prod.view(direct)) == []
    stopped = [o for o in kueue.tenant_kueue_objects(queued, prod.view(queued)) if o["spec"] == {"stopPolicy": "HoldAndDrain"}]
    assert [o["metadata"]["name"] for o in stopped] == [change.get("previous_names", ["inference"])[0]]


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
    assert environment.view(research).gpu_ceiling_by_resource["nvidia.com/gpu"] == 16
    assert environment.facts.unqueued_pools == {}


def test_a_spare_cohort_outside_a_tenants_tree_lends_it_nothing(tmp_path):
    root = write_spare_project(tmp_path / "p")
    replace_once(root / "stacks" / "Pulumi.prod.yaml", "      defaultCohort: shared\n", "      spareCohort: elsewhere\n")
    environment = load_environment(root, "prod")
    (cohort,) = kueue.cohorts(environment.facts)
    assert cohort["metadata"]["name"] == "elsewhere" and cohort["spec"]["resourceGroups"]
    research = next(t.spec for t in environment.tenants if t.name == "research")
    assert environment.view(research).gpu_ceiling_by_resource.get("nvidia.com/gpu", 0) == 0
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
MEMBER = {"scheduler": False, "jobController": False, "parentController": False}   # what `authorizer` answers for a tenant member
JOBSET_CONTROLLER = {**MEMBER, "jobController": True, "parentController": True}   # may update jobs/status and jobsets/status


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
    assert admit(_job(suspend=True), resource="jobs") == []
    # Kueue suspends the labelled Jobs it queues; one it skipped (its controller a queued Job or JobSet) is not
    (unqueued,) = admit(_job(), resource="jobs")
    assert ", suspended by Kueue (it is not when the Job names a queued workload as its controller)" in unqueued


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


# --- JobSets: one Workload for the JobSet, its Jobs trusted only from the JobSet controller ---------


def _jobset(queue: str | None = "default", gpus: int = 1, suspend: bool | None = None, annotations: dict | None = None) -> dict:
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "labels": {}},
          "spec": {"replicatedJobs": [
              {"name": "driver", "replicas": 1, "template": {"spec": {"template": {"spec": _pod(gpus=0, queue=None)["spec"]}}}},
              {"name": "workers", "replicas": 2, "template": {"spec": {"template": {"spec": _pod(gpus=gpus, queue=None)["spec"]}}}},
          ]}}
    if queue is not None:
        js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if suspend is not None:
        js["spec"]["suspend"] = suspend
    if annotations:
        js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["metadata"] = {"annotations": annotations}
    return js


def _template(gpus: int) -> dict:
    return {"spec": _pod(gpus=gpus, queue=None)["spec"]}


def _labelled(obj: dict, queue: str | None, suspend: bool | None) -> dict:
    if queue is not None:
        obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    return obj


def _ray_cluster_spec(gpus: int, annotations: dict | None) -> dict:
    """A head (no GPUs) and a GPU worker group; `annotations` on the worker template."""
    worker = _template(gpus)
    if annotations:
        worker["metadata"] = {"annotations": annotations}
    return {"headGroupSpec": {"rayStartParams": {}, "template": _template(0)},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "rayStartParams": {}, "template": worker}]}


def _raycluster(queue: str | None = "default", gpus: int = 1, suspend: bool | None = None, annotations: dict | None = None) -> dict:
    rc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "labels": {}},
          "spec": _ray_cluster_spec(gpus, annotations)}
    return _labelled(rc, queue, suspend)


def _rayjob(queue: str | None = "default", gpus: int = 1, suspend: bool | None = None, annotations: dict | None = None,
            submitter_gpus: int = 0) -> dict:
    spec = {"entrypoint": "python train.py", "shutdownAfterJobFinishes": True, "rayClusterSpec": _ray_cluster_spec(gpus, annotations)}
    if submitter_gpus:
        spec["submitterPodTemplate"] = _template(submitter_gpus)
    return _labelled({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj", "labels": {}}, "spec": spec}, queue, suspend)


def _lws(queue: str | None = "default", gpus: int = 1, suspend: bool | None = None, annotations: dict | None = None) -> dict:
    """A LeaderWorkerSet (it has no `suspend`: Kueue gates its pods): a CPU leader, GPU workers."""
    worker = _template(gpus)
    if annotations:
        worker["metadata"] = {"annotations": annotations}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "lws", "labels": {}},
           "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 4, "leaderTemplate": _template(0), "workerTemplate": worker}}}
    return _labelled(lws, queue, None)


WORKLOADS = {"jobs": _job, "jobsets": _jobset, "rayjobs": _rayjob, "rayclusters": _raycluster,
             "leaderworkersets": _lws}   # resource -> builder of the kinds with pod templates
KINDS = {"jobs": "Job", "jobsets": "JobSet", "rayjobs": "RayJob", "rayclusters": "RayCluster", "leaderworkersets": "LeaderWorkerSet"}


def _child_job(queue: str | None = None, suspend: bool | None = True, parallelism: int = 1, kind: str = "JobSet") -> dict:
    """A Job as the JobSet controller makes it: its labels (any member can write them) and the controller ownerReference."""
    job = _job(queue=queue, suspend=suspend)
    job["metadata"]["labels"].update({"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "workers"})
    job["metadata"]["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": kind, "name": "js",
                                           "uid": "u", "controller": True}]
    job["spec"]["parallelism"] = parallelism
    return job


def test_the_policy_matches_jobsets(pinning):
    rules = pinning["spec"]["matchConstraints"]["resourceRules"]
    assert {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["jobsets"]} in rules


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_gpu_jobset_must_name_the_local_queue(engine, pinning):
    def admit(obj, operation="CREATE", old=None, namespace=TENANT_NS, given=MEMBER):
        return replay(engine, pinning, obj, resource="jobsets", operation=operation, old=old, namespace=namespace, given=given)

    assert admit(_jobset(suspend=True)) == []
    assert admit(_jobset(suspend=False))[0].endswith(
        ", suspended by Kueue (it is not when the JobSet names a queued workload as its controller); label the Job or JobSet, "
        "or the pod template of a Deployment or StatefulSet (docs/queues-and-vclusters.md)")
    (refused,) = admit(_jobset(queue=None))
    assert refused.startswith("a JobSet that requests GPUs must go through the tenant's queue: the label kueue.x-k8s.io/queue-name: default (got '')")
    assert admit(_jobset(queue="other"))                               # another LocalQueue name: not the tenant's
    assert admit(_jobset(queue=None, gpus=0)) == []                    # CPU JobSets may run outside the queue
    assert admit(_jobset(queue=None), namespace=DIRECT_NS) == []       # `queue.admission: direct`
    # its controller makes new Jobs from the current spec: GPUs cannot be added to an unqueued JobSet later
    assert admit(_jobset(queue=None), operation="UPDATE", old=_jobset(queue=None, gpus=0))[0].startswith(
        "GPU requests cannot be added to a JobSet outside the tenant's queue")
    assert admit(_jobset(), operation="UPDATE", old=_jobset()) == []
    # only Kueue unsuspends a queued JobSet, and the label stays
    assert admit(_jobset(suspend=False), operation="UPDATE", old=_jobset(suspend=True)) == [
        "a queued JobSet starts when Kueue admits it: only Kueue sets its spec.suspend to false"]
    assert admit(_jobset(suspend=False), operation="UPDATE", old=_jobset(suspend=True), given={**MEMBER, "scheduler": True}) == []
    assert admit(_jobset(suspend=False), operation="UPDATE", old=_jobset(suspend=True), given=JOBSET_CONTROLLER)
    assert admit(_jobset(gpus=0, queue=None), operation="UPDATE", old=_jobset(gpus=0))[0].startswith("the label kueue.x-k8s.io/queue-name cannot")


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
@pytest.mark.parametrize("queue", [None, "default"])
def test_a_jobsets_job_comes_only_from_the_jobset_controller(engine, pinning, queue):
    """Kueue skips a Job naming a queued JobSet as its controller, labelled or not: a member who
    writes that ownerReference (and the JobSet's labels) must not get a Job outside the queue."""
    def admit(obj, given=MEMBER, namespace=TENANT_NS):
        return replay(engine, pinning, obj, resource="jobs", namespace=namespace, given=given)

    assert admit(_child_job(queue=queue), given=JOBSET_CONTROLLER) == []
    (refused,) = admit(_child_job(queue=queue))
    assert refused == ("a Job that requests GPUs and names a JobSet as its controller is created by the JobSet controller, "
                       "counted in its parent's Workload: create the JobSet (labelled kueue.x-k8s.io/queue-name: default) instead")
    assert admit(_child_job(queue=queue), given={**MEMBER, "jobController": True})   # jobs/status alone is not the JobSet controller
    assert admit(_child_job(queue=queue), namespace=DIRECT_NS) == []
    other_owner = _child_job(queue="default", kind="CronJob")              # not a parent Kueue skips: queued as any Job
    other_owner["metadata"]["ownerReferences"][0]["apiVersion"] = "batch/v1"
    assert admit(other_owner) == []


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
@pytest.mark.parametrize("resource", WORKLOADS)
def test_a_suspended_job_outside_the_queue_cannot_gain_gpus(engine, pinning, resource):
    """A suspended Job's template may change, and a JobSet's controller makes Jobs from its current
    spec; a CPU Job or JobSet created without the label must not get GPUs added and then be
    unsuspended outside Kueue. One rule for both kinds."""
    build, kind = WORKLOADS[resource], KINDS[resource]

    def update(old, new, given=MEMBER, namespace=TENANT_NS):
        return replay(engine, pinning, new, old=old, operation="UPDATE", resource=resource, namespace=namespace, given=given)

    cpu = build(queue=None, suspend=True, gpus=0)
    (refused,) = update(cpu, build(queue=None, suspend=True))
    assert refused.startswith(f"GPU requests cannot be added to a {kind} outside the tenant's queue "
                              "(label kueue.x-k8s.io/queue-name: default, got '')")
    assert refused.endswith(f"so create a new {kind} with it")
    assert update(cpu, build(queue=None, suspend=True, gpus=0, annotations={"team": "a"})) == []   # CPU edits pass
    assert update(cpu, build(queue=None, suspend=False, gpus=0)) == []                            # and so does starting it
    assert update(build(suspend=True, gpus=0), build(suspend=True)) == []          # in the queue: Kueue meters it
    assert update(build(queue=None, suspend=True), build(queue=None, suspend=True)) == []   # GPUs it already had
    assert update(cpu, build(queue=None, suspend=True), namespace=DIRECT_NS) == []          # `queue.admission: direct`
    assert update(cpu, build(queue=None, suspend=True), given={**MEMBER, "scheduler": True}) == []
    # one that has GPUs outside the queue (made before its namespace was queued, or by an admin) keeps its spec
    had = build(queue=None, suspend=True)
    changed = build(queue=None, suspend=False, annotations={"team": "a"})   # started, or (a LeaderWorkerSet) any spec edit
    (kept,) = update(had, changed)
    assert kept.startswith(f"a {kind} that requests GPUs outside the tenant's queue keeps its spec (label")
    assert update(had, changed, given={**MEMBER, "scheduler": True}) == []
    relabelled = build(queue=None, suspend=True)
    relabelled["metadata"]["labels"]["team"] = "a"
    assert update(had, relabelled) == []                                            # its metadata is the member's


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_jobsets_job_changes_only_with_its_jobset(engine, pinning):
    def update(old, new, given=MEMBER):
        return replay(engine, pinning, new, old=old, operation="UPDATE", resource="jobs", namespace=TENANT_NS, given=given)

    frozen = ("a Job that requests GPUs outside a queue of its own (a JobSet's Job, or one orphaned from its JobSet) "
              "changes only with its JobSet: its spec and controller are the JobSet controller's; change or delete the JobSet")
    # the JobSet controller resumes its Jobs when Kueue admits the JobSet (labelled child Jobs too)
    for queue in (None, "default"):
        assert update(_child_job(queue=queue), _child_job(queue=queue, suspend=False), given=JOBSET_CONTROLLER) == []
        assert frozen in update(_child_job(queue=queue), _child_job(queue=queue, suspend=False))
        assert update(_child_job(queue=queue, suspend=False), _child_job(queue=queue, suspend=False, parallelism=8)) == [frozen]
    orphaned = _child_job()
    del orphaned["metadata"]["ownerReferences"]
    assert update(_child_job(), orphaned) == [frozen]                   # the controller reference stays
    assert update(_child_job(), orphaned, given=JOBSET_CONTROLLER) == []   # the garbage collector orphans it
    resumed = copy.deepcopy(orphaned)
    resumed["spec"]["suspend"] = False
    kept = "a Job that requests GPUs outside the tenant's queue keeps its spec"
    (refused,) = update(orphaned, resumed)                             # orphaned, still never by hand: a Job
    assert refused.startswith(kept)                                     # outside the queue keeps its spec
    labels_only = _child_job()
    labels_only["metadata"]["labels"]["team"] = "x"
    assert update(_child_job(), labels_only) == []                      # metadata is the member's
    (refused,) = update(_job(suspend=True, queue=None), _job(suspend=False, queue=None))
    assert refused.startswith(kept)
    cpu = _child_job()
    cpu["spec"]["template"]["spec"] = _pod(gpus=0, queue=None)["spec"]
    cpu_resumed = copy.deepcopy(cpu)
    cpu_resumed["spec"]["suspend"] = False
    assert update(cpu, cpu_resumed) == []                               # CPU Jobs are the member's


# --- RayJobs, RayClusters, LeaderWorkerSets: queued as Kueue queues them, their children trusted only from the operator


KUBERAY_OPERATOR = {**MEMBER, "jobController": True, "parentController": True}   # may update rayjobs/ and rayclusters/status


def _owned(obj: dict, kind: str, api_version: str = "ray.io/v1") -> dict:
    """`obj` naming a `kind` as its controller, as the KubeRay operator makes it (any member can write that too)."""
    obj["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "u", "controller": True}]
    return obj


def test_the_policy_matches_ray_and_leaderworkersets(pinning):
    rules = pinning["spec"]["matchConstraints"]["resourceRules"]
    for group, resource in (("ray.io", "rayjobs"), ("ray.io", "rayclusters"), ("leaderworkerset.x-k8s.io", "leaderworkersets")):
        assert {"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": [resource]} in rules


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
@pytest.mark.parametrize("resource", ["rayjobs", "rayclusters"])
def test_a_gpu_ray_workload_must_name_the_local_queue_and_arrive_suspended(engine, pinning, resource):
    build, kind = WORKLOADS[resource], KINDS[resource]

    def admit(obj, operation="CREATE", old=None, namespace=TENANT_NS, given=MEMBER):
        return replay(engine, pinning, obj, resource=resource, operation=operation, old=old, namespace=namespace, given=given)

    assert admit(build(suspend=True)) == []                            # as Kueue's webhook leaves it
    (unqueued,) = admit(build(suspend=False))
    assert f", suspended by Kueue (it is not when the {kind} names a queued workload as its controller)" in unqueued
    (refused,) = admit(build(queue=None))
    assert refused.startswith(f"a {kind} that requests GPUs must go through the tenant's queue: the label "
                              "kueue.x-k8s.io/queue-name: default (got '')")
    assert admit(build(queue="other", suspend=True))
    assert admit(build(queue=None, gpus=0)) == []                      # CPU Ray may run outside the queue
    assert admit(build(queue=None), namespace=DIRECT_NS) == []
    assert admit(build(suspend=False), operation="UPDATE", old=build(suspend=True)) == [
        f"a queued {kind} starts when Kueue admits it: only Kueue sets its spec.suspend to false"]
    assert admit(build(suspend=False), operation="UPDATE", old=build(suspend=True), given={**MEMBER, "scheduler": True}) == []
    assert admit(build(queue=None, suspend=True), operation="UPDATE", old=build(suspend=True))[0].startswith(
        "the label kueue.x-k8s.io/queue-name cannot")


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_rayjobs_submitter_requests_gpus_too(engine, pinning):
    """Kueue counts the submitter (K8sJobMode) as a pod set of the RayJob: GPUs there are GPUs of the RayJob."""
    (refused,) = replay(engine, pinning, _rayjob(queue=None, gpus=0, submitter_gpus=1), resource="rayjobs", namespace=TENANT_NS, given=MEMBER)
    assert refused.startswith("a RayJob that requests GPUs must go through the tenant's queue")


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
@pytest.mark.parametrize("queue", [None, "default"])
def test_a_rayjobs_cluster_and_submitter_come_only_from_the_operator(engine, pinning, queue):
    """KubeRay copies a RayJob's labels onto its RayCluster, and Kueue skips a RayCluster or Job naming
    a queued RayJob as controller: a member writing that ownerReference must not get one outside the queue."""
    def admit(obj, resource, given=MEMBER, namespace=TENANT_NS):
        return replay(engine, pinning, obj, resource=resource, namespace=namespace, given=given)

    cluster = _owned(_raycluster(queue=queue, suspend=None), "RayJob")
    assert admit(cluster, "rayclusters", given=KUBERAY_OPERATOR) == []
    assert admit(cluster, "rayclusters") == [
        "a RayCluster that requests GPUs and names a RayJob as its controller is created by the RayJob controller, counted in "
        "its parent's Workload: create the RayJob (labelled kueue.x-k8s.io/queue-name: default) instead"]
    assert admit(cluster, "rayclusters", namespace=DIRECT_NS) == []
    submitter = _owned(_job(queue=queue, suspend=None), "RayJob")
    assert admit(submitter, "jobs", given=KUBERAY_OPERATOR) == []
    assert admit(submitter, "jobs")[0].startswith("a Job that requests GPUs and names a RayJob as its controller")
    service_owned = _owned(_raycluster(queue="default", suspend=True), "RayService")   # not a parent Kueue skips: queued as
    assert admit(service_owned, "rayclusters") == []                                   # any RayCluster
    assert admit(_owned(_raycluster(queue=None), "RayService"), "rayclusters")


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_rayclusters_pods_come_only_from_the_operator(engine, pinning):
    """KubeRay creates a RayCluster's head and worker pods ungated (Kueue counts them in the RayCluster's
    Workload): a GPU pod naming a RayCluster as controller is admitted only from the operator."""
    def admit(pod, given=MEMBER):
        return replay(engine, pinning, pod, resource="pods", namespace=TENANT_NS, given=given)

    for queue in (None, "default"):
        pod = _owned(_pod(queue=queue), "RayCluster")
        assert admit(pod, given=KUBERAY_OPERATOR) == []
        assert admit(pod) == ["a Pod that requests GPUs and names a RayCluster as its controller is created by the RayCluster "
                              "controller, counted in its parent's Workload: create the RayCluster (labelled "
                              "kueue.x-k8s.io/queue-name: default) instead"]
    assert admit(_owned(_pod(queue="default", gates=True), "RayCluster"))   # gated or not: never a member's
    assert admit(_owned(_pod(gpus=0, queue=None), "RayCluster")) == []      # CPU pods are the member's
    not_ray = _owned(_pod(queue=None), "RayCluster", api_version="example.com/v1")   # another group's kind: an ordinary pod
    assert admit(not_ray)[0].startswith("a pod that requests GPUs must go through the tenant's queue")


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_rayjobs_cluster_changes_only_with_its_rayjob(engine, pinning):
    """KubeRay disregards later changes of a RayJob's rayClusterSpec but reconciles its RayCluster: a member
    raising that RayCluster's workers would get pods its RayJob's Workload does not count."""
    def update(old, new, given=MEMBER):
        return replay(engine, pinning, new, old=old, operation="UPDATE", resource="rayclusters", namespace=TENANT_NS, given=given)

    frozen = ("a RayCluster that requests GPUs outside a queue of its own (a RayJob's RayCluster, or one orphaned from its "
              "RayJob) changes only with its RayJob: its spec and controller are the RayJob controller's; change or delete the RayJob")
    old = _owned(_raycluster(suspend=None), "RayJob")
    more = copy.deepcopy(old)
    more["spec"]["workerGroupSpecs"][0]["replicas"] = 16
    assert update(old, more) == [frozen]
    assert update(old, more, given=KUBERAY_OPERATOR) == []
    orphaned = copy.deepcopy(old)
    del orphaned["metadata"]["ownerReferences"]
    assert update(old, orphaned) == [frozen]
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"]["team"] = "a"
    assert update(old, relabelled) == []


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_a_gpu_leaderworkerset_must_name_the_local_queue(engine, pinning):
    """Kueue does not suspend a LeaderWorkerSet: it labels and annotates its pod templates, and its pods
    (the StatefulSet controller's) are gated, as the pod rules require; the set itself needs the label."""
    def admit(obj, resource="leaderworkersets", namespace=TENANT_NS, given=MEMBER):
        return replay(engine, pinning, obj, resource=resource, namespace=namespace, given=given)

    assert admit(_lws()) == []
    (refused,) = admit(_lws(queue=None))
    assert refused.startswith("a LeaderWorkerSet that requests GPUs must go through the tenant's queue: the label "
                              "kueue.x-k8s.io/queue-name: default (got '')")
    assert admit(_lws(queue="other"))
    assert admit(_lws(queue=None, gpus=0)) == []
    assert admit(_lws(queue=None), namespace=DIRECT_NS) == []
    sts_pod = _owned(_pod(queue="default", gates=False), "StatefulSet", api_version="apps/v1")   # as a StatefulSet makes it
    assert admit(sts_pod, resource="pods")[0].startswith("a pod that requests GPUs must go through the tenant's queue")
    assert admit(_owned(_pod(queue="default", gates=True), "StatefulSet", api_version="apps/v1"), resource="pods") == []


# ---- DRA classes (tests/fixtures/dra-kueue) -------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
DRA_KUEUE = REPO / "tests" / "fixtures" / "dra-kueue"
B200_QUEUED = "deviceclass.resource.kubernetes.io/b200.gpu.dra.dev"


def _dra_kueue(tmp_path: Path, *edits: tuple[str, str]) -> Environment:
    root = tmp_path / "project"
    shutil.copytree(DRA_KUEUE, root)
    for old, new in edits:
        replace_once(root / "stacks" / "Pulumi.dra.yaml", old, new)
    return load_environment(root, "dra")


def test_a_dra_only_class_is_queued_under_its_device_class_in_a_group_of_its_own():
    environment = load_environment(DRA_KUEUE, "dra")
    vision = _queue(environment, "vision")["spec"]["resourceGroups"]
    assert [g["coveredResources"] for g in vision] == [["cpu", "ephemeral-storage", "memory"], ["nvidia.com/gpu"], [B200_QUEUED]]
    assert vision[2]["flavors"] == [{"name": "b200-train", "resources": [{"name": B200_QUEUED, "nominalQuota": "1"}]}]
    # h100's DeviceClass maps nvidia.com/gpu: claims and device-plugin GPUs share the h100 pools' one resource.
    assert vision[1]["flavors"] == [{"name": "h100-shared", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]}]
    # No tenant's queue lists the b200 pool with nvidia.com/gpu, and one not granted b200 covers no B200 resource.
    for tenant in ("vision", "robotics", "speech"):
        groups = _queue(environment, tenant)["spec"]["resourceGroups"]
        for group in groups:
            assert not ("b200-train" in [f["name"] for f in group["flavors"]] and "nvidia.com/gpu" in group["coveredResources"])
    assert all(B200_QUEUED not in g["coveredResources"] for g in _queue(environment, "robotics")["spec"]["resourceGroups"])


def test_kueue_maps_every_device_class_that_meters_a_gpu_class_and_no_other():
    platform = load_environment(DRA_KUEUE, "dra").platform
    assert kueue.kueue_configuration(platform) == {"resources": {"deviceClassMappings": [
        {"name": B200_QUEUED, "deviceClassNames": ["b200.gpu.dra.dev"]},
        {"name": "nvidia.com/gpu", "deviceClassNames": ["h100.gpu.dra.dev"]},
    ]}}
    # Without Kueue the stack needs none; the same classes on the stack without a scheduler.
    assert kueue.kueue_configuration(load_environment(REPO / "tests" / "fixtures" / "dra", "dra").platform) == {}


def test_a_dra_only_pools_spare_capacity_is_offered_in_its_own_group(tmp_path):
    environment = _dra_kueue(tmp_path, ("    scheduler: kueue\n", "    scheduler: kueue\n    queues: {defaultCohort: org}\n"))
    (spare,) = kueue.cohorts(environment.facts)
    groups = spare["spec"]["resourceGroups"]
    assert [g["coveredResources"] for g in groups] == [["nvidia.com/gpu"], [B200_QUEUED]]
    # 8 B200s, vision holds 1 nominally: 7 spare in the DRA-only group, none of it as nvidia.com/gpu.
    assert groups[1]["flavors"] == [{"name": "b200-train", "resources": [{"name": B200_QUEUED, "nominalQuota": "7"}]}]
