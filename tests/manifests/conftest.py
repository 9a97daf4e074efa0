"""Fixtures for the builder tests: the example environments, and tenants made to measure.

The example environments are loaded once per session and must be treated as read-only; tests
that need a variant build a new `Tenant` with `make_tenant` (or `model_copy(update=...)`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from components.fleet.environment import Environment
from components.load import load_environment, stack_names
from components.spec.stack import Platform
from components.spec.tenant import Tenant

from .example_tenants import synthetic_environment, tenant_of
from .kube_schemas import KubeSchemas

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_ENVIRONMENTS = tuple(stack_names(REPO_ROOT))


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


@pytest.fixture(scope="session")
def environments() -> dict[str, Environment]:
    """The example environments of the repository (`stacks/Pulumi.<env>.yaml` plus `tenants/`)."""
    return {name: load_environment(REPO_ROOT, name) for name in EXAMPLE_ENVIRONMENTS}


@pytest.fixture(scope="session")
def prod(environments: dict[str, Environment]) -> Environment:
    return environments["prod"]


@pytest.fixture(scope="session")
def dev(environments: dict[str, Environment]) -> Environment:
    return environments["dev"]


@pytest.fixture
def tenant_in() -> Callable[[Environment, str], Tenant]:
    """`tenant_in(prod, "eval")`: an example tenant's spec in one environment."""
    return tenant_of


@pytest.fixture
def make_tenant() -> Callable[..., Tenant]:
    """`make_tenant(name="team-a", quota={...})`: a minimal valid tenant with the given fields merged in."""

    def build(**fields: Any) -> Tenant:
        base = {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "team-a", "displayName": "Team A", "costCenter": "cc-1"}
        return Tenant.model_validate(_merge(base, fields))

    return build


@pytest.fixture
def make_environment() -> Callable[..., Environment]:
    """`make_environment(gpuClasses={...})`: an environment named `test` over a platform with these fields."""

    def build(name: str = "test", **platform: Any) -> Environment:
        spec = Platform.model_validate(_merge({"labelDomain": "gpu.example.com"}, platform))
        return Environment(name, spec, None, [])

    return build


@pytest.fixture(scope="session")
def rendered(environments: dict[str, Environment]) -> dict[str, dict[str, list[dict]]]:
    """Core objects per environment (`dev`, `prod`, the synthetic `lab`), keyed `_platform` or tenant name."""
    from components.manifests.tenant_core import platform_core_objects, tenant_objects

    cases = {name: (env, [t.spec for t in env.tenants]) for name, env in environments.items()}
    cases["lab"] = synthetic_environment()
    return {
        name: {"_platform": platform_core_objects(env.facts), **{t.name: tenant_objects(t, env.view(t)) for t in tenants}}
        for name, (env, tenants) in cases.items()
    }


@pytest.fixture(scope="session")
def kube_schemas() -> KubeSchemas:
    """Strict schemas of every supported Kubernetes version (1.30 up to the newest the package ships)."""
    return KubeSchemas()
