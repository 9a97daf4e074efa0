"""Kubernetes resource quantities (`500m`, `64Gi`, `1.5`), parsed and summed exactly.

Values are held as `fractions.Fraction`, so sums and comparisons never drift the way floats do
(0.1 + 0.2 CPUs is exactly 300m). Near-misses that people type (`64GB`, `4 GPUs`, `1,5`) get a
message that names the correct spelling.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import PydanticCustomError, core_schema

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_SUFFIXES = {**{k: Fraction(v) for k, v in _BINARY.items()}, **_DECIMAL}
_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?$"
)
QUANTITY_PATTERN = (
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_NEAR_MISS_UNITS = {
    "kb": "k or Ki", "mb": "M or Mi", "gb": "G or Gi", "tb": "T or Ti", "pb": "P or Pi",
    "kib": "Ki", "mib": "Mi", "gib": "Gi", "tib": "Ti", "pib": "Pi",
    "g": "G or Gi", "t": "T or Ti", "ki": "Ki", "mi": "Mi", "gi": "Gi", "ti": "Ti",
    "cpu": "a plain number of CPUs", "cpus": "a plain number of CPUs", "cores": "a plain number of CPUs",
    "core": "a plain number of CPUs", "gpu": "a plain number", "gpus": "a plain number",
    "millicores": "m",
}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message says how to write it."""


@functools.lru_cache(maxsize=16384)
def _parse_text(cls: type, raw: str) -> Quantity:
    # Cached: a fleet writes the same few quantities thousands of times, and the builders parse
    # them again; a Quantity is never changed after it is made, so one instance may be shared.
    match = _PATTERN.fullmatch(raw)
    if not match:
        raise QuantityError(f"'{raw}' is not a Kubernetes quantity: {_near_miss_hint(raw)}")
    value = Fraction(Decimal(match["number"]))
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > 30:
            raise QuantityError(f"'{raw}': exponent out of range")
        value *= Fraction(10) ** exponent
    else:
        value *= _SUFFIXES[match["suffix"] or ""]
    if match["sign"] == "-":
        value = -value
    return cls(value, raw)


def _near_miss_hint(text: str) -> str:
    match = re.match(r"^\s*([+-]?[0-9.,]+)\s*([A-Za-z]*)\s*$", text)
    if not match:
        return "write a number with an optional suffix, e.g. 500m, 4, 1.5, 64Gi"
    number, unit = match.groups()
    if "," in number:
        return f"use a dot as the decimal separator, e.g. {number.replace(',', '.')}{unit}"
    if text != text.strip() or " " in text:
        if unit.lower() in _NEAR_MISS_UNITS:
            return f"write it without spaces or words; use {_NEAR_MISS_UNITS[unit.lower()]}"
        return f"remove the spaces: {number}{unit}"
    if unit.lower() in _NEAR_MISS_UNITS:
        fix = _NEAR_MISS_UNITS[unit.lower()]
        suffix = "" if fix.startswith("a plain number") else fix.split()[0]
        return f"'{unit}' is not a Kubernetes unit; use {fix} (e.g. {number}{suffix})"
    return "suffixes are n u m k M G T P E (powers of 10) or Ki Mi Gi Ti Pi Ei (powers of 2)"


class Quantity:
    """An exact Kubernetes quantity that remembers how it was written.

    >>> Quantity.parse("500m") + Quantity.parse("1.5")
    Quantity('2')
    """

    __slots__ = ("value", "text")

    def __init__(self, value: Fraction, text: str | None = None) -> None:
        self.value = Fraction(value)
        self.text = text if text is not None else format_quantity(self.value)

    @classmethod
    def parse(cls, raw: Any) -> "Quantity":
        """Parse a YAML scalar (str, int or Decimal) as a quantity.

        >>> Quantity.parse("64Gi").value == 64 * 2**30
        True
        """
        if isinstance(raw, Quantity):
            return raw
        if isinstance(raw, bool) or raw is None:
            raise QuantityError("expected a quantity such as 500m, 4 or 64Gi")
        if isinstance(raw, int):
            return cls(Fraction(raw), str(raw))
        if isinstance(raw, (Decimal, float)):
            if not Decimal(raw).is_finite():
                raise QuantityError("must be a finite number")
            text = format(Decimal(str(raw)) if isinstance(raw, float) else raw, "f")
            return cls(Fraction(Decimal(text)), _trim_decimal(text))
        if not isinstance(raw, str):
            raise QuantityError("expected a quantity such as 500m, 4 or 64Gi")
        return _parse_text(cls, raw)

    def __add__(self, other: "Quantity") -> "Quantity":
        return Quantity(self.value + other.value)

    def __sub__(self, other: "Quantity") -> "Quantity":
        return Quantity(self.value - other.value)

    def scaled(self, factor: Fraction | int) -> "Quantity":
        """This quantity times a factor, e.g. capacity times an overcommit ratio."""
        return Quantity(self.value * Fraction(factor))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        if isinstance(other, (int, Fraction)):
            return self.value == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: "Quantity") -> bool:
        return self.value < _value(other)

    def __le__(self, other: "Quantity") -> bool:
        return self.value <= _value(other)

    def __gt__(self, other: "Quantity") -> bool:
        return self.value > _value(other)

    def __ge__(self, other: "Quantity") -> bool:
        return self.value >= _value(other)

    def __repr__(self) -> str:
        return f"Quantity({self.text!r})"

    def __str__(self) -> str:
        return self.text

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler):
        def validate(raw: Any) -> Quantity:
            try:
                return cls.parse(raw)
            except QuantityError as err:
                raise PydanticCustomError("quantity", str(err)) from None

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.plain_serializer_function_ser_schema(str)
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: GetJsonSchemaHandler):
        return {
            "anyOf": [
                {"type": "string", "pattern": QUANTITY_PATTERN},
                {"type": "number"},
            ],
            "description": "Kubernetes quantity, e.g. 500m, 4, 1.5, 64Gi",
        }


def _value(other: Any) -> Fraction:
    return other.value if isinstance(other, Quantity) else Fraction(other)


def _trim_decimal(text: str) -> str:
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def format_quantity(value: Fraction) -> str:
    """Canonical Kubernetes spelling of an exact value: binary suffix when whole, else decimal.

    >>> format_quantity(Fraction(3, 10))
    '300m'
    """
    value = Fraction(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value.denominator == 1:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if value >= _BINARY[suffix] and value % _BINARY[suffix] == 0 and value >= 2**20:
                return f"{sign}{value // _BINARY[suffix]}{suffix}"
        return f"{sign}{value.numerator}"
    for suffix in ("m", "u", "n"):
        scaled = value / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{sign}{scaled.numerator}{suffix}"
    # Kubernetes rounds sub-nano amounts up; so do we, never down.
    nanos = -(-value.numerator * 10**9 // value.denominator)
    return f"{sign}{nanos}n"
