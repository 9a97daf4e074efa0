"""Checks between the tenants of one environment, one small validator per concern: unique names
and namespaces, previous names, the stack's tenant list, dedicated pools, ingress grants between
tenants. Each takes (environment, every loaded tenant file, deployed or not); `check_fleet` runs
them and then the capacity check.

Clashes between files are reported on every file involved: the one a pull request edited may sort
either way (`tenants diff` prints the edited files' problems first)."""

from __future__ import annotations

from ..fleet.environment import Environment, LoadedTenant
from ..fleet.feasibility import reachable_pools
from ..fleet.ingress_hosts import HostClaim, at_or_below, claims_of, foreign_claim, overlapping_claims
from ..fleet.isolation import fraction_isolation, isolation_of
from ..spec.hints import did_you_mean_tenant
from ..spec.problems import Problem
from .capacity import capacity_problems
from .platform import platform_path


def _by_file(all_tenants: list[LoadedTenant]) -> list[LoadedTenant]:
    return sorted(all_tenants, key=lambda t: t.doc.file)


def _files_by_name(all_tenants: list[LoadedTenant]) -> dict[str, list[LoadedTenant]]:
    files_by_name: dict[str, list] = {}
    for loaded in _by_file(all_tenants):
        files_by_name.setdefault(loaded.name, []).append(loaded)
    return files_by_name


def _first_file_per_name(all_tenants: list[LoadedTenant]) -> dict[str, LoadedTenant]:
    return {name: group[0] for name, group in _files_by_name(all_tenants).items()}


