"""JSON Schemas of the file formats, generated from the pydantic models (the single source of truth)."""

from __future__ import annotations

from typing import Any

from .base import API_VERSION, SpecSchema
from .stack import CONFIG_KEY, Platform
from .tenant import Tenant

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def tenant_schema() -> dict[str, Any]:
    """JSON Schema of a tenant file, for editors (`# yaml-language-server: $schema=...`) and CI.

    >>> tenant_schema()["title"]
    'Tenant'
    """
    schema = _without_examples(Tenant.model_json_schema(by_alias=True, mode="validation", schema_generator=SpecSchema))
    schema["$schema"] = SCHEMA_DIALECT
    schema["$id"] = f"https://{API_VERSION.split('/')[0]}/schemas/tenant-{API_VERSION.split('/')[1]}.json"
    # Overrides are partial tenants: keep them open here; `tenants validate` checks them fully.
    schema["properties"]["environments"]["additionalProperties"] = {
        "type": "object",
        "propertyNames": {"enum": sorted(set(schema["properties"]) - {"apiVersion", "kind", "name", "environments"})},
    }
    return schema


def stack_schema() -> dict[str, Any]:
    """JSON Schema of a `stacks/Pulumi.<env>.yaml` file (our config key; other config keys are free).

    >>> schema = stack_schema()
    >>> sorted(schema["properties"]["config"]["properties"])
    ['gpu-tenancy:platform']
    """
    platform = _without_examples(Platform.model_json_schema(by_alias=True, mode="validation", schema_generator=SpecSchema))
    defs = platform.pop("$defs", {})
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"https://{API_VERSION.split('/')[0]}/schemas/stack-{API_VERSION.split('/')[1]}.json",
        "title": "Pulumi stack settings with the gpu-tenancy platform inventory",
        "type": "object",
        "required": ["config"],
        "properties": {
            "config": {
                "type": "object",
                "required": [CONFIG_KEY],
                "properties": {CONFIG_KEY: platform},
            }
        },
        "$defs": defs,
    }


def _without_examples(node: Any) -> Any:
    """The schema with each description cut before its docstring example: `>>>` lines are for `make
    test`, not for the editor's hover text."""
    if isinstance(node, dict):
        return {key: (_description(value) if key == "description" and isinstance(value, str) else _without_examples(value))
                for key, value in node.items()}
    if isinstance(node, list):
        return [_without_examples(item) for item in node]
    return node


def _description(text: str) -> str:
    lines = text.splitlines()
    cut = next((i for i, line in enumerate(lines) if line.lstrip().startswith(">>>")), len(lines))
    return "\n".join(lines[:cut]).rstrip()
