"""`gpu-tenancy:index:Tenant`: one team's namespaces and everything in them, as Pulumi resources."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import pulumi

from ..manifests.build import helm_releases, tenant_objects
from ..manifests.tenant_grant import is_tenant_grant, reads_grant
from ..manifests.meta import KubeObject
from .kubernetes import logical_name, register
from ..fleet.environment import Environment
from ..spec.tenant import Tenant as TenantSpec
from .vcluster_release import register_vcluster


class Tenant(pulumi.ComponentResource):
    """A tenant's objects as typed resources; nothing of a tenant is ever deleted by accident.

    Removing the tenant file (or disabling the tenant in an environment) leaves the whole tenant on
    the cluster as it was, unmanaged:

    * its Namespaces carry `retain_on_delete` (and `protect` when the stack asks for it);
    * everything else is `deleted_with` a Namespace: namespaced objects with their own, the
      cluster-scoped ones (placement policy and binding, ClusterRoleBinding, queues) and its
      monitoring rule (in the platform's namespace) with the tenant's primary Namespace. While that Namespace is only retained, the engine skips their
      delete too, so running pods keep their admission checks and their queue. (Not
      `retain_on_delete` on them: the engine would then also keep every object that merely stops
      being generated, e.g. a queue after a scheduler change, and a replacement in place, such as a
      LocalQueue's `clusterQueue` after a rename, must really delete the old object.)

    Only `lifecycle: decommissioned` with a confirmation lifts retain and protect, and unties the
    cluster-scoped objects from the Namespace; removing the file afterwards deletes the tenant,
    Namespaces first (they depend on the tenant's cluster-scoped objects, so the engine deletes
    them in reverse order and waits for each): no pod ever runs without its policies.

    >>> registered = pulumi_mocks(lambda: Tenant("eval", tenant, prod))
    >>> [(r.name, r.options["retainOnDelete"]) for r in registered if r.type == "kubernetes:core/v1:Namespace"]
    [('eval-namespace-eval', True)]
    """

    namespaces: pulumi.Output[list[str]]

    def __init__(
        self,
        name: str,
        spec: TenantSpec,
        environment: Environment,
        opts: Optional[pulumi.ResourceOptions] = None,
        objects: Optional[list[KubeObject]] = None,
        admission: Sequence[pulumi.Resource] = (),
    ) -> None:
        aliases = [pulumi.Alias(name=old) for old in spec.previous_names]
        if opts is not None and opts.parent is not None:
            # `pulumi state move` of a tenant into another stack (a shard, docs/sharding.md) parents it
            # to that stack's root: the CLI moves no parent it is not given, and giving it the Fleet
            # would move every tenant. These aliases adopt the moved tenant under this parent (its
            # children follow through their parent's alias), so the move previews no change.
            aliases += [pulumi.Alias(name=n, parent=pulumi.ROOT_STACK_RESOURCE) for n in (name, *spec.previous_names)]
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases)) if aliases else opts
        super().__init__("gpu-tenancy:index:Tenant", name, None, opts)
        view = environment.view(spec)
        objects = objects if objects is not None else tenant_objects(spec, view)
        retain = spec.lifecycle != "decommissioned"
        self.resources: dict[str, pulumi.Resource] = {}

        def add(obj: KubeObject, **options: Any) -> pulumi.Resource:
            child = logical_name(name, obj)
            aliases = [pulumi.Alias(name=logical_name(old, obj)) for old in spec.previous_names]
            resource = register(child, obj, pulumi.ResourceOptions(parent=self, aliases=aliases, **options))
            self.resources[child] = resource
            return resource

        namespace_objects = [o for o in objects if o["kind"] == "Namespace"]
        own = {o["metadata"]["name"] for o in namespace_objects}
        # Outside the tenant's namespaces: cluster-scoped objects, and its monitoring rule in the
        # platform's monitoring namespace. Both are kept or deleted with the tenant as a whole.
        outside = [o for o in objects if o["kind"] != "Namespace" and o["metadata"].get("namespace") not in own]
        namespace_resources: dict[str, pulumi.Resource] = {}
        # Decommissioned: the cluster-scoped objects come first and the Namespaces depend on them,
        # so on delete the Namespaces (and their pods) go first. Otherwise they are deleted_with the
        # primary Namespace, which therefore has to exist first.
        def after(obj: KubeObject, grants: list[pulumi.Resource]) -> Optional[list[pulumi.Resource]]:
            # A binding after the TenantGrant it reads, both after the platform's policies and CRD
            # (`admission`): a binding never points at a policy or grant not there yet.
            return ([*admission, *grants] if reads_grant(obj) else list(admission) if is_tenant_grant(obj) else []) or None

        grants: list[pulumi.Resource] = []
        # Grants first, bindings last (sorted by these two keys: False before True).
        order = sorted(outside, key=lambda o: (not is_tenant_grant(o), reads_grant(o)))
        guards = []
        if not retain:
            for obj in order:
                guards.append(add(obj, depends_on=after(obj, grants)))
                if is_tenant_grant(obj):
                    grants.append(guards[-1])
        for obj in namespace_objects:
            namespace_resources[obj["metadata"]["name"]] = add(
                obj,
                retain_on_delete=retain,
                protect=environment.platform.protect_namespaces and retain,
                depends_on=guards or None,
            )
        if retain:
            primary = namespace_resources.get(spec.all_namespaces[0]) or next(iter(namespace_resources.values()), None)
            for obj in order:
                resource = add(obj, deleted_with=primary, depends_on=after(obj, grants))
                if is_tenant_grant(obj):
                    grants.append(resource)
        for obj in objects:
            if obj["kind"] == "Namespace" or obj["metadata"].get("namespace") not in own:
                continue
            owner_namespace = namespace_resources.get(obj["metadata"]["namespace"])
            add(obj, deleted_with=owner_namespace, depends_on=[owner_namespace] if owner_namespace is not None else None)
        for release in helm_releases(spec, view):
            namespace = namespace_resources.get(release["namespace"])
            self.resources[f"{name}-vcluster"] = register_vcluster(
                f"{name}-vcluster",
                release,
                pulumi.ResourceOptions(parent=self, deleted_with=namespace, depends_on=[namespace] if namespace else None),
            )
        self.namespaces = pulumi.Output.from_input(spec.all_namespaces)
        self.register_outputs({"namespaces": self.namespaces, "lifecycle": spec.lifecycle})
