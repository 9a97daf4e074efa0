"""Kueue objects (`kueue.x-k8s.io/v1beta2`): per-GPU-class quotas that a ResourceQuota cannot express.

* a ResourceFlavor per GPU node pool (node labels: the pool's `<labelDomain>/gpu-class` and
  `<labelDomain>/pool`; tolerations: the pool's taint, its owner's on a dedicated pool,
  `nvidia.com/gpu=present` on a shared one), plus
  `default-flavor` for cpu and memory, which any node serves. Kueue injects a flavor's labels and
  tolerations into the pods it admits, so a Job with no selector of its own lands on exactly one
  pool and passes the placement policy;
* a ClusterQueue per tenant, named like the tenant, admitting workloads of its namespaces only
  (`namespaceSelector` on the tenant label). Two resource groups: cpu/memory in `default-flavor`,
  and every GPU resource in one flavor per pool the tenant may reach (and no other). A class quota
  is split across the tenant's pools of the class as the capacity check places it, so summed per
  resource the nominal quotas equal the namespace quota's nominal part. Borrowing happens within
  the tenant's cohort, flavor by flavor (pool by pool); `borrowingLimit`/`lendingLimit` cap it per
  class, and a class the tenant reaches only through its dedicated pools is neither lent nor
  borrowed (limits of 0);
* a LocalQueue `default` in each tenant namespace, pointing at the tenant's ClusterQueue;
* a Cohort per cohort, nested by `queues.cohorts.<name>.parent`; the spare cohort
  (`queues.spareCohort`, else the root of `defaultCohort`'s tree) holds, per shared pool, what no
  ClusterQueue holds nominally there, so that capacity nobody's quota covers can still be borrowed.

Kueue does not look at ResourceQuota: it admits workloads by its own bookkeeping, and the
ResourceQuota still rejects pods beyond the namespace's quota (see docs/queues-and-vclusters.md).
"""

from __future__ import annotations

from typing import NamedTuple

from ..fleet import gpu_capacity as cap
from ..fleet import feasibility as feas
from ..fleet.facts import FleetFacts, TenantView
from ..fleet.queue_arithmetic import KUEUE_CPU_FLAVOR, cohort_chain, cohort_of
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from .cel import as_dyn, cel_string
from .gpu_nodes import pool_taints
from .placement_policy import requests_gpu
from .meta import (
    deny_binding,
    KUEUE_ADMISSION_GATE,
    KUEUE_QUEUE_NAME_LABEL,
    QUEUE_ADMISSION_LABEL,
    TENANT_LABEL,
    KubeObject,
    gpu_class_label,
    kube_object,
    object_meta,
    owned_labels,
    platform_labels,
    pool_label,
)

API_VERSION = "kueue.x-k8s.io/v1beta2"
LOCAL_QUEUE = "default"
POLICY_NAME = "gpu-tenancy-kueue-queue"


def flavor_pools(tenant: Tenant, view: TenantView) -> list[str]:
    """The node pools whose flavors the tenant's ClusterQueue lists: exactly those its pods may land on.

    >>> flavor_pools(tenant, view), flavor_pools(prod.tenants[1].spec, prod.view(prod.tenants[1].spec))
    (['a100-mig', 'a100-shared'], ['h100-serve'])
    """
    return list(view.reachable_pools)


def gpu_flavor_quotas(tenant: Tenant, view: TenantView) -> dict[str, dict[str, int]]:
    """Nominal quota per flavor (node pool) and extended resource of the tenant's ClusterQueue.

    Every pool the tenant may reach is a flavor listing each GPU resource the pool offers (0 where
    the tenant holds no quota there, so that it may still borrow). A class quota (or MIG profile
    quota) is split across the tenant's pools of that class (offering that profile) as the
    capacity check's flow places it (`components.fleet.facts.FleetFacts.quota_split`), so the nominal
    quotas of all tenants on one pool fit in it together.

    >>> gpu_flavor_quotas(tenant, view)
    {'a100-mig': {'nvidia.com/mig-1g.10gb': 48, 'nvidia.com/mig-3g.40gb': 16}, 'a100-shared': {'nvidia.com/gpu': 20}}
    """
    platform = view.platform
    pools = flavor_pools(tenant, view)
    result: dict[str, dict[str, int]] = {
        pool: {resource: 0 for resource in cap.queue_gpu_resources(platform, platform.node_pools[pool])} for pool in pools
    }
    # A tenant the fleet does not count (tests, previews) is split on its own (`FleetFacts.view`).
    for commodity, by_pool in view.quota_split:
        for pool, units in by_pool:
            for resource in _queued(platform, pool, commodity):
                if pool in result:
                    result[pool][resource] = result[pool].get(resource, 0) + units
    return {pool: dict(sorted(resources.items())) for pool, resources in sorted(result.items())}


