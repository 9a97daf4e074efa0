"""Cross-file checks: what no single model can see (references, uniqueness, capacity, geometry)."""

from __future__ import annotations

import difflib
import ipaddress
from fractions import Fraction
from pathlib import PurePath
from typing import Iterable

from ..fleet import feasibility as feas
from ..fleet import gpu_capacity as cap
from ..fleet import mig
from ..fleet.budget import compute_hard, effective_limits, namespace_slices
from ..spec.problems import Problem
from ..spec.quantity import Quantity
from ..spec.stack import CONFIG_KEY, Platform
from ..spec.tenant import Tenant
from ..spec.yaml_source import SourceDocument, yaml_text
from ..fleet import queue_arithmetic
from ..spec import role_bundles
from . import vcluster

_STRICTNESS = {"privileged": 0, "baseline": 1, "restricted": 2}
_RESERVED_PREFIXES = ("kube-", "openshift-")
_RESERVED_NAMES = {"default", "kube-system", "kube-public", "kube-node-lease"}


def _hint(value: str, known: Iterable[str]) -> str:
    known = sorted(known)
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    listing = ", ".join(known) if known else "none defined"
    return f"; did you mean '{close[0]}'?" if close else f" (known: {listing})"


def _tenant_hint(value: str, known: Iterable[str]) -> str:
    """Like `_hint` for tenant names, stricter: teams often share a prefix or a word (llm-eval and
    eval are two teams), so only a near-identical name is suggested.

    >>> _tenant_hint("llm-eval", ["eval", "inference"]), _tenant_hint("inferense", ["eval", "inference"])
    (' (no tenant file has a close name; tenant files define: eval, inference)', "; did you mean 'inference'?")
    """
    known = sorted(known)
    if not known:
        return " (known: none defined)"
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.8)
    if close:
        return f"; did you mean '{close[0]}'?"
    listing = f"; tenant files define: {', '.join(known)}" if 0 < len(known) <= 12 else ""
    return f" (no tenant file has a close name{listing})"


def _platform_path(*parts) -> tuple:
    return ("config", CONFIG_KEY, *parts)


