"""GPU time-slicing and MPS as the NVIDIA device plugin reads them: one ConfigMap entry per class.

ClusterPolicy `devicePlugin.config.name` points to the ConfigMap; each node picks its entry by
the label `nvidia.com/device-plugin.config`. Both modes advertise each GPU `replicas` times.
Time-sliced pods take turns on the GPU with no memory or fault isolation (one pod can use all
the memory, or crash the others' CUDA contexts). MPS pods run at once through the plugin's MPS
server, each capped at 1/replicas of the memory and compute threads, but a fatal fault in one can
still end the others. MIG is the isolating alternative.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..fleet.facts import FleetFacts
from ..fleet.isolation import mode_of
from ..spec.stack import GpuClass, NodePool, Platform
from .meta import DEVICE_PLUGIN_CONFIG_LABEL, KubeObject, kube_object, object_meta, platform_labels



def sharing_config(gpu_class: GpuClass) -> dict[str, Any]:
    """The device-plugin config of one time-sliced or MPS class.

    The `sharing` entry is the sharing mode's (`fleet/isolation.py`): `resources` names
    `nvidia.com/gpu` even when shares are renamed, the plugin then advertises them as `nvidia.com/gpu.shared`.

    >>> from components.spec.stack import GpuClass
    >>> sharing_config(GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="timeSlicing",
    ...     time_slicing={"replicas": 4}))["sharing"]["timeSlicing"]["resources"]
    [{'name': 'nvidia.com/gpu', 'replicas': 4}]
    """
    entry = mode_of(gpu_class).device_plugin
    if entry is None:
        raise ValueError(
            f"GPU class of model {gpu_class.model} is not shared by the device plugin (sharing: {gpu_class.sharing})"
        )
    return {
        "version": "v1",
        # Shared GPUs are whole devices (the plugin refuses MPS with the mixed strategy); an explicit
        # `none` keeps a cluster-wide MIG strategy off them.
        "flags": {"migStrategy": "none"},
        "sharing": entry(gpu_class),
    }


def config_key(platform: Platform, pool: NodePool) -> str | None:
    """The ConfigMap key (the GPU class name) a pool's nodes use; None unless time-sliced or MPS.

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing",
    ...                           "timeSlicing": {"replicas": 4}}},
    ...     "nodePools": {"inf": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}}})
    >>> config_key(p, p.node_pools["inf"])
    'l4'
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    return pool.gpu_class if gpu_class is not None and mode_of(gpu_class).device_plugin else None


def node_labels(platform: Platform, pool: NodePool) -> dict[str, str]:
    """The `nvidia.com/device-plugin.config` label of a time-sliced or MPS pool's nodes (empty otherwise).

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi"}},
    ...     "nodePools": {"inf": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}}})
    >>> node_labels(p, p.node_pools["inf"])
    {}
    """
    key = config_key(platform, pool)
    return {DEVICE_PLUGIN_CONFIG_LABEL: key} if key else {}


def device_plugin_config_map(facts: FleetFacts) -> KubeObject | None:
    """The ConfigMap for ClusterPolicy `devicePlugin.config.name`; None without time-sliced or MPS classes.

    >>> sorted(device_plugin_config_map(dev.facts)["data"]), device_plugin_config_map(prod.facts)
    (['l4'], None)
    """
    platform = facts.platform
    sliced = {name: c for name, c in sorted(platform.gpu_classes.items()) if mode_of(c).device_plugin}
    if not sliced:
        return None
    operator = platform.gpu_operator
    data = {
        name: yaml.safe_dump(sharing_config(gpu_class), sort_keys=False, default_flow_style=False)
        for name, gpu_class in sliced.items()
    }
    return kube_object(
        "v1",
        "ConfigMap",
        object_meta(operator.device_plugin_config, namespace=operator.namespace, labels=platform_labels(facts.environment_label)),
        data=data,
    )
