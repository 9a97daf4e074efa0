"""The shape `tenants import --from` expects of each source kind's fields, checked before mapping.

A file given to the importer is input like any other: a field of the wrong type (an `owners` map
instead of a list, a quota written as a list) is refused at its line, with nothing written, rather
than crashing the importer or being read as something it is not. Only the fields the importers
read are declared; `*` stands for every list item or map value.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..spec.yaml_source import yaml_kind
from .importing import Refusal

_TEXT = (str,)
_AMOUNT = (str, int, Decimal, float)
_SUBJECTS = (((), list), (("*",), dict), (("*", "kind"), _TEXT), (("*", "name"), _TEXT))
_BINDINGS = (((), list), (("*",), dict), (("*", "clusterRoleName"), _TEXT),
             *((("*", "subjects", *p), t) for p, t in _SUBJECTS))
_SELECTOR = (((), dict), (("matchLabels",), dict), (("matchLabels", "*"), _TEXT), (("matchExpressions",), list),
             (("matchExpressions", "*"), dict), (("matchExpressions", "*", "key"), _TEXT),
             (("matchExpressions", "*", "operator"), _TEXT), (("matchExpressions", "*", "values"), list),
             (("matchExpressions", "*", "values", "*"), _TEXT))
_LIMITS = (((), list), (("*",), dict), (("*", "type"), _TEXT), (("*", "*"), (dict, str)), (("*", "*", "*"), _AMOUNT))


def _under(prefix: tuple, shapes) -> tuple:
    return tuple(((*prefix, *path), kinds) for path, kinds in shapes)


_METADATA = ((("metadata",), dict), (("metadata", "name"), _TEXT), (("metadata", "namespace"), _TEXT),
             (("metadata", "labels"), dict), (("metadata", "labels", "*"), _TEXT),
             (("metadata", "annotations"), dict), (("metadata", "annotations", "*"), _TEXT), (("spec",), dict), (("status",), dict))

# (group, kind) -> (required paths, (path, allowed types) of every field the importer reads)
SHAPES: dict[tuple[str, str], tuple[tuple[tuple, ...], tuple]] = {
    ("capsule.clastix.io", "Tenant"): ((("metadata", "name"),), (
        *_METADATA,
        *_under(("spec", "owners"), _SUBJECTS),
        *_under(("spec", "additionalRoleBindings"), _BINDINGS),
        (("spec", "rules"), list), (("spec", "rules", "*"), dict), (("spec", "rules", "*", "namespaceSelector"), dict),
        (("spec", "rules", "*", "permissions"), dict), *_under(("spec", "rules", "*", "permissions", "bindings"), _BINDINGS),
        (("spec", "rules", "*", "quota"), list), (("spec", "rules", "*", "quota", "*"), dict),
        (("spec", "rules", "*", "quota", "*", "hard"), dict), (("spec", "rules", "*", "quota", "*", "hard", "*"), _AMOUNT),
        (("spec", "resourceQuotas"), dict), (("spec", "resourceQuotas", "scope"), _TEXT), (("spec", "resourceQuotas", "items"), list),
        (("spec", "resourceQuotas", "items", "*"), dict), (("spec", "resourceQuotas", "items", "*", "hard"), dict),
        (("spec", "resourceQuotas", "items", "*", "hard", "*"), _AMOUNT),
        (("spec", "limitRanges"), dict), (("spec", "limitRanges", "items"), list), (("spec", "limitRanges", "items", "*"), dict),
        *_under(("spec", "limitRanges", "items", "*", "limits"), _LIMITS),
        (("spec", "namespaceOptions"), dict),
        (("spec", "containerRegistries"), dict), (("spec", "containerRegistries", "allowed"), list),
        (("spec", "containerRegistries", "allowed", "*"), _TEXT), (("spec", "containerRegistries", "allowedRegex"), _TEXT),
        (("spec", "nodeSelector"), dict), (("spec", "nodeSelector", "*"), _TEXT),
        (("status", "namespaces"), list), (("status", "namespaces", "*"), _TEXT),
    )),
    ("kubeflow.org", "Profile"): ((("metadata", "name"),), (
        *_METADATA, (("spec", "owner"), dict), (("spec", "owner", "kind"), _TEXT), (("spec", "owner", "name"), _TEXT),
        (("spec", "resourceQuotaSpec"), dict), (("spec", "resourceQuotaSpec", "hard"), dict),
        (("spec", "resourceQuotaSpec", "hard", "*"), _AMOUNT), (("spec", "plugins"), list), (("spec", "plugins", "*"), dict),
    )),
    ("kueue.x-k8s.io", "LocalQueue"): ((("metadata", "name"), ("metadata", "namespace"), ("spec", "clusterQueue")), (
        *_METADATA, (("spec", "clusterQueue"), _TEXT),
    )),
    ("kueue.x-k8s.io", "ClusterQueue"): ((("metadata", "name"),), (
        *_METADATA, *_under(("spec", "namespaceSelector"), _SELECTOR),
        (("spec", "resourceGroups"), list), (("spec", "resourceGroups", "*"), dict), (("spec", "resourceGroups", "*", "flavors"), list),
        (("spec", "resourceGroups", "*", "flavors", "*"), dict), (("spec", "resourceGroups", "*", "flavors", "*", "name"), _TEXT),
        (("spec", "resourceGroups", "*", "flavors", "*", "resources"), list),
        (("spec", "resourceGroups", "*", "flavors", "*", "resources", "*"), dict),
        (("spec", "resourceGroups", "*", "flavors", "*", "resources", "*", "name"), _TEXT),
        *((("spec", "resourceGroups", "*", "flavors", "*", "resources", "*", key), _AMOUNT)
          for key in ("nominalQuota", "borrowingLimit", "lendingLimit")),
        (("spec", "cohort"), _TEXT), (("spec", "cohortName"), _TEXT), (("spec", "fairSharing"), dict),
    )),
    ("kueue.x-k8s.io", "ResourceFlavor"): ((("metadata", "name"),), (
        *_METADATA, (("spec", "nodeLabels"), dict), (("spec", "nodeLabels", "*"), _TEXT),
    )),
    ("", "Namespace"): ((("metadata", "name"),), _METADATA),
}


def _values(data: Any, pattern: tuple, at: tuple = ()):
    """(path, value) of every value `pattern` names in `data` (`*`: every item or value)."""
    if not pattern:
        yield at, data
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        items = enumerate(data) if isinstance(data, list) else data.items() if isinstance(data, dict) else ()
    else:
        items = [(head, data[head])] if isinstance(data, dict) and head in data else []
    for key, value in items:
        yield from _values(value, rest, (*at, key))


def shape_refusals(data: Any, group: str, kind: str) -> list[Refusal]:
    """Fields of a source document that are missing or not of the type the importer reads (empty: fine).

    >>> [r.message for r in shape_refusals({"metadata": {"name": "a"}, "spec": {"owners": {"name": "x"}}},
    ...                                    "capsule.clastix.io", "Tenant")]
    ['must be a list, not a map']
    """
    if not isinstance(data, dict):
        return [Refusal((), f"a document must be a map, not {_kind_name(data)}")]
    required, fields = SHAPES.get((group, kind), ((), ()))
    out = []
    for pattern, kinds in fields:
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        for path, value in _values(data, pattern):
            if any(path[:len(r.path)] == r.path for r in out):
                continue  # below a field already refused
            if value is not None and not (isinstance(value, kinds) and not isinstance(value, bool)):
                wanted = " or ".join(dict.fromkeys(_TYPE_NAMES[k] for k in kinds))
                out.append(Refusal(path, f"must be {wanted}, not {_kind_name(value)}"))
    for path in required if not out else ():
        if [v for _, v in _values(data, path)] in ([], [None], [""]):
            out.append(Refusal(path, f"a {kind} needs {'.'.join(path)}"))
    return out


_TYPE_NAMES = {str: "a string", int: "a number", Decimal: "a number", float: "a number", dict: "a map", list: "a list"}


def _kind_name(value: Any) -> str:
    return "a map" if isinstance(value, dict) else yaml_kind(value)
