"""GPU capacity of an environment and how tenant quotas map onto it.

Vocabulary: a *GPU class* is a kind of device tenants ask for; a *resource* is the extended
resource the device plugin advertises (`nvidia.com/gpu`, `nvidia.com/gpu.shared`,
`nvidia.com/mig-1g.10gb`). ResourceQuota can only count resources, so per-class GPU quotas are
summed per resource for the namespace quota; per-class limits are enforced only by the placement
policy (which classes) and, when enabled, by Kueue or KAI queues (how many per class).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from . import devices, mig
from .isolation import mode_of
from ..spec.stack import GpuClass, NodePool, Platform
from ..spec.tenant import Tenant

# The device names and quota keys live in `devices.py`, below the sharing-mode table that names
# them (`isolation.py`, which this module reads); builders and checks keep reading them here.
GPU, GPU_SHARED = devices.GPU, devices.GPU_SHARED
IMPLICIT_EXTENDED_RESOURCE_PREFIX, CLAIM_DEVICES_SUFFIX = devices.IMPLICIT_EXTENDED_RESOURCE_PREFIX, devices.CLAIM_DEVICES_SUFFIX
quota_key, device_class_quota_keys = devices.quota_key, devices.device_class_quota_keys
pool_layout, is_mig_mixed, mps_memory_per_replica = devices.pool_layout, devices.is_mig_mixed, devices.mps_memory_per_replica


def class_resource(gpu_class: GpuClass) -> str:
    """The extended resource a pod requests to get a device of this class (whole-GPU classes).

    >>> from components.spec.stack import GpuClass
    >>> class_resource(GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="timeSlicing",
    ...     time_slicing={"replicas": 4, "renameByDefault": True}))
    'nvidia.com/gpu.shared'
    """
    return mode_of(gpu_class).resource(gpu_class)


def node_mig_profiles(platform: Platform, pool: NodePool) -> dict[str, int]:
    """MIG devices per profile on one node of a mixed-strategy MIG pool ({} otherwise).

    >>> node_mig_profiles(prod.platform, prod.platform.node_pools["a100-mig"])
    {'1g.10gb': 28, '3g.40gb': 8}
    >>> node_mig_profiles(prod.platform, prod.platform.node_pools["h100-train"])
    {}
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    return {} if gpu_class is None else dict(sorted(mode_of(gpu_class).node_devices(platform, pool, gpu_class)[1].items()))


def node_class_units(platform: Platform, pool: NodePool) -> int:
    """Units of the class's own resource (`class_resource`) on one node of the pool.

    Whole GPUs; x replicas when time-sliced or shared by MPS; MIG single: slices plus GPUs the layout leaves whole;
    MIG mixed: only the GPUs the layout leaves whole (its slices are `node_mig_profiles`).

    >>> node_class_units(prod.platform, prod.platform.node_pools["h100-train"])
    8
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    return 0 if gpu_class is None else mode_of(gpu_class).node_devices(platform, pool, gpu_class)[0]


def node_gpu_resources(platform: Platform, pool: NodePool) -> dict[str, int]:
    """Extended resources one node of the pool advertises (its device plugin's allocatable).

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {"l4": {"model": "L4",
    ...     "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing", "timeSlicing": {"replicas": 4}}},
    ...     "nodePools": {"l4": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}}})
    >>> node_gpu_resources(p, p.node_pools["l4"])
    {'nvidia.com/gpu': 8}
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    if gpu_class is None:
        return {}
    units, profiles = mode_of(gpu_class).node_devices(platform, pool, gpu_class)
    result = {mig.resource_name(profile): count for profile, count in profiles.items()}
    if units:
        result[class_resource(gpu_class)] = units
    return dict(sorted(result.items()))


@dataclass
class Capacity:
    """Devices per GPU class and per MIG profile (mixed strategy), in the units quotas use."""

    per_class: dict[str, int] = field(default_factory=dict)
    per_mig_profile: dict[str, int] = field(default_factory=dict)
    mig_profile_classes: dict[str, list[str]] = field(default_factory=dict)

    def limit_for_class(self, platform: Platform, name: str) -> Fraction:
        overcommit = Fraction(platform.gpu_classes[name].overcommit)
        return self.per_class.get(name, 0) * overcommit

    def limit_for_profile(self, platform: Platform, profile: str) -> Fraction:
        classes = self.mig_profile_classes.get(profile, [])
        overcommit = min((Fraction(platform.gpu_classes[c].overcommit) for c in classes), default=Fraction(1))
        return self.per_mig_profile.get(profile, 0) * overcommit


