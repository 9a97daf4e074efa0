"""Replay a ValidatingAdmissionPolicy on two independent CEL engines (cel: Rust cel-interpreter,
celpy: cel-python), the way the API server runs it: matchConditions, variables in order, then
every validation, a failed one reporting its messageExpression.

`authorizer` has no equivalent offline, so a test passes the value of a variable that uses it
(e.g. `operator`) in `given`; a policy with `paramKind` reads the object its binding names, which
a test passes as `params`. Of the Kubernetes CEL libraries both engines get `<list>.sum()` (of
ints), `<list>.join(separator)` (of strings) and `<string>.find(regex)` (the first match, or ""),
which neither ships.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import cel
import celpy


def _find(text: str, regex: str) -> str:
    """Kubernetes CEL's `find`: the first match of `regex` in `text`, "" when none."""
    match = re.search(regex, text)
    return match.group(0) if match else ""


class RustCel:
    name = "cel"

    @staticmethod
    @lru_cache(maxsize=None)
    def compile(expression: str):
        return cel.compile(expression)

    def run(self, expression: str, activation: dict[str, Any]) -> Any:
        context = cel.Context()
        context.add_function("sum", lambda values: sum(values))
        context.add_function("join", lambda values, separator: separator.join(values))
        context.add_function("find", _find)
        context.update(activation)
        return self.compile(expression).execute(context)

    def variables(self, values: dict[str, Any]) -> Any:
        return dict(values)


class CelPy:
    name = "celpy"
    _env = celpy.Environment()

    @classmethod
    @lru_cache(maxsize=None)
    def compile(cls, expression: str):
        return cls._env.program(cls._env.compile(expression),
                                functions={"sum": lambda values: celpy.celtypes.IntType(sum(values)),
                                           "join": lambda values, separator: celpy.celtypes.StringType(separator.join(values)),
                                           "find": lambda text, regex: celpy.celtypes.StringType(_find(text, regex))})

    def run(self, expression: str, activation: dict[str, Any]) -> Any:
        converted = {k: v if k == "variables" else celpy.json_to_cel(v) for k, v in activation.items()}
        result = self.compile(expression).evaluate(converted)
        if isinstance(result, celpy.CELEvalError):
            raise RuntimeError(f"{expression}: {result}")
        return result

    def variables(self, values: dict[str, Any]) -> Any:
        # A value a test passes in `given` is plain Python; celpy's operators want its own types.
        return celpy.celtypes.MapType({celpy.celtypes.StringType(k): celpy.json_to_cel(v) if type(v) is bool else v
                                       for k, v in values.items()})


ENGINES = [RustCel(), CelPy()]


def admit(engine, policy: dict, obj: dict | None, *, resource: str, operation: str = "CREATE", old: dict | None = None,
          user: str = "alice", namespace: dict | None = None, given: dict[str, Any] | None = None,
          params: dict | None = None) -> list[str]:
    """Messages of the validations `obj` fails (empty: admitted); `params` is the binding's parameter object."""
    spec = policy["spec"]
    activation: dict[str, Any] = {
        "object": obj, "oldObject": old,
        "request": {"operation": operation, "resource": {"resource": resource}, "userInfo": {"username": user},
                    "kind": {"kind": (obj or old or {}).get("kind", "")},
                    "namespace": (namespace or {"metadata": {"name": "ns"}})["metadata"]["name"]},
        "namespaceObject": namespace or {"metadata": {"name": "ns"}},
        "params": params,
    }
    for condition in spec.get("matchConditions", []):
        if not engine.run(condition["expression"], activation):
            return []
    values: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        if given and variable["name"] in given:
            values[variable["name"]] = given[variable["name"]]
            continue
        values[variable["name"]] = engine.run(variable["expression"], {**activation, "variables": engine.variables(values)})
    activation["variables"] = engine.variables(values)
    messages = []
    for validation in spec["validations"]:
        if not engine.run(validation["expression"], activation):
            if "messageExpression" in validation:
                messages.append(str(engine.run(validation["messageExpression"], activation)))
            else:
                messages.append(validation["message"])
    return messages