def _queued(platform: Platform, pool: str, commodity) -> list[str]:
    """The queue resources a commodity's units on `pool` are counted as (`cap.queue_resources`)."""
    return cap.queue_resources(platform, platform.node_pools[pool].gpu_class, feas.commodity_resource(platform, commodity))


def device_class_mappings(platform: Platform) -> list[dict]:
    """Kueue's `resources.deviceClassMappings` (its Configuration, v1beta2): every DeviceClass that
    meters a GPU class, under the resource its tenants' ClusterQueues count it as
    (`cap.device_class_queue_resource`). Kueue refuses a workload whose claim template names a class
    no mapping lists, so a class metering no GPU class (pinned at 0) is left out on purpose.

    >>> device_class_mappings(dra.platform)   # doctest: +NORMALIZE_WHITESPACE
    [{'name': 'deviceclass.resource.kubernetes.io/b200.gpu.dra.dev', 'deviceClassNames': ['b200.gpu.dra.dev']},
     {'name': 'nvidia.com/gpu', 'deviceClassNames': ['h100.gpu.dra.dev']}]
    """
    by_resource: dict[str, list[str]] = {}
    for name in sorted(platform.device_classes):
        resource = cap.device_class_queue_resource(platform, name)
        if resource is not None:
            by_resource.setdefault(resource, []).append(name)
    return [{"name": resource, "deviceClassNames": names} for resource, names in sorted(by_resource.items())]


def kueue_configuration(platform: Platform) -> dict:
    """The fields of Kueue's own Configuration (`config.kueue.x-k8s.io/v1beta2`, the `kueue-manager-config`
    ConfigMap of its installation) the stack needs: its DRA mappings; {} when it needs none.

    >>> kueue_configuration(prod.platform)
    {}
    """
    if platform.scheduler != "kueue":
        return {}
    mappings = device_class_mappings(platform)
    return {"resources": {"deviceClassMappings": mappings}} if mappings else {}


def gpu_class_quotas(tenant: Tenant, view: TenantView) -> dict[str, dict[str, int]]:
    """`gpu_flavor_quotas` summed per GPU class: the tenant's nominal quota per class and resource.

    >>> gpu_class_quotas(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["a100"]
    {'nvidia.com/gpu': 20}
    """
    platform = view.platform
    result: dict[str, dict[str, int]] = {}
    for pool, resources in gpu_flavor_quotas(tenant, view).items():
        per_class = result.setdefault(platform.node_pools[pool].gpu_class, {})
        for resource, count in resources.items():
            per_class[resource] = per_class.get(resource, 0) + count
    return {name: dict(sorted(r.items())) for name, r in sorted(result.items())}


def _flavor_tolerations(facts: FleetFacts, pool: str) -> list[dict]:
    """Tolerations for the pool's taints: a dedicated pool's `<labelDomain>/tenant=<owner>:NoSchedule`,
    a shared pool's `nvidia.com/gpu=present:NoSchedule`.

    Only the owner's ClusterQueue lists a dedicated pool's flavor, so only the owner's pods get the
    toleration -- the one toleration of that key the placement policy lets them carry. A shared
    pool's flavor is in the ClusterQueues of the tenants granted its class, and Kueue assigns it
    to pod sets that request the pool's GPU resources only (cpu-only pod sets get
    `default-flavor`), so the toleration goes to GPU pods alone, the only pods the policy lets
    tolerate that taint.
    """
    return [
        {"effect": taint["effect"], "key": taint["key"], "operator": "Equal", "value": taint["value"]}
        for taint in pool_taints(facts, pool)
    ]


def resource_flavors(facts: FleetFacts) -> list[KubeObject]:
    """`default-flavor` (cpu, memory; no node constraint) and one ResourceFlavor per GPU node pool.

    A flavor's node labels are the pool's class and pool labels, which every node of the pool
    carries: Kueue injects them as the node selector of the pods it admits, so they land on that
    pool and pass the tenant's placement policy (a pool selector always pins) with no selector of
    their own. A flavor per class would span pools dedicated to different tenants.

    >>> [f["metadata"]["name"] for f in resource_flavors(dev.facts)]
    ['a100-mig', 'default-flavor', 'l4-shared']
    """
    platform = facts.platform
    labels = platform_labels(facts.environment_label)
    flavors = [kube_object(API_VERSION, "ResourceFlavor", object_meta(KUEUE_CPU_FLAVOR, labels=labels), spec={})]
    for name, pool in sorted(platform.node_pools.items()):
        if pool.gpu_class not in platform.gpu_classes:
            continue
        spec: dict = {"nodeLabels": {gpu_class_label(platform): pool.gpu_class, pool_label(platform): name}}
        tolerations = _flavor_tolerations(facts, name)
        if tolerations:
            spec["tolerations"] = tolerations
        flavors.append(kube_object(API_VERSION, "ResourceFlavor", object_meta(name, labels=labels), spec=spec))
    return sorted(flavors, key=lambda f: f["metadata"]["name"])


