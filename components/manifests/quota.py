"""ResourceQuotas: what a tenant may *declare*, checked at admission (not a runtime limit).

Objects per tenant namespace:

* `tenant-quota`: compute, GPUs, storage and object counts.
* `priority-<class>`: one per platform PriorityClass the tenant has a cap for (its own
  `quota.priorityClasses` entry, else the class's `defaultTenantCap`), scoped with a
  `PriorityClass In [<class>]` scopeSelector. `online-inference: {pods: 0}` is how a class is
  reserved for tenants with a grant.
* `suspended`: only for `lifecycle: suspended` (and `decommissioned`, while its namespaces are
  being removed); `pods: 0` admits no new pod and touches none that already runs.

Tenants with several namespaces. A ResourceQuota counts one namespace, and Kubernetes has no
quota across namespaces. Copying the tenant's quota into every namespace would let a tenant with
N namespaces declare N times its budget, and the capacity check (which counts each tenant once)
would be wrong. So the budgets that the capacity check sums, compute (cpu, memory,
ephemeral-storage) and GPUs, are split: `namespaceQuotas` carves parts out for extra namespaces
(e.g. a canary namespace with 8 CPUs and 1 GPU) and the tenant's own namespace keeps the rest.
An extra namespace without an entry gets the same keys at "0": it holds data and configuration
(PVCs, Secrets, ConfigMaps, Services) and, while the tenant has a cpu or memory quota, admits no
pods, because the LimitRange gives every container requests that a zero quota refuses. Storage and
object counts are per-namespace guard rails, not capacity budgets, so every namespace gets them as
written (a tenant with N namespaces may hold up to N times each).

Queues. With Kueue or KAI, a tenant may borrow idle GPUs from its cohort; the GPU keys of the
tenant's quota are then its nominal quota plus what its queue can borrow: its `borrowingLimit`
per class, never more than the rest of the cohort lends on the pools it may reach, and with no
limit all of that (`gpu_ceiling_by_resource`). Otherwise the ResourceQuota would reject the very
pods the queue admitted on borrowed capacity.

GPU resources. Only `requests.<extended-resource>` keys are enforced for extended resources
(there is no overcommit for devices, so `limits.` keys are never written, nor bare
`nvidia.com/gpu`). GPUs are granted, never implied: every GPU resource the cluster advertises
that the tenant has no quota for is pinned at "0", so a missing quota entry cannot mean
"unlimited".

PriorityClass caps on GPUs are per extended resource, because ResourceQuota counts resources,
not GPU classes: `gpu: 4` at a priority caps each of the tenant's GPU resources at 4 (never above
its quota for that resource).
"""

from __future__ import annotations

from ..model import capacity as cap
from ..model import mig
from ..model.budget import compute_hard, namespace_slices, split_budget  # noqa: F401  (part of this module's API)
from ..model.quantity import Quantity
from ..model.load import Environment
from ..model.stack import Platform, PriorityClassSpec
from ..model.tenant import PriorityCap, Tenant
from .meta import KubeObject, kube_object, object_meta
from .namespace import owned_labels
from .queues import gpu_ceiling_by_resource

TENANT_QUOTA = "tenant-quota"
SUSPENDED_QUOTA = "suspended"
PRIORITY_QUOTA_PREFIX = "priority-"

_OBJECTS = (
    ("pods", "pods"),
    ("services", "services"),
    ("services_load_balancers", "services.loadbalancers"),
    ("services_node_ports", "services.nodeports"),
    ("persistent_volume_claims", "persistentvolumeclaims"),
    ("config_maps", "configmaps"),
    ("secrets", "secrets"),
)


def priority_quota_name(priority_class: str) -> str:
    """Name of the quota scoped to one PriorityClass.

    >>> priority_quota_name("online-inference")
    'priority-online-inference'
    """
    return PRIORITY_QUOTA_PREFIX + priority_class


def cluster_gpu_resources(platform: Platform) -> list[str]:
    """Every GPU extended resource the cluster's GPUs could advertise, whether a layout offers it or not.

    Whole GPUs and time-slicing shares (`nvidia.com/gpu`, `nvidia.com/gpu.shared`) and every MIG
    profile of every GPU model of the stack's classes: a resource with no quota key is not limited
    at all, so a profile no layout offers today (or a share no class renames) is pinned at "0"
    rather than left open for the day someone re-partitions a node by hand.

    >>> from components.model.stack import Platform
    >>> cluster_gpu_resources(Platform(labelDomain="gpu.example.com", gpuClasses={"h100": {
    ...     "model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}}))[:3]
    ['nvidia.com/gpu', 'nvidia.com/gpu.shared', 'nvidia.com/mig-1g.10gb']
    """
    if not platform.gpu_classes:
        return []
    resources = {cap.GPU, cap.GPU_SHARED}
    resources |= {mig.resource_name(profile) for profile in cap.capacity(platform).per_mig_profile}
    table = mig.geometry()
    for gpu_class in platform.gpu_classes.values():
        geometry = table.get(gpu_class.model)
        if geometry is not None:
            resources |= {mig.resource_name(profile) for profile in geometry.profiles}
    return sorted(resources)


def gpu_hard(tenant: Tenant, platform: Platform, granted: dict[str, int] | None = None) -> dict[str, str]:
    """`requests.<resource>` quota keys for GPUs: the tenant's quota, "0" for every other cluster GPU resource.

    >>> from components.model.stack import Platform
    >>> p = Platform(labelDomain="gpu.example.com", gpuClasses={"h100": {
    ...     "model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}})
    >>> gpu_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", gpu={"classes": ["h100"]}, quota={"gpu": 8}), p)
    {'requests.nvidia.com/gpu': '8'}
    """
    granted = cap.gpu_quota_by_resource(tenant, platform) if granted is None else granted
    counts = {resource: 0 for resource in cluster_gpu_resources(platform)}
    counts.update(granted)
    return {f"requests.{resource}": str(count) for resource, count in sorted(counts.items())}


