"""Tenants for the builder tests: one example tenant as an environment sees it, and a made-up
environment whose tenants exercise every optional branch of the builders."""

from __future__ import annotations

from typing import Any, Callable

from components.fleet.environment import Environment
from components.spec.stack import Platform
from components.spec.tenant import Tenant


def tenant_of(environment: Environment, name: str) -> Tenant:
    """The spec of one example tenant as it applies to `environment`."""
    for loaded in environment.tenants:
        if loaded.name == name:
            return loaded.spec
    raise KeyError(f"no tenant '{name}' in environment '{environment.name}'")


def viewed(builder: Callable[..., Any], tenant: Tenant, environment: Environment) -> Any:
    """`builder(tenant, view)`, the view being the tenant's window on `environment`'s fleet."""
    return builder(tenant, environment.view(tenant))


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
