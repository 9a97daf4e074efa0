"""Which registries a tenant's pods may pull images from, enforced at admission.

A tenant member who may create pods may run any image the nodes can pull, unless admission says
otherwise. When the stack or the tenant lists registries (`images.registries` in either; the
tenant's add to the stack's) or the stack requires digests (`images.requireDigest`), the tenant
gets a ValidatingAdmissionPolicy (`gpu-tenancy-images-<tenant>`, plus its binding, in the tenant's
namespaces) that checks every image of a pod: containers, init containers, ephemeral containers
and image volumes (`spec.volumes[].image.reference`: the kubelet pulls an image volume like a
container image; the ImageVolume feature is on by default in Kubernetes 1.37), on pod CREATE,
on pod UPDATE (a container's image may be changed in place) and on the
`pods/ephemeralcontainers` subresource (`kubectl debug`).

* An image must start with `<registry>/` for one of the listed entries. Images are compared as
  written: a short name (`nginx`, `library/nginx`) is refused, because each node's container
  runtime decides where it comes from (containerd: docker.io; CRI-O: any unqualified-search
  registry); the message says to write it in full.
* With `requireDigest`, every image must end in `@sha256:<64 hex digits>`.
* On UPDATE only images the pod did not already have are checked, so a pod admitted before a
  registry was removed can still be labelled or finalized; it cannot switch to a new image.

The rules hold for everybody in the tenant's namespaces (platform admins debugging a pod too: use
an allowed image); workload controllers' pods are checked when the controller creates them (a
Deployment with an unlisted image is stored, its pods are refused with this message in the
ReplicaSet's events).

Design: like the guard and placement policies, one policy and one binding per tenant with the
allowances inlined as CEL literals.
"""

from __future__ import annotations

from typing import Any

from .cel import cel_list, names_or_none
from ..fleet.facts import TenantView
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from .meta import deny_binding, TENANT_LABEL, KubeObject, kube_object, object_meta, owned_labels

API_VERSION = "admissionregistration.k8s.io/v1"
NAME_PREFIX = "gpu-tenancy-images"
DIGEST = "@sha256:[0-9a-f]{64}$"


def policy_name(tenant: str) -> str:
    """Name of the tenant's image policy and of its binding.

    >>> policy_name("eval")
    'gpu-tenancy-images-eval'
    """
    return f"{NAME_PREFIX}-{tenant}"


def allowed_registries(tenant: Tenant, platform: Platform) -> list[str]:
    """The registries the tenant's pods may pull from: the stack's and the tenant's, sorted.

    >>> platform = Platform(labelDomain="g.dev", images={"registries": ["nvcr.io/nvidia"]})
    >>> allowed_registries(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", images={"registries": ["ghcr.io/acme"]}), platform)
    ['ghcr.io/acme', 'nvcr.io/nvidia']
    """
    return sorted({*platform.images.registries, *tenant.images.registries})


def _images(pod: str) -> str:
    """Every image of a pod, as one list of strings (the three container lists are different types),
    image volumes' references included: the same registries and digests hold for them."""
    return (
        f"{pod}.spec.containers.map(c, c.image) + "
        f"(has({pod}.spec.initContainers) ? {pod}.spec.initContainers.map(c, c.image) : []) + "
        f"(has({pod}.spec.ephemeralContainers) ? {pod}.spec.ephemeralContainers.map(c, c.image) : []) + "
        f"(has({pod}.spec.volumes) ? {pod}.spec.volumes.filter(v, has(v.image) && has(v.image.reference))"
        ".map(v, v.image.reference) : [])"
    )


def _variables(registries: list[str]) -> list[dict[str, str]]:
    return [
        {"name": "images", "expression": _images("object")},
        {"name": "oldImages", "expression": f'request.operation == "UPDATE" ? {_images("oldObject")} : []'},
        # Images the request brings: all of them on CREATE, those the pod did not have on UPDATE.
        {"name": "newImages", "expression": "variables.images.filter(i, !(i in variables.oldImages))"},
        {"name": "prefixes", "expression": cel_list(f"{registry}/" for registry in registries)},
    ]


def _validations(tenant: Tenant, registries: list[str], require_digest: bool) -> list[dict[str, str]]:
    name = tenant.name
    validations = []
    if registries:
        unlisted = "variables.newImages.filter(i, !variables.prefixes.exists(p, i.startsWith(p)))"
        validations.append({
            "expression": f"size({unlisted}) == 0",
            "messageExpression": (
                f'"image " + {unlisted}[0] + " is not from a registry tenant {name} may pull from '
                f'({names_or_none(registries)}); write the image in full, registry first (docker.io/library/nginx, not nginx)"'
            ),
            "message": f"images of tenant {name} must come from: {names_or_none(registries)}",
            "reason": "Forbidden",
        })
    if require_digest:
        undigested = f'variables.newImages.filter(i, !i.matches("{DIGEST}"))'
        validations.append({
            "expression": f"size({undigested}) == 0",
            "messageExpression": (
                f'"image " + {undigested}[0] + " is not pinned by digest: images of tenant {name} must end in '
                '@sha256:<64 hex digits> (the stack requires digests, so a re-pushed tag cannot change what runs)"'
            ),
            "message": f"images of tenant {name} must be pinned by digest (@sha256:...)",
            "reason": "Forbidden",
        })
    return validations


def image_policy(tenant: Tenant, view: TenantView) -> KubeObject | None:
    """The tenant's image ValidatingAdmissionPolicy, or None while nothing is restricted.

    >>> from components.fleet.environment import Environment
    >>> env = Environment("dev", Platform(labelDomain="g.dev", images={"requireDigest": True}), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
    >>> image_policy(t, env.view(t))["spec"]["validations"][0]["message"]
    'images of tenant a must be pinned by digest (@sha256:...)'
    """
    registries = allowed_registries(tenant, view.platform)
    require_digest = view.platform.images.require_digest
    if not registries and not require_digest:
        return None
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["pods", "pods/ephemeralcontainers"]}]
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant.name}}, "resourceRules": rules},
        "variables": _variables(registries),
        "validations": _validations(tenant, registries, require_digest),
    }
    return kube_object(
        API_VERSION,
        "ValidatingAdmissionPolicy",
        object_meta(policy_name(tenant.name), labels=owned_labels(tenant, view)),
        spec=spec,
    )


def image_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """Policy and binding of one tenant; none while nothing is restricted. A decommissioned tenant
    keeps both until its namespaces are gone (like the guard binding: they are deleted after them).

    >>> from components.fleet.environment import Environment
    >>> env = Environment("dev", Platform(labelDomain="g.dev"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
    >>> image_objects(t, env.view(t))
    []
    """
    policy = image_policy(tenant, view)
    if policy is None:
        return []
    return [policy, deny_binding(policy_name(tenant.name), owned_labels(tenant, view))]
