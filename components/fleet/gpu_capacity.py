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

from . import mig
from ..spec.quantity import Quantity, format_quantity
from ..spec.stack import GpuClass, NodePool, Platform
from ..spec.tenant import Tenant

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
# The two DRA quota key forms of a DeviceClass, as the real kube-apiserver counts them
# (components/manifests/device_classes.py says what each counts).
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
CLAIM_DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def quota_key(resource: str) -> str:
    """The ResourceQuota key that meters pods' requests of an extended resource.

    >>> quota_key("nvidia.com/mig-1g.10gb")
    'requests.nvidia.com/mig-1g.10gb'
    """
    return f"requests.{resource}"


def device_class_quota_keys(device_class: str) -> tuple[str, str]:
    """The two quota keys of a DRA DeviceClass: its implicit extended resource, and its claims' devices.

    >>> device_class_quota_keys("gpu.nvidia.com")
    ('requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com', 'gpu.nvidia.com.deviceclass.resource.k8s.io/devices')
    """
    return quota_key(IMPLICIT_EXTENDED_RESOURCE_PREFIX + device_class), device_class + CLAIM_DEVICES_SUFFIX


def class_resource(gpu_class: GpuClass) -> str:
    """The extended resource a pod requests to get a device of this class (whole-GPU classes).

    >>> from components.spec.stack import GpuClass
    >>> class_resource(GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="timeSlicing",
    ...     time_slicing={"replicas": 4, "renameByDefault": True}))
    'nvidia.com/gpu.shared'
    """
    if gpu_class.replication and gpu_class.replication.rename_by_default:
        return GPU_SHARED
    return GPU


def mps_memory_per_replica(gpu_class: GpuClass) -> str | None:
    """GPU memory each MPS client may pin: the class's memory / replicas in whole MiB, as the device
    plugin's MPS daemon computes it from the device's real total (a little below the nominal one).

    >>> mps_memory_per_replica(GpuClass(model="H100-80GB", product="NVIDIA-H100-80GB-HBM3", memory="80Gi",
    ...     sharing="mps", mps={"replicas": 3}))
    '27306Mi'
    """
    if gpu_class.sharing != "mps" or gpu_class.mps is None:
        return None
    per_replica = int(Quantity.parse(gpu_class.memory).value) // gpu_class.mps.replicas
    return format_quantity(Fraction(per_replica // 2**20 * 2**20))


def is_mig_mixed(gpu_class: GpuClass) -> bool:
    """Whether the class is partitioned with the mixed MIG strategy (one resource per profile).

    >>> is_mig_mixed(prod.platform.gpu_classes["a100-mig"]), is_mig_mixed(prod.platform.gpu_classes["h100"])
    (True, False)
    """
    return gpu_class.sharing == "mig" and gpu_class.mig is not None and gpu_class.mig.strategy == "mixed"


def pool_layout(platform: Platform, pool: NodePool) -> list[tuple[int, dict[str, int]]]:
    """MIG devices of one node of the pool as (number of GPUs, profile -> count per GPU) groups.

    GPUs not covered by the layout stay whole (MIG disabled) and are not part of the result.
    Returns [] when the pool has no valid layout (validation reports why).

    >>> pool_layout(prod.platform, prod.platform.node_pools["a100-mig"])
    [(4, {'1g.10gb': 7}), (4, {'3g.40gb': 2})]
    """
    if pool.mig_layout is None:
        return []
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    if gpu_class is None:
        return []
    named = mig.expand_named_layout(pool.mig_layout, gpu_class.model)
    if pool.mig_layout in platform.mig_layouts:
        groups = []
        for group in platform.mig_layouts[pool.mig_layout]:
            count = pool.gpus_per_node if group.devices == "all" else len([d for d in group.devices if d < pool.gpus_per_node])
            groups.append((count, dict(group.profiles)))
        return groups
    if named is not None:
        return [(pool.gpus_per_node, named)]
    return []


def node_mig_profiles(platform: Platform, pool: NodePool) -> dict[str, int]:
    """MIG devices per profile on one node of a mixed-strategy MIG pool ({} otherwise).

    >>> node_mig_profiles(prod.platform, prod.platform.node_pools["a100-mig"])
    {'1g.10gb': 28, '3g.40gb': 8}
    >>> node_mig_profiles(prod.platform, prod.platform.node_pools["h100-train"])
    {}
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    if gpu_class is None or not is_mig_mixed(gpu_class):
        return {}
    result: dict[str, int] = {}
    for count, devices in pool_layout(platform, pool):
        for profile, per_gpu in devices.items():
            result[profile] = result.get(profile, 0) + count * per_gpu
    return dict(sorted(result.items()))


def node_class_units(platform: Platform, pool: NodePool) -> int:
    """Units of the class's own resource (`class_resource`) on one node of the pool.

    Whole GPUs; x replicas when time-sliced or shared by MPS; MIG single: slices plus GPUs the layout leaves whole;
    MIG mixed: only the GPUs the layout leaves whole (its slices are `node_mig_profiles`).

    >>> node_class_units(prod.platform, prod.platform.node_pools["h100-train"])
    8
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    if gpu_class is None:
        return 0
    if gpu_class.replication:
        return pool.gpus_per_node * gpu_class.replication.replicas
    if gpu_class.sharing == "mig":
        groups = pool_layout(platform, pool)
        whole = max(pool.gpus_per_node - sum(count for count, _ in groups), 0)
        if is_mig_mixed(gpu_class):
            return whole
        return whole + sum(count * sum(devices.values()) for count, devices in groups)
    return pool.gpus_per_node


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
    result = {mig.resource_name(profile): count for profile, count in node_mig_profiles(platform, pool).items()}
    units = node_class_units(platform, pool)
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
        gpus = pool.node_count * pool.gpus_per_node
        if gpu_class.replication:
            result.per_class[pool.gpu_class] += gpus * gpu_class.replication.replicas
        elif gpu_class.sharing == "mig":
            groups = pool_layout(platform, pool)
            covered = sum(count for count, _ in groups)
            if is_mig_mixed(gpu_class):
                for count, devices in groups:
                    for profile, per_gpu in devices.items():
                        result.per_mig_profile[profile] = result.per_mig_profile.get(profile, 0) + pool.node_count * count * per_gpu
                        classes = result.mig_profile_classes.setdefault(profile, [])
                        if pool.gpu_class not in classes:
                            classes.append(pool.gpu_class)
                # GPUs the layout leaves whole still serve nvidia.com/gpu requests.
                result.per_class[pool.gpu_class] += pool.node_count * max(pool.gpus_per_node - covered, 0)
            else:
                slices = sum(count * sum(devices.values()) for count, devices in groups)
                result.per_class[pool.gpu_class] += pool.node_count * (slices + max(pool.gpus_per_node - covered, 0))
        else:
            result.per_class[pool.gpu_class] += gpus
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
