"""Map plain Kubernetes objects to typed `pulumi_kubernetes` resources (the thin shell).

Built-in kinds become their typed class (`core.v1.Namespace`, `rbac.v1.Role`, ...); a partial
`Node` becomes a `core.v1.NodePatch` (server-side apply; a static GPU node has two, its label patch
and its taint patch, each with its own field manager: manifests/gpu_nodes.py); custom
resources (Kueue, KAI) become `apiextensions.CustomResource`, except KAI's `Config`, which KAI's
Helm chart owns: its few fields of ours become an `apiextensions.CustomResourcePatch`.

Every object is applied under one stable field manager, `gpu-tenancy` (the provider's
`pulumi.com/patchFieldManager` annotation), forced (`pulumi.com/patchForce`: a refresh repairs a
field a person changed by hand instead of failing on the conflict; `with_field_manager`). The provider's default is a random manager per resource
(`pulumi-kubernetes-<hex>`), so re-adopting an object Pulumi had let go of (a retained tenant whose
file is restored) conflicted with the manager of its own earlier deployment. The one exception is a
node's taint patch (`meta.is_taint_patch`): the provider applies the annotation to the Node too, and
the node's label patch owns it with `gpu-tenancy`, so the taint patch keeps the provider's default
(kept in the state; manifests/gpu_nodes.py says why that is safe for an atomic list applied unforced).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..manifests.meta import FIELD_MANAGER, PATCH_FIELD_MANAGER, PATCH_FORCE, KubeObject, immutable_fields, is_taint_patch
from ..manifests.registration import Planned, object_key

# Custom resources another installer creates, of which we own only some fields (deleting ours gives them back).
_PATCHED_CUSTOM_RESOURCES = {("kai.scheduler/v1", "Config")}

_GROUP_MODULES = {
    "": "core",
    "apps": "apps",
    "batch": "batch",
    "rbac.authorization.k8s.io": "rbac",
    "networking.k8s.io": "networking",
    "scheduling.k8s.io": "scheduling",
    "storage.k8s.io": "storage",
    "policy": "policy",
    "admissionregistration.k8s.io": "admissionregistration",
    "apiextensions.k8s.io": "apiextensions",
    "flowcontrol.apiserver.k8s.io": "flowcontrol",
    # DeviceClass resource.k8s.io/v1: pulumi-kubernetes 4.25 types only up to v1beta2, so v1 objects go
    # through the generic CustomResource until the SDK has the typed class (then it is picked up here).
    "resource.k8s.io": "resource",
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def resource_class(api_version: str, kind: str) -> type[pulumi.CustomResource] | None:
    """The typed pulumi_kubernetes class for a built-in kind, or None for custom resources.

    >>> resource_class("v1", "Node").__name__
    'NodePatch'
    """
    group, _, version = api_version.rpartition("/")
    module_name = _GROUP_MODULES.get(group)
    if module_name is None:
        return None
    module = getattr(getattr(k8s, module_name), version, None)
    if kind == "Node":
        return getattr(module, "NodePatch", None)
    return getattr(module, kind, None)


def logical_name(prefix: str, obj: Mapping[str, Any]) -> str:
    """Stable Pulumi name from the owner, kind, namespace and name of an object.

    A Node's taint patch (`meta.is_taint_patch`) ends in `-taints`; its label patch keeps the plain
    name, which the node's single patch had before the two were split, so deployed stacks update it
    in place.

    >>> logical_name("team-a", {"kind": "Role", "metadata": {"name": "tenant-owner", "namespace": "team-a"}})
    'team-a-role-team-a-tenant-owner'
    >>> from components.manifests.gpu_nodes import label_patch, taint_patch
    >>> logical_name("prod-platform", label_patch("n1", {})), logical_name("prod-platform", taint_patch("n1", []))
    ('prod-platform-node-n1', 'prod-platform-node-n1-taints')
    """
    return "-".join(p for p in (prefix, object_key(obj)) if p)


def planned_options(
    entry: Planned,
    parent: Optional[pulumi.Resource],
    registered: Mapping[str, pulumi.Resource],
    groups: Mapping[str, Sequence[pulumi.Resource]],
    aliases: Optional[list[pulumi.Alias]] = None,
) -> pulumi.ResourceOptions:
    """The options of one planned registration (manifests/registration.py): its plan keys resolved
    through `registered` (key -> resource already registered), its groups through `groups`.

    >>> from components.manifests.registration import Planned
    >>> options = planned_options(Planned("namespace-a", {}, "namespace", retain_on_delete=True), None, {}, {})
    >>> options.retain_on_delete, options.protect, options.depends_on
    (True, None, None)
    """
    depends_on = [r for group in entry.waits_for for r in groups.get(group, ())] + [registered[k] for k in entry.depends_on]
    return pulumi.ResourceOptions(
        parent=parent,
        aliases=aliases,
        retain_on_delete=entry.retain_on_delete,
        protect=entry.protect,
        deleted_with=registered[entry.deleted_with] if entry.deleted_with else None,
        depends_on=depends_on or None,
    )


def registered_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata `register` gives the resource of `obj`: `with_field_manager`, except on a node's
    taint patch, which names no field manager (module docstring).

    >>> from components.manifests.gpu_nodes import label_patch, taint_patch
    >>> [sorted(registered_metadata(p).get("annotations", {})) for p in (label_patch("n1", {"a": "b"}), taint_patch("n1", []))]
    [['pulumi.com/patchFieldManager', 'pulumi.com/patchForce'], []]
    """
    return dict(obj["metadata"]) if is_taint_patch(obj) else with_field_manager(obj["metadata"])


