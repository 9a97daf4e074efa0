"""Tenants made for one e2e module, next to the example prod stack (helpers of its tests).

Each is rendered in the prod inventory (the stack's own `images` settings replaced) as the only
tenant of its environment, and only its own objects are applied: the prod stack's platform objects
(the guard policy, the TenantGrant CRD, the placement policy) are the applied `prod_stack`'s;
`tools.applied_stack.apply_tenant` applies them and `remove_tenant` deletes them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

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
