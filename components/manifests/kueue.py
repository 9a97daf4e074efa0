"""Kueue objects (`kueue.x-k8s.io/v1beta2`): per-GPU-class quotas that a ResourceQuota cannot express.

* a ResourceFlavor per GPU class (its nodes by the `<labelDomain>/gpu-class` label), plus
  `default-flavor` for cpu and memory, which any node serves;
* a ClusterQueue per tenant, named like the tenant, admitting workloads of its namespaces only
  (`namespaceSelector` on the tenant label). Two resource groups: cpu/memory in `default-flavor`,
  and every GPU resource of the tenant in one flavor per allowed GPU class. Nominal quotas are the
  tenant's quota per class (a MIG-sliced class carries the tenant's slices per profile), so summed
  per resource they equal the namespace ResourceQuota. Borrowing happens within the tenant's cohort;
  `borrowingLimit`/`lendingLimit` cap it per class, and a class the tenant reaches only through its
  dedicated pools is neither lent nor borrowed (limits of 0);
* a LocalQueue `default` in each tenant namespace, pointing at the tenant's ClusterQueue.

Kueue does not look at ResourceQuota: it admits workloads by its own bookkeeping, and the
ResourceQuota still rejects pods beyond the namespace's quota (see docs/queues-and-vclusters.md).
"""

from __future__ import annotations

from ..model import capacity as cap
from ..model import mig
from ..model.load import Environment
from ..model.queue_checks import KUEUE_CPU_FLAVOR, cohort_of, dedicated_only_classes, kueue_compute_nominal
from ..model.stack import Platform
from ..model.tenant import Tenant
from .gpu_nodes import dedicated_pool_owners, gpu_class_label, pool_taints
from .meta import TENANT_LABEL, KubeObject, kube_object, object_meta, platform_labels
from .namespace import environment_label, owned_labels

API_VERSION = "kueue.x-k8s.io/v1beta2"
LOCAL_QUEUE = "default"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


def gpu_flavor_quotas(tenant: Tenant, platform: Platform) -> dict[str, dict[str, int]]:
    """Nominal quota per GPU class (flavor) and extended resource of the tenant's ClusterQueue.

    Every allowed class gets its whole-GPU resource (0 when the tenant has no quota there, so that
    it may still borrow); MIG slices go to the first allowed mixed-strategy class offering the profile.

    >>> from components.model.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {"a100": {
    ...     "model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi"}}})
    >>> gpu_flavor_quotas(Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha1", "kind": "Tenant",
    ...     "name": "a", "displayName": "A", "costCenter": "cc-1", "gpu": {"classes": ["a100"]},
    ...     "quota": {"gpu": 8}}), p)
    {'a100': {'nvidia.com/gpu': 8}}
    """
    by_class = cap.gpu_quota_by_class(tenant, platform)
    allowed = [name for name in cap.allowed_classes(tenant, platform) if name in platform.gpu_classes]
    result: dict[str, dict[str, int]] = {
        name: {cap.class_resource(platform.gpu_classes[name]): by_class.get(name, 0)} for name in allowed
    }
    providers = {profile: sorted(classes) for profile, classes in cap.capacity(platform).mig_profile_classes.items()}
    for profile, count in sorted(tenant.quota.mig.items()):
        offering = [name for name in providers.get(profile, []) if name in result]
        if offering:
            result[offering[0]][mig.resource_name(profile)] = count
    return {name: dict(sorted(resources.items())) for name, resources in sorted(result.items())}


def _flavor_tolerations(environment: Environment, gpu_class: str) -> list[dict]:
    """Tolerations for the class's taints, when every pool of the class carries the same ones.

    Only dedicated pools are tainted (`<labelDomain>/tenant=<owner>`); a class whose pools belong
    to one tenant gets that toleration, a class shared or split between owners gets none (pods
    bring their own, and the placement policy decides who may land where).
    """
    pools = [name for name, pool in sorted(environment.platform.node_pools.items()) if pool.gpu_class == gpu_class]
    owners = dedicated_pool_owners(environment)
    if not pools or any(pool not in owners for pool in pools) or len({owners[p] for p in pools}) != 1:
        return []
    return [
        {"effect": taint["effect"], "key": taint["key"], "operator": "Equal", "value": taint["value"]}
        for taint in pool_taints(environment, pools[0])
    ]


def resource_flavors(environment: Environment) -> list[KubeObject]:
    """`default-flavor` (cpu, memory; no node constraint) and one ResourceFlavor per GPU class.

    >>> [f["metadata"]["name"] for f in resource_flavors(dev)]   # doctest: +SKIP
    ['a100-mig', 'default-flavor', 'l4']
    """
    platform = environment.platform
    labels = platform_labels(environment_label(environment))
    flavors = [kube_object(API_VERSION, "ResourceFlavor", object_meta(KUEUE_CPU_FLAVOR, labels=labels), spec={})]
    for name in sorted(platform.gpu_classes):
        spec: dict = {"nodeLabels": {gpu_class_label(platform): name}}
        tolerations = _flavor_tolerations(environment, name)
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


