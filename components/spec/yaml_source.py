"""Safe YAML loading that remembers where every value came from.

PyYAML's `safe_load` silently keeps the last of two duplicate keys and forgets line numbers. We
compose the node tree with the safe (C when available) loader and build plain Python data
ourselves, so that we can reject duplicate keys, bound alias expansion ("billion laughs") and
nesting, refuse every non-standard tag (no `!!python/...` object is ever constructed), and keep a
map from each value's path to its line and column for error messages.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Callable

import yaml

from .problems import InvalidInput, Problem

try:
    _BaseLoader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _BaseLoader = yaml.SafeLoader

_TAGS: dict[tuple, str] = {}   # (node kind, plain text, implicit) -> resolved tag


class _Loader(_BaseLoader):
    """The safe loader with its tag resolution memoised: the C parser asks PyYAML's resolver, in
    Python, once per node (130 times per tenant file), and the answer depends on the text alone
    (no path resolvers are registered)."""

    def resolve(self, kind, value, implicit):
        key = (kind, value, implicit)
        tag = _TAGS.get(key)
        if tag is None:
            if len(_TAGS) >= 100_000:
                _TAGS.clear()
            tag = _TAGS[key] = super().resolve(kind, value, implicit)
        return tag

MAX_FILE_BYTES = 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64

Path_ = tuple  # a path into the data: keys and list indexes


@dataclass
class SourceDocument:
    """Plain data from one YAML document plus where each path in it was written.

    >>> doc = parse_yaml("a:\\n  b: 1\\n", "x.yaml")
    >>> doc.data, doc.position(("a", "b"))
    ({'a': {'b': 1}}, (2, 3))
    """

    file: str
    data: Any
    positions: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    # Paths whose values came from elsewhere in the file (environment overrides) -> the written path.
    origins: dict[Path_, Path_] = field(default_factory=dict)
    # The stack whose override is merged in (environments.<stack>); its problems name it.
    stack: str | None = None

    def field_name(self, path: Path_) -> str:
        """The dotted name of `path` as the author wrote it (overrides keep their `environments.<env>.` prefix)."""
        path = tuple(path)
        # Name it after the same written part that `position` points at: when an override merges
        # into a map, the keys it does not mention still come from the base file.
        for cut in range(len(path), 0, -1):
            if path[:cut] in self.positions:
                origin = self.origins.get(path[:cut])
                return dotted(origin + path[cut:]) if origin is not None else dotted(path)
        return dotted(path)

    def position(self, path: Path_) -> tuple[int, int]:
        """Line and column of the deepest part of `path` that exists in the file."""
        path = tuple(path)
        while path and path not in self.positions:
            path = path[:-1]
        # Data that was never a file (plain dicts, Pulumi config) has no lines to point at.
        return self.positions.get(path, (1, 1) if self.positions else (0, 0))

    def problem(self, path: Path_, message: str, *, severity: str = "error", field_name: str | None = None) -> Problem:
        line, column = self.position(path)
        name = field_name if field_name is not None else self.field_name(path)
        return Problem(self.file, line, column, name, message, severity, self.stack or "")  # type: ignore[arg-type]


_PLAIN = re.compile(r"^[A-Za-z0-9_./@+-]([A-Za-z0-9_./@+ -]*[A-Za-z0-9_./@+-])?$")


def yaml_text(value: Any, *, quote: bool = True) -> str:
    """A value as a user writes it in YAML, for messages and diffs: `null`, `true`, `[h100, l4]`,
    `{a100: 4}`; a string alone is quoted (`'h100'`, as messages quote what the user wrote)
    unless `quote` is false; strings inside lists and maps are quoted only where YAML needs it.

    >>> yaml_text(None), yaml_text(False), yaml_text(["h100", "l4"]), yaml_text({"gpu": {"a100": 4}}), yaml_text("x")
    ('null', 'false', '[h100, l4]', '{gpu: {a100: 4}}', "'x'")
    >>> yaml_text(["yes", "a b", "", "1"])
    "['yes', a b, '', '1']"
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, float):
        return {float("inf"): ".inf", float("-inf"): "-.inf"}.get(value, ".nan" if value != value else repr(value))
    if isinstance(value, str):
        return repr(value) if quote else _flow_string(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow_string(str(k))}: {yaml_text(v, quote=False)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return "[" + ", ".join(yaml_text(v, quote=False) for v in items) + "]"
    return str(value)


def _flow_string(text: str) -> str:
    """A string inside a flow list or map: plain when YAML reads it back as the same string."""
    if _PLAIN.match(text) and not text.startswith(("-", "@")):
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    return repr(text)


def yaml_kind(value: Any) -> str:
    """What YAML read, in its words: `a string`, `a number`, `null`, ...

    >>> yaml_kind(None), yaml_kind(4300), yaml_kind([1])
    ('null', 'a number', 'a list')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float, Decimal)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def dotted(path: Path_) -> str:
    """`('quota', 'gpu', 0)` -> `quota.gpu[0]`.

    >>> dotted(("quota", "gpu", 0))
    'quota.gpu[0]'
    """
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class _Builder:
    def __init__(self, file: str) -> None:
        self.file = file
        self.nodes = 0
        self.positions: dict[Path_, tuple[int, int]] = {}
        self.problems: list[Problem] = []
        self.constructor = yaml.SafeLoader("")  # used only to resolve scalar values

    def fail(self, node: yaml.Node, field_name: str, message: str) -> None:
        self.problems.append(
            Problem(self.file, node.start_mark.line + 1, node.start_mark.column + 1, field_name, message)
        )

    def build(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooLarge(node, f"the document expands to more than {MAX_NODES} values (YAML aliases?); write the "
                            f"repeated values out instead of nesting anchors and aliases (&a, *a)")
        if depth > MAX_DEPTH:
            raise _TooLarge(node, f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            return self.build_mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != "tag:yaml.org,2002:seq":
                self.fail(node, dotted(path), f"unsupported YAML tag {_tag_text(node.tag)}; tenant and stack files are plain data: write the value itself")
                return None
            items = []
            for index, child in enumerate(node.value):
                self.positions[path + (index,)] = (child.start_mark.line + 1, child.start_mark.column + 1)
                items.append(self.build(child, path + (index,), depth + 1))
            return items
        return self.build_scalar(node, path)

    def build_mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict:
        if node.tag not in ("tag:yaml.org,2002:map",):
            self.fail(node, dotted(path), f"unsupported YAML tag {_tag_text(node.tag)}; tenant and stack files are plain data: write the value itself")
            return {}
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self.fail(key_node, dotted(path), "merge keys (<<) are not supported; write the fields out")
                continue
            key = self.build_scalar(key_node, path) if isinstance(key_node, yaml.ScalarNode) else None
            if isinstance(key, bool) or key is None and isinstance(key_node, yaml.ScalarNode):
                self.fail(
                    key_node,
                    dotted(path),
                    f"key '{key_node.value}' is read as {'a boolean' if isinstance(key, bool) else 'null'} by YAML; quote it",
                )
                continue
            if not isinstance(key, (str, int)):
                self.fail(key_node, dotted(path), "keys must be plain strings")
                continue
            key = str(key)
            if key in result:
                first = self.positions.get(path + (key,), (0, 0))[0]
                self.fail(key_node, dotted(path + (key,)), f"duplicate key '{key}' (first defined on line {first}); YAML would silently keep only the last one")
                continue
            self.positions[path + (key,)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = self.build(value_node, path + (key,), depth + 1)
        return result

    def build_scalar(self, node: yaml.Node, path: Path_) -> Any:
        tag = node.tag
        if tag == "tag:yaml.org,2002:str":
            return node.value  # what SafeConstructor.construct_yaml_str returns, without its bookkeeping
        if tag == "tag:yaml.org,2002:int":
            text = node.value
            if text.isascii() and text.isdigit() and (text[0] != "0" or text == "0"):
                return int(text)  # what construct_yaml_int returns for plain decimals (not 0-led: octal), ~10x faster
        if tag == "tag:yaml.org,2002:float":
            text = node.value.replace("_", "")
            try:
                value = Decimal(text)
            except InvalidOperation:
                return self.constructor.construct_object(node)
            return value if value.is_finite() else float(value)
        if tag in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"):
            return node.value
        if tag not in _SCALAR_TAGS:
            self.fail(node, dotted(path), f"unsupported YAML tag {_tag_text(tag)}; tenant and stack files are plain data: write the value itself")
            return None
        try:
            return self.constructor.construct_object(node)
        except yaml.YAMLError as err:
            self.fail(node, dotted(path), f"cannot read value: {getattr(err, 'problem', err)}")
            return None


_SCALAR_TAGS = {f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null")}


def _short_tag(tag: str) -> str:
    return tag.replace("tag:yaml.org,2002:", "!!")


class _TooLarge(Exception):
    def __init__(self, node: yaml.Node, message: str) -> None:
        super().__init__(message)
        self.node = node


def parse_yaml(text: str, file: str) -> SourceDocument:
    """Parse one YAML document into plain data with positions; raise `InvalidInput` on any problem.

    >>> parse_yaml("a: 1\\na: 2\\n", "x.yaml")
    Traceback (most recent call last):
    ...
    components.spec.problems.InvalidInput: x.yaml:2:1: a: duplicate key 'a' (first defined on line 1); YAML would silently keep only the last one
    """
    root = _composed(text, file, lambda loader: loader.get_single_node())
    if root is None:
        raise InvalidInput([Problem(file, 1, 1, "", "the file is empty; write its content, or delete the file")])
    return _document(root, file)


def parse_yaml_documents(text: str, file: str) -> list[SourceDocument]:
    """Every document of a multi-document YAML file (`---` between them), each with its positions;
    empty documents are left out; raise `InvalidInput` with every problem of every document.

    >>> [(d.data, d.position(("b",))) for d in parse_yaml_documents("a: 1\\n---\\nb: 2\\n", "x.yaml")]
    [({'a': 1}, (1, 1)), ({'b': 2}, (3, 1))]
    """

    def every(loader) -> list:
        nodes = []
        while loader.check_node():
            nodes.append(loader.get_node())
        return nodes

    documents, problems = [], []
    for root in _composed(text, file, every):
        if isinstance(root, yaml.ScalarNode) and root.tag == "tag:yaml.org,2002:null":
            continue
        try:
            documents.append(_document(root, file))
        except InvalidInput as err:
            problems.extend(err.problems)
    if problems:
        raise InvalidInput(problems)
    return documents


def _composed(text: str, file: str, compose):
    """`compose(loader)` over `text` (a byte-order mark left out), every YAML syntax error as a located problem."""
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        loader = _Loader(text)
        try:
            return compose(loader)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = "invalid YAML: " + " ".join(p for p in (err.context, err.problem) if p)
        # libyaml says "found character that cannot start any token" without naming the tab.
        if (mark is not None and _indented_with_tab(text, mark.line)) or "tab" in (err.problem or "") + (err.context or ""):
            message += " (YAML does not allow tabs for indentation; use spaces)"
        elif "flow" in (err.context or ""):
            message += " (close every '[' and '{' on the line where it opens, or write the list or mapping as block lines)"
        raise InvalidInput([Problem(file, line, column, "", message)]) from None
    except yaml.YAMLError as err:
        raise InvalidInput([Problem(file, 1, 1, "", f"invalid YAML: {err}")]) from None
    except RecursionError:
        raise InvalidInput([Problem(file, 1, 1, "", f"invalid YAML: nesting too deep (more than {MAX_DEPTH} levels)")]) from None


def _document(root: yaml.Node, file: str) -> SourceDocument:
    builder = _Builder(file)
    try:
        data = builder.build(root, (), 0)
    except _TooLarge as err:
        raise InvalidInput(
            [Problem(file, err.node.start_mark.line + 1, err.node.start_mark.column + 1, "", str(err))]
        ) from None
    except RecursionError:
        raise InvalidInput([Problem(file, 1, 1, "", "nesting too deep")]) from None
    if builder.problems:
        raise InvalidInput(builder.problems)
    builder.positions[()] = (root.start_mark.line + 1, root.start_mark.column + 1)
    return SourceDocument(file, data, builder.positions)


def _indented_with_tab(text: str, line_index: int) -> bool:
    lines = text.split("\n")
    if not 0 <= line_index < len(lines):
        return False
    line = lines[line_index]
    return "\t" in line[: len(line) - len(line.lstrip(" \t"))]


def _tag_text(tag: str) -> str:
    """`tag:yaml.org,2002:python/object` -> `!!python/object`, as people write it."""
    prefix = "tag:yaml.org,2002:"
    return "!!" + tag[len(prefix):] if tag.startswith(prefix) else tag


def read_text(path: Path, display: str, root: Path | None = None) -> str:
    """Read a regular, UTF-8 file no larger than MAX_FILE_BYTES, that stays inside `root`.

    Raises `InvalidInput` with a one-line explanation for anything else.

    >>> read_text(root / "tenants" / "eval.yaml", "tenants/eval.yaml", root).splitlines()[0]
    '# yaml-language-server: $schema=../docs/schema/tenant.schema.json'
    >>> read_text(root / "tenants", "tenants", root)
    Traceback (most recent call last):
    ...
    components.spec.problems.InvalidInput: tenants: is a directory, not a file; remove it or rename it so it does not end in .yaml
    """
    def fail(message: str) -> InvalidInput:
        return InvalidInput([Problem(display, 0, 0, "", message)])

    info = _followed_stat(path, root, fail)
    if stat.S_ISDIR(info.st_mode):
        raise fail("is a directory, not a file; remove it or rename it so it does not end in .yaml")
    if not stat.S_ISREG(info.st_mode):
        raise fail("is not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise fail(f"is {info.st_size} bytes; a tenant or stack file may be at most {MAX_FILE_BYTES} bytes")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise fail(f"cannot read: {err.strerror}") from None
    return _utf8_text(raw, display)


def _followed_stat(path: Path, root: Path | None, fail: Callable[[str], InvalidInput]) -> os.stat_result:
    """The file's stat, through a symbolic link only if it stays inside `root`."""
    try:
        info = os.lstat(path)
    except OSError as err:
        raise fail(f"cannot read: {err.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = path.resolve()
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
            raise fail("is a symbolic link that cannot be followed (a loop?)") from None
        if root is not None and not target.is_relative_to(root.resolve()):
            raise fail(f"is a symbolic link to {target}, outside {root}; tenant and stack files must live in the directory itself")
        try:
            info = os.stat(path)
        except OSError as err:
            raise fail(f"cannot read: {err.strerror}") from None
    return info


def _utf8_text(raw: bytes, display: str) -> str:
    try:
        return raw.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise InvalidInput(
            [Problem(display, line, column, "", f"is not UTF-8 (byte 0x{raw[err.start]:02x}); save the file as UTF-8")]
        ) from None
