"""`gpu-tenancy:index:GpuPlatform`: cluster-wide objects of an environment as Pulumi resources."""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi

from ..manifests.gpu_nodes import is_node_patch
from ..manifests.meta import KubeObject
from .kubernetes import logical_name, register


class GpuPlatform(pulumi.ComponentResource):
    """PriorityClasses, node labels (NodePatch with a fixed field manager), MIG and time-slicing
    ConfigMaps, admission policies and shared RBAC: everything that belongs to no single tenant.

    A NodePatch that carries taints depends on every other object here (the Kueue flavors that
    carry the matching tolerations) and on `taint_after` (the tenants' placement policies, which
    decide who may tolerate them): a taint lands only once the rest of the platform is in place.

    >>> from components.manifests.build import platform_objects
    >>> registered = pulumi_mocks(lambda: GpuPlatform("prod-platform", platform_objects(prod)))
    >>> [t for t in sorted({r.type for r in registered}) if t.startswith("kubernetes:core/")]
    ['kubernetes:core/v1:ConfigMap', 'kubernetes:core/v1:NodePatch']
    """

    def __init__(
        self,
        name: str,
        objects: list[KubeObject],
        opts: Optional[pulumi.ResourceOptions] = None,
        *,
        taint_after: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("gpu-tenancy:index:GpuPlatform", name, None, opts)
        self.resources: dict[str, pulumi.Resource] = {}
        tainting = [o for o in objects if is_node_patch(o) and (o.get("spec") or {}).get("taints")]
        for obj in [o for o in objects if not any(o is t for t in tainting)]:
            child = logical_name(name, obj)
            self.resources[child] = register(child, obj, pulumi.ResourceOptions(parent=self))
        before_taints = [*self.resources.values(), *taint_after]
        for obj in tainting:
            child = logical_name(name, obj)
            self.resources[child] = register(child, obj, pulumi.ResourceOptions(parent=self, depends_on=before_taints or None))
        self.register_outputs({"objects": len(objects)})