def resource_groups(tenant: Tenant, platform: Platform) -> list[dict]:
    """The ClusterQueue's resource groups: cpu/memory in `default-flavor`, GPU resources per class.

    Every flavor of a group lists every covered resource, in the group's order (Kueue requires it).

    >>> from components.model.stack import Platform
    >>> resource_groups(Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha1", "kind": "Tenant",
    ...     "name": "a", "displayName": "A", "costCenter": "cc-1", "quota": {"cpu": {"requests": "8"},
    ...     "memory": {"requests": "32Gi"}}}), Platform.model_validate({"labelDomain": "x.dev"}))[0]["coveredResources"]
    ['cpu', 'memory']
    """
    groups = []
    compute = kueue_compute_nominal(tenant, platform)
    if compute:
        groups.append(
            {
                "coveredResources": sorted(compute),
                "flavors": [{"name": KUEUE_CPU_FLAVOR, "resources": [_resource(r, compute[r]) for r in sorted(compute)]}],
            }
        )
    flavors = gpu_flavor_quotas(tenant, platform)
    covered = sorted({resource for resources in flavors.values() for resource in resources})
    if covered:
        has_cohort = cohort_of(tenant, platform) is not None
        borrowing = dict(tenant.queue.borrowing_limit or {}) if has_cohort else {}
        lending = dict(tenant.queue.lending_limit or {})
        # A class the tenant reaches only through its dedicated pools: nobody else can be placed on
        # those nodes, and the tenant cannot be placed on anyone else's, so it neither lends nor borrows.
        for name in dedicated_only_classes(tenant, platform):
            lending[name] = 0
            if has_cohort:
                borrowing[name] = 0
        entries = []
        for name, resources in flavors.items():
            whole = cap.class_resource(platform.gpu_classes[name])
            items = []
            for resource in covered:
                limited = resource == whole and not cap.is_mig_mixed(platform.gpu_classes[name])
                items.append(
                    _resource(
                        resource,
                        resources.get(resource, 0),
                        borrowing.get(name) if limited else None,
                        min(lending[name], resources.get(resource, 0)) if limited and name in lending and has_cohort else None,
                    )
                )
            entries.append({"name": name, "resources": items})
        groups.append({"coveredResources": covered, "flavors": entries})
    return groups


def cluster_queue(tenant: Tenant, environment: Environment) -> KubeObject:
    """The tenant's ClusterQueue, named like the tenant; held (no new admissions) while suspended.

    >>> cluster_queue(prod.tenants[0].spec, prod)["spec"]["namespaceSelector"]   # doctest: +SKIP
    {'matchLabels': {'gpu-tenancy.dev/tenant': 'eval'}}
    """
    platform = environment.platform
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
        "resourceGroups": resource_groups(tenant, platform),
    }
    cohort = cohort_of(tenant, platform)
    if cohort is not None:
        spec["cohortName"] = cohort
    if tenant.queue.weight is not None:
        spec["fairSharing"] = {"weight": tenant.queue.weight}
    if tenant.lifecycle == "suspended":
        # Mirrors the suspended ResourceQuota: running workloads keep running, nothing new is admitted.
        spec["stopPolicy"] = "Hold"
    labels = owned_labels(tenant, environment)
    return kube_object(API_VERSION, "ClusterQueue", object_meta(tenant.name, labels=labels), spec=dict(sorted(spec.items())))


def local_queues(tenant: Tenant, environment: Environment) -> list[KubeObject]:
    """A LocalQueue `default` in each tenant namespace; workloads opt in with `kueue.x-k8s.io/queue-name: default`.

    >>> [q["metadata"]["namespace"] for q in local_queues(prod.tenants[1].spec, prod)]   # doctest: +SKIP
    ['inference', 'inference-canary']
    """
    labels = owned_labels(tenant, environment)
    return [
        kube_object(API_VERSION, "LocalQueue", object_meta(LOCAL_QUEUE, namespace=namespace, labels=labels), spec={"clusterQueue": tenant.name})
        for namespace in tenant.all_namespaces
    ]


def tenant_kueue_objects(tenant: Tenant, environment: Environment) -> list[KubeObject]:
    """The tenant's ClusterQueue and LocalQueues.

    >>> [o["kind"] for o in tenant_kueue_objects(prod.tenants[0].spec, prod)]   # doctest: +SKIP
    ['ClusterQueue', 'LocalQueue']
    """
    return [cluster_queue(tenant, environment), *local_queues(tenant, environment)]


def platform_kueue_objects(environment: Environment) -> list[KubeObject]:
    """Cluster-wide Kueue objects: the ResourceFlavors (cohorts need no object of their own)."""
    return resource_flavors(environment)