def storage_hard(tenant: Tenant) -> dict[str, str]:
    """Persistent storage keys: total requested bytes, per-StorageClass bytes and claim counts.

    >>> storage_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", quota={"storage": {"storageClasses": {"fast": {"persistentVolumeClaims": 2}}}}))
    {'fast.storageclass.storage.k8s.io/persistentvolumeclaims': '2'}
    """
    storage = tenant.quota.storage
    if storage is None:
        return {}
    hard = {}
    if storage.requests is not None:
        hard["requests.storage"] = str(storage.requests)
    for name, per_class in sorted(storage.storage_classes.items()):
        prefix = f"{name}.storageclass.storage.k8s.io"
        if per_class.requests is not None:
            hard[f"{prefix}/requests.storage"] = str(per_class.requests)
        if per_class.persistent_volume_claims is not None:
            hard[f"{prefix}/persistentvolumeclaims"] = str(per_class.persistent_volume_claims)
    return hard


def object_count_hard(tenant: Tenant) -> dict[str, str]:
    """Object-count keys (`pods`, `services`, ...) for the counts the tenant caps.

    >>> object_count_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", quota={"objects": {"servicesLoadBalancers": 0}}))
    {'services.loadbalancers': '0'}
    """
    objects = tenant.quota.objects
    return {key: str(getattr(objects, field)) for field, key in _OBJECTS if getattr(objects, field) is not None}


def _zeroed(hard: dict[str, str]) -> dict[str, str]:
    return {key: "0" for key in hard}


def _quota(name: str, namespace: str, labels: dict[str, str], hard: dict[str, str], scope_class: str | None = None) -> KubeObject:
    spec: dict = {"hard": dict(sorted(hard.items()))}
    if scope_class is not None:
        spec["scopeSelector"] = {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [scope_class]}]
        }
    return kube_object("v1", "ResourceQuota", object_meta(name, namespace=namespace, labels=labels), spec=spec)


def priority_cap(tenant: Tenant, name: str, priority_class: PriorityClassSpec) -> PriorityCap | None:
    """The tenant's cap at one PriorityClass: its own entry, else the class's default, else none.

    >>> from components.model.stack import PriorityClassSpec
    >>> pc = PriorityClassSpec(value=1, description="x", defaultTenantCap={"pods": 0})
    >>> priority_cap(Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1"), "serve", pc).pods
    0
    """
    own = tenant.quota.priority_classes.get(name)
    return own if own is not None else priority_class.default_tenant_cap


def priority_hard(tenant: Tenant, platform: Platform, priority: PriorityCap, budget: dict[str, str]) -> dict[str, str]:
    """Quota keys of one PriorityClass cap, never above the namespace's own budget for a key.

    >>> from components.model.stack import Platform
    >>> priority_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1"), Platform(labelDomain="x.dev"), PriorityCap(pods=0), {})
    {'pods': '0'}
    """
    hard: dict[str, str] = {}
    if priority.pods is not None:
        hard["pods"] = str(priority.pods)
    compute = {}
    if priority.cpu is not None:
        compute["requests.cpu"] = str(priority.cpu)
    if priority.memory is not None:
        compute["requests.memory"] = str(priority.memory)
    if priority.gpu is not None:
        for resource, count in cap.gpu_quota_by_resource(tenant, platform).items():
            if count > 0:
                compute[f"requests.{resource}"] = str(priority.gpu)
    for key, value in compute.items():
        if key in budget and Quantity.parse(budget[key]) < Quantity.parse(value):
            value = budget[key]
        hard[key] = value
    return hard


def resource_quotas(tenant: Tenant, environment: Environment) -> list[KubeObject]:
    """Every ResourceQuota of the tenant, in each of its namespaces (see the module docstring).

    >>> from components.model.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", quota={"cpu": {"requests": "8"}}, lifecycle="suspended")
    >>> [q["metadata"]["name"] for q in resource_quotas(t, env)]
    ['tenant-quota', 'priority-online-inference', 'suspended']
    """
    platform = environment.platform
    labels = owned_labels(tenant, environment)
    budgets = {**compute_hard(tenant), **gpu_hard(tenant, platform, gpu_ceiling_by_resource(tenant, environment))}
    slices = namespace_slices(tenant, platform)
    guard_rails = {**storage_hard(tenant), **object_count_hard(tenant)}
    objects = []
    for namespace in tenant.all_namespaces:
        primary = namespace == tenant.name
        if primary:
            budget = split_budget(budgets, slices)
        else:
            budget = {**_zeroed(budgets), **{k: v for k, v in slices.get(namespace, {}).items() if k in budgets}}
        hard = {**guard_rails, **budget}
        if hard:
            objects.append(_quota(TENANT_QUOTA, namespace, labels, hard))
        for name, priority_class in sorted(platform.priority_classes.items()):
            priority = priority_cap(tenant, name, priority_class)
            if priority is None:
                continue
            scoped = priority_hard(tenant, platform, priority, budget)
            if scoped:
                objects.append(_quota(priority_quota_name(name), namespace, labels, scoped, scope_class=name))
        if tenant.lifecycle in ("suspended", "decommissioned"):
            objects.append(_quota(SUSPENDED_QUOTA, namespace, labels, {"pods": "0"}))
    return objects
