"""The LimitRange: per-container defaults and bounds in every tenant namespace.

It is what makes a cpu/memory/ephemeral-storage quota usable: once a ResourceQuota counts one, the
API server rejects pods whose containers do not state it, and the LimitRange defaults fill it in.
Values are the tenant's `limits`, each unset one taken from the stack's `limitRangeDefaults`, and
for ephemeral storage then from `guardRails.ephemeralStorage`, which also gives every namespace
its ephemeral-storage quota keys: the two always come together. The ephemeral-storage limit is
also what the kubelet evicts a pod for exceeding (container writable layers, logs and disk-backed
emptyDirs), so the default limit and the max bound how much of a node's disk one container fills.
"""

from __future__ import annotations

from ..fleet.facts import TenantView
from ..spec.tenant import ResourceValues, Tenant
from .meta import KubeObject, kube_object, object_meta, owned_labels, plain_copy

LIMIT_RANGE = "tenant-limits"

_SECTIONS = (("default_request", "defaultRequest"), ("default", "default"), ("max", "max"), ("min", "min"))
_RESOURCES = (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeral-storage"))


def _values(values: ResourceValues) -> dict[str, str]:
    return {key: str(getattr(values, field)) for field, key in _RESOURCES if getattr(values, field) is not None}


def container_limits(tenant: Tenant, view: TenantView) -> dict:
    """The `type: Container` limit item, empty sections left out.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1")
    >>> container_limits(t, env.view(t))["defaultRequest"]
    {'cpu': '100m', 'ephemeral-storage': '256Mi', 'memory': '256Mi'}
    """
    limits = view.effective_limits
    item: dict = {"type": "Container"}
    for field, key in _SECTIONS:
        values = _values(getattr(limits, field))
        if values:
            item[key] = dict(sorted(values.items()))
    return item


def limit_ranges(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """One LimitRange `tenant-limits` per tenant namespace; none when there is nothing to set.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2",
    ...     kind="Tenant", name="a", displayName="A", costCenter="cc-1", namespaces=["a-data"])
    >>> [o["metadata"]["namespace"] for o in limit_ranges(t, env.view(t))]
    ['a', 'a-data']
    """
    item = container_limits(tenant, view)   # once: merging the layers makes a dozen pydantic models
    if len(item) == 1:
        return []
    labels = owned_labels(tenant, view)
    return [
        kube_object(
            "v1",
            "LimitRange",
            object_meta(LIMIT_RANGE, namespace=namespace, labels=labels),
            spec={"limits": [plain_copy(item)]},
        )
        for namespace in tenant.all_namespaces
    ]
