"""MIG layouts as the GPU Operator's MIG Manager reads them: one mig-parted ConfigMap per environment.

The MIG Manager on each node reads the layout named by the node label `nvidia.com/mig.config`
from the ConfigMap that ClusterPolicy `migManager.config.name` points to, and repartitions the
GPUs (draining GPU pods first). We render only the layouts pools use, plus `all-disabled`, which
the operator puts on MIG-capable nodes that have no label yet; a custom ConfigMap replaces the
built-in one, so it must keep that name.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..fleet.facts import FleetFacts
from ..fleet import mig
from ..fleet.gpu_capacity import is_dra_only
from ..fleet.isolation import mode_of
from ..spec.stack import NodePool, Platform
from .meta import MIG_CONFIG_LABEL, KubeObject, kube_object, object_meta, platform_labels

ALL_DISABLED = "all-disabled"
CONFIG_KEY = "config.yaml"


def node_mig_config(platform: Platform, pool: NodePool) -> str | None:
    """The `nvidia.com/mig.config` value for nodes of a pool; None when their GPUs cannot do MIG.

    Pools of MIG-capable GPUs that are not shared by MIG get `all-disabled`, so a node that once
    carried slices is turned back into whole GPUs instead of keeping whatever it had.

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}},
    ...     "nodePools": {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1"]}}})
    >>> node_mig_config(p, p.node_pools["train"])
    'all-disabled'
    """
    gpu_class = platform.gpu_classes.get(pool.gpu_class)
    if gpu_class is None or is_dra_only(platform, pool.gpu_class):
        # The DRA driver, not the MIG Manager, owns the GPUs of a class served by DRA alone (the GPU
        # Operator's DRA stack runs no MIG Manager): no label for one to act on.
        return None
    if mode_of(gpu_class).partitions_gpus:
        return pool.mig_layout
    return ALL_DISABLED if gpu_class.model in mig.geometry() else None


def node_labels(platform: Platform, pool: NodePool) -> dict[str, str]:
    """MIG labels every node of the pool carries (empty for GPUs without MIG).

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi"}},
    ...     "nodePools": {"inf": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}}})
    >>> node_labels(p, p.node_pools["inf"])
    {}
    """
    value = node_mig_config(platform, pool)
    return {MIG_CONFIG_LABEL: value} if value else {}


def _pools_by_layout(platform: Platform) -> dict[str, list[NodePool]]:
    used: dict[str, list[NodePool]] = {}
    for _, pool in sorted(platform.node_pools.items()):
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        if gpu_class is not None and mode_of(gpu_class).partitions_gpus and pool.mig_layout:
            used.setdefault(pool.mig_layout, []).append(pool)
    return used


def _mig_devices(profiles: dict[str, int]) -> dict[str, int]:
    return dict(sorted(profiles.items()))


def layout_groups(platform: Platform, layout: str) -> list[dict[str, Any]]:
    """The mig-parted device groups of one layout used by the platform's pools.

    GPUs that a custom layout leaves out are stated as `mig-enabled: false` when every pool using
    the layout has the same GPU count; otherwise mig-parted would leave them as they were.

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "gpu.example.com",
    ...     "gpuClasses": {"m": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"}},
    ...     "nodePools": {"p": {"gpuClass": "m", "gpusPerNode": 8, "nodes": ["n1"], "migLayout": "all-3g.40gb"}}})
    >>> layout_groups(p, "all-3g.40gb")
    [{'devices': 'all', 'mig-enabled': True, 'mig-devices': {'3g.40gb': 2}}]
    """
    pools = _pools_by_layout(platform).get(layout, [])
    if layout in platform.mig_layouts:
        groups: list[dict[str, Any]] = []
        covered: set[int] = set()
        for group in platform.mig_layouts[layout]:
            devices: Any = "all" if group.devices == "all" else sorted(group.devices)
            if devices != "all":
                covered |= set(devices)
            groups.append({"devices": devices, "mig-enabled": True, "mig-devices": _mig_devices(group.profiles)})
        sizes = {pool.gpus_per_node for pool in pools}
        if covered and len(sizes) == 1:
            rest = [index for index in range(sizes.pop()) if index not in covered]
            if rest:
                groups.append({"devices": rest, "mig-enabled": False})
        return groups
    for pool in pools:
        model = platform.gpu_classes[pool.gpu_class].model
        named = mig.expand_named_layout(layout, model)
        if named is not None:
            return [{"devices": "all", "mig-enabled": True, "mig-devices": _mig_devices(named)}]
    return []


def mig_parted_config(platform: Platform) -> dict[str, Any]:
    """The mig-parted document (`version: v1`, `mig-configs`): `all-disabled` plus every layout in use.

    >>> from components.spec.stack import Platform
    >>> mig_parted_config(Platform.model_validate({"labelDomain": "gpu.example.com"}))
    {'version': 'v1', 'mig-configs': {'all-disabled': [{'devices': 'all', 'mig-enabled': False}]}}
    """
    configs: dict[str, list[dict[str, Any]]] = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for layout in sorted(_pools_by_layout(platform)):
        if layout != ALL_DISABLED:
            configs[layout] = layout_groups(platform, layout)
    return {"version": "v1", "mig-configs": configs}


class _Dumper(yaml.SafeDumper):
    """Block style, except GPU index lists stay on one line as in NVIDIA's examples (`devices: [0, 1]`)."""


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = bool(data) and all(isinstance(item, int) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def config_text(document: dict[str, Any]) -> str:
    """YAML text of a mig-parted document, keys in the order NVIDIA's files use.

    >>> print(config_text({"version": "v1", "mig-configs": {"x": [{"devices": [0, 1], "mig-enabled": False}]}}), end="")
    version: v1
    mig-configs:
      x:
      - devices: [0, 1]
        mig-enabled: false
    """
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def uses_mig_manager(platform: Platform) -> bool:
    """Whether any pool gets an `nvidia.com/mig.config` label (so the MIG Manager needs our ConfigMap).

    >>> from components.spec.stack import Platform
    >>> uses_mig_manager(Platform.model_validate({"labelDomain": "gpu.example.com"}))
    False
    """
    return any(node_mig_config(platform, pool) for pool in platform.node_pools.values())


def mig_config_map(facts: FleetFacts) -> KubeObject | None:
    """The ConfigMap for ClusterPolicy `migManager.config.name`; None when no pool has MIG-capable GPUs.

    >>> mig_config_map(prod.facts)["data"]["config.yaml"].splitlines()[0]
    'version: v1'
    """
    platform = facts.platform
    if not uses_mig_manager(platform):
        return None
    operator = platform.gpu_operator
    return kube_object(
        "v1",
        "ConfigMap",
        object_meta(operator.mig_config, namespace=operator.namespace, labels=platform_labels(facts.environment_label)),
        data={CONFIG_KEY: config_text(mig_parted_config(platform))},
    )
