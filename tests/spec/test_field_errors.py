"""Pydantic errors become located, readable problems (one per mistake, not one per union member)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.spec.field_errors import model_problems
from components.spec.stack import MigDeviceGroup, Platform
from components.spec.tenant import Tenant
from components.spec.yaml_source import parse_yaml

HEAD = "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: t\ndisplayName: T\ncostCenter: cc-1\n"


def problems(model, text: str) -> list[str]:
    doc = parse_yaml(text, "t.yaml")
    with pytest.raises(ValidationError) as caught:
        model.model_validate(doc.data)
    return [str(p) for p in model_problems(caught.value, doc, doc.data, model)]


@pytest.mark.parametrize(
    "body, expected",
    [
        ("quota:\n  gpu: -1\n", "t.yaml:7:3: quota.gpu: must be >= 0 (got -1); write 0 or more"),
        ("quota:\n  gpu: 4 GPUs\n", "t.yaml:7:3: quota.gpu: must be a whole number (got '4 GPUs'); write just 4"),
        ("quota:\n  gpu: {h100: -2}\n", "t.yaml:7:9: quota.gpu.h100: must be >= 0 (got -2); write 0 or more"),
        ("quota:\n  gpu: 1.5\n", "t.yaml:7:3: quota.gpu: must be a whole number (got 1.5); write a count without quotes or units, e.g. 4"),
    ],
)
def test_a_union_reports_only_the_alternative_the_input_was_meant_for(body, expected):
    assert problems(Tenant, HEAD + body) == [expected]


def test_when_no_alternative_fits_both_are_named():
    text = "labelDomain: gpu.example.com\ntenants: some\n"
    assert problems(Platform, text) == [
        "t.yaml:2:1: tenants: 'some' is not allowed; write one of 'all'; or must be a list (got a string: 'some'); write it in "
        "brackets, e.g. [some], or one `- item` per line"
    ]


def test_list_alternative_errors_point_into_the_list():
    assert problems(MigDeviceGroup, "devices: [1, 99]\nprofiles: {1g.10gb: 7}\n") == [
        "t.yaml:1:14: devices[1]: must be <= 63 (got 99); write 63 or less"
    ]


def test_unknown_fields_get_a_suggestion_or_the_list_of_known_fields():
    found = problems(Tenant, HEAD + "qouta: {}\nzzz: 1\n")
    assert found[0] == "t.yaml:6:1: qouta: unknown field; did you mean 'quota'?"
    assert found[1].startswith("t.yaml:7:1: zzz: unknown field; known fields: apiVersion, kind, name, ")
    assert ", quota, " in found[1] and found[1].endswith(", environments")
    assert len(found) == 2


def test_nested_unknown_fields_suggest_from_the_nested_model():
    assert problems(Tenant, HEAD + "access:\n  owner: {groups: [a]}\n") == [
        "t.yaml:7:3: access.owner: unknown field; did you mean 'owners'?"
    ]


def test_missing_required_fields_are_located_at_the_mapping():
    found = problems(Tenant, "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: t\n")
    assert found == [
        "t.yaml:1:1: displayName: required field is missing; add `displayName:` (docs/file-format.md says what it holds)",
        "t.yaml:1:1: costCenter: required field is missing; add `costCenter:` (docs/file-format.md says what it holds)",
    ]


def test_every_error_of_a_file_is_reported():
    found = problems(Tenant, HEAD + "lifecycle: paused\nnamespaces: [A]\nquota:\n  objects: {pods: x}\n")
    assert [line.split(": ")[1] for line in found] == ["lifecycle", "namespaces[0]", "quota.objects.pods"]
