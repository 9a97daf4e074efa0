"""Turn pydantic validation errors into located, actionable problems."""

from __future__ import annotations

import re
import typing
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from .base import PATTERN_WORDS
from .hints import closest
from .problems import Problem
from .yaml_source import SourceDocument, yaml_kind, yaml_text


def _data_path(data: Any, loc: tuple) -> tuple:
    """Keep only the parts of a pydantic `loc` that walk the data (drops union-member tags)."""
    path: list = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and part not in node and part == loc[-1]:
            path.append(part)  # a missing or unknown field: name it
            break
    return tuple(path)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def _model_at(model: type[BaseModel], path: tuple) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in path:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        field = next(
            (f for name, f in current.model_fields.items() if part in (name, f.alias)),
            None,
        )
        if field is None:
            # A dict key (e.g. a GPU class name): stay on the value model of the dict.
            continue
        models = _models_in(field.annotation)
        current = models[0] if models else None
    return current


def field_names(model: type[BaseModel]) -> list[str]:
    """The names a model's fields have in files (aliases such as `displayName`).

    >>> from components.spec.tenant import Contact
    >>> field_names(Contact)
    ['name', 'email', 'chat']
    """
    return [f.alias or name for name, f in model.model_fields.items()]


@dataclass(frozen=True)
class _Failed:
    """One pydantic error, with what the messages show of it."""

    error: dict
    root_model: type[BaseModel]
    path: tuple

    @property
    def ctx(self) -> dict:
        return self.error.get("ctx") or {}

    @property
    def got(self) -> Any:
        return self.error.get("input")

    @property
    def shown(self) -> str:
        return yaml_text(self.got)


def _message(error: dict, root_model: type[BaseModel], path: tuple) -> str:
    kind = error["type"]
    message = _MESSAGES.get("date_" if kind.startswith("date_") else kind)
    return message(_Failed(error, root_model, path)) if message else error["msg"]


def _unknown_field(f: _Failed) -> str:
    parent = _model_at(f.root_model, f.path[:-1])
    known = field_names(parent) if parent else []
    close = closest(str(f.path[-1]), known)
    hint = f"; did you mean '{close}'?" if close else (f"; known fields: {', '.join(known)}" if known else "")
    return f"unknown field{hint}"


_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
_BOUND_FIX = {"greater_than_equal": "{bound} or more", "greater_than": "more than {bound}", "less_than_equal": "{bound} or less",
              "less_than": "less than {bound}"}


def _out_of_bounds(f: _Failed) -> str:
    bound = next(iter(f.ctx.values())) if f.ctx else "?"
    return f"must be {_BOUNDS[f.error['type']]} {bound} (got {f.shown}); write {_BOUND_FIX[f.error['type']].format(bound=bound)}"


def _pattern_mismatch(f: _Failed) -> str:
    foreign = [c for c in str(f.got) if ord(c) > 127]
    if foreign:
        names = ", ".join(f"'{c}' (U+{ord(c):04X} {unicodedata.name(c, 'unknown')})" for c in dict.fromkeys(foreign))
        return f"{f.shown} contains non-ASCII character(s) {names}; names must be plain ASCII (look-alike letters are not allowed)"
    words = PATTERN_WORDS.get(f.ctx.get("pattern", ""))
    if words is None:
        return f"{f.shown} is not valid here (must match {f.ctx.get('pattern')})"
    bare = re.sub(r"^[a-z]+://|[:/].*$", "", str(f.got))   # a URL where a name belongs: its host alone
    fix = f"; write {yaml_text(bare)}" if bare != f.got and re.fullmatch(f.ctx["pattern"], bare) else ""
    return f"{f.shown} is not {words}{fix}"


def _not_whole(f: _Failed) -> str:
    number = re.match(r"^\s*([0-9]+)\s*[A-Za-z]", f.got) if isinstance(f.got, str) else None
    if number:  # "4 GPUs": the count is there, the word is not allowed
        return f"must be a whole number (got {f.shown}); write just {number[1]}"
    return f"must be a whole number (got {f.shown}); write a count without quotes or units, e.g. 4"


