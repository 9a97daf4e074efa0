"""GPU time-slicing as the NVIDIA device plugin reads it: one ConfigMap entry per time-sliced class.

ClusterPolicy `devicePlugin.config.name` points to the ConfigMap; each node picks its entry by
the label `nvidia.com/device-plugin.config`. Time-slicing advertises each GPU `replicas` times;
the pods sharing a GPU take turns on it with no memory or fault isolation (one pod can use all
the memory, or crash the others' CUDA contexts). MIG is the isolating alternative.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..fleet.gpu_capacity import GPU
from ..fleet.environment import Environment
from ..spec.stack import GpuClass, NodePool, Platform
from .meta import KubeObject, kube_object, object_meta, platform_labels

DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"


def sharing_config(gpu_class: GpuClass) -> dict[str, Any]:
    """The device-plugin config of one time-sliced class.

    `resources` names `nvidia.com/gpu` even when shares are renamed: the plugin then advertises
    them as `nvidia.com/gpu.shared`.

    >>> from components.spec.stack import GpuClass
    >>> sharing_config(GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="timeSlicing",
    ...     time_slicing={"replicas": 4}))["sharing"]["timeSlicing"]["resources"]
    [{'name': 'nvidia.com/gpu', 'replicas': 4}]
    """
    if gpu_class.time_slicing is None:
        raise ValueError(f"GPU class of model {gpu_class.model} is not time-sliced (sharing: {gpu_class.sharing})")
    settings = gpu_class.time_slicing
    return {
        "version": "v1",
        # Sliced GPUs are whole devices; an explicit `none` keeps a cluster-wide MIG strategy off them.
        "flags": {"migStrategy": "none"},
        "sharing": {
            "timeSlicing": {
                "renameByDefault": settings.rename_by_default,
                "failRequestsGreaterThanOne": settings.fail_requests_greater_than_one,
                "resources": [{"name": GPU, "replicas": settings.replicas}],
            }
        },
    }


def config_key(platform: Platform, pool: NodePool) -> str | None:
    """The ConfigMap key (the GPU class name) a pool's nodes use; None when the pool is not time-sliced.

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing",
    ...                           "timeSlicing": {"replicas": 4}}},
    ...     "nodePools": {"inf": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}}})
    >>> config_key(p, p.node_pools["inf"])
    'l4'
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    return pool.gpu_class if gpu_class is not None and gpu_class.sharing == "timeSlicing" else None


def node_labels(platform: Platform, pool: NodePool) -> dict[str, str]:
    """The `nvidia.com/device-plugin.config` label of a time-sliced pool's nodes (empty otherwise).

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi"}},
    ...     "nodePools": {"inf": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}}})
    >>> node_labels(p, p.node_pools["inf"])
    {}
    """
    key = config_key(platform, pool)
    return {DEVICE_PLUGIN_CONFIG_LABEL: key} if key else {}


def device_plugin_config_map(environment: Environment) -> KubeObject | None:
    """The ConfigMap for ClusterPolicy `devicePlugin.config.name`; None without time-sliced classes.

    >>> sorted(device_plugin_config_map(env)["data"])   # doctest: +SKIP
    ['l4']
    """
    platform = environment.platform
    sliced = {name: c for name, c in sorted(platform.gpu_classes.items()) if c.sharing == "timeSlicing"}
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
        object_meta(operator.device_plugin_config, namespace=operator.namespace, labels=platform_labels(environment.name)),
        data=data,
    )
