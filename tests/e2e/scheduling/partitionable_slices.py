"""ResourceSlices as the NVIDIA DRA driver publishes MIG with DynamicMIG (KEP-4815 partitionable
devices), standing in for its kubelet plugin on the scheduling lane (test_dra_mig_allocation.py).

What the driver (kubernetes-sigs/dra-driver-nvidia-gpu, cmd/gpu-kubelet-plugin) publishes on
Kubernetes 1.35 and newer, one pool per node: a first slice holding only `sharedCounters`, one counter
set per GPU (`gpu-<minor>-counter-set`: multiprocessors, memory, and one counter of 1 per memory slice,
`memory-slice-<i>`), then one slice per GPU holding its devices: the full GPU (`gpu-<minor>`, type
gpu, consuming every counter) and every MIG partition the GPU could hold, one device per profile and
placement (`gpu-<minor>-mig-<profile>-<profile id>-<start>`, type mig, attribute `profile`), each
consuming its multiprocessors, memory and the memory slices of its placement. The scheduler may
allocate a partition only while its counters last, which is how the GPU's geometry is enforced.

The partitions are derived from the tool's geometry table (`components/fleet/mig.py`: profile sizes
and aligned placements), so this publisher and the tool's capacity read one source; a real driver
reads NVML. Multiprocessors are 14 per compute slice (an A100's 98 over 7); other classes' GPUs are
published whole, as tests/e2e/scheduling/resource_slices.py does.
"""

from __future__ import annotations

import re

from components.fleet import mig

DRIVER = "gpu.nvidia.com"
SMS_PER_COMPUTE_SLICE = 14
# NVML's GPU-instance profile ids, part of the driver's device names.
PROFILE_IDS = {"1g.10gb": 19, "1g.10gb+me": 20, "1g.20gb": 15, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5, "7g.80gb": 0}


def _counters(multiprocessors: int, memory_gib: int, slices: range) -> dict:
    counters = {"multiprocessors": {"value": str(multiprocessors)}, "memory": {"value": f"{memory_gib}Gi"}}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in slices})
    return counters


def _slice_gib(model: str) -> int:
    geo = mig.geometry()[model]
    return int(re.search(r"(\d+)GB", model)[1]) // geo.memory_slices


def gpu_counters(model: str) -> dict:
    """One GPU's counters: every multiprocessor, all its memory, each memory slice."""
    geo = mig.geometry()[model]
    return _counters(geo.compute_slices * SMS_PER_COMPUTE_SLICE, geo.memory_slices * _slice_gib(model), range(geo.memory_slices))


def partitions(model: str, product: str, minor: int) -> list[dict]:
    """The devices of one MIG-capable GPU: the full GPU, then every profile at every placement, by name."""
    counter_set = f"gpu-{minor}-counter-set"
    devices = [{"name": f"gpu-{minor}", "attributes": {"productName": {"string": product}, "type": {"string": "gpu"}},
                "consumesCounters": [{"counterSet": counter_set, "counters": gpu_counters(model)}]}]
    for name, profile in mig.geometry()[model].profiles.items():
        sms, gib = profile.compute * SMS_PER_COMPUTE_SLICE, profile.memory * _slice_gib(model)
        for start in mig.placements(model, name):
            devices.append({
                "name": f"gpu-{minor}-mig-{re.sub('[^a-z0-9]', '', name)}-{PROFILE_IDS.get(name, 99)}-{start}",
                "attributes": {"productName": {"string": product}, "type": {"string": "mig"}, "profile": {"string": name}},
                "capacity": {"multiprocessors": {"value": str(sms)}, "memory": {"value": f"{gib}Gi"}},
                "consumesCounters": [{"counterSet": counter_set, "counters": _counters(sms, gib, range(start, start + profile.memory))}],
            })
    return sorted(devices, key=lambda d: d["name"])


def node_slices(platform, pool_name: str) -> list[dict]:
    """The ResourceSlice specs of one node of the pool: counters, then one device slice per GPU (MIG classes); or one slice of whole GPUs."""
    pool = platform.node_pools[pool_name]
    gpu_class = platform.gpu_classes[pool.gpu_class]
    product, gpus = gpu_class.devices.product_name, range(pool.gpus_per_node)
    if gpu_class.sharing != "mig":
        return [{"devices": [{"name": f"gpu-{i}", "attributes": {"productName": {"string": product}, "type": {"string": "gpu"}},
                              "capacity": {"memory": {"value": gpu_class.memory}}} for i in gpus]}]
    counter_sets = [{"name": f"gpu-{i}-counter-set", "counters": gpu_counters(gpu_class.model)} for i in gpus]
    return [{"sharedCounters": counter_sets}] + [{"devices": partitions(gpu_class.model, product, i)} for i in gpus]


def publish_partitionable_slices(stack) -> None:
    """Every node's slices, applied as the driver's kubelet plugin would."""
    platform = stack.environment.platform
    for node, pool_name in sorted(stack.node_pool.items()):
        specs = node_slices(platform, pool_name)
        for index, body in enumerate(specs):
            spec = {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": len(specs)}, **body}
            stack.plane.cp.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                  "metadata": {"name": f"{node}-{DRIVER}-{index}"}, "spec": spec}, field_manager="nvidia-dra-driver")
