"""Tenants made for one e2e module, next to the example prod stack (helpers of its tests).

Each is rendered in the prod inventory (the stack's own `images` settings replaced) as the only
tenant of its environment, and only its own objects are applied: the prod stack's platform objects
(the guard policy, the TenantGrant CRD, the placement policy) are the applied `prod_stack`'s.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.load import environment_from_data
from components.manifests.build import environment_objects
from components.spec.base import API_VERSION
from components.spec.stack import CONFIG_KEY

REPO_ROOT = Path(__file__).resolve().parents[2]


def tenant_data(name: str, **fields: Any) -> dict[str, Any]:
    """A tenant file's data: owners `<name>-leads`, developers `<name>-devs`, viewers `<name>-readers`,
    CI ServiceAccount `ci` (developer), and `fields`.

    >>> tenant_data("lab", lifecycle="suspended")["access"]["owners"], tenant_data("lab", lifecycle="suspended")["lifecycle"]
    ({'groups': ['lab-leads']}, 'suspended')
    """
    access = {"owners": {"groups": [f"{name}-leads"]}, "developers": {"groups": [f"{name}-devs"]},
              "viewers": {"groups": [f"{name}-readers"]}, "ciServiceAccounts": [{"name": "ci", "role": "developer"}]}
    return {"apiVersion": API_VERSION, "kind": "Tenant", "name": name, "displayName": name, "costCenter": "cc-e2e",
            "access": access, **fields}


def rendered(name: str, stack_images: dict[str, Any], /, **fields: Any) -> list[dict[str, Any]]:
    """The tenant's rendered objects (its file: `tenant_data(name, **fields)`), in the prod inventory
    with `stack_images` as the stack's `images` settings.

    >>> sorted({o["kind"] for o in rendered("lab", {})})[:2]
    ['ClusterQueue', 'ClusterRoleBinding']
    """
    platform = copy.deepcopy(yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"][CONFIG_KEY])
    platform.update(images=stack_images, tenants="all")
    return environment_objects(environment_from_data("prod", platform, {name: tenant_data(name, **fields)}))[name]


def apply_settled(apiserver, objects: list[dict[str, Any]]) -> None:
    """Apply `objects` (all must be accepted), wait for their namespaces and for every policy among
    them to be type-checked without warnings."""
    results = apiserver.apply_rendered(objects)
    failed = [(o["kind"], o["metadata"]["name"], r) for o, r in results if isinstance(r, ApiException)]
    assert not failed, failed
    apiserver.wait_namespaces_ready(objects)
    adm = client.AdmissionregistrationV1Api(apiserver.api_client)
    for vap in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"):
        def checked(name=vap["metadata"]["name"]):
            status = adm.read_validating_admission_policy(name).status
            return status is not None and status.type_checking is not None and status
        status = apiserver.wait_for(checked, what=f"type checking of {vap['metadata']['name']}")
        assert not (status.type_checking.expression_warnings or []), status.type_checking.expression_warnings


def delete_objects(apiserver, objects: list[dict[str, Any]]) -> None:
    """Delete the namespaces among `objects` and every cluster-scoped object; namespaced ones go
    with their namespace. Absent objects are fine."""
    for obj in objects:
        if obj["kind"] == "Namespace":
            apiserver.delete_namespace(obj["metadata"]["name"])
        elif "namespace" not in obj["metadata"]:
            resource = apiserver.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            try:
                apiserver.dynamic.delete(resource, name=obj["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    raise
