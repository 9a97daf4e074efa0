"""Scheduler queues (Kueue, KAI): what a tenant's queue settings amount to (their checks are in
`components.validate.queues`).

The nominal queue quota of a tenant is always its `quota` (per GPU class); `queue` only says how
it shares: which cohort (Kueue) or department (KAI parent queue) it borrows within, how much it
may borrow or lend per GPU class, and its weight. The arithmetic here is shared with the builders
(`components.manifests.kueue`, `components.manifests.kai`) so that checks and objects agree.

Lending and borrowing happen pool by pool (a Kueue flavor is a node pool): a member lends its
nominal quota on each pool, capped by its `lendingLimit`, and never a class only its dedicated
pools provide; a tenant can borrow only what is lent on pools it may reach (`lenders`,
`lent_to` of `components.fleet.facts.FleetFacts`; the checks read them). The ResourceQuota under
a queue reads none of this: it is a bound from the tenant's own spec and the stack (the one rule,
`components.fleet.facts.TenantView.gpu_ceiling_by_resource`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

from . import gpu_capacity as cap
from .budget import ephemeral_storage_quota
from ..spec.stack import Platform
from ..spec.tenant import Tenant

KAI_FALLBACK_DEPARTMENT = "tenants"
KAI_PARENT_PREFIX = "dept-"
KUEUE_CPU_FLAVOR = "default-flavor"
# KAI charges a MIG device as its compute slices (`nvidia.com/mig-3g.40gb` = 3 GPUs); `...+me`
# profiles do not match and are not counted. A time-slicing share counts as one GPU whether it is
# advertised as `nvidia.com/gpu` or renamed `nvidia.com/gpu.shared` (renaming must not empty the
# tenant's KAI GPU quota, nor turn its limit into 0).
_KAI_MIG = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


def cohort_of(tenant: Tenant, platform: Platform) -> str | None:
    """The Kueue cohort a tenant's ClusterQueue joins: its own `queue.cohort`, else the stack default.

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1"})
    >>> cohort_of(t, Platform.model_validate({"labelDomain": "x.dev", "queues": {"defaultCohort": "shared"}}))
    'shared'
    """
    return tenant.queue.cohort or platform.queues.default_cohort


def kai_department_of(tenant: Tenant, platform: Platform) -> str:
    """The KAI parent queue of a tenant's leaf queue (KAI schedules only queues that have a parent).

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1"})
    >>> kai_department_of(t, Platform.model_validate({"labelDomain": "x.dev"}))
    'tenants'
    """
    return cohort_of(tenant, platform) or KAI_FALLBACK_DEPARTMENT


def kai_parent_queue(department: str) -> str:
    """Name of a department's KAI parent Queue; prefixed, as parent and leaf (tenant) queues share one set of names.

    >>> kai_parent_queue("research")
    'dept-research'
    """
    return KAI_PARENT_PREFIX + department


def dedicated_only_classes(tenant: Tenant, platform: Platform) -> set[str]:
    """GPU classes the tenant reaches only through its dedicated pools (never lent to others).

    >>> dedicated_only_classes(prod.tenants[1].spec, prod.platform), dedicated_only_classes(tenant, prod.platform)
    ({'h100'}, set())
    """
    dedicated = {platform.node_pools[p].gpu_class for p in tenant.gpu.dedicated_pools if p in platform.node_pools}
    return dedicated - set(tenant.gpu.classes)


def _limited_classes(tenant: Tenant, platform: Platform) -> list[str]:
    # What a plain-number limit applies to: the whole-GPU classes the tenant has quota for.
    return [
        name for name in cap.gpu_quota_by_class(tenant, platform)
        if name in platform.gpu_classes and not cap.is_mig_mixed(platform.gpu_classes[name])
    ]


def borrowing_limits(tenant: Tenant, platform: Platform) -> dict[str, int] | None:
    """`queue.borrowingLimit` per GPU class (None: unset, no limit). A plain number is the same
    number for each whole-GPU class the tenant has quota for (MIG slices take no per-class limit)
    but those it reaches only through its dedicated pools: checks and builders only see maps.

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {c: {
    ...     "model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi"} for c in ("a100", "b")}})
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "gpu": {"classes": ["a100", "b"]}, "quota": {"gpu": {"a100": 8, "b": 2}},
    ...     "queue": {"borrowingLimit": 4}})
    >>> borrowing_limits(t, p), t.queue.borrowing_limit
    ({'a100': 4, 'b': 4}, 4)
    """
    limit = tenant.queue.borrowing_limit
    if not isinstance(limit, int):
        return limit
    dedicated = dedicated_only_classes(tenant, platform)
    return {name: limit for name in _limited_classes(tenant, platform) if name not in dedicated}


def lending_limits(tenant: Tenant, platform: Platform) -> dict[str, int] | None:
    """`queue.lendingLimit` per GPU class (None: unset); a plain number as for `borrowing_limits`,
    its dedicated-only classes included (what they lend is left out where lending is worked out).

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "queue": {"lendingLimit": {"h100": 1}}})
    >>> lending_limits(t, Platform.model_validate({"labelDomain": "x.dev"}))
    {'h100': 1}
    """
    limit = tenant.queue.lending_limit
    if not isinstance(limit, int):
        return limit
    return {name: limit for name in _limited_classes(tenant, platform)}


def cohort_chain(cohort: str, platform: Platform) -> list[str]:
    """The cohort and its ancestors (`queues.cohorts.<name>.parent`), nearest first; a cycle (which
    validation refuses) ends where it closes.

    >>> from components.spec.stack import Platform
    >>> cohort_chain("nlp", Platform.model_validate({"labelDomain": "x.dev", "queues": {"cohorts": {
    ...     "nlp": {"parent": "research"}, "research": {"parent": "org"}}}}))
    ['nlp', 'research', 'org']
    """
    chain = [cohort]
    while True:
        settings = platform.queues.cohorts.get(chain[-1])
        parent = settings.parent if settings is not None else None
        if parent is None or parent in chain:
            return chain
        chain.append(parent)


def cohort_root(cohort: str, platform: Platform) -> str:
    """The root of the cohort's tree: queues borrow from anywhere in it, the root holds nothing apart.

    >>> from components.spec.stack import Platform
    >>> cohort_root("nlp", Platform.model_validate({"labelDomain": "x.dev", "queues": {"cohorts": {"nlp": {"parent": "org"}}}}))
    'org'
    """
    return cohort_chain(cohort, platform)[-1]


def spare_cohort(platform: Platform) -> str | None:
    """The Kueue cohort whose Cohort object holds the spare capacity of every shared pool:
    `queues.spareCohort`, else the root of `queues.defaultCohort`'s tree; None without Kueue or either.

    >>> from components.spec.stack import Platform
    >>> spare_cohort(Platform.model_validate({"labelDomain": "x.dev", "scheduler": "kueue", "queues": {
    ...     "defaultCohort": "research", "cohorts": {"research": {"parent": "org"}}}}))
    'org'
    """
    if platform.scheduler != "kueue":
        return None
    queues = platform.queues
    if queues.spare_cohort is not None:
        return queues.spare_cohort
    return cohort_root(queues.default_cohort, platform) if queues.default_cohort is not None else None


def queue_group(tenant: Tenant, platform: Platform) -> str | None:
    """Whom the tenant's queue borrows from: the root of its Kueue cohort's tree, or of its KAI
    department's (always one); a queue borrows across its whole tree.

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1"})
    >>> queue_group(t, Platform.model_validate({"labelDomain": "x.dev", "scheduler": "kai"}))
    'tenants'
    """
    if platform.scheduler == "kueue":
        cohort = cohort_of(tenant, platform)
        return cohort_root(cohort, platform) if cohort is not None else None
    if platform.scheduler == "kai":
        return cohort_root(kai_department_of(tenant, platform), platform)
    return None


def queue_borrows(tenant: Tenant, platform: Platform) -> bool:
    """Whether the tenant's queue may borrow others' idle GPUs: it has someone to borrow from (a Kueue
    cohort, a KAI department) and all its GPU pods go through it (`queue.admission: queued`).

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "queue": {"admission": "direct"}})
    >>> queue_borrows(t, Platform.model_validate({"labelDomain": "x.dev", "scheduler": "kai"}))
    False
    """
    return queue_group(tenant, platform) is not None and tenant.queue.admission == "queued"


@dataclass(frozen=True)
class KaiAmounts:
    """A tenant's quota in KAI Queue units: GPUs (fractions allowed), CPU millicores, memory MB (10^6 bytes)."""

    gpu: Fraction
    cpu: int
    memory: int


