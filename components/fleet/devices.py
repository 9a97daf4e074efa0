"""The devices a GPU node advertises and the quota keys that meter them: the names every sharing mode uses.

Below both `isolation.py` (what each sharing mode does, which names these keys) and
`gpu_capacity.py` (the arithmetic over a stack), so the sharing-mode table can name the
resources and keys without importing the arithmetic that reads the table.
"""

from __future__ import annotations

from fractions import Fraction

from . import mig
from ..spec.quantity import Quantity, format_quantity
from ..spec.stack import GpuClass, NodePool, Platform

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


def mps_memory_per_replica(gpu_class: GpuClass) -> str | None:
    """GPU memory each MPS client may pin: the class's memory / replicas in whole MiB, as the device
    plugin's MPS daemon computes it from the device's real total (a little below the nominal one).

    >>> mps_memory_per_replica(GpuClass(model="H100-80GB", product="NVIDIA-H100-80GB-HBM3", memory="80Gi",
    ...     sharing="mps", mps={"replicas": 3}))
    '27306Mi'
    """
    if gpu_class.mps is None:
        return None
    per_replica = int(Quantity.parse(gpu_class.memory).value) // gpu_class.mps.replicas
    return format_quantity(Fraction(per_replica // 2**20 * 2**20))


def is_mig_mixed(gpu_class: GpuClass) -> bool:
    """Whether the class is partitioned with the mixed MIG strategy (one resource per profile).

    >>> is_mig_mixed(prod.platform.gpu_classes["a100-mig"]), is_mig_mixed(prod.platform.gpu_classes["h100"])
    (True, False)
    """
    # The spec sets `mig` exactly when `sharing` is mig.
    return gpu_class.mig is not None and gpu_class.mig.strategy == "mixed"


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