def capacity(platform: Platform) -> Capacity:
    """Hand-checkable capacity: nodes x GPUs per node, x replicas for time-slicing, x slices for MIG.

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}},
    ...     "nodePools": {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]}}})
    >>> capacity(p).per_class
    {'h100': 16}
    """
    result = Capacity(per_class={name: 0 for name in platform.gpu_classes})
    for pool_name, pool in sorted(platform.node_pools.items()):
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        if gpu_class is None:
            continue
        units, profiles = mode_of(gpu_class).node_devices(platform, pool, gpu_class)
        result.per_class[pool.gpu_class] += pool.node_count * units
        for profile, count in profiles.items():
            result.per_mig_profile[profile] = result.per_mig_profile.get(profile, 0) + pool.node_count * count
            classes = result.mig_profile_classes.setdefault(profile, [])
            if pool.gpu_class not in classes:
                classes.append(pool.gpu_class)
    return result


def allowed_classes(tenant: Tenant, platform: Platform) -> list[str]:
    """GPU classes the tenant may use: listed ones plus those of its dedicated pools.

    >>> allowed_classes(tenant, prod.platform), allowed_classes(prod.tenants[1].spec, prod.platform)
    (['a100', 'a100-mig'], ['h100'])
    """
    names = set(tenant.gpu.classes)
    for pool in tenant.gpu.dedicated_pools:
        if pool in platform.node_pools:
            names.add(platform.node_pools[pool].gpu_class)
    return sorted(names)


def gpu_quota_by_class(tenant: Tenant, platform: Platform) -> dict[str, int]:
    """The tenant's whole-GPU quota per class; a plain number applies to its single allowed class.

    >>> gpu_quota_by_class(prod.tenants[2].spec, prod.platform)
    {'h100': 40}
    """
    quota = tenant.quota.gpu
    if quota is None:
        return {}
    if isinstance(quota, int):
        classes = allowed_classes(tenant, platform)
        if len(classes) == 1:
            return {classes[0]: quota}
        return {} if quota == 0 else {"": quota}
    return dict(sorted(quota.items()))


def counts_in_device_plugin_resource(platform: Platform, name: str, gpu_class: GpuClass) -> bool:
    """Whether the class's grant belongs in its device-plugin resource key (`requests.nvidia.com/gpu`).

    Yes when the device plugin serves it, or when one of its DeviceClasses maps that resource as its
    `extendedResourceName` (claims of the class are then charged there too). A class served by DRA
    alone under another name is metered by its DeviceClass keys only: adding its grant to
    `nvidia.com/gpu` would hand the tenant that many device-plugin GPUs of its other classes.

    >>> from components.spec.stack import Platform
    >>> p = Platform(labelDomain="x.dev", gpuClasses={"b200": {"model": "B200", "product": "NVIDIA-B200",
    ...     "memory": "180Gi", "serving": "dra"}}, deviceClasses={"b200.x.dev": {"driver": "gpu.nvidia.com",
    ...     "gpuClass": "b200"}})
    >>> counts_in_device_plugin_resource(p, "b200", p.gpu_classes["b200"])
    False
    """
    if gpu_class.serving != "dra":
        return True
    resource = class_resource(gpu_class)
    return any(
        spec.gpu_class == name and spec.extended_resource_name == resource for spec in platform.device_classes.values()
    )