def _not_a_string(f: _Failed) -> str:
    got, shown = f.got, f.shown
    if isinstance(got, bool):
        return (f"must be a string (got {shown}: YAML reads unquoted yes/no, on/off and true/false as "
                f"booleans); quote it, e.g. \"{'yes' if got else 'no'}\"")
    if isinstance(got, (int, float, Decimal)):
        return f"must be a string (got the number {shown}); quote it: \"{shown}\""
    return f"must be a string (got {shown})"


def _not_a_mapping(f: _Failed) -> str:
    got = f"{yaml_kind(f.got)}: {f.shown}" if f.got is not None else "null"
    return f"must be a mapping of fields (got {got}); write its fields as `key: value` lines indented under it"


def _not_a_list(f: _Failed) -> str:
    got = f"{yaml_kind(f.got)}: {f.shown}" if f.got is not None else "null"
    example = f"[{yaml_text(f.got, quote=False)}]" if isinstance(f.got, (str, int)) and not isinstance(f.got, bool) else "[a, b]"
    return f"must be a list (got {got}); write it in brackets, e.g. {example}, or one `- item` per line"


# Values people write for a field that mean something the format says another way: (field, value) -> how.
_LITERAL_HINTS: dict[tuple[str, str], str] = {
    ("lifecycle", "expired"): ("expiry is not a lifecycle: keep `lifecycle: active` and set `expires: YYYY-MM-DD` "
                               "(its last active day, UTC); after it the tenant is suspended (no new pods, nothing deleted), and "
                               "`tenants validate` warns 30 days ahead"),
    ("lifecycle", "deleted"): "to delete a tenant write `lifecycle: decommissioned` with `decommission: {confirm: <its name>}`",
}


def _not_a_choice(f: _Failed) -> str:
    hint = _LITERAL_HINTS.get((str(f.path[-1]) if f.path else "", str(f.got)))
    return f"{f.shown} is not allowed; " + (hint if hint else f"write one of {f.ctx.get('expected')}")


# The message of each pydantic error type ("date_": every date_* type); any other type keeps pydantic's.
_MESSAGES: dict[str, Callable[[_Failed], str]] = {
    "extra_forbidden": _unknown_field,
    "missing": lambda f: (f"required field is missing; add `{f.path[-1]}:` (docs/file-format.md says what it holds)"
                          if f.path and isinstance(f.path[-1], str) else "required field is missing"),
    **{kind: _out_of_bounds for kind in _BOUNDS},
    "string_pattern_mismatch": _pattern_mismatch,
    "string_too_long": lambda f: f"{f.shown} is too long (at most {f.ctx.get('max_length')} characters); use a shorter one",
    "string_too_short": lambda f: "must not be empty",
    "literal_error": _not_a_choice,
    **{kind: _not_whole for kind in ("int_type", "int_parsing", "int_from_float")},
    "string_type": _not_a_string,
    **{kind: _not_a_mapping for kind in ("dict_type", "model_type", "model_attributes_type")},
    "list_type": _not_a_list,
    **{kind: (lambda f: f"must be true or false (got {f.shown}); write true or false, unquoted") for kind in ("bool_type", "bool_parsing")},
    "date_": lambda f: f"{f.shown} is not a date: write a day as YYYY-MM-DD (no time), e.g. 2027-03-31",
    "quantity": lambda f: f.error["msg"],
    "value_error": lambda f: str(f.ctx.get("error", f.error["msg"])),
}


def model_problems(error: ValidationError, doc: SourceDocument, data: Any, model: type[BaseModel], prefix: tuple = ()) -> list[Problem]:
    """Problems for every error of one pydantic validation, located in `doc`.

    `data` is what was validated and `prefix` its path inside the document (e.g. the stack config key).

    >>> from pydantic import ValidationError
    >>> from components.spec.tenant import Tenant
    >>> from components.spec.yaml_source import parse_yaml
    >>> doc = parse_yaml("kind: Tenant\\nname: Team_A\\n", "tenants/team-a.yaml")
    >>> try:
    ...     Tenant.model_validate(doc.data)
    ... except ValidationError as err:
    ...     [str(p) for p in model_problems(err, doc, doc.data, Tenant)][:2]
    ['tenants/team-a.yaml:1:1: apiVersion: required field is missing; add `apiVersion:` (docs/file-format.md says what it holds)', "tenants/team-a.yaml:2:1: name: 'Team_A' is not a DNS label: lower-case letters, digits and '-', beginning and ending with a letter or digit (e.g. team-a)"]
    """
    problems: list[Problem] = []
    seen: set[tuple] = set()
    items = error.errors(include_url=False)
    noise = _misshapen_alternatives(items, data)
    for index, item in enumerate(items):
        if index in noise:
            continue
        path = _data_path(data, tuple(item["loc"]))
        message = _message(item, model, path)
        if item["type"] == "value_error":
            path, message = _named_path(data, path, message)
        key = (path, message)
        if key in seen:
            continue
        seen.add(key)
        problems.append(doc.problem(prefix + path, message, field_name=doc.field_name(prefix + path)))
    return _collapse_union_noise(problems)


