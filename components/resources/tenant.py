"""`gpu-tenancy:index:Tenant`: one team's namespaces and everything in them, as Pulumi resources."""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi

from ..manifests.build import helm_releases, tenant_objects
from ..manifests.meta import KubeObject
from ..manifests.registration import Planned, tenant_plan
from .kubernetes import planned_options, register
from ..fleet.environment import Environment
from ..spec.tenant import Tenant as TenantSpec
from .vcluster_release import register_vcluster

# How each place of the plan becomes a resource: its Helm release, or the typed resource of an object.
_REGISTER = {"release": register_vcluster}


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

    These rules are data in manifests/registration.py (`tenant_plan`); this component registers
    the plan's entries in order, each as `<name>-<key>`, with the options the plan gives.

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
        super().__init__("gpu-tenancy:index:Tenant", name, None, _moved_aliases(name, spec, opts))
        view = environment.view(spec)
        objects = objects if objects is not None else tenant_objects(spec, view)
        self.plan = tenant_plan(spec, objects, helm_releases(spec, view), protect_namespaces=environment.platform.protect_namespaces)
        self.resources: dict[str, pulumi.Resource] = {}
        registered: dict[str, pulumi.Resource] = {}
        groups = {"admission": list(admission)}
        for entry in self.plan:
            registered[entry.key] = self.resources[f"{name}-{entry.key}"] = self._register(name, spec, entry, registered, groups)
        # What the platform's node taints wait for (Fleet): the placement binding and the grant.
        self.taint_gates = [registered[entry.key] for entry in self.plan if "taint gates" in entry.provides]
        self.namespaces = pulumi.Output.from_input(spec.all_namespaces)
        self.register_outputs({"namespaces": self.namespaces, "lifecycle": spec.lifecycle})

    def _register(self, name: str, spec: TenantSpec, entry: Planned, registered: dict[str, pulumi.Resource],
                  groups: dict[str, list[pulumi.Resource]]) -> pulumi.Resource:
        aliases = [pulumi.Alias(name=f"{old}-{entry.key}") for old in spec.previous_names] if entry.aliased else None
        options = planned_options(entry, self, registered, groups, aliases)
        return _REGISTER.get(entry.place, register)(f"{name}-{entry.key}", entry.subject, options)


def _moved_aliases(name: str, spec: TenantSpec, opts: Optional[pulumi.ResourceOptions]) -> Optional[pulumi.ResourceOptions]:
    """`opts` with the component's aliases: its previous names, and under a given parent its names at the stack root.

    >>> [a.name for a in _moved_aliases("eval", tenant.model_copy(update={"previous_names": ["evals"]}), None).aliases]
    ['evals']
    """
    aliases = [pulumi.Alias(name=old) for old in spec.previous_names]
    if opts is not None and opts.parent is not None:
        # `pulumi state move` of a tenant into another stack (a shard, docs/sharding.md) parents it
        # to that stack's root: the CLI moves no parent it is not given, and giving it the Fleet
        # would move every tenant. These aliases adopt the moved tenant under this parent (its
        # children follow through their parent's alias), so the move previews no change.
        aliases += [pulumi.Alias(name=n, parent=pulumi.ROOT_STACK_RESOURCE) for n in (name, *spec.previous_names)]
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases)) if aliases else opts