def device_class_queue_resource(platform: Platform, name: str) -> str | None:
    """The resource a Kueue ClusterQueue counts the devices of a DeviceClass under (its name in
    Kueue's `deviceClassMappings`); None for a class metering no GPU class (Kueue then refuses its claims).

    A class that maps its GPU class's device-plugin resource (`serving: both`) is counted in that
    resource, as its ResourceQuota key is: Kueue resolves a pod's `nvidia.com/gpu` to the mapped class
    too, so one name keeps one budget. Any other is counted under its implicit extended resource,
    `deviceclass.resource.kubernetes.io/<class>`, the name a pod asking for it directly is counted
    under as well (Kueue counts such a request as written), so all three DRA paths meet in one
    resource.

    >>> [device_class_queue_resource(dra.platform, n) for n in ("b200.gpu.dra.dev", "h100.gpu.dra.dev", "gpu.nvidia.com")]
    ['deviceclass.resource.kubernetes.io/b200.gpu.dra.dev', 'nvidia.com/gpu', None]
    """
    spec = platform.device_classes[name]
    gpu_class = platform.gpu_classes.get(spec.gpu_class) if spec.gpu_class else None
    if gpu_class is None:
        return None
    if spec.extended_resource_name is not None and spec.extended_resource_name == class_resource(gpu_class):
        return spec.extended_resource_name
    return IMPLICIT_EXTENDED_RESOURCE_PREFIX + name


def queue_resources(platform: Platform, class_name: str, resource: str) -> list[str]:
    """What a queue counts a class's `resource` as: itself, or for a class served by DRA alone (whose
    pods never ask for the device-plugin resource) the queue resources of its DeviceClasses.

    >>> queue_resources(dra.platform, "b200", "nvidia.com/gpu"), queue_resources(dra.platform, "h100", "nvidia.com/gpu")
    (['deviceclass.resource.kubernetes.io/b200.gpu.dra.dev'], ['nvidia.com/gpu'])
    """
    if not is_dra_only(platform, class_name):
        return [resource]
    whole = resource == class_resource(platform.gpu_classes[class_name])
    # A MIG class served by DRA: each profile's devices are its DeviceClass's (`migProfile`), not the class's GPUs.
    named = [name for name, spec in platform.device_classes.items() if spec.gpu_class == class_name
             and (spec.mig_profile is None if whole else spec.mig_profile is not None and mig.resource_name(spec.mig_profile) == resource)]
    if not whole and not named:
        return [resource]
    return sorted({queued for name in named if (queued := device_class_queue_resource(platform, name)) is not None})


def is_dra_only(platform: Platform, class_name: str) -> bool:
    """Whether pods get the class's devices through DRA alone, never as its device-plugin resource.

    >>> is_dra_only(dra.platform, "b200"), is_dra_only(dra.platform, "h100")
    (True, False)
    """
    gpu_class = platform.gpu_classes.get(class_name)
    return gpu_class is not None and not counts_in_device_plugin_resource(platform, class_name, gpu_class)


def queue_gpu_resources(platform: Platform, pool: NodePool) -> dict[str, int]:
    """`node_gpu_resources` as a queue counts them: a DRA-only class's devices under its DeviceClasses' names.

    >>> queue_gpu_resources(dra.platform, dra.platform.node_pools["b200-train"])
    {'deviceclass.resource.kubernetes.io/b200.gpu.dra.dev': 8}
    """
    result: dict[str, int] = {}
    for resource, count in node_gpu_resources(platform, pool).items():
        for queued in queue_resources(platform, pool.gpu_class, resource):
            result[queued] = count
    return dict(sorted(result.items()))


def gpu_quota_by_resource(tenant: Tenant, platform: Platform) -> dict[str, int]:
    """What the namespace ResourceQuota enforces: requested devices per extended resource.

    >>> gpu_quota_by_resource(tenant, prod.platform)
    {'nvidia.com/gpu': 20, 'nvidia.com/mig-1g.10gb': 48, 'nvidia.com/mig-3g.40gb': 16}
    """
    totals: dict[str, int] = {}
    for name, count in gpu_quota_by_class(tenant, platform).items():
        gpu_class = platform.gpu_classes.get(name)
        resource = class_resource(gpu_class) if gpu_class else GPU
        if gpu_class is not None and not counts_in_device_plugin_resource(platform, name, gpu_class):
            continue
        totals[resource] = totals.get(resource, 0) + count
    for profile, count in sorted(tenant.quota.mig.items()):
        resource = mig.resource_name(profile)
        totals[resource] = totals.get(resource, 0) + count
    return dict(sorted(totals.items()))


def ratio_text(value: Decimal | Fraction) -> str:
    """A ratio as people write it: no trailing zeros, at most two decimals.

    >>> ratio_text(Fraction(5, 4)), ratio_text(Decimal("2.00")), ratio_text(Fraction(1, 3))
    ('1.25', '2', '0.333333')
    """
    return f"{float(value):g}"
