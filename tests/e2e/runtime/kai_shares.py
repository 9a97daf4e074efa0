"""KAI GPU shares (`gpu-fraction`) on the runtime lane: the pod as KAI's webhook leaves it, the binder's
flags as KAI's operator derives them from the stack's KAI `Config`, and what the binder wrote."""

from __future__ import annotations

import uuid
from typing import Any

from components.manifests.meta import KAI_SHARED_GPU_CONFIGMAP_ANNOTATION, KAI_SHARED_GPU_PREFIX_SUFFIX
from tests.e2e.scheduling.kai import kai_pod
from tools.kai import GPU_FRACTION, GPU_PORTION, VISIBLE_DEVICES, binder_args, make_gpu_share

__all__ = ["GPU_FRACTION", "GPU_PORTION", "VISIBLE_DEVICES", "binder_args", "kai_fraction_pod", "share_config"]


def kai_fraction_pod(fraction: float, *, queue: str, selector: dict | None = None, toleration: dict | None = None,
                     labels: dict | None = None) -> dict[str, Any]:
    """`kai_pod` asking KAI for `fraction` of one GPU by annotation (no GPU resource), as KAI's
    admission webhook leaves it (`tools.kai.make_gpu_share`, with the webhook's ConfigMap prefix).

    >>> pod = kai_fraction_pod(0.5, queue="eval")
    >>> pod["metadata"]["annotations"]["gpu-fraction"], "nvidia.com/gpu" in pod["spec"]["containers"][0]["resources"]["requests"]
    ('0.5', False)
    """
    body = kai_pod(0, queue=queue, selector=selector, toleration=toleration, labels=labels)
    name = body["metadata"]["name"]
    make_gpu_share(body["metadata"], body["spec"], fraction, f"{name}-{uuid.uuid4().hex[:7]}{KAI_SHARED_GPU_PREFIX_SUFFIX}")
    return body


def share_config(core: Any, pod: Any) -> dict[str, str]:
    """The data the binder wrote into the share's ConfigMap `<prefix>-0` (GPU and portion)."""
    prefix = pod.metadata.annotations[KAI_SHARED_GPU_CONFIGMAP_ANNOTATION]
    return core.read_namespaced_config_map(f"{prefix}-0", pod.metadata.namespace).data or {}
