"""A Capsule Tenant's quota over its namespaces, as a tenant file's `quota` and `namespaceQuotas`.

Capsule's `resourceQuotas.scope: Tenant` (the default) caps the sum over all the Tenant's
namespaces; `scope: Namespace` gives each namespace the whole quota. A tenant file's `quota` is
the tenant's total and `namespaceQuotas` carves parts of its compute and GPU budget out for its
extra namespaces (the namespace named like the tenant keeps the rest); without a part, an extra
namespace gets 0 CPUs, 0 GPUs and so 0 pods (`manifests/quota.py`). Imported as written, a
Capsule Tenant's running namespaces would therefore get nothing. So the budget is split:

| scope | total (`quota`) | each of the Tenant's namespaces |
|---|---|---|
| Tenant | as written | an equal share, in whole units (1m CPU, 1 byte, 1 GPU or slice); the remainder one unit each to the first namespaces by name, so the shares add up to the total exactly |
| Namespace | as written times the number of namespaces | the whole quota |

The namespace named like the tenant, when Capsule does not list it, gets no budget (it is new).
Object counts and storage are per namespace in a tenant file (every namespace gets them as
written): with scope Tenant each is divided by the number of namespaces the file gives the tenant
(rounded down), so that the sum never exceeds what Capsule allowed. A value that does not divide
into whole units, or a count that would come out at 0 for every namespace, refuses the import.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

from ..spec.quantity import Quantity, format_quantity

_COMPUTE = ("cpu", "memory", "ephemeralStorage")
_UNIT = {"cpu": Fraction(1, 1000), "memory": Fraction(1), "ephemeralStorage": Fraction(1), "requests.storage": Fraction(1)}


def _parts(total: Fraction, unit: Fraction, count: int) -> list[Fraction] | None:
    """`total` in `count` whole-unit parts that add up to it (larger parts first), or None."""
    units = total / unit
    if units.denominator != 1:
        return None
    base, rest = divmod(units.numerator, count)
    return [(base + (1 if i < rest else 0)) * unit for i in range(count)]


def namespace_shares(data: dict[str, Any], namespaces: list[str], scope: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """Tenant file data with the quota split over the Capsule Tenant's `namespaces` (see the module
    docstring), the notes for the report, and the reasons it cannot be split (empty: it was).

    >>> data = {"name": "solar", "namespaces": ["solar-dev", "solar-prod"],
    ...         "quota": {"cpu": {"requests": "8"}, "gpu": {"a100": 3}, "objects": {"pods": 20}}}
    >>> out, notes, refused = namespace_shares(data, ["solar-dev", "solar-prod"], "Tenant")
    >>> out["quota"], out["namespaceQuotas"]
    ({'cpu': {'requests': '8'}, 'gpu': {'a100': 3}, 'objects': {'pods': 6}}, {'solar-dev': {'cpu': {'requests': '4'}, 'gpu': {'a100': 2}}, 'solar-prod': {'cpu': {'requests': '4'}, 'gpu': {'a100': 1}}})
    """
    name = data["name"]
    listed = sorted(set(namespaces))
    if not listed or listed == [name] or not data.get("quota"):
        return data, [], []
    out = copy.deepcopy(data)
    quota = out["quota"]
    count = len(listed)
    per_namespace = scope == "Namespace"
    shares: dict[str, dict[str, Any]] = {ns: {} for ns in listed}
    notes: list[str] = []
    refused: list[str] = []
    refused += _compute_shares(quota, listed, per_namespace, shares)
    _device_shares(quota, listed, per_namespace, shares)
    if per_namespace:
        notes.append(f"resourceQuotas.scope Namespace: each of {', '.join(listed)} keeps the whole quota (namespaceQuotas); "
                     f"quota is the total, {count} times it")
    else:
        notes.append(f"resourceQuotas.scope Tenant: any of {', '.join(listed)} could use the whole quota while the sum stayed "
                     "within it; a tenant file gives each namespace a fixed share (namespaceQuotas: equal shares adding up to "
                     "the total): move budget between them there")
        namespaces_in_file = len({name, *listed})
        refused.extend(_divide_guard_rails(quota, namespaces_in_file, notes))
    if name not in listed:
        notes.append(f"namespace {name} (named like the tenant, created by the platform) gets no compute or GPU budget: "
                     "the Tenant's namespaces hold all of it")
    out["namespaceQuotas"] = {ns: part for ns, part in shares.items() if ns != name and part}
    return out, notes, refused


def _compute_shares(quota: dict[str, Any], listed: list[str], per_namespace: bool, shares: dict[str, dict[str, Any]]) -> list[str]:
    """Each namespace's cpu, memory and storage share into `shares`; the amounts that do not split into whole units."""
    count = len(listed)
    refused: list[str] = []
    for field in _COMPUTE:
        for side, value in sorted((quota.get(field) or {}).items()):
            amount = Quantity.parse(str(value)).value
            parts = [amount] * count if per_namespace else _parts(amount, _UNIT[field], count)
            if parts is None:
                refused.append(f"quota.{field}.{side} {value} does not split into whole units over the {count} namespaces "
                               f"({', '.join(listed)}); write it in {'millicores' if field == 'cpu' else 'bytes'}")
                continue
            if per_namespace:
                quota[field][side] = format_quantity(amount * count)
            for ns, part in zip(listed, parts):
                shares[ns].setdefault(field, {})[side] = format_quantity(part)
    return refused