def with_field_manager(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The object's metadata with our stable server-side apply field manager, applied forced (each
    kept if already set).

    Forced, because drift is repaired by applying again: a hand edit (`kubectl edit`, `label
    --overwrite`, a client's update) makes its manager the owner of the field it changed, so an
    unforced apply of our value is refused as a field conflict, and `pulumi up --refresh` /
    `preview --refresh` fail instead of repairing (docs/when-things-fail.md). Only the fields we
    declare are in the apply, so forcing takes none that another manager adds.

    >>> with_field_manager({"name": "a"})["annotations"]
    {'pulumi.com/patchFieldManager': 'gpu-tenancy', 'pulumi.com/patchForce': 'true'}
    """
    annotations = {PATCH_FIELD_MANAGER: FIELD_MANAGER, PATCH_FORCE: "true", **(metadata.get("annotations") or {})}
    return {**metadata, "annotations": annotations}


def cluster_provider(context: str) -> k8s.Provider:
    """The explicit provider of a stack's `kubeContext`.

    `kubeconfig=""`: the SDK would otherwise store `$KUBECONFIG` (a path on the deploying machine)
    as a provider input, so the same stack previewed from another checkout or CI runner showed a
    provider change. With an empty value the provider loads the kubeconfig the usual way
    (`$KUBECONFIG`, then `~/.kube/config`) without remembering where it was.

    >>> [(r.type, sorted(r.inputs.items())) for r in pulumi_mocks(lambda: cluster_provider("prod-admin"))]
    [('pulumi:providers:kubernetes', [('context', 'prod-admin'), ('kubeconfig', '')])]
    """
    return k8s.Provider("cluster", context=context, kubeconfig="")


def register(name: str, obj: KubeObject, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Create the typed resource for one object, applied under our stable field manager.

    >>> from components.manifests.meta import kube_object
    >>> namespace = kube_object("v1", "Namespace", {"name": "team-a"})
    >>> [(r.type, sorted(r.inputs["metadata"]["annotations"].items())) for r in pulumi_mocks(lambda: register("team-a", namespace, pulumi.ResourceOptions()))]
    [('kubernetes:core/v1:Namespace', [('pulumi.com/patchFieldManager', 'gpu-tenancy'), ('pulumi.com/patchForce', 'true')])]
    """
    cls = resource_class(obj["apiVersion"], obj["kind"])
    fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    fields["metadata"] = registered_metadata(obj)
    immutable = immutable_fields(obj)
    if immutable:
        # The provider knows the built-in ones, not those of CRDs (a renamed tenant's LocalQueue in a
        # namespace it keeps points at its new ClusterQueue: "field is immutable" at preview). The
        # new object has the same name, so the old one is deleted first.
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(replace_on_changes=list(immutable), delete_before_replace=True)
        )
    if cls is None:
        spec = fields.pop("spec", None)
        metadata = fields.pop("metadata")
        if fields:
            raise ValueError(f"custom resource {obj['kind']} has top-level fields besides spec: {sorted(fields)}")
        custom = (k8s.apiextensions.CustomResourcePatch if (obj["apiVersion"], obj["kind"]) in _PATCHED_CUSTOM_RESOURCES
                  else k8s.apiextensions.CustomResource)
        return custom(name, api_version=obj["apiVersion"], kind=obj["kind"], metadata=metadata, spec=spec, opts=opts)
    return cls(name, opts=opts, **{_snake(k): v for k, v in fields.items()})
