"""ResourceSlices standing in for the NVIDIA DRA driver (helpers of the scheduling lane's DRA tests):
one per node, pool = node name, a device per GPU whose `productName` matches the node's GPU class
and `type: gpu`, with the `memory` capacity the driver publishes (the device's real total, below
the nominal one); what the tool's DeviceClass selectors read."""

from __future__ import annotations

DRIVER = "gpu.nvidia.com"
PRODUCTS = {"h100": "NVIDIA H100 80GB HBM3", "b200": "NVIDIA B200"}
MEMORY = {"h100": "81559Mi", "b200": "183359Mi"}


def publish_resource_slices(stack) -> None:
    """One ResourceSlice per node of the stack, as the driver's kubelet plugin publishes it."""
    platform = stack.environment.platform
    for node, pool in sorted(stack.node_pool.items()):
        gpu_class = platform.node_pools[pool].gpu_class
        stack.plane.cp.apply({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"productName": {"string": PRODUCTS[gpu_class]}, "type": {"string": "gpu"}},
                                  "capacity": {"memory": {"value": MEMORY[gpu_class]}}}
                                 for i in range(platform.node_pools[pool].gpus_per_node)]},
        }, field_manager="nvidia-dra-driver")
