"""`gpu-tenancy:index:Tenant`: one team's namespaces and everything in them, as Pulumi resources."""

from __future__ import annotations

from typing import Optional

import pulumi

from ..manifests.build import helm_releases, tenant_objects
from ..manifests.meta import KubeObject
from .kubernetes import logical_name, register
from ..model.load import Environment
from ..model.tenant import Tenant as TenantSpec
from .vcluster_release import register_vcluster


class Tenant(pulumi.ComponentResource):
    """A tenant's objects as typed resources; its Namespaces are never deleted by accident.

    Namespaces carry `retain_on_delete` (removing the tenant file, or disabling the tenant in an
    environment, leaves them and their data alone) and `protect` when the stack asks for it.
    Only `lifecycle: decommissioned` with a confirmation makes them deletable. Namespaced children
    are `deleted_with` their Namespace, so a real decommission does not issue one delete per object.

    >>> Tenant("team-a", spec, environment)   # doctest: +SKIP
    """

    namespaces: pulumi.Output[list[str]]

    def __init__(
        self,
        name: str,
        spec: TenantSpec,
        environment: Environment,
        opts: Optional[pulumi.ResourceOptions] = None,
        objects: Optional[list[KubeObject]] = None,
    ) -> None:
        aliases = [pulumi.Alias(name=old) for old in spec.previous_names]
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases)) if aliases else opts
        super().__init__("gpu-tenancy:index:Tenant", name, None, opts)
        objects = objects if objects is not None else tenant_objects(spec, environment)
        decommissioned = spec.lifecycle == "decommissioned"
        namespace_resources: dict[str, pulumi.Resource] = {}
        self.resources: dict[str, pulumi.Resource] = {}
        for obj in objects:
            child = logical_name(name, obj)
            old_names = [logical_name(old, obj) for old in spec.previous_names]
            child_aliases = [pulumi.Alias(name=old) for old in old_names]
            if obj["kind"] == "Namespace":
                child_opts = pulumi.ResourceOptions(
                    parent=self,
                    retain_on_delete=not decommissioned,
                    protect=environment.platform.protect_namespaces and not decommissioned,
                    aliases=child_aliases,
                )
                resource = register(child, obj, child_opts)
                namespace_resources[obj["metadata"]["name"]] = resource
            else:
                owner_namespace = namespace_resources.get(obj["metadata"].get("namespace", ""))
                child_opts = pulumi.ResourceOptions(
                    parent=self,
                    deleted_with=owner_namespace,
                    depends_on=[owner_namespace] if owner_namespace is not None else None,
                    aliases=child_aliases,
                )
                resource = register(child, obj, child_opts)
            self.resources[child] = resource
        for release in helm_releases(spec, environment):
            namespace = namespace_resources.get(release["namespace"])
            self.resources[f"{name}-vcluster"] = register_vcluster(
                f"{name}-vcluster",
                release,
                pulumi.ResourceOptions(parent=self, deleted_with=namespace, depends_on=[namespace] if namespace else None),
            )
        self.namespaces = pulumi.Output.from_input(spec.all_namespaces)
        self.register_outputs({"namespaces": self.namespaces, "lifecycle": spec.lifecycle})
