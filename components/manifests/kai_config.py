"""The fields of KAI's own configuration (`Config` `kai-config`, kai.scheduler/v1) the stack decides.

KAI's operator reads one cluster-scoped `Config` named `kai-config`, which KAI's Helm chart creates
(server-side apply, field manager `kai-config-deployer`). The tool owns only the fields a stack
setting needs, applied as a patch (`CustomResourcePatch`, field manager `gpu-tenancy`), so that
removing the setting gives the fields back instead of deleting KAI's configuration:

* `kaiFractions.memoryBound: hamicore` on a class: `spec.admission.gpuSharing: true` (KAI's
  webhook gives fraction pods their ConfigMaps) and `spec.binder.plugins.hamicore.enabled: true`.
  With it the binder writes `CUDA_DEVICE_MEMORY_LIMIT` (the pod's share of the node's
  `nvidia.com/gpu.memory` label, in MiB) into the pod's ConfigMap and the webhook points the
  container's variable at it (`--hami-core-enabled`); the gpusharing plugin runs first (priority
  100 > 50, KAI's defaults), as hamicore requires. What holds the limit is HAMi-core in the
  container (docs/gpu-sharing.md).
"""

from __future__ import annotations

from ..spec.stack import Platform
from .meta import KubeObject, kube_object, object_meta, platform_labels

API_VERSION = "kai.scheduler/v1"
NAME = "kai-config"   # KAI's singleton (constants.DefaultKAIConfigSingeltonInstanceName)


def kai_config(platform: Platform, environment_label: str) -> list[KubeObject]:
    """The `kai-config` fields the stack sets; none when no class asks for a KAI setting.

    >>> [o["spec"] for o in kai_config(staging.platform, "staging")]
    [{'admission': {'gpuSharing': True}, 'binder': {'plugins': {'hamicore': {'enabled': True}}}}]
    >>> kai_config(prod.platform, "prod")
    []
    """
    if platform.scheduler != "kai" or platform.kai_memory_bound != "hamicore":
        return []
    spec = {"admission": {"gpuSharing": True}, "binder": {"plugins": {"hamicore": {"enabled": True}}}}
    return [kube_object(API_VERSION, "Config", object_meta(NAME, labels=platform_labels(environment_label)), spec=spec)]
