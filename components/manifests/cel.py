"""CEL literals for the generated admission policies (placement, guard).

JSON string literals are valid CEL string literals (same escapes), so values are written with
`json.dumps`; a list of them is a CEL list.
"""

from __future__ import annotations

import json
from typing import Iterable


def cel_string(value: str) -> str:
    """A CEL string literal.

    >>> cel_string('a"b')
    '"a\\\\"b"'
    """
    return json.dumps(value)


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
