"""What each way of sharing a GPU isolates, as data: one record per sharing mode.

The one place these facts are written. docs/gpu-sharing.md's isolation table is rendered from
`SHARING_MODES` (`python -m tools.isolation_table`), and `tenants validate` reads
`Isolation.bounds_memory` to warn when tenants share GPUs that bound no pod's memory. The quota
keys are built by the functions the quota builder uses (`gpu_capacity.quota_key`,
`gpu_capacity.device_class_quota_keys`, `mig.resource_name`), so the table cannot name a key the
namespaces do not get.

Quota is admission-time accounting: a key says how many devices or shares a namespace may
*declare*, never how much GPU memory a pod uses. What bounds a pod on the node is the last column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import gpu_capacity as cap
from . import mig
from ..spec.stack import GpuClass


@dataclass(frozen=True)
class Isolation:
    """What one sharing mode gives a pod, and who meters and enforces it."""

    mode: str                 # the row's name
    set_by: str               # what in the stack (or the pod) selects the mode
    sharing: Optional[str]    # the stack's `gpuClasses.<name>.sharing` value; None: not a stack sharing mode
    shares_a_gpu: bool        # pods (and so tenants) can run on the same physical GPU
    bounds_memory: bool       # something on the node bounds each pod's GPU memory
    memory_bound: str
    fault_isolation: str
    compute_share: str
    metered_by: str           # the quota keys or queue that count it at admission
    enforced_by: str          # what holds the bounds on the node


def _keys(*keys: str, joined_by: str = " or ") -> str:
    return joined_by.join(f"`{key}`" for key in keys)


_SHARES = _keys(cap.quota_key(cap.GPU), cap.quota_key(cap.GPU_SHARED)) + " (`renameByDefault`)"
_DRA_KEYS = _keys(*cap.device_class_quota_keys("<class>"), joined_by=" and ")
_KAI_QUEUE = (
    "the tenant's KAI queue (pod label `kai.scheduler/queue: <tenant>` and `schedulerName: kai-scheduler`, both "
    "required at admission for a pod with the annotation), in fractions of a GPU; ResourceQuota cannot count "
    "fractions (the pod requests no `nvidia.com/gpu`)"
)

SHARING_MODES: tuple[Isolation, ...] = (
    Isolation(
        mode="exclusive",
        set_by="`sharing: exclusive` (the default)",
        sharing="exclusive",
        shares_a_gpu=False,
        bounds_memory=True,
        memory_bound="all of the GPU's memory, no other pod on it",
        fault_isolation="own GPU",
        compute_share="the whole GPU",
        metered_by=_keys(cap.quota_key(cap.GPU)),
        enforced_by="the NVIDIA device plugin allocates each GPU to one container",
    ),
    Isolation(
        mode="MIG",
        set_by="`sharing: mig` and a pool's `migLayout`",
        sharing="mig",
        shares_a_gpu=True,
        bounds_memory=True,
        memory_bound="hardware: the instance's own memory slices (e.g. 10 GB for 1g.10gb)",
        fault_isolation="hardware: a fault stays in its GPU instance",
        compute_share="dedicated compute slices of the instance",
        metered_by=_keys(cap.quota_key(mig.resource_name("<profile>"))) + " (mixed), " + _keys(cap.quota_key(cap.GPU)) + " (single)",
        enforced_by="the GPU (partitions made by the MIG Manager from the mig-parted ConfigMap)",
    ),
    Isolation(
        mode="MPS",
        set_by="`sharing: mps`, `mps: {replicas: N}`",
        sharing="mps",
        shares_a_gpu=True,
        bounds_memory=True,
        memory_bound="per client: GPU memory / `replicas` (the MPS pinned device memory limit; unproven against a hostile client)",
        fault_isolation="**not full**: a fatal GPU fault in one client can end every MPS client on the GPU",
        compute_share="100 / `replicas` % of the threads (MPS active thread percentage), run at once",
        metered_by=_SHARES,
        enforced_by="the device plugin's MPS control daemon on the node, from its MPS config",
    ),
    Isolation(
        mode="time-slicing",
        set_by="`sharing: timeSlicing`, `timeSlicing: {replicas: N}`",
        sharing="timeSlicing",
        shares_a_gpu=True,
        bounds_memory=False,
        memory_bound="**none**: one pod can take all of the GPU's memory",
        fault_isolation="**none**: a fault in one pod can end the others on the GPU",
        compute_share="turns on the whole GPU, no guarantee",
        metered_by=_SHARES,
        enforced_by="nothing bounds a pod; the device plugin only advertises `replicas` shares per GPU",
    ),
    Isolation(
        mode="KAI fraction",
        set_by="`kaiFractions: {memoryBound: none}` on an exclusive class (`scheduler: kai`), pod annotation `gpu-fraction` or `gpu-memory`",
        sharing=None,
        shares_a_gpu=True,
        bounds_memory=False,
        memory_bound="**none**: the fraction is scheduling accounting only",
        fault_isolation="**none**",
        compute_share="shared, no guarantee",
        metered_by=_KAI_QUEUE,
        enforced_by="nothing on the node; KAI only places pods by their fractions",
    ),
    Isolation(
        mode="KAI fraction with HAMi-core",
        set_by="`kaiFractions: {memoryBound: hamicore}` (the tool's KAI `Config` turns on the `hamicore` binder plugin), plus HAMi-core loaded in the container (e.g. kai-resource-isolator)",
        sharing=None,
        shares_a_gpu=True,
        bounds_memory=True,
        memory_bound="soft: `CUDA_DEVICE_MEMORY_LIMIT` (share x GPU memory), checked by HAMi-core on CUDA allocations through LD_PRELOAD; a hostile container that bypasses the library (static CUDA runtime, direct driver calls, its own preload) is not bounded",
        fault_isolation="**none**",
        compute_share="shared, no guarantee",
        metered_by=_KAI_QUEUE,
        enforced_by="HAMi-core (`libvgpu.so`) inside the container, i.e. by the tenant's own process, not by the node",
    ),
    Isolation(
        mode="DRA",
        set_by="`serving: dra` or `both`, and `deviceClasses` naming the class",
        sharing=None,
        shares_a_gpu=False,
        bounds_memory=True,
        memory_bound="the driver's sharing config: exclusive by default (the whole device); a claim's time-slicing or MPS config gives those rows' bounds",
        fault_isolation="as the driver's sharing (own device by default)",
        compute_share="as the driver's sharing (the whole device by default)",
        metered_by=_DRA_KEYS + ", and `requests.<extendedResourceName>` when the class maps one",
        enforced_by="the DRA driver allocates each device to a claim (and applies the claim's sharing config)",
    ),
)


def isolation_of(gpu_class: GpuClass) -> Isolation:
    """The isolation a GPU class's pods get, from its `sharing` (DRA-served classes are exclusive).

    >>> isolation_of(prod.platform.gpu_classes["a100-mig"]).fault_isolation
    'hardware: a fault stays in its GPU instance'
    >>> isolation_of(dev.platform.gpu_classes["l4"]).bounds_memory
    False
    """
    return next(record for record in SHARING_MODES if record.sharing == gpu_class.sharing)


def fraction_isolation(gpu_class: GpuClass) -> Optional[Isolation]:
    """The isolation of KAI fractions on a class's GPUs (`kaiFractions`); None when the class declares none.

    >>> fraction_isolation(staging.platform.gpu_classes["a100"]).mode
    'KAI fraction with HAMi-core'
    >>> fraction_isolation(staging.platform.gpu_classes["h100"]) is None
    True
    """
    if gpu_class.kai_fractions is None:
        return None
    mode = "KAI fraction with HAMi-core" if gpu_class.kai_fractions.memory_bound == "hamicore" else "KAI fraction"
    return next(record for record in SHARING_MODES if record.mode == mode)
