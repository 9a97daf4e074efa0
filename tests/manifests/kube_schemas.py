"""Strict Kubernetes OpenAPI schemas of every supported version, for the builder tests and the
hardening tests (the `kube_schemas` fixture of tests/manifests/conftest.py is one of these)."""

from __future__ import annotations

from typing import Any

from components.manifests import tenant_grant as grants

MIN_KUBERNETES = "1.30"


def _strict(schema: Any) -> Any:
    """A copy of an OpenAPI schema in which an object with `properties` allows no other field."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {k: ({name: _strict(v) for name, v in value.items()} if k == "properties" else _strict(value))
              for k, value in schema.items()}
    if "properties" in schema:
        strict.setdefault("additionalProperties", False)
    return strict


class KubeSchemas:
    """Strict Kubernetes OpenAPI schemas from `kubernetes-validate`, each file parsed once.

    `kubernetes_validate.validate()` re-reads the 1 MB definitions file on every call; this keeps
    one validator per (version, kind) instead, so validating hundreds of objects takes seconds.
    """

    def __init__(self) -> None:
        from packaging.version import Version
        import kubernetes_validate.utils as kv

        self._kv = kv
        self.versions = [v for v in kv.all_versions() if Version(v) >= Version(MIN_KUBERNETES)]
        self._registries: dict[str, Any] = {}
        self._validators: dict[tuple[str, str, str], Any] = {}

    def _schema_dir(self, version: str) -> str:
        return f"kubernetes-json-schema/v{version}-local-strict"

    def _registry(self, version: str):
        from referencing import Registry, Resource

        if version not in self._registries:
            definitions = self._kv.schema_contents(f"{self._schema_dir(version)}/_definitions.json", version)
            self._registries[version] = Resource.from_contents(definitions) @ Registry()
        return self._registries[version]

    def validator(self, version: str, api_version: str, kind: str):
        import re

        import jsonschema
        from referencing import Resource

        key = (version, api_version, kind)
        if key not in self._validators and (api_version, kind) == (grants.API_VERSION, grants.KIND):
            # Our own CRD: its schema, strict (the API server would prune an unknown field silently).
            self._validators[key] = jsonschema.Draft202012Validator(_strict(grants.grant_crd_schema()))
        if key not in self._validators:
            # Same file naming as kubernetes-validate: rbac.authorization.k8s.io/v1 -> rbac-v1.
            group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
            schema = self._kv.schema_contents(f"{self._schema_dir(version)}/{kind.lower()}-{group_version}.json", version)
            registry = Resource.from_contents(schema) @ self._registry(version)
            self._validators[key] = jsonschema.Draft202012Validator(schema, registry=registry)
        return self._validators[key]

    def errors(self, obj: dict, version: str) -> list[str]:
        """Every schema violation of `obj` at `version`, as `path: message` lines."""
        validator = self.validator(version, obj["apiVersion"], obj["kind"])
        return [
            f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
            for error in validator.iter_errors(obj)
        ]
