"""Block YAML of plain Kubernetes objects, byte for byte what PyYAML's C dumper writes, ~6x faster.

PyYAML's dumper spends nearly all of its time in the pure-Python representer (even with the C
emitter): about 0.3 ms per object, 9-12 s for the 41,000 objects of 1,000 tenants. `dump_objects`
writes block-style YAML of plain JSON-like data (dict, list, str, int, bool, None) itself, byte
for byte what `yaml.dump_all` with `_Dumper` (the C dumper, never writing anchors) and
`_DUMP_OPTIONS` writes:
- the style of each distinct string (plain, single- or double-quoted) is decided by PyYAML once
  (a quick check for the common plain words, one batched dump for the rest) and cached;
- long plain and single-quoted scalars are folded with libyaml's rule (break at a lone space once
  past column 120, continuation lines indented one level deeper);
- the text of a list that is the value of a key is cached by the list's repr and indentation:
  RBAC rules, selectors and ports repeat across namespaces and tenants (not a list whose first
  item holds a long string: admission rules name their tenant and never repeat);
- a document outside that domain (another value type, a multi-line string, a double-quoted string
  that would need folding) is written by PyYAML itself.
A dict or list used twice is written out twice, never as a YAML anchor and alias (which some
Kubernetes tools do not expect). tests/hardening/test_fast_yaml.py compares the two writers on
generated data and on every rendered stack.
"""

from __future__ import annotations

import marshal
import re
from typing import Any

import yaml

try:
    _CDumper = yaml.CSafeDumper
except AttributeError:  # pragma: no cover
    _CDumper = yaml.SafeDumper