def _resource(name: str, nominal, borrowing: int | None = None, lending: int | None = None) -> dict:
    item: dict = {"name": name, "nominalQuota": str(nominal)}
    if borrowing is not None:
        item["borrowingLimit"] = str(borrowing)
    if lending is not None:
        item["lendingLimit"] = str(lending)
    return item


def resource_groups(tenant: Tenant, view: TenantView) -> list[dict]:
    """The ClusterQueue's resource groups: cpu/memory in `default-flavor`, GPU resources per pool flavor.

    Every flavor of a group lists every covered resource, in the group's order (Kueue requires it).
    Borrowing and lending limits are per GPU class (`queue.borrowingLimit`/`lendingLimit`); each
    flavor of the class carries them on the class's own resource (a flavor is one pool).

    >>> resource_groups(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))[0]["coveredResources"]
    ['cpu', 'ephemeral-storage', 'memory']
    """
    groups = []
    compute = view.kueue_compute_nominal
    if compute:
        groups.append(
            {
                "coveredResources": sorted(compute),
                "flavors": [{"name": KUEUE_CPU_FLAVOR, "resources": [_resource(r, compute[r]) for r in sorted(compute)]}],
            }
        )
    for flavors in _by_serving(view.platform, gpu_flavor_quotas(tenant, view)):
        covered = sorted({resource for resources in flavors.values() for resource in resources})
        if covered:
            groups.append({"coveredResources": covered, "flavors": _gpu_flavors(tenant, view, flavors, covered)})
    return groups


def _by_serving(platform: Platform, by_pool: dict[str, dict[str, int]]) -> list[dict[str, dict[str, int]]]:
    """The pools (flavors) of the device plugin, then those of classes served by DRA alone: a resource
    group each, so a DRA-only pool's flavor lists its DeviceClasses' resources and never `nvidia.com/gpu`
    (every flavor of a group lists every resource of the group; Kueue puts a flavor in one group only)."""
    dra_only = {pool for pool in by_pool if cap.is_dra_only(platform, platform.node_pools[pool].gpu_class)}
    return [{p: r for p, r in by_pool.items() if p not in dra_only}, {p: r for p, r in by_pool.items() if p in dra_only}]


def _class_limits(tenant: Tenant, view: TenantView) -> tuple[bool, dict[str, int], dict[str, int]]:
    """(has a cohort, borrowing limit by GPU class, lending limit by GPU class)."""
    has_cohort = cohort_of(tenant, view.platform) is not None
    borrowing = dict(view.borrowing_limits or {}) if has_cohort else {}
    lending = dict(view.lending_limits or {})
    # A class the tenant reaches only through its dedicated pools: nobody else can be placed on
    # those nodes, and the tenant cannot be placed on anyone else's, so it neither lends nor borrows.
    for name in sorted(view.dedicated_only_classes):
        lending[name] = 0
        if has_cohort:
            borrowing[name] = 0
    return has_cohort, borrowing, lending


def _gpu_flavors(tenant: Tenant, view: TenantView, flavors: dict[str, dict[str, int]], covered: list[str]) -> list[dict]:
    """One flavor per pool, each listing every covered resource; the limits on the class's whole-GPU resource."""
    platform = view.platform
    has_cohort, borrowing, lending = _class_limits(tenant, view)
    entries = []
    for pool_name, resources in flavors.items():
        class_name = platform.node_pools[pool_name].gpu_class
        gpu_class = platform.gpu_classes[class_name]
        whole = cap.queue_resources(platform, class_name, cap.class_resource(gpu_class))
        items = []
        for resource in covered:
            limited = resource in whole and resource in resources and not cap.is_mig_mixed(gpu_class)
            items.append(
                _resource(
                    resource,
                    resources.get(resource, 0),
                    borrowing.get(class_name) if limited else None,
                    min(lending[class_name], resources.get(resource, 0))
                    if limited and class_name in lending and has_cohort
                    else None,
                )
            )
        entries.append({"name": pool_name, "resources": items})
    return entries


