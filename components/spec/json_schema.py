"""JSON Schemas of the file formats, generated from the pydantic models (the single source of truth)."""

from __future__ import annotations

from typing import Any

from .base import API_VERSION
from .stack import CONFIG_KEY, Platform
from .tenant import Tenant

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def tenant_schema() -> dict[str, Any]:
    """JSON Schema of a tenant file, for editors (`# yaml-language-server: $schema=...`) and CI.

    >>> tenant_schema()["title"]
    'Tenant'
    """
    schema = Tenant.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = SCHEMA_DIALECT
    schema["$id"] = f"https://{API_VERSION.split('/')[0]}/schemas/tenant-{API_VERSION.split('/')[1]}.json"
    # Overrides are partial tenants: keep them open here; `tenants validate` checks them fully.
    schema["properties"]["environments"]["additionalProperties"] = {
        "type": "object",
        "propertyNames": {"enum": sorted(set(schema["properties"]) - {"apiVersion", "kind", "name", "environments"})},
    }
    return schema


def stack_schema() -> dict[str, Any]:
    """JSON Schema of a `stacks/Pulumi.<env>.yaml` file (our config key; other config keys are free)."""
    platform = Platform.model_json_schema(by_alias=True, mode="validation")
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