def kai_gpu_units(resource: str, count: int) -> Fraction:
    """How many GPUs KAI charges for `count` devices of an extended resource.

    >>> kai_gpu_units("nvidia.com/mig-3g.40gb", 2), kai_gpu_units("nvidia.com/gpu.shared", 4)
    (Fraction(6, 1), Fraction(4, 1))
    """
    if resource in (cap.GPU, cap.GPU_SHARED):
        return Fraction(count)
    match = _KAI_MIG.match(resource)
    return Fraction(int(match[1]) * count) if match else Fraction(0)


def kai_dra_only_gpus(tenant: Tenant, platform: Platform) -> int:
    """The tenant's GPUs of classes served by DRA alone (no device-plugin resource key holds them).

    KAI charges a queue one GPU per device a pod's ResourceClaims request from a DeviceClass whose
    name contains "gpu" (its `IsGPUDeviceClass`; validate requires such names on KAI stacks), so
    these grants belong in the queue's GPUs beside the device-plugin resources.

    >>> kai_dra_only_gpus(dra.tenants[2].spec, dra.platform)   # vision: h100 2 (device plugin too), b200 1 (DRA only)
    1
    """
    return sum(
        count for name, count in cap.gpu_quota_by_class(tenant, platform).items()
        if (gpu_class := platform.gpu_classes.get(name)) is not None and gpu_class.sharing != "mig"
        and not cap.counts_in_device_plugin_resource(platform, name, gpu_class)
    )


