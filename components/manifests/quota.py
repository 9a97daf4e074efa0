"""ResourceQuotas: what a tenant may *declare*, checked at admission (not a runtime limit).

Objects per tenant namespace:

* `tenant-quota`: compute, GPUs, storage and object counts.
* `priority-<class>`: one per platform PriorityClass the tenant has a cap for (its own
  `quota.priorityClasses` entry, else the class's `defaultTenantCap`), scoped with a
  `PriorityClass In [<class>]` scopeSelector. `online-inference: {pods: 0}` is how a class is
  reserved for tenants with a grant.
* `cross-namespace-affinity`: `pods: 0` for pods whose (anti-)affinity terms look at other
  namespaces (scope `CrossNamespacePodAffinity`), unless the tenant sets
  `quota.crossNamespaceAffinity`: one pod with required anti-affinity to every namespace and a
  wide topology key would keep every other tenant's pods off every node.
* `suspended`: only for `lifecycle: suspended` (and `decommissioned`, while its namespaces are
  being removed); `pods: 0` admits no new pod and touches none that already runs.

Tenants with several namespaces. A ResourceQuota counts one namespace, and Kubernetes has no
quota across namespaces. Copying the tenant's quota into every namespace would let a tenant with
N namespaces declare N times its budget, and the capacity check (which counts each tenant once)
would be wrong. So the budgets that the capacity check sums, compute (cpu, memory,
ephemeral-storage) and GPUs, are split: `namespaceQuotas` carves parts out for extra namespaces
(e.g. a canary namespace with 8 CPUs and 1 GPU) and the tenant's own namespace keeps the rest
(during a rename, the old namespace kept under `namespaces` keeps it: `budget_home`).
An extra namespace without an entry gets the same keys at "0": it holds data and configuration
(PVCs, Secrets, ConfigMaps, Services) and, while the tenant has a cpu or memory quota, admits no
pods, because the LimitRange gives every container requests that a zero quota refuses. Storage and
object counts are per-namespace guard rails, not capacity budgets, so every namespace gets them as
written (a tenant with N namespaces may hold up to N times each).

Guard rails always exist. Object counts, `requests.storage`, the per-StorageClass keys and the
ephemeral-storage keys come from the tenant, else from the stack's `guardRails` (NodePort and
LoadBalancer Services at 0 unless granted; ephemeral storage a guard rail per namespace where the
tenant sets no `quota.ephemeralStorage`, a split budget where it does); every StorageClass the stack lists in `guardRails.storageClasses` that neither
gives a cap is pinned at 0. A namespace whose compute budget is zero (every cpu and memory key
"0") also gets `pods: 0`: a pod whose requests and limits are all 0 would otherwise get in as
BestEffort.

Queues. With Kueue or KAI, a tenant may borrow idle GPUs from its cohort; the GPU keys of the
tenant's quota are then its nominal quota plus what its queue can borrow: its `borrowingLimit`
per class, never more than the rest of the cohort lends on the pools it may reach, and with no
limit all of that (`TenantView.gpu_ceiling_by_resource`). Otherwise the ResourceQuota would reject the very
pods the queue admitted on borrowed capacity.

GPU resources. Only `requests.<extended-resource>` keys are enforced for extended resources
(there is no overcommit for devices, so `limits.` keys are never written, nor bare
`nvidia.com/gpu`). GPUs are granted, never implied: every GPU resource the cluster advertises
that the tenant has no quota for is pinned at "0", so a missing quota entry cannot mean
"unlimited".

DRA. Every DeviceClass of the stack (`deviceClasses`, tool- or driver-owned) is in the budget at
the grant of its GPU class or "0", in both key forms; `device_classes.device_class_hard` holds the
rule and what each key counts on the real API server.

PriorityClass caps on GPUs are per extended resource, because ResourceQuota counts resources,
not GPU classes: `gpu: 4` at a priority caps each of the tenant's GPU resources at 4 (never above
its quota for that resource).
"""

from __future__ import annotations

from typing import Mapping

from ..fleet import gpu_capacity as cap
from ..fleet.budget import budget_home, compute_hard, namespace_slices, split_budget  # noqa: F401  (part of this module's API)
from ..spec.quantity import Quantity
from ..fleet.facts import TenantView
from ..spec.stack import Platform, PriorityClassSpec
from ..spec.tenant import PriorityCap, Tenant
from .device_classes import device_class_hard
from .meta import KubeObject, kube_object, object_meta, owned_labels

TENANT_QUOTA = "tenant-quota"
SUSPENDED_QUOTA = "suspended"
CROSS_NAMESPACE_AFFINITY_QUOTA = "cross-namespace-affinity"
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


