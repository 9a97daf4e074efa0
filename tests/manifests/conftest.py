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


def tenant_of(environment: Environment, name: str) -> Tenant:
    """The spec of one example tenant as it applies to `environment`."""
    for loaded in environment.tenants:
        if loaded.name == name:
            return loaded.spec
    raise KeyError(f"no tenant '{name}' in environment '{environment.name}'")


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


SYNTHETIC_PLATFORM: dict[str, Any] = {
    "labelDomain": "gpu.example.com",
    "environment": "lab",
    "podSecurity": {"level": "baseline", "version": "v1.32"},
    "platformAdminGroup": "sre",
    "platformNamespaces": {"ingress": ["ingress-nginx", "gateway"], "monitoring": ["monitoring"]},
    "clusterDns": {"namespace": "dns", "podLabels": {"app": "coredns"}},
    "gpuClasses": {
        "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
        "l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing",
               "timeSlicing": {"replicas": 4, "renameByDefault": True}},
        "a100-mig": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"},
    },
    "nodePools": {
        "h100": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["h1", "h2"]},
        "l4": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["l1"]},
        "mig": {"gpuClass": "a100-mig", "gpusPerNode": 8, "nodes": ["m1"], "migLayout": "all-1g.10gb"},
    },
    "limitRangeDefaults": {
        "defaultRequest": {"cpu": "100m", "memory": "128Mi", "ephemeralStorage": "1Gi"},
        "default": {"cpu": "1", "memory": "1Gi", "ephemeralStorage": "2Gi"},
        "max": {"cpu": "64", "memory": "512Gi"},
        "min": {"cpu": "10m", "memory": "16Mi"},
    },
}

# Every optional branch of the builders at least once: suspended, decommissioned, storage classes,
# every object count, priority caps with cpu/memory/gpu, SAs of every role in extra namespaces,
# port ranges, SCTP, ipBlock exceptions, grants between tenants, a stricter Pod Security level.
SYNTHETIC_TENANTS: list[dict[str, Any]] = [
    {
        "name": "kitchen",
        "displayName": "Kitchen Sink",
        "description": "Uses every field.",
        "costCenter": "cc-9",
        "contacts": [{"name": "Zoë Ünal", "email": "zoe@example.com", "chat": "#kitchen"}],
        "lifecycle": "suspended",
        "namespaces": ["kitchen-data", "kitchen-ci"],
        "access": {
            "owners": {"groups": ["kitchen-leads"], "users": ["lead@example.com"]},
            "developers": {"groups": ["kitchen-eng", "kitchen-leads"]},
            "viewers": {"groups": ["everyone"], "users": ["auditor@example.com"]},
            "ciServiceAccounts": [
                {"name": "deploy", "role": "owner", "namespace": "kitchen-ci"},
                {"name": "build"},
                {"name": "report", "role": "viewer", "namespace": "kitchen-data"},
            ],
        },
        "quota": {
            "cpu": {"requests": "10", "limits": "20"},
            "memory": {"requests": "64Gi", "limits": "128Gi"},
            "ephemeralStorage": {"requests": "100Gi", "limits": "200Gi"},
            "gpu": {"h100": 4, "l4": 8},
            "mig": {"1g.10gb": 14},
            "storage": {"requests": "10Ti", "storageClasses": {"fast": {"requests": "1Ti", "persistentVolumeClaims": 5}, "slow.example.com": {"requests": "5Ti"}}},
            "objects": {"pods": 100, "services": 10, "servicesLoadBalancers": 1, "servicesNodePorts": 0,
                        "persistentVolumeClaims": 20, "configMaps": 50, "secrets": 50},
            "priorityClasses": {"online-inference": {"pods": 5, "cpu": "4", "memory": "16Gi", "gpu": 2}, "training": {"gpu": 4}},
        },
        "limits": {"defaultRequest": {"cpu": "200m"}, "max": {"ephemeralStorage": "50Gi"}, "min": {"ephemeralStorage": "10Mi"}},
        "network": {
            "ingressFrom": {"tenants": ["retired"], "platform": ["ingress", "monitoring"],
                            "ports": [{"port": 8000, "endPort": 8099}, {"port": 9000, "protocol": "SCTP"}]},
            "egress": [
                {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.2.0.0/16"], "ports": [{"port": 443}, {"port": 5000, "endPort": 5010, "protocol": "UDP"}]},
                {"cidr": "2001:db8::/32"},
            ],
        },
        "gpu": {"classes": ["h100", "l4", "a100-mig"]},
        "podSecurity": "restricted",
    },
    {
        "name": "retired",
        "displayName": "Retired Team",
        "costCenter": "cc-0",
        "lifecycle": "decommissioned",
        "decommission": {"confirm": "retired"},
        "access": {"viewers": {"users": ["archivist@example.com"]}},
    },
]


def synthetic_environment() -> tuple[Environment, list[Tenant]]:
    """A made-up environment and tenants that exercise every optional branch of the builders."""
    platform = Platform.model_validate(SYNTHETIC_PLATFORM)
    tenants = [Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", **t}) for t in SYNTHETIC_TENANTS]
    return Environment("lab", platform, None, []), tenants


@pytest.fixture(scope="session")
def rendered(environments: dict[str, Environment]) -> dict[str, dict[str, list[dict]]]:
    """Core objects per environment (`dev`, `prod`, the synthetic `lab`), keyed `_platform` or tenant name."""
    from components.manifests.tenant_core import platform_core_objects, tenant_objects

    cases = {name: (env, [t.spec for t in env.tenants]) for name, env in environments.items()}
    cases["lab"] = synthetic_environment()
    return {
        name: {"_platform": platform_core_objects(env), **{t.name: tenant_objects(t, env) for t in tenants}}
        for name, (env, tenants) in cases.items()
    }


MIN_KUBERNETES = "1.30"


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


@pytest.fixture(scope="session")
def kube_schemas() -> KubeSchemas:
    """Strict schemas of every supported Kubernetes version (1.30 up to the newest the package ships)."""
    return KubeSchemas()