def tenant_names_are_unique(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """One file per tenant name.

    >>> tenant_names_are_unique(prod, prod.tenants)
    []

    >>> from dataclasses import replace
    >>> [p.message for p in tenant_names_are_unique(prod, [*prod.tenants, replace(prod.tenants[0], doc=prod.tenants[1].doc)])][:1]
    ["tenant 'eval' is also defined in tenants/inference.yaml; tenant names must be unique: rename one of them (its `name` and its file)"]
    """
    problems: list[Problem] = []
    files_by_name = _files_by_name(all_tenants)
    for loaded in _by_file(all_tenants):
        others = [o for o in files_by_name[loaded.name] if o is not loaded]
        if others:
            problems.append(loaded.doc.problem(("name",), f"tenant '{loaded.name}' is also defined in {', '.join(o.doc.file for o in others)}; tenant names must be unique: rename one of them (its `name` and its file)"))
    return problems


def namespaces_have_one_tenant(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """A namespace (a tenant's own or an extra one) belongs to one tenant.

    >>> namespaces_have_one_tenant(prod, prod.tenants)
    []
    """
    problems: list[Problem] = []
    by_file = _by_file(all_tenants)
    claims: dict[str, list[tuple[object, tuple]]] = {}
    for loaded in by_file:
        claims.setdefault(loaded.name, []).append((loaded, ("name",)))
        for index, namespace in enumerate(loaded.spec.namespaces):
            claims.setdefault(namespace, []).append((loaded, ("namespaces", index)))
    for namespace, claimants in claims.items():
        if len({loaded.name for loaded, _ in claimants}) < 2:
            continue  # one tenant (or one name defined twice, reported above)
        owner = next((loaded for loaded, path in claimants if path == ("name",)), None)
        for loaded, path in claimants:
            others = ", ".join(f"'{o.name}' ({o.doc.file})" for o, _ in claimants if o.name != loaded.name)
            if owner is not None and owner.name != loaded.name:
                message = f"namespace '{namespace}' already belongs to tenant '{owner.name}' ({owner.doc.file}): it is that tenant's own namespace"
            elif path == ("name",):
                message = f"this tenant's own namespace '{namespace}' is also claimed by tenant {others} under namespaces; a namespace has one tenant"
            else:
                message = f"namespace '{namespace}' is also claimed by tenant {others}; a namespace has one tenant: remove it from one of the two files"
            problems.append(loaded.doc.problem(path, message))
    return problems


def previous_names_are_free(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """A previous name is no other tenant's current name (reported on both files).

    >>> previous_names_are_free(prod, prod.tenants)
    []
    """
    problems: list[Problem] = []
    names = _first_file_per_name(all_tenants)
    by_file = _by_file(all_tenants)
    for loaded in by_file:
        for previous in loaded.spec.previous_names:
            other = names.get(previous)
            if other is not None and other is not loaded:
                problems.append(loaded.doc.problem(("previousNames",), f"previous name '{previous}' is the current name of tenant in {other.doc.file}; remove '{previous}' from previousNames (a name has one tenant)"))
                problems.append(other.doc.problem(("name",), f"tenant '{loaded.name}' ({loaded.doc.file}) lists '{previous}' under previousNames, but it is this tenant's name"))
    return problems


def stack_lists_known_tenants(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """The stack's `tenants` list names tenant files (current names), and leaving a live tenant out
    is pointed out.

    >>> stack_lists_known_tenants(prod, prod.tenants)
    []
    """
    platform = environment.platform
    doc = environment.platform_doc
    problems: list[Problem] = []
    names = _first_file_per_name(all_tenants)
    known = {t.name for t in all_tenants}
    if platform.tenants != "all":
        renamed = {previous: t for t in all_tenants for previous in t.spec.previous_names}
        for index, name in enumerate(platform.tenants):
            if name in renamed and name not in known:
                now = renamed[name]
                problems.append(doc.problem(platform_path("tenants", index), f"'{name}' is a previous name of tenant '{now.name}' ({now.doc.file}); list '{now.name}' instead"))
            elif name not in known:
                problems.append(doc.problem(platform_path("tenants", index), f"no tenant file defines '{name}'{did_you_mean_tenant(name, known)}"))
        for name in environment.disabled_tenants:
            loaded = names.get(name)
            if loaded is not None and not loaded.spec.is_decommissioned and not platform.leaves_out_on_purpose(name):
                problems.append(doc.problem(platform_path("tenants"), (
                    f"tenant '{name}' ({loaded.doc.file}) is not deployed in stack {environment.name}: this list names "
                    f"the tenants the stack deploys; add '{name}' to it to deploy the tenant there"
                ), severity="warning"))
    problems.extend(_left_out_problems(environment, known))
    return problems


def _left_out_problems(environment: Environment, known: set[str]) -> list[Problem]:
    platform, doc = environment.platform, environment.platform_doc
    left_out = platform.tenants_left_out
    if left_out and platform.tenants == "all":
        return [doc.problem(platform_path("tenantsLeftOut"), (
            "`tenants: all` deploys every tenant, so none is left out; list the tenants this stack deploys in "
            "`tenants`, or remove tenantsLeftOut"))]
    problems = []
    for index, name in enumerate(left_out if isinstance(left_out, list) else []):
        if name not in known:
            problems.append(doc.problem(platform_path("tenantsLeftOut", index), f"no tenant file defines '{name}'{did_you_mean_tenant(name, known)}"))
        elif name in platform.tenants:
            problems.append(doc.problem(platform_path("tenantsLeftOut", index), (
                f"'{name}' is both deployed (`tenants`) and left out (`tenantsLeftOut`); remove it from one of the lists")))
    return problems


def dedicated_pools_have_one_tenant(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """A node pool is dedicated to one deployed tenant at most.

    >>> dedicated_pools_have_one_tenant(prod, prod.tenants)
    []
    """
    problems: list[Problem] = []
    dedicating: dict[str, list[tuple[object, int]]] = {}
    for loaded in environment.tenants:
        for index, pool in enumerate(loaded.spec.gpu.dedicated_pools):
            dedicating.setdefault(pool, []).append((loaded, index))
    for pool, claims in dedicating.items():
        for loaded, index in claims if len({id(c[0]) for c in claims}) > 1 else []:
            others = ", ".join(f"'{o.name}' ({o.doc.file})" for o, _ in claims if o is not loaded)
            problems.append(loaded.doc.problem(("gpu", "dedicatedPools", index), f"node pool '{pool}' is already dedicated to tenant {others}; a dedicated pool has one tenant: remove it here, or ask the platform team for a pool of this tenant's own"))
    return problems


def tenant_grants_name_deployed_tenants(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """`network.ingressFrom.tenants` names current, deployed, live tenants.

    >>> tenant_grants_name_deployed_tenants(prod, prod.tenants)
    []
    """
    problems: list[Problem] = []
    names = _first_file_per_name(all_tenants)
    known = {t.name for t in all_tenants}
    renamed_to = {previous: t for t in all_tenants for previous in t.spec.previous_names}
    deployed = {t.name for t in environment.tenants}
    for loaded in environment.tenants:
        for index, name in enumerate(loaded.spec.network.ingress_from.tenants):
            where = ("network", "ingressFrom", "tenants", index)
            source = names.get(name)
            if source is None and name in renamed_to:
                problems.append(loaded.doc.problem(where, f"'{name}' is a previous name of tenant '{renamed_to[name].name}' ({renamed_to[name].doc.file}); grant '{renamed_to[name].name}' instead"))
            elif source is None:
                problems.append(loaded.doc.problem(where, f"unknown tenant '{name}'{did_you_mean_tenant(name, known)}"))
            elif name not in deployed and environment.platform.leaves_out_on_purpose(name):
                continue  # the stack says it leaves that tenant out: the grant is idle there on purpose
            elif name not in deployed:
                problems.append(loaded.doc.problem(where, (
                    f"tenant '{name}' is not deployed in stack {environment.name} (the stack's `tenants` list leaves it out), "
                    f"so this grant lets nothing in there; remove it or deploy '{name}'"
                ), severity="warning"))
            elif source.spec.is_decommissioned:
                problems.append(loaded.doc.problem(where, (
                    f"tenant '{name}' is decommissioned: its namespaces are about to be deleted; remove the grant"
                ), severity="warning"))
    return problems


def _host_claims(environment: Environment, all_tenants: list[LoadedTenant]) -> list[tuple[LoadedTenant, HostClaim, str | None]]:
    """Every `network.ingressHosts` entry of the deployed tenants, with why it is not the tenant's (None: it is, or no one owns it)."""
    names = {previous: t.name for t in all_tenants for previous in t.spec.previous_names} | {t.name: t.name for t in all_tenants}
    return [
        (loaded, claim, foreign_claim(claim, environment.platform, names))
        for loaded in environment.tenants
        for claim in claims_of(loaded.name, loaded.spec.network.ingress_hosts)
    ]


def _host_path(claim: HostClaim) -> tuple:
    return ("network", "ingressHosts", claim.index)


def ingress_hosts_are_the_tenants_own(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """An Ingress host or wildcard in `network.ingressHosts` is the tenant's: under the stack's
    ingressDomain its own `<tenant>.<ingressDomain>` and below, elsewhere a domain the stack grants it
    (`ingressHosts.tenantDomains`); a stack that grants none is pointed out at each host outside
    its ingressDomain, which any tenant could claim first.

    >>> ingress_hosts_are_the_tenants_own(prod, prod.tenants)
    []
    >>> from dataclasses import replace
    >>> inference = next(t for t in prod.tenants if t.name == "inference")
    >>> hostile = replace(inference, spec=inference.spec.model_copy(update={"network": inference.spec.network.model_copy(
    ...     update={"ingress_hosts": ["eval.apps.acme.dev", "*.apps.acme.dev"]})}))
    >>> hijacking = replace(prod, tenants=[hostile if t is inference else t for t in prod.tenants])
    >>> for p in ingress_hosts_are_the_tenants_own(hijacking, hijacking.tenants):
    ...     print(p.field, p.message.split(":")[0])
    network.ingressHosts[0] 'eval.apps.acme.dev' belongs to tenant 'eval'
    network.ingressHosts[1] '*.apps.acme.dev' covers every tenant's hosts
    """
    problems: list[Problem] = []
    platform = environment.platform
    for loaded, claim, foreign in _host_claims(environment, all_tenants):
        if foreign is not None:
            problems.append(loaded.doc.problem(_host_path(claim), foreign))
        elif platform.ingress_hosts is None and not (platform.ingress_domain and at_or_below(claim.name, platform.ingress_domain)):
            problems.append(loaded.doc.problem(_host_path(claim), (
                f"'{claim.written}' is outside the stack's ingressDomain and the stack grants no such hosts "
                f"(ingressHosts.tenantDomains), so any tenant may claim one first; grant its domain to tenant "
                f"'{loaded.name}' in the stack, e.g. ingressHosts: {{tenantDomains: {{{loaded.name}: [{claim.name}]}}}}"
            ), severity="warning"))
    return problems


def ingress_hosts_have_one_tenant(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """Two tenants never claim the same host or overlapping wildcards (ingress-nginx merges every
    Ingress of one host, so the second would take the first's traffic); reported on both files.
    Under the ingress domain and with the stack's grants every name has one owner already, so
    this is the check of the hosts no grant decides.

    >>> ingress_hosts_have_one_tenant(prod, prod.tenants)
    []
    """
    files = {loaded.name: loaded for loaded in _by_file(all_tenants)}
    owned = [(loaded, claim) for loaded, claim, foreign in _host_claims(environment, all_tenants) if foreign is None]
    where = {claim: loaded for loaded, claim in owned}
    problems: list[Problem] = []
    for claim, others in sorted(overlapping_claims(c for _, c in owned).items(), key=lambda item: (where[item[0]].doc.file, item[0].index)):
        named = ", ".join(f"'{o.tenant}' ({files[o.tenant].doc.file}: '{o.written}')"
                          for o in sorted(others, key=lambda o: (files[o.tenant].doc.file, o.index)))
        problems.append(where[claim].doc.problem(_host_path(claim), (
            f"'{claim.written}' overlaps the Ingress hosts of tenant {named}; a host has one tenant (ingress-nginx merges "
            "the Ingresses of one host, so either tenant could serve the other's traffic): remove it from one file, "
            "or have the platform team grant the domain to one tenant (ingressHosts.tenantDomains in the stack)"
        )))
    return problems


def ingress_host_grants_name_tenants(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """The stack's `ingressHosts.tenantDomains` names tenant files (current names); a warning, not an
    error: a grant to no tenant keeps its domain from every other tenant, which is safe, and an
    environment loaded with a few tenants (a test's, a shard's) must not fail on the others' grants.

    >>> ingress_host_grants_name_tenants(prod, prod.tenants)
    []
    """
    grants = environment.platform.ingress_hosts
    known = {t.name for t in all_tenants}
    return [
        environment.platform_doc.problem(platform_path("ingressHosts", "tenantDomains", name),
                                         f"no tenant file defines '{name}': its domains stay closed to every other tenant "
                                         f"(remove the grant once the tenant is gone){did_you_mean_tenant(name, known)}",
                                         severity="warning")
        for name in (sorted(grants.tenant_domains) if grants else [])
        if name not in known
    ]


# A fleet of thousands shares one class; the message names a few and counts the rest.
_NAMED_TENANTS = 5


def shared_gpus_bound_memory_or_are_acknowledged(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """Tenants whose pods can land on the same physical GPU of a class that bounds no pod's GPU memory
    (time-slicing) are pointed out, at the class's `sharing`, unless the stack lists the class under
    `gpuSharing.acknowledgeNoMemoryBound`.

    >>> shared_gpus_bound_memory_or_are_acknowledged(prod, prod.tenants), shared_gpus_bound_memory_or_are_acknowledged(dev, dev.tenants)
    ([], [])
    >>> from dataclasses import replace
    >>> from components.spec.platform.inventory import GpuSharing
    >>> unacknowledged = replace(dev, platform=dev.platform.model_copy(update={"gpu_sharing": GpuSharing()}))
    >>> print(shared_gpus_bound_memory_or_are_acknowledged(unacknowledged, dev.tenants)[0].message)  # doctest: +ELLIPSIS
    GPU class 'l4' is shared by time-slicing, and tenants eval, inference, llm-finetune may run pods on the same GPU (pool l4-shared): ...
    """
    platform = environment.platform
    acknowledged = set(platform.gpu_sharing.acknowledge_no_memory_bound)
    owners = environment.facts.pool_owners
    tenants_by_pool: dict[str, set[str]] = {}
    for loaded in environment.tenants:
        if loaded.spec.is_decommissioned:
            continue
        for pool in reachable_pools(loaded.name, loaded.spec, platform, owners):
            if pool not in owners:
                tenants_by_pool.setdefault(pool, set()).add(loaded.name)
    problems: list[Problem] = []
    for class_name, gpu_class in sorted(platform.gpu_classes.items()):
        # A class of whole GPUs is still shared when it allows KAI fractions.
        isolation = fraction_isolation(gpu_class) or isolation_of(gpu_class)
        if class_name in acknowledged or not isolation.shares_a_gpu or isolation.bounds_memory:
            continue
        pools = sorted(p for p, members in tenants_by_pool.items() if len(members) > 1 and platform.node_pools[p].gpu_class == class_name)
        if not pools:
            continue
        tenants = sorted(set().union(*(tenants_by_pool[p] for p in pools)))
        named = ", ".join(tenants[:_NAMED_TENANTS]) + (f" and {len(tenants) - _NAMED_TENANTS} more" if len(tenants) > _NAMED_TENANTS else "")
        field = ("kaiFractions", "memoryBound") if gpu_class.kai_fractions else ("sharing",)
        problems.append(environment.platform_doc.problem(platform_path("gpuClasses", class_name, *field), (
            f"GPU class '{class_name}' is shared by {isolation.mode}, and tenants {named} may run pods on the "
            f"same GPU ({'pools' if len(pools) > 1 else 'pool'} {', '.join(pools)}): nothing bounds a pod's GPU memory and "
            "faults are not isolated, so one tenant's pod can take all of a GPU's memory or end the others' kernels; "
            f"use MIG or MPS{' (or kaiFractions.memoryBound: hamicore, a soft bound)' if gpu_class.kai_fractions else ''} for a memory bound, dedicate pools, or accept it by listing '{class_name}' under "
            "gpuSharing.acknowledgeNoMemoryBound"
        ), severity="warning"))
    return problems


FLEET_VALIDATORS = (
    tenant_names_are_unique,
    namespaces_have_one_tenant,
    previous_names_are_free,
    stack_lists_known_tenants,
    dedicated_pools_have_one_tenant,
    tenant_grants_name_deployed_tenants,
    ingress_hosts_are_the_tenants_own,
    ingress_hosts_have_one_tenant,
    ingress_host_grants_name_tenants,
    shared_gpus_bound_memory_or_are_acknowledged,
)


def check_fleet(environment: Environment, all_tenants: list[LoadedTenant]) -> list[Problem]:
    """Problems between tenants: duplicate names and namespaces, shared dedicated pools, capacity.

    >>> [p.message for p in check_fleet(prod, prod.tenants)][:1]
    ["GPU class 'a100': tenant quotas on pool a100-shared add up to 20 (eval: 20), 100% of what it holds (capacity 16 x overcommit 1.25 = 20)"]
    """
    problems = [problem for validator in FLEET_VALIDATORS for problem in validator(environment, all_tenants)]
    return problems + capacity_problems(environment)