def _named_path(data: Any, path: tuple, message: str) -> tuple[tuple, str]:
    """A model validator's message that starts with the dotted path of the field it is about
    (`gpuClasses.l4: ...`, `deviceClasses.l4.gpu.acme.dev meters ...`: keys may hold dots) is
    located at that field, not at the model pydantic locates it at (#41: stack errors pointed at
    the config block); a colon after the path goes with it. One key alone is a word, not a path.

    >>> _named_path({"gpuClasses": {"l4": {}}}, (), "gpuClasses.l4: MPS and DRA cannot both share it")
    (('gpuClasses', 'l4'), 'MPS and DRA cannot both share it')
    >>> _named_path({"default": "1Gi"}, (), "default (1Gi) is above max")
    ((), 'default (1Gi) is above max')
    """
    node: Any = data
    for part in path:
        if not isinstance(node, (dict, list)):
            return path, message
        node = node[part]
    found, rest = [], message
    while isinstance(node, dict):
        keys = [k for k in node if isinstance(k, str) and rest.startswith(k) and rest[len(k):len(k) + 1] in (".", ":", " ")]
        if not keys:
            break
        key = max(keys, key=len)
        found.append(key)
        node, rest = node[key], rest[len(key):]
        if not rest.startswith("."):
            break
        rest = rest[1:]
    if len(found) < 2 or rest.startswith("."):
        return path, message
    return path + tuple(found), rest[1:].strip() if rest.startswith(":") else message


_CONTAINER_KINDS = {"dict_type", "model_type", "model_attributes_type", "list_type"}
_SCALAR_KINDS = {
    "int_type", "int_parsing", "int_from_float", "string_type", "bool_type", "bool_parsing",
    "float_type", "float_parsing", "decimal_type", "decimal_parsing", "literal_error",
}


def _misshapen_alternatives(items: list[dict], data: Any) -> set[int]:
    """Errors of union alternatives that expected another shape than the input (a mapping where a
    number was given, or the reverse), when another alternative did fit: `gpu: -1` should say
    "must be >= 0", not also "must be a mapping"."""
    groups: dict[tuple, list[int]] = {}
    inputs: dict[tuple, Any] = {}
    for index, item in enumerate(items):
        if item["type"] == "missing":
            continue  # a missing field's name is not in the data either, but it is no union member
        loc, node = tuple(item["loc"]), data
        for cut, part in enumerate(loc):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:  # a union member tag such as 'constrained-int': the union sits at loc[:cut]
                groups.setdefault(loc[:cut], []).append(index)
                inputs[loc[:cut]] = node
                break
    noise: set[int] = set()
    for prefix, members in groups.items():
        if len(members) < 2:
            continue
        container = isinstance(inputs[prefix], (dict, list))
        wrong_shape = {
            i for i in members
            if len(items[i]["loc"]) == len(prefix) + 1
            and items[i]["type"] in (_SCALAR_KINDS if container else _CONTAINER_KINDS)
        }
        # A literal mismatch (`tenants: some` where `all` or a list is expected) fits neither better.
        fitting = [i for i in members if i not in wrong_shape and items[i]["type"] != "literal_error"]
        if wrong_shape and fitting:
            noise |= wrong_shape
    return noise


def _collapse_union_noise(problems: list[Problem]) -> list[Problem]:
    by_place: dict[tuple, list[Problem]] = {}
    for problem in problems:
        by_place.setdefault((problem.line, problem.column, problem.field), []).append(problem)
    result = []
    for group in by_place.values():
        if len(group) > 1:
            messages = "; or ".join(dict.fromkeys(p.message for p in group))
            first = group[0]
            result.append(Problem(first.file, first.line, first.column, first.field, messages, first.severity, first.stack))
        else:
            result.extend(group)
    return result
