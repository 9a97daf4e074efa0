"""Shared pydantic configuration and field types of the file formats."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Callable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

# The current version of tenant and stack files. It moves with every change that makes an old file
# fail or mean something else; tenant files say it in `apiVersion`, stack files in `apiVersion`
# under `gpu-tenancy:platform` (a stack file written before stack files carried one is v1alpha1).
# `tenants migrate` rewrites older files (components/authoring/migrate.py, docs/migrating.md).
API_VERSION = "gpu-tenancy.dev/v1alpha2"
V1ALPHA1 = "gpu-tenancy.dev/v1alpha1"
OLDER_VERSIONS = (V1ALPHA1,)  # oldest first
# What `tenants migrate` writes where a person must choose; validation refuses it anywhere.
DECIDE = "DECIDE"

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DnsLabel = Annotated[
    str,
    StringConstraints(pattern=DNS_LABEL_PATTERN, max_length=63),
    Field(description="DNS-1123 label: lower-case letters, digits and '-', at most 63 characters"),
]
# Namespaced object names built from a tenant name need headroom for suffixes such as `-owner`.
TenantName = Annotated[
    str,
    StringConstraints(pattern=DNS_LABEL_PATTERN, max_length=40),
    Field(description="DNS-1123 label of at most 40 characters (names of generated objects add suffixes)"),
]
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LabelValue = Annotated[
    str,
    StringConstraints(pattern=LABEL_VALUE_PATTERN, max_length=63),
    Field(description="Kubernetes label value"),
]
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DnsSubdomain = Annotated[
    str,
    StringConstraints(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253),
]

# What a value matching each pattern looks like, in words, for the message when one does not (the
# raw regular expression helps nobody); a module defining a pattern adds its words here.
PATTERN_WORDS: dict[str, str] = {
    DNS_LABEL_PATTERN: "a DNS label: lower-case letters, digits and '-', beginning and ending with a letter or digit (e.g. team-a)",
    LABEL_VALUE_PATTERN: ("a Kubernetes label value: letters, digits, '-', '_' and '.', beginning and ending with a letter "
                          "or digit, no spaces (e.g. cc-4300)"),
    DNS_SUBDOMAIN_PATTERN: "lower-case DNS labels joined by '.' (e.g. gpu.example.com)",
}
NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]  # strict: YAML `yes` must not become 1


class Model(BaseModel):
    """Base of every file-format model: camelCase keys, unknown keys rejected."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
        str_strip_whitespace=False,
        regex_engine="rust-regex",  # `$` ends the text: python-re let "name\n" through
    )


_SHOWN_DEFAULT = "gpu_tenancy_shown_default"


def fresh(factory: Callable[[], Any], **field: Any) -> Any:
    """A field whose default `factory` makes anew for each model (`[]`, `{}`, `Access()`), shown in
    the JSON Schema like a plain default (`SpecSchema`).

    A plain mutable default is one shared instance that pydantic deep-copies on every validation:
    a tenant file leaves about thirty of them unset, and copying them was a tenth of loading a
    1,000-tenant fleet (docs/performance.md).

    >>> class Team(Model):
    ...     groups: list[str] = fresh(list, description="group names")
    >>> Team().groups is not Team().groups
    True
    >>> Team.model_json_schema(schema_generator=SpecSchema)["properties"]["groups"]["default"]
    []
    """
    make = functools.partial(factory)
    setattr(make, _SHOWN_DEFAULT, True)
    return Field(default_factory=make, **field)


class SpecSchema(GenerateJsonSchema):
    """The JSON Schema generator of the file formats: `fresh` defaults are shown as plain ones are.

    >>> class Team(Model):
    ...     groups: list[str] = fresh(list)
    >>> "default" in Team.model_json_schema()["properties"]["groups"]
    False
    >>> Team.model_json_schema(schema_generator=SpecSchema)["properties"]["groups"]["default"]
    []
    """

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if getattr(factory, _SHOWN_DEFAULT, False):
            return factory()
        return super().get_default_value(schema)
