"""Objects the API server would refuse for their size, found offline (`tenants validate`).

A ValidatingAdmissionPolicy's CEL expressions are parsed by cel-go, whose parser refuses an
expression of more than 100,000 code points (github.com/google/cel-go parser/parser.go, the default
`expressionSizeCodePointLimit`, which the API server keeps): the server answers 422 "expression code
point size exceeds limit" (tests/e2e/test_object_limits.py shows it). A tenant's registries are
inlined in its image policy's expressions, so some 2,000 registries are enough.

The API server stores each object in one etcd request, and etcd refuses a request above its
`--max-request-bytes` (go.etcd.io/etcd/server/v3 embed.DefaultMaxRequestBytes = 1.5 MiB); the
API server's own body limit is larger (k8s.io/apiserver pkg/server/config.go MaxRequestBodyBytes
= 3 MiB). A tenant's lists are copied into its objects, some several times (its registries are
inlined in its image policy's CEL and in its messages; its hosts in its TenantGrant), so a list
that fits the 1 MiB a tenant file may hold can still make an object the server refuses at `up`,
after the other objects were applied. Here each object of such a tenant is measured as JSON (what
a custom resource is stored as; built-in kinds are stored as protobuf, a little smaller) and one
over the limit is an error at the tenant's longest list, the line to shorten.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from ..fleet.environment import Environment
from ..manifests.build import tenant_objects
from ..spec.problems import Problem

ETCD_MAX_REQUEST_BYTES = 1_572_864   # 1.5 MiB: etcd's default --max-request-bytes
# What the API server adds before it stores an object (uid, timestamps, managedFields, the key).
HEADROOM_BYTES = 65_536
MAX_OBJECT_BYTES = ETCD_MAX_REQUEST_BYTES - HEADROOM_BYTES
CEL_EXPRESSION_CODE_POINTS = 100_000   # cel-go's parser limit, per expression
# A tenant whose file's data is this small cannot build an expression or object near the limits
# (no list is copied more than a few times into one), so its objects are not built here.
_WORTH_MEASURING = CEL_EXPRESSION_CODE_POINTS // 5
_EXPRESSION_KEYS = ("expression", "messageExpression")


def json_size(obj: Any) -> int:
    """Bytes of `obj` as compact JSON.

    >>> json_size({"a": [1, 2]})
    11
    """
    return len(json.dumps(obj, separators=(",", ":"), default=str))


def _lists(data: Any, path: tuple = ()) -> Iterator[tuple[tuple, int]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _lists(value, (*path, key))
    elif isinstance(data, list):
        yield path, json_size(data)


def longest_expression(obj: Any) -> tuple[int, str]:
    """(code points, where) of the longest CEL expression in an object (0 when it has none).

    >>> longest_expression({"spec": {"validations": [{"expression": "true"}, {"messageExpression": "'a' + 'b'"}]}})
    (9, 'spec.validations[1].messageExpression')
    """
    found = [(0, "")]

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in _EXPRESSION_KEYS and isinstance(item, str):
                    found.append((len(item), f"{where}.{key}".lstrip(".")))
                else:
                    walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{where}[{index}]")

    walk(obj, "")
    return max(found)


def _refusal(obj: dict) -> str | None:
    """Why the API server would refuse the object for its size, or None."""
    name = f"{obj['kind']} {obj['metadata']['name']}"
    if obj["kind"] == "ValidatingAdmissionPolicy":
        points, where = longest_expression(obj)
        if points > CEL_EXPRESSION_CODE_POINTS:
            return (f"makes the CEL expression {where} of the tenant's {name} {points:,} code points long; the API server's "
                    f"CEL parser takes at most {CEL_EXPRESSION_CODE_POINTS:,}")
    size = json_size(obj)
    if size > MAX_OBJECT_BYTES:
        return (f"makes the tenant's {name} {size:,} bytes, more than the API server can store ({MAX_OBJECT_BYTES:,}: "
                f"etcd takes at most {ETCD_MAX_REQUEST_BYTES:,} bytes a request)")
    return None


def object_size_problems(environment: Environment) -> list[Problem]:
    """An error per tenant whose objects the API server would refuse for their size (a CEL
    expression over the parser's limit, an object over etcd's), at the tenant's longest list.

    >>> object_size_problems(prod)
    []
    """
    problems = []
    for loaded in environment.tenants:
        if json_size(loaded.doc.data) < _WORTH_MEASURING:
            continue
        refusals = [why for obj in tenant_objects(loaded.spec, environment.view(loaded.spec)) if (why := _refusal(obj))]
        if not refusals:
            continue
        path, _ = max(_lists(loaded.doc.data), key=lambda pair: pair[1], default=((), 0))
        problems.append(loaded.doc.problem(path, (
            f"{refusals[0]}, so `up` would be refused there; shorten this list (a common prefix covers many "
            f"entries), or split the tenant")))
    return problems
