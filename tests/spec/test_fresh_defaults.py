"""Tenant-file models make their mutable defaults per instance (`fresh`), and the schema still shows them."""

from __future__ import annotations

import inspect

from pydantic import BaseModel, Field

from components.spec import tenant
from components.spec.base import Model, SpecSchema, fresh
from components.spec.json_schema import tenant_schema


def _tenant_models() -> list[type[BaseModel]]:
    return [c for c in vars(tenant).values() if inspect.isclass(c) and issubclass(c, BaseModel) and c.__module__ == tenant.__name__]


def test_no_tenant_model_shares_a_mutable_default():
    # A `[]`, `{}` or `Access()` default is deep-copied by pydantic on every validation: about
    # thirty per tenant file, a tenth of loading 1,000 of them (docs/performance.md).
    shared = [
        f"{model.__name__}.{name} = {info.default!r}"
        for model in _tenant_models()
        for name, info in model.model_fields.items()
        if isinstance(info.default, (list, dict, set, BaseModel))
    ]
    assert shared == [], "use fresh(...) for these defaults: " + "; ".join(shared)


def test_fresh_defaults_are_not_shared_and_are_shown_in_the_schema():
    minimal = {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a", "displayName": "A", "costCenter": "cc-1"}
    first, second = tenant.Tenant.model_validate(minimal), tenant.Tenant.model_validate(minimal)
    first.access.owners.groups.append("a-leads")
    first.quota.mig["1g.10gb"] = 1
    assert second.access.owners.groups == [] and second.quota.mig == {}
    properties = tenant_schema()["properties"]
    assert properties["namespaces"]["default"] == [] and properties["environments"]["default"] == {}
    assert properties["access"]["default"]["owners"] == {"bundles": [], "groups": [], "users": []}


def test_only_fresh_factories_are_shown_as_defaults():
    def made_elsewhere() -> list[str]:
        return ["x"]

    class Holder(Model):
        shown: list[str] = fresh(list)
        hidden: list[str] = Field(default_factory=made_elsewhere)

    properties = Holder.model_json_schema(schema_generator=SpecSchema)["properties"]
    assert properties["shown"]["default"] == [] and "default" not in properties["hidden"]