def gpu_hard(view: TenantView, granted: Mapping[str, int] | None = None) -> dict[str, str]:
    """`requests.<resource>` quota keys for GPUs: `granted` (default: the tenant's quota), "0" for every
    other GPU resource the quota pins (`FleetFacts.quota_gpu_resources`).

    >>> from components.fleet.facts import FleetFacts
    >>> from components.spec.stack import Platform
    >>> p = Platform(labelDomain="gpu.example.com", gpuClasses={"h100": {
    ...     "model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}})
    >>> gpu_hard(FleetFacts("dev", p, ()).view(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", gpu={"classes": ["h100"]}, quota={"gpu": 8})))
    {'requests.nvidia.com/gpu': '8', 'requests.nvidia.com/gpu.shared': '0', 'requests.nvidia.com/mig-1g.10gb': '0', ...}
    """
    counts = {resource: 0 for resource in view.quota_gpu_resources}
    counts.update(view.gpu_quota_by_resource if granted is None else granted)
    return {cap.quota_key(resource): str(count) for resource, count in sorted(counts.items())}


def storage_hard(tenant: Tenant, platform: Platform | None = None) -> dict[str, str]:
    """Persistent storage keys: total requested bytes, per-StorageClass bytes and claim counts.

    The tenant's values, else the stack's `guardRails.storage`; classes of `guardRails.storageClasses`
    that get no cap from either are pinned at 0.

    >>> storage_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", quota={"storage": {"storageClasses": {"fast": {"persistentVolumeClaims": 2}}}}))
    {'fast.storageclass.storage.k8s.io/persistentvolumeclaims': '2'}
    """
    own = tenant.quota.storage
    defaults = platform.guard_rails.storage if platform is not None else None
    hard = {}
    total = own.requests if own is not None and own.requests is not None else (defaults.requests if defaults else None)
    if total is not None:
        hard["requests.storage"] = str(total)
    classes = dict(defaults.storage_classes) if defaults else {}
    classes.update(own.storage_classes if own is not None else {})
    for name in platform.guard_rails.storage_classes if platform is not None else []:
        classes.setdefault(name, None)
    for name, per_class in sorted(classes.items()):
        prefix = f"{name}.storageclass.storage.k8s.io"
        if per_class is None:
            hard[f"{prefix}/requests.storage"] = "0"
            hard[f"{prefix}/persistentvolumeclaims"] = "0"
            continue
        if per_class.requests is not None:
            hard[f"{prefix}/requests.storage"] = str(per_class.requests)
        if per_class.persistent_volume_claims is not None:
            hard[f"{prefix}/persistentvolumeclaims"] = str(per_class.persistent_volume_claims)
    return hard


def ephemeral_storage_hard(tenant: Tenant, platform: Platform) -> dict[str, str]:
    """Ephemeral-storage keys from the stack's `guardRails.ephemeralStorage`, for each side the tenant's
    `quota.ephemeralStorage` leaves unset (what the tenant sets is budget: `compute_hard`).

    The LimitRange gives every container an ephemeral-storage request and limit from the same guard
    rails (`effective_limits`), so these keys never refuse a pod for not stating one.

    >>> ephemeral_storage_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", quota={"ephemeralStorage": {"limits": "1Ti"}}), prod.platform)
    {'requests.ephemeral-storage': '100Gi'}
    """
    own = tenant.quota.ephemeral_storage
    rail = platform.guard_rails.ephemeral_storage.quota
    hard = {}
    for side in ("requests", "limits"):
        value = getattr(rail, side)
        if value is not None and (own is None or getattr(own, side) is None):
            hard[f"{side}.ephemeral-storage"] = str(value)
    return hard


def object_count_hard(tenant: Tenant, platform: Platform | None = None) -> dict[str, str]:
    """Object-count keys (`pods`, `services`, ...): the tenant's counts, else the stack's guard rails.

    >>> object_count_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", quota={"objects": {"servicesLoadBalancers": 0}}))
    {'services.loadbalancers': '0'}
    """
    objects = tenant.quota.objects
    defaults = platform.guard_rails.objects if platform is not None else None
    hard = {}
    for field, key in _OBJECTS:
        value = getattr(objects, field)
        if value is None and defaults is not None:
            value = getattr(defaults, field)
        if value is not None:
            hard[key] = str(value)
    kinds = {**(defaults.kinds if defaults is not None else {}), **objects.kinds}
    for kind, value in sorted(kinds.items()):
        hard[f"count/{kind}"] = str(value)
    return hard


# etcd's default --max-request-bytes: no object it stores is larger (the API server's own limit on a
# request body is above it; ConfigMap and Secret data are also capped at 1 MiB by API validation).
ETCD_MAX_REQUEST_BYTES = 1536 * 1024
# Keys that count a subset of what another key counts (NodePort and LoadBalancer Services are Services).
_SUBSET_COUNTS = ("services.loadbalancers", "services.nodeports")


def worst_case_objects(tenant: Tenant, platform: Platform) -> int:
    """The most objects the tenant's count keys admit in one namespace (every count at its limit).

    >>> worst_case_objects(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", quota={"objects": {"kinds": {"jobs.batch": 0}}}), prod.platform)
    9800
    """
    hard = object_count_hard(tenant, platform)
    return sum(int(value) for key, value in hard.items() if key not in _SUBSET_COUNTS)


