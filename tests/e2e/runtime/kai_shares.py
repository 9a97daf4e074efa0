"""KAI GPU shares (`gpu-fraction`) on the runtime lane: the pod as KAI's webhook leaves it, the binder's
flags as KAI's operator derives them from the stack's KAI `Config`, and what the binder wrote."""

from __future__ import annotations

import json
import uuid
from typing import Any

from components.manifests.meta import GPU_TAINT_TOLERATION, KAI_SHARED_GPU_CONFIGMAP_ANNOTATION, KAI_SHARED_GPU_PREFIX_SUFFIX
from tests.e2e.scheduling.kai import kai_pod

GPU_FRACTION = "gpu-fraction"
GPU_PORTION = "GPU_PORTION"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def kai_fraction_pod(fraction: float, *, queue: str, selector: dict | None = None, toleration: dict | None = None,
                     labels: dict | None = None) -> dict[str, Any]:
    """`kai_pod` asking KAI for `fraction` of one GPU by annotation (no GPU resource), as KAI's
    admission webhook leaves it (which the lane does not run; pkg/admission/webhook/v1alpha2/gpusharing):
    the ConfigMap-name annotation `<pod>-<7 random>-shared-gpu`, the container's NVIDIA_VISIBLE_DEVICES,
    RUNAI_NUM_OF_GPUS and GPU_PORTION read from ConfigMap `<prefix>-0`, `envFrom` of `<prefix>-0-evar`
    and the ConfigMap volume. The binder creates both ConfigMaps and writes the reserved GPU into them.

    >>> pod = kai_fraction_pod(0.5, queue="eval")
    >>> pod["metadata"]["annotations"]["gpu-fraction"], "nvidia.com/gpu" in pod["spec"]["containers"][0]["resources"]["requests"]
    ('0.5', False)
    """
    body = kai_pod(0, queue=queue, selector=selector, toleration=toleration, labels=labels)
    name = body["metadata"]["name"]
    prefix = f"{name}-{uuid.uuid4().hex[:7]}{KAI_SHARED_GPU_PREFIX_SUFFIX}"
    body["metadata"]["annotations"] = {GPU_FRACTION: f"{fraction:g}", KAI_SHARED_GPU_CONFIGMAP_ANNOTATION: prefix}
    spec = body["spec"]
    # A share tolerates the shared pools' taint as a GPU pod does (the placement policy counts it one).
    spec["tolerations"] = [dict(GPU_TAINT_TOLERATION), *spec.get("tolerations", [])]
    config_map = f"{prefix}-0"
    container = spec["containers"][0]
    for values in container["resources"].values():   # a share asks by annotation only (kai_pod(0) says gpu: "0")
        values.pop("nvidia.com/gpu", None)
    container["env"] = [{"name": key, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": key}}}
                        for key in (VISIBLE_DEVICES, "RUNAI_NUM_OF_GPUS", GPU_PORTION)]
    container["envFrom"] = [{"configMapRef": {"name": f"{config_map}-evar"}}]
    spec["volumes"] = [{"name": f"{config_map}-vol", "configMap": {"name": config_map}}]
    return body


def binder_args(stack: Any) -> tuple[str, ...]:
    """The binder's `--plugins` as KAI's operator writes it from the stack's KAI `Config`
    (`spec.binder.plugins`; pkg/operator/operands/binder/resources.go), none without such plugins."""
    config = stack.find("Config", "kai-config")
    plugins = (((config or {}).get("spec") or {}).get("binder") or {}).get("plugins")
    return (f"--plugins={json.dumps(plugins, sort_keys=True)}",) if plugins else ()


def share_config(core: Any, pod: Any) -> dict[str, str]:
    """The data the binder wrote into the share's ConfigMap `<prefix>-0` (GPU and portion)."""
    prefix = pod.metadata.annotations[KAI_SHARED_GPU_CONFIGMAP_ANNOTATION]
    return core.read_namespaced_config_map(f"{prefix}-0", pod.metadata.namespace).data or {}
