"""`gpu-tenancy:index:GpuPlatform`: cluster-wide objects of an environment as Pulumi resources."""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..manifests.gpu_nodes import is_node_patch
from ..manifests.meta import KubeObject
from ..manifests.registration import Planned, platform_plan
from .kubernetes import planned_options, register


class GpuPlatform(pulumi.ComponentResource):
    """PriorityClasses, node labels and taints (NodePatch: a label patch and a taint patch per static
    node, each with its fixed field manager), MIG and time-slicing ConfigMaps, admission policies
    and shared RBAC: everything that belongs to no single tenant.

    Order: a node's taint patch depends on every other object here but the label patches of tainted
    nodes (the Kueue flavors carry the matching tolerations) and on `taint_after` (the tenants'
    placement policies, which decide who may tolerate it; through one gate resource, `_gate`): a
    taint lands only once the rest of the platform is in place. The label patch of a tainted node
    depends on that node's taint patch: a stack deployed when one patch carried both (its logical name is the label patch's now) owns the
    taints under `gpu-tenancy` alone, and the label patch that no longer carries them would remove
    them; applied first, the taint patch co-owns the same list (same value: no conflict), so the
    taint stays when the label patch lets go of it. (The rules: `PLATFORM_PLACES` in
    manifests/registration.py; this component registers `platform_plan`'s entries in order.)

    Every patch of a node also depends on a read of that Node (`Node.get`, `<name>-node-<node>-joined`):
    a patch is a server-side apply, which creates the Node when it is missing, so an inventory node
    not on the cluster would become a phantom Node with GPU labels and a tenant taint. The read
    fails instead ("resource '<node>' does not exist", at preview and at `up`), before anything is
    applied to that node (docs/operator.md says what to do).

    >>> from components.manifests.build import platform_objects
    >>> registered = pulumi_mocks(lambda: GpuPlatform("prod-platform", platform_objects(prod)))
    >>> [t for t in sorted({r.type for r in registered}) if t.startswith("kubernetes:core/")]
    ['kubernetes:core/v1:ConfigMap', 'kubernetes:core/v1:Node', 'kubernetes:core/v1:NodePatch']
    """

    def __init__(
        self,
        name: str,
        objects: list[KubeObject],
        opts: Optional[pulumi.ResourceOptions] = None,
        *,
        taint_after: Sequence[pulumi.Resource] = (),
        taints_later: bool = False,
    ) -> None:
        super().__init__("gpu-tenancy:index:GpuPlatform", name, None, opts)
        self.resources: dict[str, pulumi.Resource] = {}
        self._name, self._objects = name, objects
        self.plan = platform_plan(objects)
        self._registered: dict[str, pulumi.Resource] = {}
        self._joined: dict[str, pulumi.Resource] = {}
        for entry in self.plan:
            if not entry.deferred:
                self._register(entry, {})
        # What a tenant's grant and bindings wait for: the TenantGrant CRD and the guard policies.
        self.admission = [self._registered[entry.key] for entry in self.plan if "admission" in entry.provides]
        if not taints_later:
            self.add_taints(taint_after)

    def add_taints(self, taint_after: Sequence[pulumi.Resource] = ()) -> None:
        """Register the tainted nodes' patches after everything else here and after `taint_after`, then
        the outputs. Called by the constructor, or (`taints_later`) by a Fleet once its tenants, whose
        admission objects need this platform's TenantGrant CRD and guard policy first, are registered.

        >>> from components.manifests.build import platform_objects
        >>> registered = pulumi_mocks(lambda: GpuPlatform("prod-platform", platform_objects(prod), taints_later=True).add_taints())
        >>> len([r for r in registered if r.type == "kubernetes:core/v1:NodePatch"]) > 0
        True
        """
        # The gate exists whenever a taint waits for it, with or without gates (a sharded
        # environment's stack has none of the tenants): moving tenants out never deletes it.
        waiting = any("taint gates" in entry.waits_for for entry in self.plan if entry.deferred)
        groups = {"taint gates": [self._gate(taint_after)] if waiting else []}
        for entry in self.plan:
            if entry.deferred:
                self._register(entry, groups)
        self.register_outputs({"objects": len(self._objects)})

    def _gate(self, taint_after: Sequence[pulumi.Resource]) -> pulumi.Resource:
        """One engine-only resource (`pulumi:index:Stash`, nothing on the cluster) that depends on
        every gate, which each taint patch depends on instead: the same order, with one edge per
        gate and one per patch where each patch naming every gate made patches x gates edges (about
        a million at 1,000 tenants, most of the Fleet's cost over bare registration, bench/run.py).
        Its value never changes, so it shows in a preview only when it is first created; it is
        the engine's own resource (the builtin `pulumi` provider, no plugin).

        >>> from components.manifests.build import platform_objects
        >>> registered = pulumi_mocks(lambda: GpuPlatform("prod-platform", platform_objects(prod), taints_later=True)
        ...     .add_taints([pulumi.Stash("a-gate", input=1)]))
        >>> [r.name for r in registered if r.type == "pulumi:index:Stash"]
        ['a-gate', 'prod-platform-taint-gates']
        """
        return pulumi.Stash(f"{self._name}-taint-gates", input="node taints wait for every tenant's taint gates",
                            opts=pulumi.ResourceOptions(parent=self, depends_on=list(taint_after)))

    def joined(self, node: str) -> pulumi.Resource:
        """The read of the Node `node` its patches depend on (one per node): it fails when the node
        is not on the cluster, where the patch would create it.

        >>> from components.manifests.build import platform_objects
        >>> registered = pulumi_mocks(lambda: GpuPlatform("prod-platform", platform_objects(prod)))
        >>> sorted(r.name for r in registered if r.type == "kubernetes:core/v1:Node")[:1]
        ['prod-platform-node-gpu-a100-01-joined']
        """
        if node not in self._joined:
            self._joined[node] = k8s.core.v1.Node.get(f"{self._name}-node-{node}-joined", node,
                                                      opts=pulumi.ResourceOptions(parent=self))
        return self._joined[node]

    def _register(self, entry: Planned, groups: dict[str, list[pulumi.Resource]]) -> None:
        child = f"{self._name}-{entry.key}"
        options = planned_options(entry, self, self._registered, groups)
        if is_node_patch(entry.subject):
            joined = pulumi.ResourceOptions(depends_on=[self.joined(entry.subject["metadata"]["name"])])
            options = pulumi.ResourceOptions.merge(options, joined)
        self.resources[child] = self._registered[entry.key] = register(child, entry.subject, options)
