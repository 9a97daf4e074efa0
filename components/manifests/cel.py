"""CEL literals and rewrites for the generated admission policies (placement, guard, queues).

JSON string literals are valid CEL string literals (same escapes), so values are written with
`json.dumps`; a list of them is a CEL list.
"""

from __future__ import annotations

import functools
import json
from typing import Iterable

_encode_ascii = json.encoder.encode_basestring_ascii


def cel_string(value: str) -> str:
    """A CEL string literal.

    >>> cel_string('a"b')
    '"a\\\\"b"'
    """
    # json.dumps of a str is this C function behind two Python layers (a quarter-million calls at
    # 1,000 tenants); anything else still goes through json.dumps.
    return _encode_ascii(value) if type(value) is str else json.dumps(value)


def cel_list(values: Iterable[str]) -> str:
    """A CEL list of string literals.

    >>> cel_list(["h100", "a100"])
    '["h100", "a100"]'
    """
    return "[" + ", ".join(cel_string(v) for v in values) + "]"


def names_or_none(values: Iterable[str]) -> str:
    """Names for a message a user reads: comma-separated, or `none`.

    >>> names_or_none([]), names_or_none(["h100", "a100"])
    ('none', 'h100, a100')
    """
    values = list(values)
    return ", ".join(values) if values else "none"


TENANT = "\x00tenant\x00"
"""Where the text of a message (`said`) names the tenant whose binding applied the policy."""


def said(text: str) -> str:
    """CEL: the message `text`, with each TENANT the `tenant` variable (the tenant's name, from the
    policy's parameters).

    >>> said(f"pods of tenant {TENANT} may not")
    '"pods of tenant " + variables.tenant + " may not"'
    """
    return " + variables.tenant + ".join(cel_string(part) for part in text.split(TENANT))


def joined(values: str) -> str:
    """CEL: the list of strings `values` for a message a user reads, as `names_or_none` writes it.

    >>> joined("params.spec.pools")
    '(size(params.spec.pools) == 0 ? "none" : params.spec.pools.join(", "))'
    """
    return f'(size({values}) == 0 ? "none" : {values}.join(", "))'


_REQUEST_OBJECTS = ("object.", "oldObject.")


def _wrapped(text: str, word: str) -> list[str]:
    """`text` in pieces, with each `word` (`object.`) that is not part of a longer name as `dyn(object).`."""
    parts, last = [], 0
    index = text.find(word)
    while index != -1:
        before = text[index - 1] if index else " "
        if not (before.isalnum() or before in "_."):  # a field or a longer name (`spec.object.`, `myobject.`)
            parts += [text[last:index], "dyn(", word[:-1], ")."]
            last = index + len(word)
        index = text.find(word, index + len(word))
    parts.append(text[last:])
    return parts


@functools.lru_cache(maxsize=4096)
def as_dyn(text: str) -> str:
    """The expression with the request's `object`/`oldObject` as `dyn`.

    A policy that matches several kinds is type-checked by the API server against each of them, so
    a rule guarded by the kind at run time (a Pod's `schedulingGates`, a Job's `template`) must not
    be checked against the other kind's schema.

    >>> as_dyn("has(object.spec.suspend) && oldObject.spec.x == spec.object.y")
    'has(dyn(object).spec.suspend) && dyn(oldObject).spec.x == spec.object.y'
    """
    # Cached: many expressions are the same text for every tenant. The others name their tenant, so
    # each is rewritten once (13,000 of them at 1,000 tenants): `str.find` of each name and a look at
    # the character before it is several times faster than a regular expression scanning for them.
    for word in _REQUEST_OBJECTS:
        text = "".join(_wrapped(text, word))
    return text.replace("? object : oldObject)", "? dyn(object) : dyn(oldObject))")
