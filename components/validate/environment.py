"""Every check of one environment, composed: the stack's inventory, each deployed tenant, the
environments tenant files override, the fleet as a whole, queues, vCluster values, role bundles."""

from __future__ import annotations

from ..fleet.environment import Environment, LoadedTenant
from ..spec.hints import did_you_mean
from ..spec.problems import Problem
from .fleet import check_fleet
from .platform import check_platform
from .queues import check_environment_queues
from .role_bundles import check_environment_bundles
from .tenant import TenantCheck, check_tenant
from .vcluster import check_environment_vclusters


def overrides_name_stacks(all_tenants: list[LoadedTenant], known_envs: list[str]) -> list[Problem]:
    """A tenant file's `environments` overrides name stacks that exist (when the stacks are known).

    >>> overrides_name_stacks(prod.tenants, ["prod", "staging", "dev"])
    []
    >>> [p.message for p in overrides_name_stacks(prod.tenants, ["prod"])][:1]
    ["no stack 'dev' (stacks/Pulumi.dev.yaml) (known: prod)"]
    """
    problems: list[Problem] = []
    for loaded in all_tenants:
        for env_name in loaded.spec.environments:
            if known_envs and env_name not in known_envs:
                problems.append(loaded.doc.problem(("environments", env_name), f"no stack '{env_name}' (stacks/Pulumi.{env_name}.yaml){did_you_mean(env_name, known_envs)}"))
    return problems


def check_environment(environment: Environment, all_tenants: list[LoadedTenant], known_envs: list[str],
                      tenant_check: TenantCheck = check_tenant) -> list[Problem]:
    """Every cross-file check for one environment, in the order its problems are reported.
    `tenant_check`: `check_tenant` or one that gives the same problems (load.py remembers them
    across the two sides of a diff).

    >>> [(p.severity, p.field) for p in check_environment(prod, prod.tenants, ["prod", "staging", "dev"])]
    [('warning', 'config.gpu-tenancy:platform.nodePools.a100-shared'), ('warning', 'config.gpu-tenancy:platform.nodePools.a100-mig')]
    """
    problems = check_platform(environment.platform, environment.platform_doc)
    for loaded in environment.tenants:
        problems.extend(tenant_check(loaded.spec, loaded.doc, environment.platform))
    problems.extend(overrides_name_stacks(all_tenants, known_envs))
    problems.extend(check_fleet(environment, all_tenants))
    problems.extend(check_environment_queues(environment) + check_environment_vclusters(environment))
    problems.extend(check_environment_bundles(environment))
    return problems
