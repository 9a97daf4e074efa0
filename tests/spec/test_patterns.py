"""Every pattern of the file format matches the whole value: a trailing line break is not a name.

Python's `re` lets `$` match before a final newline, so under that engine `"kueue-system\\n"` was a
valid DNS label: it escaped the reserved-namespace table (compared as a plain string) and reached the
API server, which refuses it mid-apply.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from components.spec.stack import Platform
from components.spec.tenant import Tenant

BASE = yaml.safe_load((Path(__file__).resolve().parents[2] / "tenants" / "eval.yaml").read_text())


@pytest.mark.parametrize("field, value", [
    ("name", "kueue-system\n"),
    ("namespaces", ["vision-serve\n"]),
    ("previousNames", ["old\n"]),
])
def test_a_tenant_name_with_a_line_break_is_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as refused:
        Tenant.model_validate({**BASE, field: value})
    assert [e["type"] for e in refused.value.errors()] == ["string_pattern_mismatch"]


def test_a_stack_label_domain_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValidationError) as refused:
        Platform.model_validate({"labelDomain": "gpu.example.com\n"})
    assert [e["loc"] for e in refused.value.errors()] == [("labelDomain",)]


def test_the_same_names_without_the_break_are_accepted() -> None:
    assert Tenant.model_validate({**BASE, "namespaces": ["eval-serve"], "previousNames": ["old"]}).name == "eval"
    assert Platform.model_validate({"labelDomain": "gpu.example.com"}).label_domain == "gpu.example.com"


# The checks written in Python, not in a model's pattern, match whole values too (`fullmatch`).

def test_a_registry_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValidationError, match="registry"):
        Tenant.model_validate({**BASE, "images": {"registries": ["nvcr.io/nvidia\n"]}})
    assert Tenant.model_validate({**BASE, "images": {"registries": ["nvcr.io/nvidia"]}}).images.registries == ["nvcr.io/nvidia"]


def test_a_quantity_with_a_line_break_is_refused() -> None:
    from components.spec.quantity import Quantity, QuantityError
    with pytest.raises(QuantityError):
        Quantity.parse("1Gi\n")
    assert str(Quantity.parse("1Gi")) == "1Gi"


def test_a_service_account_user_with_a_line_break_is_not_the_tenants_own() -> None:
    from components.fleet.tenant_claims import subject_refusal
    from components.load import load_platform
    platform, _ = load_platform(Path(__file__).resolve().parents[2], "prod")
    assert subject_refusal(platform, "users", "system:serviceaccount:eval:ci", ["eval"]) is None
    assert subject_refusal(platform, "users", "system:serviceaccount:eval:ci\n", ["eval"]) is not None