def kai_amounts(tenant: Tenant, platform: Platform, by_resource: Mapping[str, int] | None = None) -> KaiAmounts:
    """The tenant's quota as KAI counts it: GPUs of every extended resource and DRA-only class,
    memory and CPU from the quota's requests, rounded down. `by_resource`: its
    `gpu_quota_by_resource` when known already.

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "quota": {"cpu": {"requests": "1500m"}, "memory": {"requests": "1Gi"}}})
    >>> kai_amounts(t, Platform.model_validate({"labelDomain": "x.dev"}))
    KaiAmounts(gpu=Fraction(0, 1), cpu=1500, memory=1073)
    """
    gpu = sum(
        (kai_gpu_units(resource, count) for resource, count in
         (cap.gpu_quota_by_resource(tenant, platform) if by_resource is None else by_resource).items()),
        Fraction(kai_dra_only_gpus(tenant, platform)),
    )
    cpu = tenant.quota.cpu.requests.value * 1000 if tenant.quota.cpu and tenant.quota.cpu.requests is not None else 0
    memory = (
        tenant.quota.memory.requests.value / 10**6 if tenant.quota.memory and tenant.quota.memory.requests is not None else 0
    )
    return KaiAmounts(gpu=gpu, cpu=math.floor(cpu), memory=math.floor(memory))


def compute_nominal(tenant: Tenant, platform: Platform, resource: str):
    """The Kueue nominal quota of `resource` (cpu, memory): the tenant's requests quota, else the stack's capacity of it.

    >>> compute_nominal(tenant, prod.platform, "cpu"), compute_nominal(tenant, prod.platform, "memory")
    (Quantity('96'), Quantity('768Gi'))
    """
    pair = getattr(tenant.quota, resource)
    if pair is not None and pair.requests is not None:
        return pair.requests
    return platform.cpu_memory_capacity.get(resource)


def kueue_compute_nominal(tenant: Tenant, platform: Platform) -> dict[str, str]:
    """Nominal cpu/memory and ephemeral-storage of the tenant's ClusterQueue: its quota's requests,
    else the stack's cluster capacity (cpu, memory) or guard rails (ephemeral-storage).

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "quota": {"cpu": {"requests": "8"}}})
    >>> kueue_compute_nominal(t, Platform.model_validate({"labelDomain": "x.dev", "cpuMemoryCapacity": {"memory": "1Ti"}}))
    {'cpu': '8', 'ephemeral-storage': '100Gi', 'memory': '1Ti'}
    """
    result = {}
    for resource in ("cpu", "memory"):
        value = compute_nominal(tenant, platform, resource)
        if value is not None:
            result[resource] = str(value)
    # Kueue applies the namespace's LimitRange defaults to a workload's requests, and every tenant's
    # LimitRange gives containers ephemeral-storage requests (the tenant's or the stack's guard
    # rails): the ClusterQueue must cover it (Kueue blocks resources it does not cover), at the
    # namespace quota's requests.
    storage = ephemeral_storage_quota(tenant, platform)
    if storage.requests is not None:
        result["ephemeral-storage"] = str(storage.requests)
    return dict(sorted(result.items()))


def kai_declared_amount(resource: str, value) -> Fraction:
    """A department's stack amount (`gpu: 40`, `cpu: "64"`, `memory: 512Gi`) in KAI units, rounded down.

    >>> from components.spec.quantity import Quantity
    >>> kai_declared_amount("cpu", Quantity.parse("1.5")), kai_declared_amount("memory", Quantity.parse("1G"))
    (Fraction(1500, 1), Fraction(1000, 1))
    """
    if resource == "gpu":
        return Fraction(value)
    if resource == "cpu":
        return Fraction(math.floor(value.value * 1000))
    return Fraction(math.floor(value.value / 10**6))