def _device_shares(quota: dict[str, Any], listed: list[str], per_namespace: bool, shares: dict[str, dict[str, Any]]) -> None:
    """Each namespace's GPUs and MIG slices (whole devices) into `shares`."""
    count = len(listed)
    for field in ("gpu", "mig"):
        for key, value in sorted((quota.get(field) or {}).items()):
            parts = [value] * count if per_namespace else [int(p) for p in _parts(Fraction(value), Fraction(1), count)]
            if per_namespace:
                quota[field][key] = value * count
            for ns, part in zip(listed, parts):
                shares[ns].setdefault(field, {})[key] = part


def _divide_guard_rails(quota: dict[str, Any], namespaces: int, notes: list[str]) -> list[str]:
    """Object counts and storage, per namespace in a tenant file: each divided by `namespaces`, rounded down."""
    refused = []

    def divide(where: str, value: Any, unit: Fraction | None) -> Any:
        amount = Fraction(value) if unit is None else Quantity.parse(str(value)).value
        share = amount // namespaces if unit is None else (amount / unit // namespaces) * unit
        if share == 0 and amount > 0:
            refused.append(f"quota.{where} {value} is tenant-wide in Capsule; a tenant file sets it per namespace and "
                           f"{value} over {namespaces} namespaces leaves each none: raise it, or import the Tenant with "
                           "its namespaces one by one")
        notes.append(f"quota.{where}: {value} over the whole Tenant; each of the {namespaces} namespaces of the tenant file "
                     f"gets {share if unit is None else format_quantity(share)} (per namespace in a tenant file)")
        return int(share) if unit is None else format_quantity(share)

    for key, value in sorted((quota.get("objects") or {}).items()):
        quota["objects"][key] = divide(f"objects.{key}", value, None)
    storage = quota.get("storage") or {}
    if "requests" in storage:
        storage["requests"] = divide("storage.requests", storage["requests"], _UNIT["requests.storage"])
    for class_name, entry in sorted((storage.get("storageClasses") or {}).items()):
        if "requests" in entry:
            entry["requests"] = divide(f"storage.storageClasses.{class_name}.requests", entry["requests"], _UNIT["requests.storage"])
        if entry.get("persistentVolumeClaims") is not None:
            entry["persistentVolumeClaims"] = divide(f"storage.storageClasses.{class_name}.persistentVolumeClaims",
                                                     entry["persistentVolumeClaims"], None)
    return refused