def worst_case_etcd_bytes(tenant: Tenant, platform: Platform) -> int:
    """The most bytes the tenant's members can make etcd hold in counted objects: every count key of
    every namespace at its limit, each object at etcd's request limit (docs/security.md).

    >>> worst_case_etcd_bytes(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", namespaces=["a-data"]), prod.platform) / 2**30
    34.5703125
    """
    return worst_case_objects(tenant, platform) * ETCD_MAX_REQUEST_BYTES * len(tenant.all_namespaces)


def _no_compute(budget: dict[str, str]) -> bool:
    """Whether a namespace's cpu and memory budget is all zero (and there is one)."""
    keys = [k for k in budget if k.split(".", 1)[-1] in ("cpu", "memory")]
    return bool(keys) and all(Quantity.parse(budget[k]).value == 0 for k in keys)


def _zeroed(hard: dict[str, str]) -> dict[str, str]:
    return {key: "0" for key in hard}


def _quota(name: str, namespace: str, labels: dict[str, str], hard: dict[str, str], scope_class: str | None = None,
           scopes: list[str] | None = None) -> KubeObject:
    spec: dict = {"hard": dict(sorted(hard.items()))}
    if scopes:
        spec["scopes"] = scopes
    if scope_class is not None:
        spec["scopeSelector"] = {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [scope_class]}]
        }
    return kube_object("v1", "ResourceQuota", object_meta(name, namespace=namespace, labels=labels), spec=spec)


def priority_cap(tenant: Tenant, name: str, priority_class: PriorityClassSpec) -> PriorityCap | None:
    """The tenant's cap at one PriorityClass: its own entry, else the class's default, else none.

    >>> from components.spec.stack import PriorityClassSpec
    >>> pc = PriorityClassSpec(value=1, description="x", defaultTenantCap={"pods": 0})
    >>> priority_cap(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1"), "serve", pc).pods
    0
    """
    own = tenant.quota.priority_classes.get(name)
    return own if own is not None else priority_class.default_tenant_cap


def priority_hard(view: TenantView, priority: PriorityCap, budget: dict[str, str]) -> dict[str, str]:
    """Quota keys of one PriorityClass cap, never above the namespace's own budget for a key.

    >>> priority_hard(prod.view(tenant), PriorityCap(pods=0, gpu=2), {"requests.nvidia.com/gpu": "1"})
    {'pods': '0', 'requests.nvidia.com/gpu': '1', 'requests.nvidia.com/mig-1g.10gb': '2', 'requests.nvidia.com/mig-3g.40gb': '2'}
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
        for resource, count in view.gpu_quota_by_resource.items():
            if count > 0:
                compute[f"requests.{resource}"] = str(priority.gpu)
    for key, value in compute.items():
        if key in budget and Quantity.parse(budget[key]) < Quantity.parse(value):
            value = budget[key]
        hard[key] = value
    return hard


def resource_quotas(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """Every ResourceQuota of the tenant, in each of its namespaces (see the module docstring).

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", quota={"cpu": {"requests": "8"}}, lifecycle="suspended")
    >>> [q["metadata"]["name"] for q in resource_quotas(t, env.view(t))]
    ['tenant-quota', 'priority-online-inference', 'priority-training', 'cross-namespace-affinity', 'suspended']
    """
    platform = view.platform
    labels = owned_labels(tenant, view)
    gpu_budget = gpu_hard(view, view.gpu_ceiling_by_resource)
    budgets = {**compute_hard(tenant), **gpu_budget, **device_class_hard(view, set(gpu_budget))}
    slices = namespace_slices(tenant, platform)
    guard_rails = {**storage_hard(tenant, platform), **ephemeral_storage_hard(tenant, platform), **object_count_hard(tenant, platform)}
    home = budget_home(tenant)
    objects = []
    for namespace in tenant.all_namespaces:
        primary = namespace == home
        if primary:
            budget = split_budget(budgets, slices)
        else:
            budget = {**_zeroed(budgets), **{k: v for k, v in slices.get(namespace, {}).items() if k in budgets}}
        hard = {**guard_rails, **budget}
        if _no_compute(budget):
            hard["pods"] = "0"
        if hard:
            objects.append(_quota(TENANT_QUOTA, namespace, labels, hard))
        for name, priority_class in sorted(platform.priority_classes.items()):
            priority = priority_cap(tenant, name, priority_class)
            if priority is None:
                continue
            scoped = priority_hard(view, priority, budget)
            if scoped:
                objects.append(_quota(priority_quota_name(name), namespace, labels, scoped, scope_class=name))
        if not tenant.quota.cross_namespace_affinity:
            objects.append(_quota(CROSS_NAMESPACE_AFFINITY_QUOTA, namespace, labels, {"pods": "0"}, scopes=["CrossNamespacePodAffinity"]))
        if not tenant.is_active:
            objects.append(_quota(SUSPENDED_QUOTA, namespace, labels, {"pods": "0"}))
    return objects