def cluster_queue(tenant: Tenant, view: TenantView) -> KubeObject:
    """The tenant's ClusterQueue, named like the tenant; held (no new admissions) while suspended.

    >>> cluster_queue(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["spec"]["namespaceSelector"]
    {'matchLabels': {'gpu-tenancy.dev/tenant': 'eval'}}
    """
    platform = view.platform
    settings = platform.queues.kueue
    preemption: dict = {
        "reclaimWithinCohort": settings.preemption.reclaim_within_cohort,
        "withinClusterQueue": settings.preemption.within_cluster_queue,
    }
    if settings.preemption.borrow_within_cohort != "Never":
        preemption["borrowWithinCohort"] = {"policy": settings.preemption.borrow_within_cohort}
    spec: dict = {
        "namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant.name}},
        "preemption": dict(sorted(preemption.items())),
        "queueingStrategy": settings.queueing_strategy,
        "resourceGroups": resource_groups(tenant, view),
    }
    cohort = cohort_of(tenant, platform)
    if cohort is not None:
        spec["cohortName"] = cohort
    if tenant.queue.weight is not None:
        spec["fairSharing"] = {"weight": tenant.queue.weight}
    if tenant.is_suspended:
        # Mirrors the suspended ResourceQuota: running workloads keep running, nothing new is admitted.
        spec["stopPolicy"] = "Hold"
    labels = owned_labels(tenant, view)
    return kube_object(API_VERSION, "ClusterQueue", object_meta(tenant.name, labels=labels), spec=dict(sorted(spec.items())))


def departing_cluster_queue(name: str, tenant: Tenant, view: TenantView) -> KubeObject:
    """The ClusterQueue `name` that a rename (a name in `previousNames`) or a decommission leaves
    behind, kept instead of deleted, stopped with `stopPolicy: HoldAndDrain`, holding no quota.

    Kueue holds a ClusterQueue's delete on its finalizer while workloads are admitted to it, so a
    delete with running work keeps `pulumi up` waiting until they end (or the update times out).
    Stopped, Kueue evicts them (a renamed tenant's requeue to its new ClusterQueue through their
    LocalQueue); without resource groups it lends nothing to the cohort, and without a
    `namespaceSelector` no namespace can submit to it. It is deleted, empty and at once, when the
    name leaves `previousNames` or the decommissioned tenant's file is removed.

    >>> departing_cluster_queue("evals", prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["spec"]
    {'stopPolicy': 'HoldAndDrain'}
    """
    labels = owned_labels(tenant, view)
    return kube_object(API_VERSION, "ClusterQueue", object_meta(name, labels=labels), spec={"stopPolicy": "HoldAndDrain"})