class _Dumper(_CDumper):
    """The C dumper, writing shared objects in full instead of as anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_DUMP_OPTIONS = dict(sort_keys=True, default_flow_style=False, width=120, allow_unicode=True)
_WIDTH = 120
_LINE_BREAKS = frozenset("\n\r\x85\u2028\u2029")
_PRINTABLE_ASCII = re.compile(r"[ -~]+")
# What makes libyaml's emitter (analyze_scalar) refuse a printable ASCII line as a plain block
# scalar: an indicator first, "-", "?" or ":" first and then a space or nothing, a document
# marker, ": " or a final ":" anywhere, " #" anywhere.
_BLOCK_INDICATOR = re.compile(r"\A(?:---|\.\.\.|[#,\[\]{}&*!|>'\"%@`]|[-?:](?: |\Z))|:(?: |\Z)| #")
_LONE_SPACE = re.compile(r"(?<! ) (?! )")
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
_PLAIN, _SINGLE, _DOUBLE = 0, 1, 2
# Caches, each bounded so that a long-lived process does not grow without end:
# string -> (style, text as written when not folded, usable as a simple key), or None: PyYAML only.
_STYLES: dict[str, tuple[int, str, bool] | None] = {}
_STYLES_MAX = 500_000
# (indent, the list marshalled) -> the text of that list as the value of a key. Only lists written by
# the fast path are stored. marshal writes exact built-in types only and tells every value and type
# apart (True from 1, "1" from 1); equal bytes load as equal data, so a hit is never wrong (a list
# written with other sharing may miss). It is 4x faster than the repr it replaced: at 1,000 tenants
# the keys are 20 MB, three quarters of them the rules of the three tenant Roles.
_LISTS: dict[tuple[int, bytes | str], str] = {}
_LISTS_MAX = 50_000
_UNIQUE_TEXT = 80  # longer strings in a list's first dict: the list is not cached


class _NotPlainData(Exception):
    """The document holds something the fast writer leaves to PyYAML."""


def _quick_style(text: str) -> tuple[int, str, bool] | None:
    """The style of a one-line printable ASCII string (nearly every string of a Kubernetes object),
    decided as libyaml decides it, cached; None when PyYAML must decide.

    Plain unless libyaml's analysis forbids it (leading or trailing space, a block indicator,
    `_BLOCK_INDICATOR`) or the resolver reads the text as something else than a string ("32",
    "true", "~"); otherwise single-quoted, which such a line always allows. Deciding here, not by
    asking PyYAML, matters because most long strings name their tenant: ~50 new ones per tenant.
    tests/hardening/test_fast_yaml.py checks the decision against PyYAML's.
    """
    if _PRINTABLE_ASCII.fullmatch(text) is None:
        return None
    if len(_STYLES) > _STYLES_MAX:
        _STYLES.clear()
    if (text[0] != " " and text[-1] != " " and _BLOCK_INDICATOR.search(text) is None
            and _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG):
        entry = _STYLES[text] = (_PLAIN, text, len(text) <= 100)
    else:
        entry = _STYLES[text] = (_SINGLE, "'" + text.replace("'", "''") + "'", len(text) <= 100)
    return entry


def _learn_styles(strings: list[str]) -> None:
    """Ask PyYAML how it writes each of these strings (one dump for all of them)."""
    if len(_STYLES) > _STYLES_MAX:
        _STYLES.clear()
    single_line = []
    for text in strings:
        if _LINE_BREAKS.isdisjoint(text):
            single_line.append(text)
        else:
            _STYLES[text] = None
    if not single_line:
        return
    try:
        lines = yaml.dump(single_line, Dumper=_Dumper, default_flow_style=False, allow_unicode=True, width=1 << 30).split("\n")
    except yaml.YAMLError:
        lines = []
    if len(lines) != len(single_line) + 1:
        lines = ["- "] * len(single_line)  # not one line per string: leave them all to PyYAML
    for text, line in zip(single_line, lines):
        written = line[2:]
        key = len(text.encode("utf-8", "surrogatepass")) <= 100
        if written == text:
            _STYLES[text] = (_PLAIN, written, key)
        elif written == "'" + text.replace("'", "''") + "'":
            _STYLES[text] = (_SINGLE, written, key)
        elif written.startswith('"') and written.endswith('"') and len(written) > 1:
            _STYLES[text] = (_DOUBLE, written, key)
        else:
            _STYLES[text] = None


def _folded(text: str, style: int, column: int, indent: int) -> str:
    """libyaml's `write_plain` / `write_single_quoted` line breaking for a scalar starting at `column`.

    It breaks at a space with no space on either side once the line is past the width (a
    single-quoted scalar never at its first or last character); the space becomes the line break
    and the next line starts at `indent`. Doubling quotes adds no spaces, so the escaped text can
    be scanned directly.
    """
    if style == _SINGLE:
        body = text.replace("'", "''")
        column += 1  # the opening quote
        edges = (0, len(body) - 1)
    else:
        body, edges = text, ()
    lines = []
    line_start = 0  # index in `body` of the first character of the current line
    if "  " not in body and (not edges or (body[0] != " " and body[-1] != " ")):
        # Every space is a lone one and none is at an edge (nearly every long string): find them directly.
        while True:
            at = body.find(" ", line_start + max(_WIDTH + 1 - column, 0))
            if at < 0:
                lines.append(body[line_start:])
                break
            lines.append(body[line_start:at])
            line_start = at + 1
            column = indent
        folded = ("\n" + " " * indent).join(lines)
        return "'" + folded + "'" if style == _SINGLE else folded
    while True:
        # The column before body[i] is column + (i - line_start); a break needs it past the width.
        earliest = line_start + max(_WIDTH + 1 - column, 0)
        match = _LONE_SPACE.search(body, earliest)
        while match is not None and match.start() in edges:
            match = _LONE_SPACE.search(body, match.start() + 1)
        if match is None:
            lines.append(body[line_start:])
            break
        lines.append(body[line_start:match.start()])
        line_start = match.start() + 1
        column = indent
    folded = ("\n" + " " * indent).join(lines)
    return "'" + folded + "'" if style == _SINGLE else folded


_UNKNOWN = object()


def _style_of(text: str, missing: list):
    """The cached style entry of a string; `_UNKNOWN` (and `text` queued in `missing`) when it
    still has to be asked of PyYAML; None when PyYAML cannot write it as plain data."""
    entry = _STYLES.get(text, False)
    if entry is False:
        entry = _quick_style(text)
        if entry is None:
            missing.append(text)
            return _UNKNOWN
    return entry


def _scalar(value: Any, column: int, indent: int, missing: list) -> str:
    kind = type(value)
    if kind is str:
        entry = _style_of(value, missing)
        if entry is _UNKNOWN:
            return ""
        if entry is None:
            raise _NotPlainData
        style, written, _ = entry
        if column + len(written) <= _WIDTH:
            return written
        if style == _DOUBLE:
            raise _NotPlainData
        return _folded(value, style, column, indent)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    raise _NotPlainData


def _key(key: Any, missing: list) -> str:
    if type(key) is not str:
        raise _NotPlainData
    entry = _style_of(key, missing)
    if entry is _UNKNOWN:
        return ""
    if entry is None or not entry[2]:
        raise _NotPlainData  # not writable as a simple key
    return entry[1]  # simple keys are never folded


def _mapping(value: dict, indent: int, out: list, inline: bool, missing: list) -> None:
    pad = " " * indent
    styles = _STYLES
    for key in sorted(value):
        item = value[key]
        entry = styles.get(key)
        key_text = entry[1] if entry is not None and entry[2] and type(key) is str else _key(key, missing)
        prefix = key_text if inline else pad + key_text
        inline = False
        kind = type(item)
        if kind is str:
            entry = styles.get(item)
            column = indent + len(key_text) + 2
            if entry is not None and column + len(entry[1]) <= _WIDTH:
                out.append(prefix + ": " + entry[1] + "\n")
            else:
                out.append(prefix + ": " + _scalar(item, column, indent + 2, missing) + "\n")
        elif kind is dict:
            if item:
                out.append(prefix + ":\n")
                _mapping(item, indent + 2, out, False, missing)
            else:
                out.append(prefix + ": {}\n")
        elif kind is list:
            if item:
                out.append(prefix + ":\n")
                _value_list(item, indent, out, missing)
            else:
                out.append(prefix + ": []\n")
        else:
            out.append(prefix + ": " + _scalar(item, indent + len(key_text) + 2, indent + 2, missing) + "\n")


def _value_list(value: list, indent: int, out: list, missing: list) -> None:
    """A list that is the value of a key, its text cached (see `_LISTS`)."""
    first = value[0]
    if type(first) is dict and any(type(v) is str and len(v) > _UNIQUE_TEXT for v in first.values()):
        # Admission rules and the like: their long texts name the tenant, so the list never
        # repeats and its key (20 MB at 1,000 tenants) would be made for nothing.
        _sequence(value, indent, out, False, missing)
        return
    try:
        key: tuple[int, bytes | str] = (indent, marshal.dumps(value))
    except ValueError:  # not exact built-in types: the writer leaves such values to PyYAML anyway
        key = (indent, repr(value))
    text = _LISTS.get(key)
    if text is not None:
        out.append(text)
        return
    start, known = len(out), len(missing)
    _sequence(value, indent, out, False, missing)
    if len(missing) == known:  # no placeholder for a string of unknown style inside
        if len(_LISTS) >= _LISTS_MAX:
            _LISTS.clear()
        _LISTS[key] = "".join(out[start:])


def _sequence(value: list, indent: int, out: list, inline: bool, missing: list) -> None:
    pad = " " * indent + "- "
    styles = _STYLES
    for item in value:
        prefix = "- " if inline else pad
        inline = False
        kind = type(item)
        if kind is str:
            entry = styles.get(item)
            if entry is not None and indent + 2 + len(entry[1]) <= _WIDTH:
                out.append(prefix + entry[1] + "\n")
            else:
                out.append(prefix + _scalar(item, indent + 2, indent + 2, missing) + "\n")
        elif kind is dict:
            if item:
                out.append(prefix)
                _mapping(item, indent + 2, out, True, missing)
            else:
                out.append(prefix + "{}\n")
        elif kind is list:
            if item:
                out.append(prefix)
                _sequence(item, indent + 2, out, True, missing)
            else:
                out.append(prefix + "[]\n")
        else:
            out.append(prefix + _scalar(item, indent + 2, indent + 2, missing) + "\n")


def _document(obj: Any, missing: list) -> str | None:
    """One `---` document as `yaml.dump_all` writes it; None when it is left to PyYAML or when
    strings of unknown style were found (added to `missing`)."""
    if type(obj) is not dict or not obj:
        return None
    out = ["---\n"]
    found: list[str] = []
    try:
        _mapping(obj, 0, out, False, found)
    except (_NotPlainData, RecursionError, TypeError):  # TypeError: keys that do not sort
        return None
    if found:
        missing.extend(found)
        return None
    return "".join(out)


def dump_objects(objects: list[dict]) -> str:
    """YAML stream of objects with sorted keys (the same text every time).

    >>> dump_objects([{"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "a"}}])
    '---\\napiVersion: v1\\nkind: Namespace\\nmetadata:\\n  name: a\\n'
    """
    missing: list[str] = []
    parts = [_document(obj, missing) for obj in objects]
    if missing:
        _learn_styles(list(dict.fromkeys(missing)))
        missing.clear()
        parts = [text if text is not None else _document(obj, missing) for text, obj in zip(parts, objects)]
    return "".join(
        text if text is not None else yaml.dump_all([obj], Dumper=_Dumper, explicit_start=True, **_DUMP_OPTIONS)
        for text, obj in zip(parts, objects)
    )


def dump_objects_pyyaml(objects: list[dict]) -> str:
    """What `dump_objects` writes, by PyYAML alone: the reference for tests and benchmarks.

    >>> print(dump_objects_pyyaml([{"kind": "Namespace", "metadata": {"name": "team-a"}}]), end="")
    ---
    kind: Namespace
    metadata:
      name: team-a
    """
    return yaml.dump_all(objects, Dumper=_Dumper, explicit_start=True, **_DUMP_OPTIONS)
