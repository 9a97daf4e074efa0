"""The tenant's namespaces: who they belong to, what they cost, and the Pod Security they enforce.

Pod Security Admission reads the `pod-security.kubernetes.io/*` labels of a namespace. All three
modes (enforce, audit, warn) get the same level, pinned to the stack's policy version so that a
Kubernetes upgrade never silently changes what is admitted.
"""

from __future__ import annotations

import json

from ..fleet.facts import TenantView
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from .meta import (
    CONTACTS_ANNOTATION,
    COST_CENTER_ANNOTATION,
    COST_CENTER_LABEL,
    DESCRIPTION_ANNOTATION,
    DISPLAY_NAME_ANNOTATION,
    LIFECYCLE_LABEL,
    OWNERS_ANNOTATION,
    POD_SECURITY_PREFIX,
    PRIMARY_NAMESPACE_ANNOTATION,
    QUEUE_ADMISSION_LABEL,
    KubeObject,
    kube_object,
    object_meta,
    owned_labels,
)

POD_SECURITY_MODES = ("enforce", "audit", "warn")

_STRICTNESS = {"privileged": 0, "baseline": 1, "restricted": 2}


def pod_security_level(tenant: Tenant, platform: Platform) -> str:
    """The tenant's Pod Security level: its own if set, else the stack's; never looser than the stack's.

    >>> from components.spec.stack import Platform
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", podSecurity="restricted")
    >>> pod_security_level(t, Platform(labelDomain="gpu.example.com"))
    'restricted'
    """
    stack = platform.pod_security.level
    own = tenant.pod_security or stack
    # Validation already rejects a looser tenant level; the builder must not loosen it either way.
    return own if _STRICTNESS[own] >= _STRICTNESS[stack] else stack


def pod_security_labels(level: str, version: str) -> dict[str, str]:
    """The Pod Security Admission labels for one level, every mode pinned to `version`.

    >>> pod_security_labels("baseline", "v1.30")["pod-security.kubernetes.io/enforce-version"]
    'v1.30'
    """
    labels = {}
    for mode in POD_SECURITY_MODES:
        labels[f"{POD_SECURITY_PREFIX}/{mode}"] = level
        labels[f"{POD_SECURITY_PREFIX}/{mode}-version"] = version
    return labels


def _contacts(tenant: Tenant) -> str:
    entries = [contact.model_dump(exclude_none=True) for contact in tenant.contacts]
    return json.dumps(entries, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def namespace_annotations(tenant: Tenant) -> dict[str, str]:
    """Human-facing facts about the tenant; annotations, because they are not label values.

    >>> namespace_annotations(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="Team A", costCenter="cc-1"))["gpu-tenancy.dev/display-name"]
    'Team A'
    """
    annotations = {
        DISPLAY_NAME_ANNOTATION: tenant.display_name,
        COST_CENTER_ANNOTATION: tenant.cost_center,
        PRIMARY_NAMESPACE_ANNOTATION: tenant.name,
    }
    if tenant.description:
        annotations[DESCRIPTION_ANNOTATION] = tenant.description
    if tenant.access.owners.groups or tenant.access.owners.users:
        annotations[OWNERS_ANNOTATION] = ",".join([*tenant.access.owners.groups, *tenant.access.owners.users])
    if tenant.contacts:
        annotations[CONTACTS_ANNOTATION] = _contacts(tenant)
    return annotations


def namespaces(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """One Namespace per tenant namespace (its own first), labelled for ownership, cost and Pod Security.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", namespaces=["a-data"])
    >>> [ns["metadata"]["name"] for ns in namespaces(t, env.view(t))]
    ['a', 'a-data']
    """
    platform = view.platform
    labels = {
        **owned_labels(tenant, view),
        COST_CENTER_LABEL: tenant.cost_center,
        LIFECYCLE_LABEL: tenant.lifecycle,
        **pod_security_labels(pod_security_level(tenant, platform), platform.pod_security.version),
    }
    if tenant.queue.admission == "direct" and platform.scheduler in ("kueue", "kai"):
        labels[QUEUE_ADMISSION_LABEL] = "direct"
    annotations = namespace_annotations(tenant)
    return [
        kube_object("v1", "Namespace", object_meta(name, labels=labels, annotations=annotations))
        for name in tenant.all_namespaces
    ]
