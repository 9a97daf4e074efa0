"""The committed JSON Schemas carry the models' descriptions, not their docstring examples."""

from __future__ import annotations

import json

from components.spec.json_schema import stack_schema, tenant_schema
from components.spec.tenant import Tenant


def _descriptions(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                yield value
            else:
                yield from _descriptions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _descriptions(item)


def test_the_tenant_model_has_an_example_that_the_schema_leaves_out():
    assert ">>>" in Tenant.__doc__  # else this test proves nothing
    schema = tenant_schema()
    assert schema["description"] == "One team sharing the cluster. `name` is also its default namespace."


def test_no_description_of_either_schema_shows_a_doctest():
    for schema in (tenant_schema(), stack_schema()):
        found = [d for d in _descriptions(schema) if ">>>" in d]
        assert found == [], json.dumps(found)[:500]
