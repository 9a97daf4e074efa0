"""Checks of one tenant against its environment's inventory, one small validator per concern.

Each validator takes (tenant, its document, the stack's platform) and returns its problems;
`check_tenant` runs them in order (the order the problems are reported in)."""

from __future__ import annotations

import ipaddress
from pathlib import PurePath
from typing import Callable

from ..fleet import gpu_capacity as cap
from ..fleet.budget import compute_hard, effective_limits, ephemeral_storage_quota, namespace_slices
from ..fleet.tenant_claims import namespace_owner, reserved_namespaces, subject_refusal
from ..spec.hints import did_you_mean
from ..spec.problems import Problem
from ..spec.quantity import Quantity
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from ..spec.yaml_source import SourceDocument, yaml_text

_STRICTNESS = {"privileged": 0, "baseline": 1, "restricted": 2}


def _adder(problems: list[Problem], doc: SourceDocument) -> Callable[..., None]:
    def add(path: tuple, message: str, severity: str = "error") -> None:
        problems.append(doc.problem(path, message, severity=severity))
    return add


def _lower_than(low: Quantity | None, high: Quantity | None) -> bool:
    return low is not None and high is not None and high < low


def file_is_named_after_the_tenant(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """One tenant per file, and the file carries its name.

    >>> file_is_named_after_the_tenant(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    stem = PurePath(doc.file).name.rsplit(".", 1)[0]
    if stem != tenant.name:
        add(("name",), f"tenant '{tenant.name}' is in file '{PurePath(doc.file).name}'; name the file {tenant.name}.yaml so that each team has one obvious file")
    return problems


def namespaces_are_free(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """No namespace the platform owns (fleet/tenant_claims.py: kube-*, default, the cluster DNS's,
    the GPU Operator's, Kueue's, KAI's, monitoring's, platform services', the stack's
    `reservedNamespaces`), none twice.

    A previous name is not checked: it adopts the old tenant's Pulumi resources, never a namespace
    created outside this tool, and renaming is the way out for a tenant holding a name reserved since.

    >>> namespaces_are_free(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    reserved = reserved_namespaces(platform)
    for index, namespace in enumerate(tenant.all_namespaces):
        path = ("name",) if index == 0 else ("namespaces", index - 1)
        owner = namespace_owner(namespace, reserved)
        if owner is not None:
            add(path, f"namespace '{namespace}' is reserved for {owner}: a tenant holding it would read its Secrets, run "
                "pods as its ServiceAccounts and change its configuration; choose another name")
    if len(set(tenant.all_namespaces)) != len(tenant.all_namespaces):
        add(("namespaces",), "lists a namespace twice (the tenant's own namespace is its name and need not be listed); remove the repeated entry")
    return problems


def access_names_only_the_tenants_subjects(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """No role of `access` names a `system:` user or group (every authenticated client, anonymous
    requests, cluster-admin's group, ...) or another namespace's ServiceAccount, unless the stack
    lists it (`tenantAccess.systemSubjects`); the tenant's own ServiceAccounts may be named, as the
    guard policy lets owners bind them too.

    >>> access_names_only_the_tenants_subjects(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    for role in ("owners", "developers", "viewers"):
        subjects = getattr(tenant.access, role)
        for kind in ("users", "groups"):
            for index, name in enumerate(getattr(subjects, kind)):
                why = subject_refusal(platform, kind, name, tenant.all_namespaces)
                if why is not None:
                    add(("access", role, kind, index), f"{why}: a tenant role may name only the team's own users and groups, and "
                        "ServiceAccounts of the tenant's namespaces (or add them to ciServiceAccounts); remove it, or ask the "
                        "platform team to list it under tenantAccess.systemSubjects")
    return problems


def gpu_references_exist(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """The GPU classes and dedicated pools the tenant names are in the inventory.

    >>> gpu_references_exist(tenant, prod.tenants[0].doc, prod.platform)
    []
    >>> [p.message for p in gpu_references_exist(tenant, prod.tenants[0].doc, dev.platform)][:1]
    ["unknown GPU class 'a100'; did you mean 'a100-mig'?"]
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    for index, name in enumerate(tenant.gpu.classes):
        if name not in platform.gpu_classes:
            add(("gpu", "classes", index), f"unknown GPU class '{name}'{did_you_mean(name, platform.gpu_classes)}")
    for index, name in enumerate(tenant.gpu.dedicated_pools):
        if name not in platform.node_pools:
            add(("gpu", "dedicatedPools", index), f"unknown node pool '{name}'{did_you_mean(name, platform.node_pools)}")
    return problems


def gpu_quota_fits_the_classes(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Whole-GPU quota: per class unless exactly one class is allowed, only for allowed classes,
    and not for a class whose GPUs are all MIG-partitioned.

    >>> gpu_quota_fits_the_classes(tenant, prod.tenants[0].doc, prod.platform)
    []
    >>> [p.message for p in gpu_quota_fits_the_classes(tenant, prod.tenants[0].doc, dev.platform)][:1]
    ["unknown GPU class 'a100'; did you mean 'a100-mig'?"]
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    allowed = cap.allowed_classes(tenant, platform)
    quota = tenant.quota.gpu
    if isinstance(quota, int) and quota > 0 and len(allowed) != 1:
        add(("quota", "gpu"), f"a plain GPU count needs exactly one allowed GPU class (allowed: {yaml_text(allowed) if allowed else 'none'}); write it per class, e.g. gpu: {{{(allowed or ['h100'])[0]}: {quota}}}")
    if isinstance(quota, dict):
        for name, count in quota.items():
            if name not in platform.gpu_classes:
                add(("quota", "gpu", name), f"unknown GPU class '{name}'{did_you_mean(name, platform.gpu_classes)}")
            elif name not in allowed and count > 0:
                add(("quota", "gpu", name), f"quota for GPU class '{name}', which the tenant may not use; add it to gpu.classes")
    for name, count in cap.gpu_quota_by_class(tenant, platform).items():
        gpu_class = platform.gpu_classes.get(name)
        if gpu_class is not None and cap.is_mig_mixed(gpu_class) and count > 0:
            pools = [p for p in platform.node_pools.values() if p.gpu_class == name]
            whole = sum(p.gpus_per_node - sum(c for c, _ in cap.pool_layout(platform, p)) for p in pools)
            if whole <= 0:
                add(("quota", "gpu"), f"GPU class '{name}' is MIG-partitioned (mixed strategy): ask for slices under quota.mig (e.g. mig: {{1g.10gb: 2}})")
    return problems


def mig_quota_is_provided(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Every MIG profile with quota is offered by a pool of a class the tenant may use.

    >>> mig_quota_is_provided(tenant, prod.tenants[0].doc, prod.platform)
    []
    >>> [p.message for p in mig_quota_is_provided(tenant, prod.tenants[0].doc, dev.platform)][:1]
    ['no node pool provides MIG profile 3g.40gb (offered: 1g.10gb); use an offered profile, or ask the platform team for a MIG layout with this one']
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    allowed = cap.allowed_classes(tenant, platform)
    if tenant.quota.mig:
        providers = {profile: set(classes) for profile, classes in cap.capacity(platform).mig_profile_classes.items()}
        for profile, count in tenant.quota.mig.items():
            classes = providers.get(profile, set())
            if count and not classes:
                offered = sorted(providers)
                add(("quota", "mig", profile), f"no node pool provides MIG profile {profile} (offered: {', '.join(offered) or 'none'}); use an offered profile, or ask the platform team for a MIG layout with this one")
            elif count and not classes & set(allowed):
                add(("quota", "mig", profile), f"MIG profile {profile} is provided by GPU class(es) {yaml_text(sorted(classes))}, which the tenant may not use; add one to gpu.classes")
    return problems


def priority_classes_exist(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """The PriorityClasses the quota is scoped to are the stack's.

    >>> priority_classes_exist(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    for name in tenant.quota.priority_classes:
        if name not in platform.priority_classes:
            add(("quota", "priorityClasses", name), f"unknown PriorityClass '{name}'{did_you_mean(name, platform.priority_classes)}")
    return problems


def compute_quota_is_usable(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Requests at most the limits, neither below zero.

    >>> compute_quota_is_usable(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    for resource in ("cpu", "memory", "ephemeral_storage"):
        pair = getattr(tenant.quota, resource)
        key = {"ephemeral_storage": "ephemeralStorage"}.get(resource, resource)
        if pair is not None and _lower_than(pair.requests, pair.limits):
            add(("quota", key, "limits"), f"limits ({pair.limits}) are below requests ({pair.requests}); every pod's limits are >= its requests, so this quota could never be used: raise limits to at least {pair.requests}, or lower requests")
        elif resource == "ephemeral_storage" and pair is not None:
            # One side written, the other from the stack's guard rails: the pair must still be usable.
            merged = ephemeral_storage_quota(tenant, platform)
            if _lower_than(merged.requests, merged.limits):
                side, other = ("requests", "limits") if pair.requests is not None else ("limits", "requests")
                add(("quota", key, side), f"{side} ({getattr(pair, side)}) with the stack's guardRails.ephemeralStorage.quota.{other} "
                    f"({getattr(merged, other)}) leaves limits below requests; set quota.ephemeralStorage.{other} too")
        for side in ("requests", "limits"):
            if pair is not None and getattr(pair, side) is not None and getattr(pair, side) < Quantity.parse(0):
                add(("quota", key, side), f"must be >= 0 (got {getattr(pair, side)})")
    return problems


def quota_has_limit_range_defaults(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """A quota on requests or limits needs a LimitRange default for pods that omit them, and a
    default request no larger than the whole quota.

    >>> quota_has_limit_range_defaults(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    limits = effective_limits(tenant, platform)
    for resource, key in (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeralStorage")):
        # Ephemeral storage always has quota keys (the tenant's or the stack's guard rails).
        pair = ephemeral_storage_quota(tenant, platform) if resource == "ephemeral_storage" else getattr(tenant.quota, resource)
        if pair is None:
            continue
        if pair.requests is not None and getattr(limits.default_request, resource) is None:
            add(("quota", key, "requests"), f"a quota on requests.{key} without a LimitRange defaultRequest makes pods that omit {key} requests fail; set limits.defaultRequest.{key} (or the stack's limitRangeDefaults)")
        if pair.limits is not None and getattr(limits.default, resource) is None:
            add(("quota", key, "limits"), f"a quota on limits.{key} without a LimitRange default makes pods that omit {key} limits fail; set limits.default.{key} (or the stack's limitRangeDefaults)")
        if pair.requests is not None and getattr(limits.default_request, resource) is not None and getattr(limits.default_request, resource) > pair.requests:
            add(("limits", "defaultRequest", key), f"the default request ({getattr(limits.default_request, resource)}) is larger than the whole quota ({pair.requests})")
        if pair.limits is not None and getattr(limits.default, resource) is not None and getattr(limits.default, resource) > pair.limits:
            add(("limits", "default", key), f"the default limit ({getattr(limits.default, resource)}) is larger than the whole quota on limits ({pair.limits}); no defaulted pod could be admitted")
    return problems


def ephemeral_storage_within_guard_rails(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """No per-container ephemeral-storage value above the stack's `guardRails.ephemeralStorage.max`:
    it bounds how much of a node's disk one container may fill before the kubelet evicts its pod.

    >>> ephemeral_storage_within_guard_rails(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    bound = platform.guard_rails.ephemeral_storage.max
    for part, key in (("default_request", "defaultRequest"), ("default", "default"), ("max", "max")):
        value = getattr(tenant.limits, part).ephemeral_storage
        if value is not None and value > bound:
            add(("limits", key, "ephemeralStorage"), f"{value} is above the stack's guardRails.ephemeralStorage.max ({bound}), the most "
                "node-local disk one container may hold; lower it, or ask the platform team to raise the bound (or use a PersistentVolumeClaim)")
    return problems


def limit_range_is_ordered(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """min <= default request <= default limit <= max, or defaulted pods are rejected.

    >>> limit_range_is_ordered(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    limits = effective_limits(tenant, platform)
    for resource, key in (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeralStorage")):
        request, default, maximum, minimum = (getattr(getattr(limits, part), resource) for part in ("default_request", "default", "max", "min"))
        if _lower_than(request, default):
            add(("limits", "default", key), f"default limit ({default}) is below the default request ({request}); raise the limit to at least {request}, or lower the request")
        if _lower_than(default, maximum) or _lower_than(request, maximum):
            add(("limits", "max", key), f"max ({maximum}) is below the default ({default or request}); defaulted pods would be rejected")
        if _lower_than(minimum, request):
            add(("limits", "min", key), f"min ({minimum}) is above the default request ({request})")
    return problems


def ci_accounts_are_in_own_namespaces(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """A CI ServiceAccount lives in one of the tenant's namespaces.

    >>> ci_accounts_are_in_own_namespaces(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    for index, grant in enumerate(tenant.access.ci_service_accounts):
        if grant.namespace is not None and grant.namespace not in tenant.all_namespaces:
            add(("access", "ciServiceAccounts", index, "namespace"), f"'{grant.namespace}' is not one of the tenant's namespaces ({', '.join(tenant.all_namespaces)}); use one of them (a CI ServiceAccount lives in the tenant's own namespaces)")
    return problems


def platform_service_grants_name_ports(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Ingress from a platform service names a known role and ports (its own or the stack's).

    >>> platform_service_grants_name_ports(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    for index, grant in enumerate(tenant.network.ingress_from.platform):
        role, ports = (grant, []) if isinstance(grant, str) else (grant.role, grant.ports)
        where = ("network", "ingressFrom", "platform", index)
        if role not in platform.platform_namespaces:
            add(where, f"unknown platform role '{role}'{did_you_mean(role, platform.platform_namespaces)}")
        elif not ports and not platform.platform_ports.get(role):
            add(where, f"ingress from platform role '{role}' names no ports and the stack's platformPorts has none for it; "
                       f"write {{role: {role}, ports: [{{port: 8080}}]}} (a grant never opens every port)")
    return problems


def api_server_egress_is_declared(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Egress to the API server needs the stack's API server endpoints.

    >>> api_server_egress_is_declared(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    if tenant.network.api_server and platform.cluster_network.api_server is None:
        add(("network", "apiServer"), "the stack declares no API server endpoints (clusterNetwork.apiServer); ask the platform team to add them")
    return problems


def egress_leaves_the_cluster(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Egress CIDRs are destinations outside the cluster's pod, service and node ranges.

    >>> egress_leaves_the_cluster(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    ranges = [(kind, ipaddress.ip_network(c)) for kind in ("pods", "services", "nodes") for c in getattr(platform.cluster_network, kind)]
    for index, rule in enumerate(tenant.network.egress):
        network = ipaddress.ip_network(rule.cidr)
        for kind, cluster in ranges:
            if network.version == cluster.version and network.overlaps(cluster):
                excepted = any(cluster.subnet_of(ipaddress.ip_network(e)) for e in rule.except_ if ipaddress.ip_network(e).version == cluster.version)
                if not excepted:
                    add(("network", "egress", index, "cidr"),
                        f"{rule.cidr} overlaps the cluster's {kind} range {cluster}: egress rules are for destinations outside "
                        f"the cluster (pods are reached by tenant grants); narrow the CIDR or add {cluster} to `except`")
    return problems


def pod_security_only_tightens(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """A tenant may tighten the stack's Pod Security level, never loosen it.

    >>> pod_security_only_tightens(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems: list[Problem] = []
    add = _adder(problems, doc)
    if tenant.pod_security is not None and _STRICTNESS[tenant.pod_security] < _STRICTNESS[platform.pod_security.level]:
        add(("podSecurity",), f"'{tenant.pod_security}' is less strict than the stack's '{platform.pod_security.level}'; a tenant may only tighten Pod Security: remove podSecurity (the stack's applies) or write a stricter level")
    return problems


def namespace_quotas_fit(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Slices for extra namespaces must name one, come out of an existing budget and fit in it.

    >>> namespace_quotas_fit(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    problems = []
    for namespace in tenant.namespace_quotas:
        if namespace not in tenant.namespaces:
            where = "the tenant's own namespace keeps what the slices leave" if namespace == tenant.name else f"the tenant's extra namespaces are: {', '.join(tenant.namespaces) or 'none'}"
            problems.append(doc.problem(("namespaceQuotas", namespace), f"'{namespace}' is not an extra namespace of this tenant ({where})"))
    if problems:
        return problems
    total = {**compute_hard(tenant), **{f"requests.{r}": str(c) for r, c in cap.gpu_quota_by_resource(tenant, platform).items()}}
    slices = namespace_slices(tenant, platform)
    for namespace, part in slices.items():
        for key in part:
            if key not in total:
                problems.append(doc.problem(("namespaceQuotas", namespace), f"{key} is carved out for {namespace}, but the tenant's quota has no {key} to carve it from"))
    for key, value in total.items():
        taken = {ns: part[key] for ns, part in slices.items() if key in part}
        if taken and sum(Quantity.parse(v).value for v in taken.values()) > Quantity.parse(value).value:
            detail = ", ".join(f"{ns}: {v}" for ns, v in sorted(taken.items()))
            first = sorted(taken)[0]
            problems.append(doc.problem(("namespaceQuotas", first), f"slices of {key} add up to more than the tenant's quota of {value} ({detail})"))
    return problems


TENANT_VALIDATORS = (
    file_is_named_after_the_tenant,
    namespaces_are_free,
    gpu_references_exist,
    gpu_quota_fits_the_classes,
    mig_quota_is_provided,
    namespace_quotas_fit,
    priority_classes_exist,
    compute_quota_is_usable,
    quota_has_limit_range_defaults,
    limit_range_is_ordered,
    ephemeral_storage_within_guard_rails,
    ci_accounts_are_in_own_namespaces,
    access_names_only_the_tenants_subjects,
    platform_service_grants_name_ports,
    api_server_egress_is_declared,
    egress_leaves_the_cluster,
    pod_security_only_tightens,
)


TenantCheck = Callable[[Tenant, SourceDocument, Platform], list[Problem]]


def check_tenant(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Problems of one tenant against its environment's inventory.

    >>> from components.spec.yaml_source import parse_yaml
    >>> doc = parse_yaml("apiVersion: gpu-tenancy.dev/v1alpha2\\nkind: Tenant\\nname: a\\n", "tenants/a.yaml")
    >>> tenant = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", gpu={"classes": ["h100"]})
    >>> [p.message for p in check_tenant(tenant, doc, Platform(labelDomain="gpu.example.com"))]
    ["unknown GPU class 'h100' (known: none defined)"]
    """
    return [problem for validator in TENANT_VALIDATORS for problem in validator(tenant, doc, platform)]
