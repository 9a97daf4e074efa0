"""The tenant file's models once validated: nothing may change them."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from components.load import load_environment
from components.spec import tenant as tenant_spec
from components.spec.tenant import Tenant

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prod():
    return load_environment(REPO, "prod")


def _models(model: type[BaseModel], seen: set) -> set:
    """Every model class a field of `model` holds, at any depth (lists, maps, unions, Optional)."""
    if model in seen:
        return seen
    seen.add(model)
    for field in model.model_fields.values():
        pending = [field.annotation]
        while pending:
            annotation = pending.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                _models(annotation, seen)
            pending.extend(typing.get_args(annotation))
    return seen


def test_every_model_of_a_tenant_is_frozen():
    models = _models(Tenant, set())
    assert len(models) > 20    # the walk reaches the nested models, not only Tenant
    assert [m.__name__ for m in models if not m.model_config.get("frozen")] == []


def test_no_field_of_a_validated_spec_can_be_assigned(prod):
    spec = prod.tenants[0].spec
    for target, field in ((spec, "lifecycle"), (spec.queue, "borrowing_limit"), (spec.gpu, "classes"), (spec.quota, "gpu")):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(target, field, None)


def test_a_changed_spec_is_a_new_one_and_the_old_one_stays(prod):
    spec = prod.tenants[0].spec
    suspended = spec.model_copy(update={"lifecycle": "suspended"})
    assert (spec.lifecycle, suspended.lifecycle) == ("active", "suspended")
    assert tenant_spec.Spec.model_config["frozen"] is True


COMPARED = re.compile(r"\.lifecycle\s*(==|!=|in\b|not in\b)\s*[\"'(]")


def test_code_asks_the_lifecycle_helpers_instead_of_comparing_strings():
    components = REPO / "components"
    found = sorted(
        f"{path.relative_to(components)}:{number}"
        for path in components.rglob("*.py")
        if path.relative_to(components).as_posix() != "spec/tenant.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if COMPARED.search(line) and ">>>" not in line
    )
    assert found == []
    assert COMPARED.search('if t.spec.lifecycle == "active":') and COMPARED.search('x.lifecycle in ("a", "b")')


@pytest.mark.parametrize(("lifecycle", "answers"), [
    ("active", (True, False, False)), ("suspended", (False, True, False)), ("decommissioned", (False, False, True)),
])
def test_each_lifecycle_answers_one_question(prod, lifecycle, answers):
    spec = prod.tenants[0].spec.model_copy(update={"lifecycle": lifecycle})
    assert (spec.is_active, spec.is_suspended, spec.is_decommissioned) == answers
