"""Field-level differences between Kubernetes objects (or any JSON-like values), compact enough for a PR.

Paths read like `spec.hard.requests.nvidia.com/gpu`; named list items (RBAC subjects, containers)
are matched by identity (`subjects[Group/ml-leads]`) so an insertion is one change, not a cascade.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import yaml

from ..manifests.build import PLATFORM
from ..manifests.meta import KubeObject, object_id
from ..spec.quantity import Quantity, QuantityError
from .documents import FieldChange, ObjectChange

_MISSING = object()


def _maybe_yaml(text: Any) -> Any:
    """The mapping inside a multi-line string value (e.g. a ConfigMap's config.yaml), else None."""
    if not isinstance(text, str) or "\n" not in text:
        return None
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def field_changes(before: Any, after: Any, path: str = "") -> list[FieldChange]:
    """Leaf-level differences between two JSON-like values, as `{path, from, to}` (None = absent).

    Keys join with dots even when they contain dots themselves, the way people read quota keys;
    multi-line strings holding YAML are compared structurally.

    >>> field_changes({"spec": {"hard": {"requests.nvidia.com/gpu": "40"}}},
    ...               {"spec": {"hard": {"requests.nvidia.com/gpu": "48"}}})
    [{'path': 'spec.hard.requests.nvidia.com/gpu', 'from': '40', 'to': '48'}]
    """
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[FieldChange] = []
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}.{key}" if path else str(key)
            changes.extend(field_changes(before.get(key, _MISSING), after.get(key, _MISSING), sub))
        return changes
    if isinstance(before, list) and isinstance(after, list):
        return _list_changes(before, after, path)
    parsed_before, parsed_after = _maybe_yaml(before), _maybe_yaml(after)
    if parsed_before is not None and parsed_after is not None:
        return field_changes(parsed_before, parsed_after, path)
    return [{"path": path, "from": None if before is _MISSING else before, "to": None if after is _MISSING else after}]


def _identity(item: Any) -> str | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    return "/".join(str(item[k]) for k in ("kind", "namespace", "name") if item.get(k))


def _list_changes(before: list, after: list, path: str) -> list[FieldChange]:
    # Named items (RBAC subjects, containers) are matched by identity, so one insertion reads as
    # one added item rather than every later index changing; scalar lists read best whole.
    if all(not isinstance(i, (dict, list)) for i in [*before, *after]):
        return [{"path": path, "from": before, "to": after}]
    left = [_identity(i) for i in before]
    right = [_identity(i) for i in after]
    keyed = None not in left + right and len(set(left)) == len(left) and len(set(right)) == len(right)
    return _keyed_changes(before, after, left, right, path) if keyed else _indexed_changes(before, after, path)


def _indexed_changes(before: list, after: list, path: str) -> list[FieldChange]:
    changes = []
    for index in range(max(len(before), len(after))):
        old = before[index] if index < len(before) else _MISSING
        new = after[index] if index < len(after) else _MISSING
        changes.extend(field_changes(old, new, f"{path}[{index}]"))
    return changes


def _keyed_changes(before: list, after: list, left: list[str], right: list[str], path: str) -> list[FieldChange]:
    old_items, new_items = dict(zip(left, before)), dict(zip(right, after))
    changes = []
    for key in [*right, *(k for k in left if k not in new_items)]:
        changes.extend(field_changes(old_items.get(key, _MISSING), new_items.get(key, _MISSING), f"{path}[{key}]"))
    if not changes and [k for k in left if k in new_items] != [k for k in right if k in old_items]:
        changes.append({"path": f"{path} (order)", "from": left, "to": right})
    return changes


_KIND_ORDER = {"Namespace": 0, "PriorityClass": 1, "ClusterRole": 2}


def object_changes(before: Iterable[KubeObject], after: Iterable[KubeObject]) -> list[ObjectChange]:
    """Objects added, removed and changed (with their field changes), by identity.

    >>> ns = lambda labels: {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": labels}}
    >>> object_changes([ns({"x": "1"})], [ns({"x": "2"})])[0]["fields"]
    [{'path': 'metadata.labels.x', 'from': '1', 'to': '2'}]
    """
    old = {object_id(o): o for o in before}
    new = {object_id(o): o for o in after}
    changes: list[ObjectChange] = []
    def order(key: str) -> tuple:
        kind = (new.get(key) or old[key])["kind"]
        return (_KIND_ORDER.get(kind, 9), kind, key)

    for key in sorted(set(old) | set(new), key=order):
        obj = new.get(key) or old[key]
        entry = {
            "id": key,
            "kind": obj["kind"],
            "namespace": obj["metadata"].get("namespace"),
            "name": obj["metadata"]["name"],
        }
        if key not in old:
            changes.append({**entry, "change": "added", "fields": []})
        elif key not in new:
            changes.append({**entry, "change": "removed", "fields": []})
        else:
            fields = field_changes(old[key], new[key])
            if fields:
                changes.append({**entry, "change": "changed", "fields": fields})
    return changes




def resource_quotas(objects: Mapping[str, list[KubeObject]]) -> dict[tuple[str, str], tuple[str, Mapping[str, object]]]:
    """(namespace, ResourceQuota name) -> (owning tenant, spec.hard) for every tenant's ResourceQuota.

    >>> resource_quotas({"a": [{"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "a"},
    ...     "spec": {"hard": {"pods": "5"}}}]})
    {('a', 'q'): ('a', {'pods': '5'})}
    """
    return {
        (obj["metadata"]["namespace"], obj["metadata"]["name"]): (owner, (obj.get("spec") or {}).get("hard") or {})
        for owner, items in objects.items() if owner != PLATFORM
        for obj in items if obj.get("kind") == "ResourceQuota" and obj["metadata"].get("namespace")
    }


def quota_amount(value: object) -> Quantity | None:
    """A quota value as a Quantity, or None when it is not one.

    >>> quota_amount("8") == Quantity.parse(8), quota_amount("eight")
    (True, None)
    """
    try:
        return Quantity.parse(value)
    except (QuantityError, TypeError):
        return None
