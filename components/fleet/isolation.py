"""What each way of sharing a GPU does and isolates, as data: one record per sharing mode.

The one place these facts are written. Each value of the stack's `gpuClasses.<name>.sharing` has a
`SharingMode` in `BY_SHARING`: the devices one node advertises (so capacity, the quota keys and
the metrics' capacity follow), what one device is of a physical GPU (chargeback), the device
plugin's config entry, whether the MIG Manager partitions the GPUs, how reports name it, and its
`Isolation` row. A value of the spec without a record fails the import of this module.

docs/gpu-sharing.md's isolation table is rendered from `isolation_rows()` (`python -m
tools.isolation_table`), and `tenants validate` reads `Isolation.bounds_memory` to warn when tenants
share GPUs that bound no pod's memory. The quota keys are built by the functions the quota builder
uses (`devices.quota_key`, `devices.device_class_quota_keys`, `mig.resource_name`), so the table
cannot name a key the namespaces do not get.

Quota is admission-time accounting: a key says how many devices or shares a namespace may
*declare*, never how much GPU memory a pod uses. What bounds a pod on the node is the last column.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Optional

from . import devices as cap
from . import mig
from ..spec.stack import GpuClass, NodePool, Platform


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

_EXCLUSIVE = Isolation(
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
)

_MIG = Isolation(
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
)

_MPS = Isolation(
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
)

_TIME_SLICING = Isolation(
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
)

_KAI_FRACTION = Isolation(
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
)

_KAI_HAMICORE = Isolation(
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
)

_DRA = Isolation(
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
)


# The GPU isolates a GPU instance whoever made it: memory, faults and compute are MIG's row.
_MIG_DRA = dataclasses.replace(
    _MIG,
    mode="MIG through DRA",
    set_by="`sharing: mig`, `serving: dra` with `devices`, and a pool's `migLayout` (the partitions quotas may promise)",
    sharing=None,
    metered_by=_keys(*cap.device_class_quota_keys("<class>-<profile>.<labelDomain>"), joined_by=" and ") + " (`quota.mig`)",
    enforced_by="the GPU (instances the DRA driver makes when a claim is prepared; the scheduler allocates a partition only "
    "within its GPU's shared counters: memory slices, multiprocessors)",
)


@dataclass(frozen=True)
class SharingMode:
    """What one value of the stack's `sharing` does; `BY_SHARING` holds one per value.

    `node_devices(platform, pool, gpu_class)` is (units of the class's own resource, MIG profile ->
    devices) on one node; `device_share(gpu_class, resource, gpus, devices)` what one device of
    `resource` is of a physical GPU, given the class's `gpus` and its `devices` of that resource.
    """

    isolation: Isolation                                          # its row of docs/gpu-sharing.md
    resource: Callable[[GpuClass], str]                           # what a pod requests for a device of the class
    node_devices: Callable[[Platform, NodePool, GpuClass], tuple[int, dict[str, int]]]
    device_share: Callable[[GpuClass, str, int, int], Fraction]   # chargeback weight
    device_plugin: Optional[Callable[[GpuClass], dict[str, Any]]]  # the plugin config's `sharing` entry; None: whole GPUs
    partitions_gpus: bool                                         # the MIG Manager partitions its pools' GPUs (`migLayout`)
    label: Callable[[GpuClass], str]                              # short name in reports, e.g. `time-slicing x4`
    statement: Callable[[GpuClass], str]                          # what sharing means for the pods on one GPU

    @property
    def sharing(self) -> str:
        """The stack's `sharing` value of the mode.

        >>> BY_SHARING["timeSlicing"].sharing
        'timeSlicing'
        """
        return str(self.isolation.sharing)


def _whole_gpu(_: GpuClass) -> str:
    return cap.GPU


def _replicated_resource(gpu_class: GpuClass) -> str:
    # The plugin advertises renamed shares as nvidia.com/gpu.shared.
    settings = gpu_class.replication
    return cap.GPU_SHARED if settings is not None and settings.rename_by_default else cap.GPU


def _whole_devices(platform: Platform, pool: NodePool, gpu_class: GpuClass) -> tuple[int, dict[str, int]]:
    return pool.gpus_per_node, {}


def _replicated_devices(platform: Platform, pool: NodePool, gpu_class: GpuClass) -> tuple[int, dict[str, int]]:
    settings = gpu_class.replication
    return pool.gpus_per_node * (settings.replicas if settings is not None else 1), {}


def _mig_devices(platform: Platform, pool: NodePool, gpu_class: GpuClass) -> tuple[int, dict[str, int]]:
    # GPUs the layout leaves whole still serve nvidia.com/gpu requests; the single strategy
    # advertises every slice as an nvidia.com/gpu too, the mixed one each profile as its own resource.
    groups = cap.pool_layout(platform, pool)
    whole = max(pool.gpus_per_node - sum(count for count, _ in groups), 0)
    if not cap.is_mig_mixed(gpu_class):
        return whole + sum(count * sum(devices.values()) for count, devices in groups), {}
    profiles: dict[str, int] = {}
    for count, devices in groups:
        for profile, per_gpu in devices.items():
            profiles[profile] = profiles.get(profile, 0) + count * per_gpu
    return whole, profiles


def _one_gpu(gpu_class: GpuClass, resource: str, gpus: int, devices: int) -> Fraction:
    return Fraction(1)


def _one_share(gpu_class: GpuClass, resource: str, gpus: int, devices: int) -> Fraction:
    settings = gpu_class.replication
    return Fraction(1, settings.replicas if settings is not None else 1)


def _mig_share(gpu_class: GpuClass, resource: str, gpus: int, devices: int) -> Fraction:
    # A profile's instance is its compute slices over the GPU's (a 1g.10gb on an A100 is 1/7); under
    # the single strategy every slice is an nvidia.com/gpu, so the class's GPUs over its devices.
    if resource != cap.GPU:
        geometry = mig.geometry()[gpu_class.model]
        profile = next(p for name, p in geometry.profiles.items() if mig.resource_name(name) == resource)
        return Fraction(profile.compute, geometry.compute_slices)
    return Fraction(1) if cap.is_mig_mixed(gpu_class) else Fraction(gpus, devices)


def _plugin_entry(key: str, fail_requests: Callable[[GpuClass], bool]) -> Callable[[GpuClass], dict[str, Any]]:
    # `resources` names nvidia.com/gpu even when shares are renamed: the plugin then advertises them
    # as nvidia.com/gpu.shared.
    def entry(gpu_class: GpuClass) -> dict[str, Any]:
        settings = gpu_class.replication
        if settings is None:  # the spec requires them; a class built without validation may lack them
            raise ValueError(f"sharing '{key}' needs `{key}: {{replicas: N}}`")
        return {key: {"renameByDefault": settings.rename_by_default, "failRequestsGreaterThanOne": fail_requests(gpu_class),
                      "resources": [{"name": cap.GPU, "replicas": settings.replicas}]}}
    return entry


def _exclusive_label(gpu_class: GpuClass) -> str:
    if gpu_class.kai_fractions:
        return "exclusive + KAI fractions" + (" (HAMi-core)" if gpu_class.kai_fractions.memory_bound == "hamicore" else "")
    return "exclusive"


def _replicas(gpu_class: GpuClass) -> int:
    settings = gpu_class.replication
    return settings.replicas if settings is not None else 1


def _mps_statement(gpu_class: GpuClass) -> str:
    replicas = _replicas(gpu_class)
    return (
        f"up to {replicas} pods run on each GPU at once through the MPS server, each limited to "
        f"{cap.mps_memory_per_replica(gpu_class)} of GPU memory and {100 // replicas}% of its threads; "
        "no fault isolation: a fatal GPU fault in one can end the others"
    )


def _mig_statement(gpu_class: GpuClass) -> str:
    if gpu_class.serving == "dra":
        return ("MIG instances with their own memory and compute, made by the DRA driver when a claim is prepared and "
                "claimed through a DeviceClass per profile; the scheduler keeps them within each GPU's shared counters")
    if not cap.is_mig_mixed(gpu_class):
        return "MIG slices with their own memory and compute, each advertised as nvidia.com/gpu"
    return (
        "MIG slices with their own memory and compute, requested as nvidia.com/mig-<profile> (see MIG "
        "profiles); the class counts only GPUs its layouts leave whole"
    )


_MODES: tuple[SharingMode, ...] = (
    SharingMode(
        isolation=_EXCLUSIVE, resource=_whole_gpu, node_devices=_whole_devices, device_share=_one_gpu,
        device_plugin=None, partitions_gpus=False, label=_exclusive_label,
        statement=lambda c: "one pod per GPU requested as a resource" if c.kai_fractions else "one pod per GPU",
    ),
    SharingMode(
        isolation=_MIG, resource=_whole_gpu, node_devices=_mig_devices, device_share=_mig_share,
        device_plugin=None, partitions_gpus=True,
        label=lambda c: "MIG (DRA)" if c.serving == "dra" else f"MIG ({c.mig.strategy if c.mig else 'mixed'})", statement=_mig_statement,
    ),
    SharingMode(
        # One MPS client per container: two shares would not widen its memory or thread limit, so the
        # plugin refuses such requests (its default for MPS, written out so the file says what runs).
        isolation=_MPS, resource=_replicated_resource, node_devices=_replicated_devices, device_share=_one_share,
        device_plugin=_plugin_entry("mps", lambda c: True), partitions_gpus=False,
        label=lambda c: f"MPS x{_replicas(c)} ({cap.mps_memory_per_replica(c)} each)", statement=_mps_statement,
    ),
    SharingMode(
        isolation=_TIME_SLICING, resource=_replicated_resource, node_devices=_replicated_devices, device_share=_one_share,
        device_plugin=_plugin_entry("timeSlicing", lambda c: bool(c.time_slicing and c.time_slicing.fail_requests_greater_than_one)),
        partitions_gpus=False, label=lambda c: f"time-slicing x{_replicas(c)}",
        statement=lambda c: (f"up to {_replicas(c)} pods take turns on each GPU with no memory or fault isolation: "
                             "one can use all the memory or crash the others"),
    ),
)

BY_SHARING: dict[str, SharingMode] = {mode.sharing: mode for mode in _MODES}

# Rows of modes no `sharing` value selects (a class's `kaiFractions`, its `serving`).
OTHER_ROWS: tuple[Isolation, ...] = (_KAI_FRACTION, _KAI_HAMICORE, _DRA, _MIG_DRA)


def _spec_sharing_values() -> tuple[str, ...]:
    return typing.get_args(GpuClass.model_fields["sharing"].annotation)


def _check_complete() -> None:
    missing = sorted(set(_spec_sharing_values()) - set(BY_SHARING))
    unknown = sorted(set(BY_SHARING) - set(_spec_sharing_values()))
    if missing or unknown:
        raise ImportError(f"fleet/isolation.py: sharing values without a SharingMode {missing}, records of no sharing value {unknown}")


_check_complete()


def mode_of(gpu_class: GpuClass) -> SharingMode:
    """The sharing mode a GPU class's `sharing` selects (an error, never a default, for a value without a record).

    >>> mode_of(prod.platform.gpu_classes["a100-mig"]).partitions_gpus
    True
    >>> mode_of(dev.platform.gpu_classes["l4"]).label(dev.platform.gpu_classes["l4"])
    'time-slicing x4'
    """
    try:
        return BY_SHARING[gpu_class.sharing]
    except KeyError:
        raise LookupError(f"sharing '{gpu_class.sharing}' has no SharingMode in components/fleet/isolation.py") from None


def isolation_rows() -> tuple[Isolation, ...]:
    """The rows of docs/gpu-sharing.md's isolation table: each sharing value's, then the other modes'.

    >>> [row.mode for row in isolation_rows()][:4]
    ['exclusive', 'MIG', 'MPS', 'time-slicing']
    """
    return tuple(mode.isolation for mode in BY_SHARING.values()) + OTHER_ROWS


def isolation_of(gpu_class: GpuClass) -> Isolation:
    """The isolation a GPU class's pods get, from its `sharing` (DRA-served classes are exclusive).

    >>> isolation_of(prod.platform.gpu_classes["a100-mig"]).fault_isolation
    'hardware: a fault stays in its GPU instance'
    >>> isolation_of(dev.platform.gpu_classes["l4"]).bounds_memory
    False
    >>> isolation_of(dra_mig.platform.gpu_classes["a100-mig"]).mode
    'MIG through DRA'
    """
    if gpu_class.sharing == "mig" and gpu_class.serving == "dra":
        return _MIG_DRA
    return mode_of(gpu_class).isolation


def fraction_isolation(gpu_class: GpuClass) -> Optional[Isolation]:
    """The isolation of KAI fractions on a class's GPUs (`kaiFractions`); None when the class declares none.

    >>> fraction_isolation(staging.platform.gpu_classes["a100"]).mode
    'KAI fraction with HAMi-core'
    >>> fraction_isolation(staging.platform.gpu_classes["h100"]) is None
    True
    """
    if gpu_class.kai_fractions is None:
        return None
    return _KAI_HAMICORE if gpu_class.kai_fractions.memory_bound == "hamicore" else _KAI_FRACTION
