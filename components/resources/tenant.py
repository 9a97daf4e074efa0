"""`gpu-tenancy:index:Tenant`: one team's namespaces and everything in them, as Pulumi resources."""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from ..manifests.build import helm_releases, tenant_objects
from ..manifests.meta import KubeObject
from .kubernetes import logical_name, register
from ..model.load import Environment
from ..model.tenant import Tenant as TenantSpec
from .vcluster_release import register_vcluster


class Tenant(pulumi.ComponentResource):
    """A tenant's objects as typed resources; nothing of a tenant is ever deleted by accident.

    Removing the tenant file (or disabling the tenant in an environment) leaves the whole tenant on
    the cluster as it was, unmanaged:

    * its Namespaces and its cluster-scoped objects (placement policy and binding,
      ClusterRoleBinding, queues) carry `retain_on_delete`, so running pods keep their admission
      checks and their queue; Namespaces are also `protect`ed when the stack asks for it;
    * namespaced children are `deleted_with` their Namespace: while the Namespace is retained the
      engine skips their delete too, and a real decommission does not issue one delete per object.
      (They do not carry `retain_on_delete` themselves: a replacement in place, e.g. a RoleBinding's
      `roleRef` or a LocalQueue's `clusterQueue` after a rename, must really delete the old object.)

    Only `lifecycle: decommissioned` with a confirmation lifts retain and protect; removing the file
    afterwards deletes the tenant, Namespaces first (they depend on the tenant's cluster-scoped
    objects, so the engine deletes them in reverse order and waits for each): no pod ever runs
    without its policies.

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
        retain = spec.lifecycle != "decommissioned"
        self.resources: dict[str, pulumi.Resource] = {}

        def add(obj: KubeObject, **options: Any) -> pulumi.Resource:
            child = logical_name(name, obj)
            aliases = [pulumi.Alias(name=logical_name(old, obj)) for old in spec.previous_names]
            resource = register(child, obj, pulumi.ResourceOptions(parent=self, aliases=aliases, **options))
            self.resources[child] = resource
            return resource

        cluster_scoped = [o for o in objects if o["kind"] != "Namespace" and not o["metadata"].get("namespace")]
        guards = [add(obj, retain_on_delete=retain) for obj in cluster_scoped]
        namespace_resources: dict[str, pulumi.Resource] = {}
        for obj in objects:
            if obj["kind"] == "Namespace":
                namespace_resources[obj["metadata"]["name"]] = add(
                    obj,
                    retain_on_delete=retain,
                    protect=environment.platform.protect_namespaces and retain,
                    depends_on=guards or None,
                )
        for obj in objects:
            if obj["kind"] == "Namespace" or not obj["metadata"].get("namespace"):
                continue
            owner_namespace = namespace_resources.get(obj["metadata"]["namespace"])
            add(obj, deleted_with=owner_namespace, depends_on=[owner_namespace] if owner_namespace is not None else None)
        for release in helm_releases(spec, environment):
            namespace = namespace_resources.get(release["namespace"])
            self.resources[f"{name}-vcluster"] = register_vcluster(
                f"{name}-vcluster",
                release,
                pulumi.ResourceOptions(parent=self, deleted_with=namespace, depends_on=[namespace] if namespace else None),
            )
        self.namespaces = pulumi.Output.from_input(spec.all_namespaces)
        self.register_outputs({"namespaces": self.namespaces, "lifecycle": spec.lifecycle})
