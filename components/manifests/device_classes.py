"""DRA DeviceClasses: the ones the tool owns, and the quota keys that meter every DeviceClass.

What each quota key counts, measured on the real kube-apiserver v1.37.2 (DRAExtendedResource is GA
and locked on; docs/gpu-sharing.md, "DRA", has the table):

* a pod asking for `deviceclass.resource.kubernetes.io/<class>: N` counts N in
  `requests.deviceclass.resource.kubernetes.io/<class>` and nothing else at admission;
* a pod asking for a class's `extendedResourceName` (e.g. `nvidia.com/gpu`) counts in
  `requests.<extendedResourceName>` only, exactly like a device-plugin GPU;
* a ResourceClaim, whether written by the tenant, made from a ResourceClaimTemplate by the claim
  controller, or made by the scheduler for an extended-resource pod, counts its devices in
  `<class>.deviceclass.resource.k8s.io/devices`, in `requests.deviceclass.resource.kubernetes.io/<class>`
  and, when the class maps an `extendedResourceName`, in `requests.<extendedResourceName>` (minus what
  its pod already counted there, so a scheduler-made claim is not charged twice); `allocationMode:
  All` counts 32, the most one claim can allocate; a ResourceClaimTemplate counts nothing.

The rule. For every DeviceClass of the stack (`deviceClasses`, owned or installed by a driver), both
keys get the tenant's grant of the class's `gpuClass`, else 0. A class's `extendedResourceName` is
metered by `requests.<name>`: a GPU key already (`nvidia.com/gpu`: device-plugin GPUs and the DRA
claims of the class then share that one budget, which is why a class served by both must map it),
or else a key of its own holding the same grant. Nothing is counted twice, because each key is one
budget and every path into a device of the class is charged in a key that holds the grant.
"""

from __future__ import annotations

from typing import Mapping

from ..fleet import gpu_capacity as cap
from ..fleet import mig
from ..fleet.facts import FleetFacts, TenantView
from ..spec.stack import Platform
from .meta import KubeObject, gpu_class_label, kube_object, object_meta, platform_labels

IMPLICIT_EXTENDED_RESOURCE_PREFIX = cap.IMPLICIT_EXTENDED_RESOURCE_PREFIX


def device_class_grants(by_class: Mapping[str, int], platform: Platform, by_resource: Mapping[str, int] | None = None) -> dict[str, int]:
    """Devices the tenant may claim per DeviceClass of the stack: its grant of the class's GPU class
    (`by_class`: its `gpu_quota_by_class`), else 0; for a MIG class served by DRA (`migProfile`), its
    `quota.mig` grant of the profile (`by_resource`: its `gpu_quota_by_resource`, `nvidia.com/mig-<profile>`).

    A plain `quota.gpu` number over several classes grants no DeviceClass (it names no class).

    >>> device_class_grants({}, dra_mig.platform, {"nvidia.com/mig-1g.10gb": 10})["a100-mig-1g.10gb.gpu.mig.dev"]
    10

    >>> from components.spec.stack import Platform
    >>> p = Platform(labelDomain="gpu.example.com", gpuClasses={"h100": {"model": "H100-80GB",
    ...     "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi", "serving": "dra"}},
    ...     deviceClasses={"h100.gpu.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "h100"},
    ...                    "mig.nvidia.com": {"owner": "driver"}})
    >>> device_class_grants({"h100": 4}, p)
    {'h100.gpu.example.com': 4, 'mig.nvidia.com': 0}
    """
    profiles = by_resource or {}
    return {
        name: (profiles.get(mig.resource_name(spec.mig_profile), 0) if spec.mig_profile else by_class.get(spec.gpu_class, 0))
        if spec.gpu_class else 0
        for name, spec in sorted(platform.device_classes.items())
    }


def device_class_hard(view: TenantView, gpu_keys: set[str]) -> dict[str, str]:
    """Quota keys for every DeviceClass (both forms) and for extended resource names not already in `gpu_keys`.

    >>> from components.spec.stack import Platform
    >>> p = Platform(labelDomain="gpu.example.com", deviceClasses={"gpu.nvidia.com": {"owner": "driver",
    ...     "extendedResourceName": "example.com/dra-gpu"}})
    >>> from components.spec.tenant import Tenant
    >>> device_class_hard(FleetFacts("dev", p, ()).view(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant",
    ...     name="a", displayName="A", costCenter="cc-1")), set())   # doctest: +NORMALIZE_WHITESPACE
    {'gpu.nvidia.com.deviceclass.resource.k8s.io/devices': '0',
     'requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com': '0', 'requests.example.com/dra-gpu': '0'}
    """
    platform = view.platform
    hard: dict[str, str] = {}
    own_keys: dict[str, int] = {}
    for name, count in device_class_grants(view.gpu_quota_by_class, platform, view.gpu_quota_by_resource).items():
        for key in cap.device_class_quota_keys(name):
            hard[key] = str(count)
        mapped = platform.device_classes[name].extended_resource_name
        if mapped is not None and cap.quota_key(mapped) not in gpu_keys:
            own_keys[mapped] = own_keys.get(mapped, 0) + count
    hard.update({cap.quota_key(resource): str(count) for resource, count in own_keys.items()})
    return dict(sorted(hard.items()))


def dra_extended_resources(platform: Platform) -> list[str]:
    """The `extendedResourceName`s of the stack's DeviceClasses: pods asking for them get DRA devices.

    >>> from components.spec.stack import Platform
    >>> dra_extended_resources(Platform(labelDomain="x.dev", deviceClasses={"gpu.nvidia.com": {"owner": "driver",
    ...     "extendedResourceName": "example.com/gpu"}}))
    ['example.com/gpu']
    """
    return sorted({spec.extended_resource_name for spec in platform.device_classes.values() if spec.extended_resource_name})


def device_classes(facts: FleetFacts) -> list[KubeObject]:
    """One `resource.k8s.io/v1` DeviceClass per tool-owned entry of `deviceClasses`, by name.

    >>> [o["metadata"]["name"] for o in device_classes(dra.facts)]
    ['b200.gpu.dra.dev', 'h100.gpu.dra.dev']
    """
    objects = []
    for name, spec in sorted(facts.platform.device_classes.items()):
        if spec.owner != "tool":
            continue
        selectors = [{"cel": {"expression": f"device.driver == '{spec.driver}'"}}]
        if spec.selector is not None:
            selectors.append({"cel": {"expression": spec.selector}})
        body: dict = {"selectors": selectors}
        if spec.extended_resource_name is not None:
            body["extendedResourceName"] = spec.extended_resource_name
        labels = platform_labels(facts.environment_label)
        # vCluster tenants sync in the classes they may claim by this label (manifests/vcluster.py).
        if spec.gpu_class is not None:
            labels[gpu_class_label(facts.platform)] = spec.gpu_class
        objects.append(
            kube_object("resource.k8s.io/v1", "DeviceClass", object_meta(name, labels=labels), spec=body)
        )
    return objects