def check_platform(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """Problems in one stack's inventory: references between classes, pools and MIG layouts."""
    problems: list[Problem] = []
    node_owner: dict[str, str] = {}
    for pool_name, pool in sorted(platform.node_pools.items()):
        where = _platform_path("nodePools", pool_name)
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        if gpu_class is None:
            problems.append(doc.problem(where + ("gpuClass",), f"unknown GPU class '{pool.gpu_class}'{_hint(pool.gpu_class, platform.gpu_classes)}"))
            continue
        for index, node in enumerate(pool.nodes):
            if node in node_owner:
                problems.append(doc.problem(where + ("nodes", index), f"node '{node}' is already in pool '{node_owner[node]}'; a node belongs to one pool"))
            node_owner.setdefault(node, pool_name)
        if pool.patch_taints is False and pool.nodes:
            problems.append(doc.problem(where + ("patchTaints",), "static nodes are not tainted here: if the pool is dedicated to a tenant, its nodes must register with the taint "
                                        f"{platform.label_domain}/tenant=<tenant>:NoSchedule themselves, or pods that select no node can land on them", severity="warning"))
        if gpu_class.sharing == "mig":
            problems.extend(_check_pool_layout(platform, doc, pool_name))
        elif pool.mig_layout is not None:
            problems.append(doc.problem(where + ("migLayout",), f"pool's GPU class '{pool.gpu_class}' is not shared by MIG (sharing: {gpu_class.sharing}); remove migLayout or use a MIG class"))
    for name, layout in sorted(platform.mig_layouts.items()):
        seen: set[int] = set()
        for index, group in enumerate(layout):
            if group.devices == "all" and len(layout) > 1:
                problems.append(doc.problem(_platform_path("migLayouts", name, index, "devices"), "`devices: all` cannot be combined with other groups in the same layout"))
            elif group.devices != "all":
                overlap = seen & set(group.devices)
                if overlap:
                    problems.append(doc.problem(_platform_path("migLayouts", name, index, "devices"), f"GPU index(es) {yaml_text(sorted(overlap))} appear in two groups"))
                seen |= set(group.devices)
    if sum(1 for pc in platform.priority_classes.values() if pc.global_default) > 1:
        problems.append(doc.problem(_platform_path("priorityClasses"), "at most one PriorityClass may be globalDefault"))
    problems.extend(_pod_security_version_problems(platform, doc))
    return problems


# The Pod Security version the tool is tested against (tools/versions.env); a pin below the cluster
# misses the checks added since (e.g. baseline refuses probe and lifecycle `host` from v1.34).
TESTED_KUBERNETES_MINOR = 37


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def _pod_security_version_problems(platform: Platform, doc: SourceDocument) -> list[Problem]:
    pinned = platform.pod_security.version
    if pinned == "latest":
        return []
    cluster = platform.kubernetes_version
    floor = _minor(cluster) if cluster else TESTED_KUBERNETES_MINOR
    if _minor(pinned) >= floor:
        return []
    against = f"the cluster ({cluster})" if cluster else f"v1.{TESTED_KUBERNETES_MINOR} (set kubernetesVersion to compare with the cluster)"
    return [doc.problem(
        _platform_path("podSecurity", "version"),
        f"Pod Security is pinned to {pinned}, older than {against}: pods pass checks added since (e.g. the probe "
        "and lifecycle `host` field, baseline from v1.34); use latest or the cluster's version",
        severity="warning",
    )]


def _check_pool_layout(platform: Platform, doc: SourceDocument, pool_name: str) -> list[Problem]:
    pool = platform.node_pools[pool_name]
    gpu_class = platform.gpu_classes[pool.gpu_class]
    where = _platform_path("nodePools", pool_name, "migLayout")
    if pool.mig_layout is None:
        return [doc.problem(_platform_path("nodePools", pool_name), f"pool of MIG class '{pool.gpu_class}' needs `migLayout` (a name from migLayouts, or all-<profile>)")]
    if gpu_class.model not in mig.geometry():
        return [doc.problem(_platform_path("gpuClasses", pool.gpu_class, "model"), f"GPU model '{gpu_class.model}' does not support MIG{_hint(gpu_class.model, mig.geometry())}")]
    if pool.mig_layout in platform.mig_layouts:
        groups = platform.mig_layouts[pool.mig_layout]
        problems = []
        for index, group in enumerate(groups):
            for reason in mig.layout_problems(gpu_class.model, group.profiles):
                problems.append(doc.problem(_platform_path("migLayouts", pool.mig_layout, index, "profiles"), f"invalid for pool '{pool_name}' ({gpu_class.model}): {reason}"))
            if group.devices != "all":
                beyond = [d for d in group.devices if d >= pool.gpus_per_node]
                if beyond:
                    problems.append(doc.problem(_platform_path("migLayouts", pool.mig_layout, index, "devices"), f"GPU index(es) {yaml_text(beyond)} do not exist on pool '{pool_name}' ({pool.gpus_per_node} GPUs per node)"))
        if gpu_class.mig and gpu_class.mig.strategy == "single":
            profiles = {p for g in groups for p in g.profiles}
            if len(profiles) > 1:
                problems.append(doc.problem(where, f"the single MIG strategy needs one profile on every GPU; layout '{pool.mig_layout}' mixes {yaml_text(sorted(profiles))} (use strategy: mixed)"))
        return problems
    if mig.expand_named_layout(pool.mig_layout, gpu_class.model) is None:
        return [doc.problem(where, f"unknown MIG layout '{pool.mig_layout}': define it under migLayouts or use all-<profile> with a profile of {gpu_class.model} ({', '.join(mig.geometry()[gpu_class.model].profiles)})")]
    return []


def _lower_than(low: Quantity | None, high: Quantity | None) -> bool:
    return low is not None and high is not None and high < low


def check_tenant(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Problems of one tenant against its environment's inventory."""
    problems: list[Problem] = []

    def add(path: tuple, message: str, severity: str = "error") -> None:
        problems.append(doc.problem(path, message, severity=severity))

    stem = PurePath(doc.file).name.rsplit(".", 1)[0]
    if stem != tenant.name:
        add(("name",), f"tenant '{tenant.name}' is in file '{PurePath(doc.file).name}'; name the file {tenant.name}.yaml so that each team has one obvious file")
    for index, namespace in enumerate(tenant.all_namespaces):
        path = ("name",) if index == 0 else ("namespaces", index - 1)
        if namespace in _RESERVED_NAMES or namespace.startswith(_RESERVED_PREFIXES):
            add(path, f"namespace '{namespace}' is reserved for the cluster (kube-*, default); choose another name")
        for role, namespaces in platform.platform_namespaces.items():
            if namespace in namespaces:
                add(path, f"namespace '{namespace}' is the platform's {role} namespace; choose another name")
        if namespace == platform.cluster_dns.namespace:
            add(path, f"namespace '{namespace}' holds the cluster DNS; choose another name")
    if len(set(tenant.all_namespaces)) != len(tenant.all_namespaces):
        add(("namespaces",), "lists a namespace twice (the tenant's own namespace is its name and need not be listed)")

    # GPU access and quotas
    for index, name in enumerate(tenant.gpu.classes):
        if name not in platform.gpu_classes:
            add(("gpu", "classes", index), f"unknown GPU class '{name}'{_hint(name, platform.gpu_classes)}")
    for index, name in enumerate(tenant.gpu.dedicated_pools):
        if name not in platform.node_pools:
            add(("gpu", "dedicatedPools", index), f"unknown node pool '{name}'{_hint(name, platform.node_pools)}")
    allowed = cap.allowed_classes(tenant, platform)
    quota = tenant.quota.gpu
    if isinstance(quota, int) and quota > 0 and len(allowed) != 1:
        add(("quota", "gpu"), f"a plain GPU count needs exactly one allowed GPU class (allowed: {yaml_text(allowed) if allowed else 'none'}); write it per class, e.g. gpu: {{{(allowed or ['h100'])[0]}: {quota}}}")
    if isinstance(quota, dict):
        for name, count in quota.items():
            if name not in platform.gpu_classes:
                add(("quota", "gpu", name), f"unknown GPU class '{name}'{_hint(name, platform.gpu_classes)}")
            elif name not in allowed and count > 0:
                add(("quota", "gpu", name), f"quota for GPU class '{name}', which the tenant may not use; add it to gpu.classes")
    for name, count in cap.gpu_quota_by_class(tenant, platform).items():
        gpu_class = platform.gpu_classes.get(name)
        if gpu_class is not None and cap.is_mig_mixed(gpu_class) and count > 0:
            pools = [p for p in platform.node_pools.values() if p.gpu_class == name]
            whole = sum(p.gpus_per_node - sum(c for c, _ in cap.pool_layout(platform, p)) for p in pools)
            if whole <= 0:
                add(("quota", "gpu"), f"GPU class '{name}' is MIG-partitioned (mixed strategy): ask for slices under quota.mig (e.g. mig: {{1g.10gb: 2}})")
    if tenant.quota.mig:
        providers = {profile: set(classes) for profile, classes in cap.capacity(platform).mig_profile_classes.items()}
        for profile, count in tenant.quota.mig.items():
            classes = providers.get(profile, set())
            if count and not classes:
                offered = sorted(providers)
                add(("quota", "mig", profile), f"no node pool provides MIG profile {profile} (offered: {', '.join(offered) or 'none'})")
            elif count and not classes & set(allowed):
                add(("quota", "mig", profile), f"MIG profile {profile} is provided by GPU class(es) {yaml_text(sorted(classes))}, which the tenant may not use; add one to gpu.classes")

    problems.extend(_namespace_quota_problems(tenant, doc, platform))

    # Priority classes
    for name in tenant.quota.priority_classes:
        if name not in platform.priority_classes:
            add(("quota", "priorityClasses", name), f"unknown PriorityClass '{name}'{_hint(name, platform.priority_classes)}")

    # Requests, limits and LimitRange
    for resource in ("cpu", "memory", "ephemeral_storage"):
        pair = getattr(tenant.quota, resource)
        key = {"ephemeral_storage": "ephemeralStorage"}.get(resource, resource)
        if pair is not None and _lower_than(pair.requests, pair.limits):
            add(("quota", key, "limits"), f"limits ({pair.limits}) are below requests ({pair.requests}); every pod's limits are >= its requests, so this quota could never be used")
        for side in ("requests", "limits"):
            if pair is not None and getattr(pair, side) is not None and getattr(pair, side) < Quantity.parse(0):
                add(("quota", key, side), f"must be >= 0 (got {getattr(pair, side)})")
    limits = effective_limits(tenant, platform)
    for resource, key in (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeralStorage")):
        pair = getattr(tenant.quota, resource)
        if pair is None:
            continue
        if pair.requests is not None and getattr(limits.default_request, resource) is None:
            add(("quota", key, "requests"), f"a quota on requests.{key} without a LimitRange defaultRequest makes pods that omit {key} requests fail; set limits.defaultRequest.{key} (or the stack's limitRangeDefaults)")
        if pair.limits is not None and getattr(limits.default, resource) is None:
            add(("quota", key, "limits"), f"a quota on limits.{key} without a LimitRange default makes pods that omit {key} limits fail; set limits.default.{key} (or the stack's limitRangeDefaults)")
        if pair.requests is not None and getattr(limits.default_request, resource) is not None and getattr(limits.default_request, resource) > pair.requests:
            add(("limits", "defaultRequest", key), f"the default request ({getattr(limits.default_request, resource)}) is larger than the whole quota ({pair.requests})")
    for resource, key in (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeralStorage")):
        request, default, maximum, minimum = (getattr(getattr(limits, part), resource) for part in ("default_request", "default", "max", "min"))
        if _lower_than(request, default):
            add(("limits", "default", key), f"default limit ({default}) is below the default request ({request})")
        if _lower_than(default, maximum) or _lower_than(request, maximum):
            add(("limits", "max", key), f"max ({maximum}) is below the default ({default or request}); defaulted pods would be rejected")
        if _lower_than(minimum, request):
            add(("limits", "min", key), f"min ({minimum}) is above the default request ({request})")

    # Access and network references
    for index, grant in enumerate(tenant.access.ci_service_accounts):
        if grant.namespace is not None and grant.namespace not in tenant.all_namespaces:
            add(("access", "ciServiceAccounts", index, "namespace"), f"'{grant.namespace}' is not one of the tenant's namespaces ({', '.join(tenant.all_namespaces)})")
    for index, grant in enumerate(tenant.network.ingress_from.platform):
        role, ports = (grant, []) if isinstance(grant, str) else (grant.role, grant.ports)
        where = ("network", "ingressFrom", "platform", index)
        if role not in platform.platform_namespaces:
            add(where, f"unknown platform role '{role}'{_hint(role, platform.platform_namespaces)}")
        elif not ports and not platform.platform_ports.get(role):
            add(where, f"ingress from platform role '{role}' names no ports and the stack's platformPorts has none for it; "
                       f"write {{role: {role}, ports: [{{port: 8080}}]}} (a grant never opens every port)")
    if tenant.network.api_server and platform.cluster_network.api_server is None:
        add(("network", "apiServer"), "the stack declares no API server endpoints (clusterNetwork.apiServer); ask the platform team to add them")
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
    if tenant.pod_security is not None and _STRICTNESS[tenant.pod_security] < _STRICTNESS[platform.pod_security.level]:
        add(("podSecurity",), f"'{tenant.pod_security}' is less strict than the stack's '{platform.pod_security.level}'; a tenant may only tighten Pod Security")
    return problems


def _namespace_quota_problems(tenant: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
    """Slices for extra namespaces must name one, come out of an existing budget and fit in it."""
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


def check_fleet(environment, all_tenants) -> list[Problem]:
    """Problems between tenants: duplicate names and namespaces, shared dedicated pools, capacity."""
    platform: Platform = environment.platform
    doc: SourceDocument = environment.platform_doc
    problems: list[Problem] = []
    # Clashes between files are reported on every file involved: the one a pull request edited may
    # sort either way (`tenants diff` prints the edited files' problems first).
    by_file = sorted(all_tenants, key=lambda t: t.doc.file)
    files_by_name: dict[str, list] = {}
    for loaded in by_file:
        files_by_name.setdefault(loaded.name, []).append(loaded)
    names = {name: group[0] for name, group in files_by_name.items()}
    for loaded in by_file:
        others = [o for o in files_by_name[loaded.name] if o is not loaded]
        if others:
            problems.append(loaded.doc.problem(("name",), f"tenant '{loaded.name}' is also defined in {', '.join(o.doc.file for o in others)}; tenant names must be unique"))
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
                message = f"namespace '{namespace}' is also claimed by tenant {others}; a namespace has one tenant"
            problems.append(loaded.doc.problem(path, message))
    for loaded in by_file:
        for previous in loaded.spec.previous_names:
            other = names.get(previous)
            if other is not None and other is not loaded:
                problems.append(loaded.doc.problem(("previousNames",), f"previous name '{previous}' is the current name of tenant in {other.doc.file}"))
                problems.append(other.doc.problem(("name",), f"tenant '{loaded.name}' ({loaded.doc.file}) lists '{previous}' under previousNames, but it is this tenant's name"))

    enabled = environment.tenants
    known = {t.name for t in all_tenants}
    if platform.tenants != "all":
        renamed = {previous: t for t in all_tenants for previous in t.spec.previous_names}
        for index, name in enumerate(platform.tenants):
            if name in renamed and name not in known:
                now = renamed[name]
                problems.append(doc.problem(_platform_path("tenants", index), f"'{name}' is a previous name of tenant '{now.name}' ({now.doc.file}); list '{now.name}' instead"))
            elif name not in known:
                problems.append(doc.problem(_platform_path("tenants", index), f"no tenant file defines '{name}'{_tenant_hint(name, known)}"))
        for name in environment.disabled_tenants:
            loaded = names.get(name)
            if loaded is not None and loaded.spec.lifecycle != "decommissioned":
                problems.append(doc.problem(_platform_path("tenants"), (
                    f"tenant '{name}' ({loaded.doc.file}) is not deployed in stack {environment.name}: this list names "
                    f"the tenants the stack deploys; add '{name}' to it to deploy the tenant there"
                ), severity="warning"))
    renamed_to = {previous: t for t in all_tenants for previous in t.spec.previous_names}
    deployed = {t.name for t in enabled}
    dedicating: dict[str, list[tuple[object, int]]] = {}
    for loaded in enabled:
        for index, pool in enumerate(loaded.spec.gpu.dedicated_pools):
            dedicating.setdefault(pool, []).append((loaded, index))
    for pool, claims in dedicating.items():
        for loaded, index in claims if len({id(c[0]) for c in claims}) > 1 else []:
            others = ", ".join(f"'{o.name}' ({o.doc.file})" for o, _ in claims if o is not loaded)
            problems.append(loaded.doc.problem(("gpu", "dedicatedPools", index), f"node pool '{pool}' is already dedicated to tenant {others}; a dedicated pool has one tenant"))
    for loaded in enabled:
        for index, name in enumerate(loaded.spec.network.ingress_from.tenants):
            where = ("network", "ingressFrom", "tenants", index)
            source = names.get(name)
            if source is None and name in renamed_to:
                problems.append(loaded.doc.problem(where, f"'{name}' is a previous name of tenant '{renamed_to[name].name}' ({renamed_to[name].doc.file}); grant '{renamed_to[name].name}' instead"))
            elif source is None:
                problems.append(loaded.doc.problem(where, f"unknown tenant '{name}'{_tenant_hint(name, known)}"))
            elif name not in deployed:
                problems.append(loaded.doc.problem(where, (
                    f"tenant '{name}' is not deployed in stack {environment.name} (the stack's `tenants` list leaves it out), "
                    f"so this grant lets nothing in there; remove it or deploy '{name}'"
                ), severity="warning"))
            elif source.spec.lifecycle == "decommissioned":
                problems.append(loaded.doc.problem(where, (
                    f"tenant '{name}' is decommissioned: its namespaces are about to be deleted; remove the grant"
                ), severity="warning"))
    problems.extend(_capacity_problems(environment))
    return problems


def _capacity_problems(environment) -> list[Problem]:
    """Quotas that cannot all be honoured at once on the pools their tenants may reach (errors, on
    every involved tenant's quota line), and groups of pools whose quotas are near full (warnings).

    See `components.fleet.feasibility`: per GPU class and MIG profile, a max-flow over tenants x
    reachable pools; dedicated pools are capacity for their owner only.
    """
    platform: Platform = environment.platform
    doc: SourceDocument = environment.platform_doc
    active = [t for t in environment.tenants if t.spec.lifecycle == "active"]
    by_name = {t.name: t for t in active}
    owners = feas.pool_owners([(t.name, t.spec) for t in environment.tenants], platform)
    problems: list[Problem] = []
    ratio = Fraction(platform.capacity_warning_ratio)
    # A tenant listing a pool that another tenant already holds gets that error; the capacity it
    # then lacks is a consequence, not a second problem to report.
    contested = {t.name for t in active if any(owners.get(p, t.name) != t.name for p in t.spec.gpu.dedicated_pools)}
    for commodity, result in feas.feasibility([(t.name, t.spec) for t in active], platform, owners).items():
        subject = feas.commodity_text(commodity)
        if result.violators and set(result.violators) & contested:
            continue
        if result.violators:
            tenants = result.violators
            pools = result.pools_of(tenants)
            asked = sum(result.demand[t] for t in tenants)
            held = sum(result.limit[p] for p in pools)
            who = ", ".join(f"{t}: {result.demand[t]}" for t in tenants)
            where = ", ".join(f"{p}: {_pool_bound(platform, result, p)}" for p in pools) or "none"
            message = (
                f"{subject} is over-promised: tenant{'s' if len(tenants) > 1 else ''} {who} "
                f"{'ask' if len(tenants) > 1 else 'asks'} for {asked} on the pools {'they' if len(tenants) > 1 else 'it'} may use "
                f"({where}), which hold {held}; lower a quota, add nodes to these pools or raise overcommit"
            )
            for name in tenants:
                problems.append(by_name[name].doc.problem(_quota_path(by_name[name].spec, commodity), message))
            continue
        for tenants, pools in feas.components(result):
            asked = sum(result.demand[t] for t in tenants)
            held = sum(result.limit[p] for p in pools)
            if held and asked >= held * ratio:
                who = ", ".join(f"{t}: {result.demand[t]}" for t in tenants)
                where = ", ".join(f"{p}: {_pool_bound(platform, result, p)}" for p in pools)
                bound = f"{where}; {held} in all" if len(pools) > 1 else _pool_bound(platform, result, pools[0])
                problems.append(doc.problem(_platform_path("nodePools", pools[0]), (
                    f"{subject}: tenant quotas on pool{'s' if len(pools) > 1 else ''} {', '.join(pools)} add up to {asked} "
                    f"({who}), {float(100 * Fraction(asked, held)):.0f}% of what {'they hold' if len(pools) > 1 else 'it holds'} "
                    f"({bound})"), severity="warning"))
    return problems


def _pool_bound(platform: Platform, result, pool: str) -> str:
    overcommit = Fraction(platform.gpu_classes[platform.node_pools[pool].gpu_class].overcommit)
    if overcommit == 1:
        return str(result.limit[pool])
    return f"capacity {result.supply[pool]} x overcommit {cap.ratio_text(overcommit)} = {result.limit[pool]}"


def _quota_path(tenant, commodity) -> tuple:
    kind, name = commodity
    if kind == "mig":
        return ("quota", "mig", name)
    return ("quota", "gpu", name) if isinstance(tenant.quota.gpu, dict) else ("quota", "gpu")


def check_environment(environment, all_tenants, known_envs: list[str]) -> list[Problem]:
    """Every cross-file check for one environment."""
    problems = check_platform(environment.platform, environment.platform_doc)
    for loaded in environment.tenants:
        problems.extend(check_tenant(loaded.spec, loaded.doc, environment.platform))
    for loaded in all_tenants:
        for env_name in loaded.spec.environments:
            if known_envs and env_name not in known_envs:
                problems.append(loaded.doc.problem(("environments", env_name), f"no stack '{env_name}' (stacks/Pulumi.{env_name}.yaml){_hint(env_name, known_envs)}"))
    problems.extend(check_fleet(environment, all_tenants))
    problems.extend(queue_arithmetic.check_environment_queues(environment) + vcluster.check_environment_vclusters(environment))
    problems.extend(role_bundles.check_environment_bundles(environment))
    return problems
