"""Which GPU class of the stack an imported GPU quota means (`tenants import`).

A ResourceQuota names a resource (`requests.nvidia.com/gpu`), not a class, and a stack often has
several classes with the same resource. The class is then taken, in this order, from what the
platform engineer said (`--gpu-class nvidia.com/gpu=a100`), from the node selector the source
pins its pods with (a Capsule Tenant's `spec.nodeSelector`, a namespace's
`scheduler.alpha.kubernetes.io/node-selector`, a Kueue ResourceFlavor's `nodeLabels`: the stack's
GPU class label, a node pool label or the `nvidia.com/gpu.product` label), or from the stack having
one class only. Anything else is refused: a quota that lands on no class, or on a guessed one,
either vanishes or grants GPUs the team never had.
"""

from __future__ import annotations

from typing import Any

from ..fleet import gpu_capacity as cap
from ..fleet.isolation import mode_of
from ..manifests.meta import GPU_PRODUCT_LABEL, NODE_SELECTOR_ANNOTATIONS, gpu_class_label, pool_label
from ..spec.stack import Platform


def gpu_classes_of_resource(platform: Platform, resource: str) -> list[str]:
    """The stack's GPU classes whose GPUs advertise `resource` (whole GPUs or shares).

    >>> p = Platform(labelDomain="gpu.example.com", gpuClasses={"h100": {
    ...     "model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}})
    >>> gpu_classes_of_resource(p, "nvidia.com/gpu")
    ['h100']
    """
    return sorted(name for name, gpu_class in platform.gpu_classes.items()
                  if not mode_of(gpu_class).partitions_gpus and cap.class_resource(gpu_class) == resource)


def classes_of_node_selector(platform: Platform, selector: dict[str, Any] | None) -> set[str] | None:
    """The GPU classes a node selector keeps pods on, or None when it says nothing about GPUs.

    >>> p = Platform(labelDomain="gpu.example.com", gpuClasses={
    ...     "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
    ...     "a100": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi"}})
    >>> sorted(classes_of_node_selector(p, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}))
    ['a100']
    """
    selector = selector or {}
    named: list[set[str]] = []
    if gpu_class_label(platform) in selector:
        named.append({str(selector[gpu_class_label(platform)])} & set(platform.gpu_classes))
    if GPU_PRODUCT_LABEL in selector:
        named.append({n for n, c in platform.gpu_classes.items() if c.product == str(selector[GPU_PRODUCT_LABEL])})
    if pool_label(platform) in selector:
        pool = platform.node_pools.get(str(selector[pool_label(platform)]))
        named.append({pool.gpu_class} if pool is not None and pool.gpu_class else set())
    if not named:
        return None
    return set.intersection(*named)


def node_selector_of_namespace(namespace: dict[str, Any]) -> dict[str, str]:
    """The node selector a namespace's annotation pins its pods with (`k=v,k2=v2`), empty without one.

    >>> node_selector_of_namespace({"metadata": {"annotations": {
    ...     "scheduler.alpha.kubernetes.io/node-selector": "nvidia.com/gpu.product=NVIDIA-L4, zone=a"}}})
    {'nvidia.com/gpu.product': 'NVIDIA-L4', 'zone': 'a'}
    """
    annotations = (namespace.get("metadata") or {}).get("annotations") or {}
    text = next((str(annotations[k]) for k in NODE_SELECTOR_ANNOTATIONS if annotations.get(k)), "")
    pairs = (part.partition("=") for part in text.split(",") if part.strip())
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


def placed_gpu_class(platform: Platform, resource: str, *, gpu_class_of: dict[str, str] | None = None,
                     node_selector: dict[str, Any] | None = None) -> tuple[str | None, str]:
    """The one class a quota of `resource` means, and how it was chosen; or None and why it cannot be placed.

    >>> p = Platform(labelDomain="gpu.example.com", gpuClasses={
    ...     "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
    ...     "a100": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi"}})
    >>> placed_gpu_class(p, "nvidia.com/gpu", node_selector={"gpu.example.com/gpu-class": "h100"})
    ('h100', 'the node selector gpu.example.com/gpu-class=h100')
    >>> placed_gpu_class(p, "nvidia.com/gpu")[0] is None
    True
    """
    if gpu_class_of and resource in gpu_class_of:
        return gpu_class_of[resource], f"--gpu-class {resource}={gpu_class_of[resource]}"
    candidates = gpu_classes_of_resource(platform, resource)
    hinted = classes_of_node_selector(platform, node_selector)
    shown = ", ".join(f"{k}={v}" for k, v in sorted((node_selector or {}).items()))
    if hinted is not None:
        chosen = sorted(hinted & set(candidates))
        if len(chosen) == 1:
            return chosen[0], f"the node selector {shown}"
        return None, (f"the node selector {shown} names {', '.join(chosen) or 'no class'} of the classes with {resource} "
                      f"({', '.join(candidates) or 'none'}); say which with --gpu-class {resource}=CLASS")
    if len(candidates) == 1:
        return candidates[0], f"the stack's only class with {resource}"
    return None, (f"the stack has {len(candidates)} classes with {resource} ({', '.join(candidates) or 'none'}) and the source "
                  f"pins its pods to none of them (no node selector of a GPU class, pool or product); say which with "
                  f"--gpu-class {resource}=CLASS")
