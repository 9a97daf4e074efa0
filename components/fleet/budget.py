"""A tenant's compute and GPU budget as ResourceQuota keys, how `namespaceQuotas` split it, its
ephemeral-storage quota and LimitRange values after the stack's defaults and guard rails.

The validation (the slices must fit) and the quota builder (the primary namespace keeps the rest)
both need these; they live here so that spec checks do not depend on the builders.
"""

from __future__ import annotations

from typing import Any

from . import gpu_capacity as cap
from ..spec.quantity import Quantity, format_quantity
from ..spec.stack import Platform
from ..spec.tenant import LimitRangeSpec, RequestsLimits, ResourceValues, Tenant

_COMPUTE = (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeral-storage"))


def compute_hard(tenant: Tenant) -> dict[str, str]:
    """`requests.*`/`limits.*` keys for cpu, memory and ephemeral-storage, as the tenant wrote them.

    >>> compute_hard(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", quota={"cpu": {"requests": "8"}}))
    {'requests.cpu': '8'}
    """
    hard = {}
    for field, resource in _COMPUTE:
        pair = getattr(tenant.quota, field)
        if pair is None:
            continue
        for side in ("requests", "limits"):
            value = getattr(pair, side)
            if value is not None:
                hard[f"{side}.{resource}"] = str(value)
    return hard


def namespace_slices(tenant: Tenant, platform: Platform) -> dict[str, dict[str, str]]:
    """Budget keys carved out for each extra namespace listed in `namespaceQuotas`.

    >>> from components.spec.stack import Platform
    >>> namespace_slices(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", namespaces=["a-canary"], quota={"cpu": {"requests": "8"}},
    ...     namespaceQuotas={"a-canary": {"cpu": {"requests": "2"}}}), Platform(labelDomain="x.dev"))
    {'a-canary': {'requests.cpu': '2'}}
    """
    slices = {}
    for namespace, part in sorted(tenant.namespace_quotas.items()):
        as_tenant = tenant.model_copy(
            update={"quota": tenant.quota.model_copy(update={
                "cpu": part.cpu, "memory": part.memory, "ephemeral_storage": part.ephemeral_storage,
                "gpu": part.gpu, "mig": part.mig,
            })}
        )
        gpus = {f"requests.{r}": str(c) for r, c in cap.gpu_quota_by_resource(as_tenant, platform).items()}
        slices[namespace] = {**compute_hard(as_tenant), **gpus}
    return slices


def budget_home(tenant: Tenant) -> str:
    """The namespace that keeps what the `namespaceQuotas` slices leave: the tenant's own namespace,
    except during a rename.

    A renamed tenant (`previousNames`) that keeps its old namespace under `namespaces` still runs its
    workloads there: that namespace keeps the budget (the new one gets none) until the team moves,
    by giving the old namespace an explicit `namespaceQuotas` slice (the new namespace then keeps
    the rest) or by dropping it from `namespaces` (docs/renaming.md).

    >>> budget_home(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="b",
    ...     displayName="B", costCenter="cc-1", previousNames=["a"], namespaces=["a"]))
    'a'
    """
    for previous in tenant.previous_names:
        if previous in tenant.namespaces and previous not in tenant.namespace_quotas:
            return previous
    return tenant.name


def split_budget(total: dict[str, str], slices: dict[str, dict[str, str]]) -> dict[str, str]:
    """What the tenant's own namespace keeps: the total minus every slice (exact arithmetic).

    >>> split_budget({"requests.cpu": "8", "requests.memory": "64Gi"}, {"canary": {"requests.cpu": "500m"}})
    {'requests.cpu': '7500m', 'requests.memory': '64Gi'}
    """
    kept = {}
    for key, value in total.items():
        taken = [part[key] for part in slices.values() if key in part]
        if not taken:
            kept[key] = value
            continue
        remaining = Quantity.parse(value).value - sum(Quantity.parse(t).value for t in taken)
        kept[key] = format_quantity(max(remaining, 0))
    return kept


def ephemeral_storage_quota(tenant: Tenant, platform: Platform) -> RequestsLimits:
    """The ephemeral-storage quota of a namespace: each side the tenant's `quota.ephemeralStorage`,
    else the stack's `guardRails.ephemeralStorage.quota`.

    >>> ephemeral_storage_quota(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", quota={"ephemeralStorage": {"requests": "10Gi"}}), prod.platform)
    RequestsLimits(requests=Quantity('10Gi'), limits=Quantity('500Gi'))
    """
    own = tenant.quota.ephemeral_storage or RequestsLimits()
    fallback = platform.guard_rails.ephemeral_storage.quota
    return RequestsLimits(
        requests=own.requests if own.requests is not None else fallback.requests,
        limits=own.limits if own.limits is not None else fallback.limits,
    )


_PARTS = ("default_request", "default", "max", "min")
_RESOURCES = ("cpu", "memory", "ephemeral_storage")


def _guard_rail_limits(platform: Platform) -> dict[str, dict[str, Any]]:
    rail = platform.guard_rails.ephemeral_storage
    return {
        "default_request": {"ephemeral_storage": rail.default_request},
        "default": {"ephemeral_storage": rail.default},
        "max": {"ephemeral_storage": rail.max},
        "min": {},
    }


def effective_limits(tenant: Tenant, platform: Platform) -> LimitRangeSpec:
    """The tenant's LimitRange values, each unset one taken from the stack's defaults
    (`limitRangeDefaults`, then for ephemeral storage `guardRails.ephemeralStorage`).

    >>> limits = effective_limits(tenant, prod.platform)
    >>> limits.default_request.cpu, limits.default.memory
    (Quantity('250m'), Quantity('4Gi'))
    """
    rails = _guard_rail_limits(platform)
    merged = {}
    for part in _PARTS:
        own, defaults = getattr(tenant.limits, part), getattr(platform.limit_range_defaults, part)
        values = {}
        for key in _RESOURCES:
            value = getattr(own, key)
            if value is None:
                value = getattr(defaults, key)
            values[key] = value if value is not None else rails[part].get(key)
        # Every value was validated where it was read: construct, do not validate again (this
        # runs twice per tenant while loading and once while building).
        merged[part] = ResourceValues.model_construct(**values)
    return LimitRangeSpec.model_construct(**merged)

