"""Kubernetes quantities: exact parsing, arithmetic, comparison, formatting and near-miss messages."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from pydantic import BaseModel, ValidationError

from components.spec.quantity import Quantity, QuantityError, format_quantity


def q(text) -> Quantity:
    return Quantity.parse(text)


def test_tenth_plus_two_tenths_is_exactly_300m():
    total = q("0.1") + q("0.2")
    assert total == q("300m")
    assert total.value == Fraction(3, 10)
    assert str(total) == "300m"


def test_many_small_sums_do_not_drift():
    total = q("0")
    for _ in range(1000):
        total = total + q("1m")
    assert total == q("1")
    assert total - q("999m") == q("1m")


@pytest.mark.parametrize(
    "text, value",
    [
        ("100n", Fraction(1, 10**7)),
        ("5u", Fraction(5, 10**6)),
        ("500m", Fraction(1, 2)),
        ("4", Fraction(4)),
        ("2k", Fraction(2000)),
        ("3M", Fraction(3 * 10**6)),
        ("64G", Fraction(64 * 10**9)),
        ("2T", Fraction(2 * 10**12)),
        ("1P", Fraction(10**15)),
        ("2E", Fraction(2 * 10**18)),
        ("1Ki", Fraction(1024)),
        ("512Mi", Fraction(512 * 2**20)),
        ("64Gi", Fraction(64 * 2**30)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("4Ti", Fraction(4 * 2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("+1", Fraction(1)),
        ("-250m", Fraction(-1, 4)),
    ],
)
def test_every_suffix_parses_to_its_exact_value(text, value):
    parsed = q(text)
    assert parsed.value == value
    assert str(parsed) == text  # it remembers how it was written


def test_yaml_numbers_are_quantities_too():
    # YAML gives ints and (through our loader) Decimals, never binary floats.
    assert q(4).value == 4 and str(q(4)) == "4"
    assert q(Decimal("1.50")).value == Fraction(3, 2)
    assert str(q(Decimal("1.50"))) == "1.5"
    assert q(Decimal("1E+3")).value == 1000


def test_comparisons_use_values_not_spelling():
    assert q("1Gi") > q("1G")
    assert q("1000m") == q("1")
    assert q("1024Mi") == q("1Gi")
    assert q("999m") < q("1") <= q("1000m")
    assert q("2") >= q("2000m")
    assert not q("1") < q("1000m")
    assert q("1") == 1 and q("500m") == Fraction(1, 2)
    assert len({q("1"), q("1000m"), q("1e0")}) == 1  # equal values hash alike


def test_scaled_applies_a_ratio_exactly():
    assert q("16").scaled(Fraction(5, 4)) == q("20")
    assert q("10Gi").scaled(Fraction(1, 3)).value == Fraction(10 * 2**30, 3)


@pytest.mark.parametrize(
    "value, text",
    [
        (Fraction(0), "0"),
        (Fraction(3, 10), "300m"),
        (Fraction(-1, 2), "-500m"),
        (Fraction(1, 10**6), "1u"),
        (Fraction(7, 10**9), "7n"),
        (Fraction(1, 3), "333333334n"),  # sub-nano rounds up, as Kubernetes does
        (Fraction(1, 10**10), "1n"),
        (Fraction(4), "4"),
        (Fraction(1000), "1000"),
        (Fraction(1024), "1024"),  # binary suffixes only from Mi up
        (Fraction(2**20), "1Mi"),
        (Fraction(1536 * 2**20), "1536Mi"),
        (Fraction(2**30), "1Gi"),
        (Fraction(5 * 2**40), "5Ti"),
        (Fraction(3 * 2**60), "3Ei"),
    ],
)
def test_canonical_formatting(value, text):
    assert format_quantity(value) == text


@pytest.mark.parametrize("text", ["0", "300m", "-500m", "1u", "7n", "4", "1Mi", "1536Mi", "1Gi", "3Ei"])
def test_canonical_text_parses_back_to_the_same_value(text):
    assert format_quantity(q(text).value) == text


def test_sums_print_canonically():
    assert str(q("512Mi") + q("512Mi")) == "1Gi"
    assert str(q("1.5") + q("500m")) == "2"
    assert repr(q("250m") + q("250m")) == "Quantity('500m')"


@pytest.mark.parametrize(
    "text, hint",
    [
        ("64GB", "'GB' is not a Kubernetes unit; use G or Gi (e.g. 64G)"),
        ("1gi", "use Gi (e.g. 1Gi)"),
        ("2TB", "use T or Ti"),
        ("4 GPUs", "write it without spaces or words; use a plain number"),
        ("4GPUs", "use a plain number (e.g. 4)"),
        ("1.5cpu", "use a plain number of CPUs (e.g. 1.5)"),
        ("12 cores", "a plain number of CPUs"),
        ("500millicores", "use m (e.g. 500m)"),
        ("1,5", "use a dot as the decimal separator, e.g. 1.5"),
        ("500 m", "remove the spaces: 500m"),
        (" 4", "remove the spaces: 4"),
        ("1X", "suffixes are n u m k M G T P E (powers of 10) or Ki Mi Gi Ti Pi Ei (powers of 2)"),
        ("lots", "write a number with an optional suffix"),
    ],
)
def test_near_misses_name_the_right_spelling(text, hint):
    with pytest.raises(QuantityError) as caught:
        q(text)
    message = str(caught.value)
    assert message.startswith(f"'{text}' is not a Kubernetes quantity: ")
    assert hint in message


@pytest.mark.parametrize("raw", [True, None, [1], {"a": 1}, float("inf")])
def test_non_quantities_are_refused(raw):
    with pytest.raises(QuantityError):
        q(raw)


def test_absurd_exponents_are_refused():
    with pytest.raises(QuantityError, match="exponent out of range"):
        q("1e31")


class _Holder(BaseModel):
    amount: Quantity


def test_in_a_model_a_near_miss_is_a_validation_error_with_the_hint():
    assert _Holder(amount="64Gi").amount == q("64Gi")
    with pytest.raises(ValidationError) as caught:
        _Holder(amount="64GB")
    error = caught.value.errors()[0]
    assert error["type"] == "quantity"
    assert "use G or Gi" in error["msg"]
    assert _Holder(amount="1.5").model_dump() == {"amount": "1.5"}


def test_json_schema_pattern_accepts_what_the_parser_accepts():
    import re

    pattern = _Holder.model_json_schema()["properties"]["amount"]["anyOf"][0]["pattern"]
    for good in ("500m", "64Gi", "1e3", ".5", "-1", "2E"):
        assert re.match(pattern, good), good
    for bad in ("64GB", "4 GPUs", "1,5", "1gi"):
        assert not re.match(pattern, bad), bad
