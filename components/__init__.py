"""gpu-tenancy: declarative tenants for a shared GPU Kubernetes cluster, as a library.

The public API (docs/library.md); everything else is internal and may move:

    load_environment(root, stack)                     an environment from tenants/ + stacks/ files
    environment_from_data(stack, platform, tenants)   the same from plain dicts (tenants from anywhere)
    environment_objects(environment)                  {owner: [Kubernetes objects]} (pure; "_platform" for cluster-wide ones)
    Fleet, Tenant, GpuPlatform                        the Pulumi components (providers only through `opts`)
    Environment, InvalidInput, Problem                what the loaders return and raise

>>> from components import load_environment, Fleet            # doctest: +SKIP
>>> fleet = Fleet("prod", load_environment(Path("."), "prod"))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .manifests.build import PLATFORM, environment_objects
from .fleet.environment import Environment
from .load import environment_from_data, load_environment
from .spec.problems import InvalidInput, Problem

if TYPE_CHECKING:  # the Pulumi components load Pulumi; the offline tools never need it
    from .resources.fleet import Fleet
    from .resources.gpu_platform import GpuPlatform
    from .resources.tenant import Tenant

_COMPONENTS = {"Fleet": "fleet", "Tenant": "tenant", "GpuPlatform": "gpu_platform"}

__all__ = [
    "PLATFORM",
    "Environment",
    "Fleet",
    "GpuPlatform",
    "InvalidInput",
    "Problem",
    "Tenant",
    "environment_from_data",
    "environment_objects",
    "load_environment",
]


def __getattr__(name: str) -> Any:
    if name in _COMPONENTS:
        from importlib import import_module

        return getattr(import_module(f".resources.{_COMPONENTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