def local_queues(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """A LocalQueue `default` in each tenant namespace; workloads opt in with `kueue.x-k8s.io/queue-name: default`.

    >>> [q["metadata"]["namespace"] for q in local_queues(prod.tenants[1].spec, prod.view(prod.tenants[1].spec))]
    ['inference', 'inference-canary']
    """
    labels = owned_labels(tenant, view)
    return [
        kube_object(API_VERSION, "LocalQueue", object_meta(LOCAL_QUEUE, namespace=namespace, labels=labels), spec={"clusterQueue": tenant.name})
        for namespace in tenant.all_namespaces
    ]


def tenant_kueue_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's ClusterQueue and LocalQueues, and the stopped ClusterQueue of each previous name;
    decommissioned, only its own ClusterQueue, stopped (`departing_cluster_queue`); with
    `queue.admission: direct`, none of these (renamed or decommissioned too: it never had a queue).

    A direct tenant stays outside Kueue: Kueue would label its unlabelled pods with the LocalQueue
    `default` (and queue them), and a ClusterQueue that sees none of its pods would lend its
    quota to the cohort while they hold the GPUs. Its GPUs are its ResourceQuota, which the
    capacity check reserves on its pools like any quota.

    >>> [o["kind"] for o in tenant_kueue_objects(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))]
    ['ClusterQueue', 'LocalQueue']
    """
    if tenant.queue.admission == "direct":   # no ClusterQueue under any name: none to stop on rename or decommission
        return []
    if tenant.is_decommissioned:
        return [departing_cluster_queue(tenant.name, tenant, view)]
    departing = [departing_cluster_queue(old, tenant, view) for old in tenant.previous_names if old != tenant.name]
    return [cluster_queue(tenant, view), *local_queues(tenant, view), *departing]


def _label(obj: str, key: str) -> str:
    return f"(has({obj}.metadata.labels) && {cel_string(key)} in {obj}.metadata.labels ? {obj}.metadata.labels[{cel_string(key)}] : '')"


def _gated(obj: str) -> str:
    return f"(has({obj}.spec.schedulingGates) && {obj}.spec.schedulingGates.exists(g, g.name == {cel_string(KUEUE_ADMISSION_GATE)}))"


# How a new object of a kind in QUEUED is held until Kueue admits it: Kueue's webhook suspends a
# labelled Job, JobSet, RayJob or RayCluster (`spec.suspend`); a LeaderWorkerSet has no suspend, its
# webhook labels and annotates the pod templates instead, so its pods (made by the StatefulSet
# controller) arrive with Kueue's scheduling gate, which the pod rules require.
_SUSPENDED = "(has({obj}.spec.suspend) && {obj}.spec.suspend)"
_PODS_GATED = "true"


class Queued(NamedTuple):
    """A kind Kueue queues (besides Pod), its API group and resource, the CEL list of the pod templates
    of `{obj}` (whether it requests GPUs, before and after an update, is read from here) and how a
    new one is held (`{obj}`: CEL)."""

    kind: str
    group: str
    resource: str
    templates: str
    held: str


QUEUED: tuple[Queued, ...] = (
    Queued("Job", "batch", "jobs", "[{obj}.spec.template]", _SUSPENDED),
    Queued("JobSet", "jobset.x-k8s.io", "jobsets",
           "(has({obj}.spec.replicatedJobs) ? {obj}.spec.replicatedJobs.map(rj, rj.template.spec.template) : [])", _SUSPENDED),
    # A RayJob's pod sets: its RayCluster's head and worker groups, and the submitter (a Job in K8sJobMode).
    Queued("RayJob", "ray.io", "rayjobs",
           "((has({obj}.spec.rayClusterSpec) ? [{obj}.spec.rayClusterSpec.headGroupSpec.template] + "
           "(has({obj}.spec.rayClusterSpec.workerGroupSpecs) ? {obj}.spec.rayClusterSpec.workerGroupSpecs.map(w, w.template) : []) : []) + "
           "(has({obj}.spec.submitterPodTemplate) ? [{obj}.spec.submitterPodTemplate] : []))", _SUSPENDED),
    Queued("RayCluster", "ray.io", "rayclusters",
           "([{obj}.spec.headGroupSpec.template] + "
           "(has({obj}.spec.workerGroupSpecs) ? {obj}.spec.workerGroupSpecs.map(w, w.template) : []))", _SUSPENDED),
    Queued("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "leaderworkersets",
           "((has({obj}.spec.leaderWorkerTemplate.leaderTemplate) ? [{obj}.spec.leaderWorkerTemplate.leaderTemplate] : []) + "
           "[{obj}.spec.leaderWorkerTemplate.workerTemplate])", _PODS_GATED),
)
_QUEUED = {q.kind: q for q in QUEUED}

# (child kind, parent kind): the parent's controller creates the child from the parent's spec, Kueue
# makes one Workload for the parent and skips a child naming a queued parent as its controller (it is
# counted in the parent's Workload: FindAncestorJobManagedByKueue). So such a child is trusted only
# from whoever may update the parent kind's status: its controller (the JobSet controller, the KubeRay
# operator; and Kueue, and cluster admins), never a tenant role, since any member can write the
# ownerReference and the labels the parent's controller sets. A JobSet's Jobs; a RayJob's RayCluster
# and its submitter Job; a RayCluster's head and worker pods, which KubeRay creates ungated. (A Job's
# pods are the `jobController` clause; a LeaderWorkerSet's pods are gated, as any labelled pod.)
CONTROLLED_BY: tuple[tuple[str, str], ...] = (
    ("Job", "JobSet"),
    ("Job", "RayJob"),
    ("RayCluster", "RayJob"),
    ("Pod", "RayCluster"),
)

# The kinds the policy checks besides Pod, each with the CEL list of the pod templates of `{obj}`.
POD_TEMPLATES: dict[str, str] = {q.kind: q.templates for q in QUEUED}

_MAY_UPDATE_STATUS = "authorizer.group({}).resource({}).subresource('status').namespace(request.namespace).check('update').allowed()"


def _parent_kind(obj: str) -> str:
    """CEL: the kind of the parent (CONTROLLED_BY, for the request's kind) `obj` names as its
    controller ownerReference, '' if none."""
    def named(child: str) -> str:
        kinds = " || ".join(f"(o.kind == {cel_string(parent)} && o.apiVersion.startsWith({cel_string(_QUEUED[parent].group + '/')}))"
                            for kid, parent in CONTROLLED_BY if kid == child)
        found = f"{obj}.metadata.ownerReferences.filter(o, has(o.controller) && o.controller && ({kinds}))"
        return f"(request.kind.kind == {cel_string(child)} && has({obj}.metadata.ownerReferences) && size({found}) > 0 ? {found}[0].kind : "
    children = sorted({child for child, _ in CONTROLLED_BY})
    return "(" + "".join(named(child) for child in children) + "''" + ")" * len(children) + ")"


def _parent_controller() -> str:
    """CEL: the requester may update the status of the parent kind the object names as controller."""
    parents = sorted({parent for _, parent in CONTROLLED_BY})
    return "(" + " || ".join(
        f"(variables.parent == {cel_string(parent)} && "
        f"{_MAY_UPDATE_STATUS.format(cel_string(_QUEUED[parent].group), cel_string(_QUEUED[parent].resource))})"
        for parent in parents) + ")"


def _held(obj: str) -> str:
    """CEL: `obj`, of one of the QUEUED kinds, is held as Kueue holds a new one of its kind."""
    return "(" + " || ".join(f"(request.kind.kind == {cel_string(q.kind)} && {q.held.format(obj=obj)})" for q in QUEUED) + ")"


def _templates_request_gpu(platform, obj: str) -> str:
    """CEL: `obj`, of one of the POD_TEMPLATES kinds, asks for GPUs: any of its pod templates does."""
    return "(" + " || ".join(
        f"(request.kind.kind == {cel_string(kind)} && {templates.format(obj=obj)}.exists(t, {requests_gpu(platform, 't')}))"
        for kind, templates in POD_TEMPLATES.items()) + ")"


def queue_pinning_policy(facts: FleetFacts) -> list[KubeObject]:
    """ValidatingAdmissionPolicy + binding: in tenant namespaces, GPU pods go through the tenant's LocalQueue.

    Kueue manages only what carries `kueue.x-k8s.io/queue-name`; an unmanaged pod or Job would hold
    GPUs no queue counts and no preemption can reclaim. So a Pod, or an object of a QUEUED kind (Job,
    JobSet, RayJob, RayCluster, LeaderWorkerSet), whose pods request GPUs (any path: device plugin,
    DRA extended resource or claim) must name the LocalQueue `default`, and a pod must carry Kueue's
    scheduling gate too, a new object of a QUEUED kind be held as Kueue holds it (suspended; an
    LWS's pods gated), unless its namespace is a `queue.admission: direct` tenant's. Pods a Job
    creates are covered by their Job (only a Job controller, which may update `jobs/status`, creates
    them ungated), and each child of CONTROLLED_BY by its parent (a JobSet's Jobs, a RayJob's
    RayCluster and submitter Job, a RayCluster's pods: Kueue queues the parent and skips the child,
    labelled or not, so a child is admitted only from whoever may update its parent's status, the
    parent's controller). An object created without the label cannot gain GPU requests later (a
    suspended Job's pod template may change and its owner may unsuspend it; a JobSet's or Ray
    controller makes new pods from its current spec), one rule over POD_TEMPLATES. And what only the
    scheduler may change, nobody else does: the label after creation, Kueue's scheduling gate on a
    pod, a queued object's `suspend`, the spec of a GPU object outside the queue, and the spec of a
    GPU child (or one orphaned from its parent), which only its parent's controller changes.
    "The scheduler" is whoever may update `workloads/status` in the namespace: Kueue and cluster
    admins, never a tenant role.

    >>> [o["kind"] for o in queue_pinning_policy(prod.facts)]
    ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']
    """
    platform = facts.platform
    labels = platform_labels(facts.environment_label)
    policy_spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]},
                *({"apiGroups": [q.group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": [q.resource]}
                  for q in QUEUED if q.group != "batch"),
            ],
        },
        "validations": [_queued_on_create_rule(), _no_gpus_outside_the_queue_rule(), *_scheduler_only_rules(), _child_follows_parent_rule()],
        "variables": _pinning_variables(platform),
    }
    # Pods and Jobs: each rule is guarded by the kind at run time, and type-checked against both.
    for section in ("validations", "variables"):
        policy_spec[section] = [{k: as_dyn(v) if k in ("expression", "messageExpression") else v for k, v in entry.items()}
                                for entry in policy_spec[section]]
    policy = kube_object(
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", object_meta(POLICY_NAME, labels=labels), spec=policy_spec
    )
    return [policy, deny_binding(POLICY_NAME, labels)]


def _pinning_variables(platform: Platform) -> list[dict[str, str]]:
    return [
        {"expression": "request.kind.kind == 'Pod'", "name": "pod"},
        {"expression": _label("object", KUEUE_QUEUE_NAME_LABEL), "name": "queue"},
        {"expression": f"request.operation == 'UPDATE' ? {_label('oldObject', KUEUE_QUEUE_NAME_LABEL)} : ''", "name": "oldQueue"},
        {"expression": f"{_label('namespaceObject', QUEUE_ADMISSION_LABEL)} == 'direct'", "name": "direct"},
        {
            "expression": f"variables.pod ? ({requests_gpu(platform)}) : {_templates_request_gpu(platform, 'object')}",
            "name": "requestsGpu",
        },
        {
            "expression": f"request.operation == 'UPDATE' && !variables.pod && {_templates_request_gpu(platform, 'oldObject')}",
            "name": "oldRequestsGpu",
        },
        {"expression": _MAY_UPDATE_STATUS.format("'kueue.x-k8s.io'", "'workloads'"), "name": "scheduler"},
        {"expression": _MAY_UPDATE_STATUS.format("'batch'", "'jobs'"), "name": "jobController"},
        # The parent kind (CONTROLLED_BY) the object names as its controller ('' if none), now and before the update.
        {"expression": _parent_kind("object"), "name": "childOf"},
        {"expression": "variables.childOf != ''", "name": "child"},
        {"expression": f"request.operation == 'UPDATE' ? {_parent_kind('oldObject')} : ''", "name": "wasChildOf"},
        {"expression": "variables.wasChildOf != ''", "name": "wasChild"},
        {"expression": "variables.child ? variables.childOf : variables.wasChildOf", "name": "parent"},
        {"expression": _parent_controller(), "name": "parentController"},
    ]


def _queued_on_create_rule() -> dict[str, str]:
    return {
        # A pod must also be gated, and a new Job or JobSet suspended: Kueue's webhook gates the
        # labelled pods and suspends the labelled Jobs and JobSets it queues, and skips those
        # naming a queued workload (a Job, a JobSet) as controller (any tenant can write that
        # ownerReference). Updates are the rules below.
        "expression": (
            "request.operation != 'CREATE' || variables.direct || !variables.requestsGpu || "
            "(variables.child ? variables.parentController : "
            f"variables.queue == {cel_string(LOCAL_QUEUE)} && (variables.pod ? {_gated('object')} : "
            f"{_held('object')})) || "
            "(variables.pod && variables.jobController)"
        ),
        "messageExpression": (
            "variables.child ? 'a ' + request.kind.kind + ' that requests GPUs and names a ' + variables.childOf + ' as its controller is "
            "created by the ' + variables.childOf + ' controller, counted in its parent\\'s Workload: create the ' + "
            "variables.childOf + ' (labelled " + f"{KUEUE_QUEUE_NAME_LABEL}: {LOCAL_QUEUE}) instead' : "
            "(variables.pod ? 'a pod' : 'a ' + request.kind.kind) + ' that requests GPUs must go through the tenant\\'s queue: "
            f"the label {KUEUE_QUEUE_NAME_LABEL}: {LOCAL_QUEUE} (got \\'' + variables.queue + '\\')' + "
            f"(variables.pod ? ' and Kueue\\'s scheduling gate {KUEUE_ADMISSION_GATE} (none when the pod names a Job "
            "as its controller)' : ', suspended by Kueue (it is not when the ' + request.kind.kind + ' names a queued "
            "workload as its controller)') + '; label the Job or JobSet, or the pod template of a Deployment or StatefulSet "
            "(docs/queues-and-vclusters.md)'"
        ),
        "reason": "Forbidden",
    }


def _no_gpus_outside_the_queue_rule() -> dict[str, str]:
    return {
        # One rule over the POD_TEMPLATES kinds: a suspended Job's pod template may change
        # (Kubernetes lets its resources, scheduling directives and annotations be edited until
        # it starts), and a JobSet's controller makes new Jobs from its current spec. So an
        # object outside the queue must not gain GPUs by update (and then be unsuspended by its
        # owner, as no queue holds it), nor one that has them (created before its namespace was
        # queued, or by an admin) change its spec. A JobSet's Jobs are the last rule's.
        "expression": (
            "variables.pod || request.operation != 'UPDATE' || variables.direct || !variables.requestsGpu || "
            f"variables.queue == {cel_string(LOCAL_QUEUE)} || variables.child || variables.wasChild || "
            "(variables.oldRequestsGpu && object.spec == oldObject.spec) || variables.scheduler"
        ),
        "messageExpression": (
            "(variables.oldRequestsGpu ? 'a ' + request.kind.kind + ' that requests GPUs outside the tenant\\'s queue keeps "
            "its spec' : 'GPU requests cannot be added to a ' + request.kind.kind + ' outside the tenant\\'s queue') + "
            f"' (label {KUEUE_QUEUE_NAME_LABEL}: {LOCAL_QUEUE}, got \\'' + variables.queue + '\\'): unsuspended, it "
            "would run GPU pods no queue counts; the label cannot be added later, so create a new ' + request.kind.kind + "
            "' with it'"
        ),
        "reason": "Forbidden",
    }


def _scheduler_only_rules() -> list[dict[str, str]]:
    """What only the scheduler changes: the queue label, Kueue's scheduling gate, a queued object's suspend."""
    return [
        {
            "expression": "request.operation != 'UPDATE' || variables.queue == variables.oldQueue || variables.scheduler",
            "message": f"the label {KUEUE_QUEUE_NAME_LABEL} cannot be added, changed or removed after creation; create a new object",
            "reason": "Forbidden",
        },
        {
            "expression": f"!variables.pod || request.operation != 'UPDATE' || !{_gated('oldObject')} || {_gated('object')} || variables.scheduler",
            "message": (
                f"only Kueue lifts the scheduling gate {KUEUE_ADMISSION_GATE}: the pod starts when the tenant's queue admits it"
            ),
            "reason": "Forbidden",
        },
        {
            "expression": (
                "variables.pod || request.operation != 'UPDATE' || variables.oldQueue == '' || "
                "!(has(oldObject.spec.suspend) && oldObject.spec.suspend) || "
                "(has(object.spec.suspend) && object.spec.suspend) || variables.scheduler || "
                "(variables.wasChild && variables.parentController)"
            ),
            "messageExpression": (
                "'a queued ' + request.kind.kind + ' starts when Kueue admits it: only Kueue sets its spec.suspend to false'"
            ),
            "reason": "Forbidden",
        },
    ]


def _child_follows_parent_rule() -> dict[str, str]:
    return {
        # A JobSet's GPU Job (now or before the update: orphaned from it) is counted in its
        # JobSet's Workload, not a queue of its own: its suspend, parallelism and pod template
        # change with its JobSet, never by hand, labelled or not.
        "expression": (
            "variables.pod || request.operation != 'UPDATE' || variables.direct || !variables.requestsGpu || "
            "(!variables.child && !variables.wasChild) || "
            "(object.spec == oldObject.spec && variables.child == variables.wasChild) || "
            "variables.scheduler || variables.parentController"
        ),
        "messageExpression": (
            "'a ' + request.kind.kind + ' that requests GPUs outside a queue of its own (a ' + variables.parent + '\\'s ' + "
            "request.kind.kind + ', or one orphaned from its ' + variables.parent + ') changes only with its ' + "
            "variables.parent + ': its spec and controller are the ' + variables.parent + ' controller\\'s; change or "
            "delete the ' + variables.parent"
        ),
        "reason": "Forbidden",
    }


def cohort_names(facts: FleetFacts) -> list[str]:
    """Every cohort of the fleet: those ClusterQueues join, the stack's `queues.cohorts`, their
    parents and the spare cohort.

    >>> cohort_names(prod.facts)
    []
    """
    platform = facts.platform
    named = {cohort_of(spec, platform) for _, spec in facts.active} | set(platform.queues.cohorts) | {facts.spare_cohort}
    return sorted({c for name in named - {None} for c in cohort_chain(name, platform)})


def spare_quota_groups(facts: FleetFacts) -> list[dict]:
    """The spare cohort's resource group: per shared pool (flavor) with spare capacity, what no
    ClusterQueue holds there (`FleetFacts.pool_spare`); every flavor lists every covered resource.

    >>> spare_quota_groups(prod.facts)[0]["flavors"]
    [{'name': 'a100-mig', 'resources': [{'name': 'nvidia.com/mig-1g.10gb', 'nominalQuota': '8'}, {'name': 'nvidia.com/mig-3g.40gb', 'nominalQuota': '0'}]}]
    """
    platform = facts.platform
    by_pool: dict[str, dict[str, int]] = {}
    for commodity, pools in facts.pool_spare.items():
        for pool, units in pools.items():
            for resource in _queued(platform, pool, commodity):
                by_pool.setdefault(pool, {})[resource] = units
    groups = []
    for pools in _by_serving(platform, by_pool):
        covered = sorted({r for pool in pools for r in cap.queue_gpu_resources(platform, platform.node_pools[pool])})
        flavors = [
            {"name": pool, "resources": [_resource(r, spare.get(r, 0)) for r in covered]}
            for pool, spare in sorted(pools.items())
        ]
        if flavors:
            groups.append({"coveredResources": covered, "flavors": flavors})
    return groups


def cohorts(facts: FleetFacts) -> list[KubeObject]:
    """A `Cohort` per cohort (`cohort_names`): its `parentName` from `queues.cohorts`, and on the
    spare cohort the spare capacity of every shared pool as a cohort-level nominal quota, which any
    ClusterQueue of its tree that lists the pool's flavor may borrow (and gives back on reclaim).

    >>> [(o["metadata"]["name"], o["spec"]) for o in cohorts(prod.facts)]
    []
    """
    platform = facts.platform
    labels = platform_labels(facts.environment_label)
    result = []
    for name in cohort_names(facts):
        spec: dict = {}
        settings = platform.queues.cohorts.get(name)
        if settings is not None and settings.parent is not None:
            spec["parentName"] = settings.parent
        if name == facts.spare_cohort:
            groups = spare_quota_groups(facts)
            if groups:
                spec["resourceGroups"] = groups
        result.append(kube_object(API_VERSION, "Cohort", object_meta(name, labels=labels), spec=spec))
    return result


def platform_kueue_objects(facts: FleetFacts) -> list[KubeObject]:
    """Cluster-wide Kueue objects: the ResourceFlavors, the Cohorts and the queue-pinning policy.

    >>> [(o["kind"], o["metadata"]["name"]) for o in platform_kueue_objects(prod.facts)][-3:]
    [('ResourceFlavor', 'h100-train'), ('ValidatingAdmissionPolicy', 'gpu-tenancy-kueue-queue'), ('ValidatingAdmissionPolicyBinding', 'gpu-tenancy-kueue-queue')]
    """
    return [*resource_flavors(facts), *cohorts(facts), *queue_pinning_policy(facts)]
