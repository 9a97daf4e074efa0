"""The escalation guard rails of role bundles, and the checks that apply them: a rule of the stack's
own `roleBundles` that grants what a tenant must not hold is refused at its line, and a bundle a
tenant names must be offered (the bundles themselves are `components.spec.role_bundles`)."""

from __future__ import annotations

import re

from ..spec.hints import did_you_mean
from ..spec.problems import Problem
from ..spec.role_bundles import READ_VERBS, BundleRule, effective_bundles
from .platform import platform_path

FORBIDDEN_VERBS = {
    "*": "a wildcard verb grants every verb, present and future",
    "escalate": "escalate lets a Role grant more than its author holds",
    "bind": "bind lets a subject bind roles it does not hold",
    "impersonate": "impersonate lets a subject act as any user, group or ServiceAccount",
    "approve": "approve signs certificates",
    "sign": "sign issues certificates",
    "use": "use grants policies (PodSecurityPolicy, SecurityContextConstraints) by name",
}


# Whole API groups no bundle may touch: who may do what, admission, the API itself, the cluster's
# scheduling and the scheduler queues whose admission state is the platform's.
FORBIDDEN_GROUPS = {
    "rbac.authorization.k8s.io": "RBAC objects (Roles, bindings) are the platform's",
    "admissionregistration.k8s.io": "admission webhooks and policies enforce the guard rails",
    "apiextensions.k8s.io": "CustomResourceDefinitions are cluster-wide",
    "apiregistration.k8s.io": "API registration is cluster-wide",
    "certificates.k8s.io": "certificate signing requests mint identities",
    "authentication.k8s.io": "token requests and reviews mint or check identities",
    "scheduling.k8s.io": "PriorityClasses are the platform's",
    "resource.k8s.io": "device claims (DRA) would bypass the GPU quota",
    "kueue.x-k8s.io": "Kueue queues and workloads belong to the scheduler (a LocalQueue could point at another tenant's ClusterQueue)",
    "scheduling.run.ai": "KAI queues are the platform's",
}


# (group, resource) no bundle may write; reading them stays allowed (people need to see why
# something was rejected). Subresources (`resourcequotas/status`) count as their resource.
NO_WRITE = {
    ("", "resourcequotas"): "ResourceQuota is the tenant's budget",
    ("", "limitranges"): "LimitRange sets the tenant's defaults and bounds",
    ("networking.k8s.io", "networkpolicies"): "NetworkPolicy is the tenant's isolation",
    ("", "namespaces"): "namespaces carry Pod Security and the tenant labels",
    ("", "nodes"): "nodes are the platform's",
    ("", "persistentvolumes"): "PersistentVolumes are cluster-wide",
    ("", "bindings"): "a Binding sets a pod's node past the scheduler and the GPU placement policy",
    **{
        ("gateway.networking.k8s.io", resource): "Gateway API routes attach to the platform's Gateways and reach other "
        "namespaces' Services, and no admission policy checks them: tenants publish through the guarded Ingress"
        for resource in ("gateways", "httproutes", "grpcroutes", "tlsroutes", "tcproutes", "udproutes", "referencegrants",
                         "backendtlspolicies", "listenersets")
    },
}


# Exact (group, resource/subresource) no bundle may grant at all.
NEVER = {
    ("", "serviceaccounts/token"): "it mints tokens of the namespace's ServiceAccounts (CI accounts included)",
    ("", "pods/binding"): "it sets a pod's node past the scheduler and the GPU placement policy",
    ("", "pods/ephemeralcontainers"): "ephemeral containers are not checked by the GPU placement policy",
    # The queue policy (gpu-tenancy-kueue-queue) knows a workload controller by these permissions.
    ("batch", "jobs/status"): "the queue policy takes whoever may update it for the Job controller, whose GPU pods start without Kueue's gate",
    ("jobset.x-k8s.io", "jobsets/status"): "the queue policy takes whoever may update it for the JobSet controller, whose GPU Jobs "
    "no queue counts by themselves",
    ("ray.io", "rayjobs/status"): "the queue policy takes whoever may update it for the KubeRay operator, whose RayClusters and "
    "submitter Jobs of a RayJob no queue counts by themselves",
    ("ray.io", "rayclusters/status"): "the queue policy takes whoever may update it for the KubeRay operator, whose GPU pods start "
    "without Kueue's gate",
}


_GROUP = re.compile(r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]+)?$")


_VERB = re.compile(r"^[a-zA-Z]+$")


def rule_problems(rule: BundleRule) -> list[tuple[tuple, str]]:
    """(path inside the rule, message) for every guard rail the rule breaks.

    >>> [m for _, m in rule_problems(BundleRule(apiGroups=["ray.io"], resources=["rayclusters"], verbs=["get"]))]
    []
    >>> rule_problems(BundleRule(apiGroups=[""], resources=["resourcequotas"], verbs=["get", "patch"]))[0][0]
    ('resources', 0)
    >>> rule_problems(BundleRule(apiGroups=["ray.io"], resources=["rayclusters"], verbs=["get", "escalate"]))[0][0]
    ('verbs', 1)
    """
    found: list[tuple[tuple, str]] = []
    writes = [(i, v) for i, v in enumerate(rule.verbs) if v not in READ_VERBS]
    for index, verb in enumerate(rule.verbs):
        if verb in FORBIDDEN_VERBS:
            found.append((("verbs", index), f"verb '{verb}' is not allowed in a bundle: {FORBIDDEN_VERBS[verb]}"))
        elif not _VERB.fullmatch(verb):
            found.append((("verbs", index), f"'{verb}' is not a verb (letters only, e.g. get, create, patch)"))
    for index, group in enumerate(rule.api_groups):
        if "*" in group:
            found.append((("apiGroups", index), "a wildcard API group grants every group, present and future; name the groups"))
        elif not _GROUP.fullmatch(group):
            found.append((("apiGroups", index), f"'{group}' is not an API group (\"\" for the core group, or a DNS name such as ray.io)"))
        elif group in FORBIDDEN_GROUPS:
            found.append((("apiGroups", index), f"API group '{group}' is not allowed in a bundle: {FORBIDDEN_GROUPS[group]}"))
    for index, resource in enumerate(rule.resources):
        if "*" in resource:
            found.append((("resources", index), "a wildcard resource grants every resource (and subresource), present and future; name them"))
            continue
        if not _RESOURCE.fullmatch(resource):
            found.append((("resources", index), f"'{resource}' is not a resource name (plural, lower case, optionally /subresource)"))
            continue
        base = resource.split("/", 1)[0]
        for group in rule.api_groups:
            if (group, resource) in NEVER:
                found.append((("resources", index), f"'{resource}' is not allowed in a bundle: {NEVER[(group, resource)]}"))
            elif (group, base) in NO_WRITE and writes:
                verbs = ", ".join(v for _, v in writes)
                found.append((("resources", index), f"a bundle may only read '{resource}' ({NO_WRITE[(group, base)]}); remove the verbs {verbs} or the resource"))
    return found


def check_role_bundles(platform, doc) -> list[Problem]:
    """Guard-rail problems of the stack's own `roleBundles`, each at its line in the stack file.

    >>> check_role_bundles(prod.platform, prod.platform_doc)
    []
    """
    problems = []
    counted = set(platform.guard_rails.objects.kinds)
    for name, bundle in sorted(platform.role_bundles.items()):
        for index, rule in enumerate(bundle.rules):
            where = platform_path("roleBundles", name, "rules", index)
            for path, message in rule_problems(rule):
                problems.append(doc.problem(where + path, f"role bundle '{name}': {message}"))
            if "create" not in rule.verbs:
                continue
            # Without a count, members of tenants with the bundle may create these objects without
            # bound: each is up to the API server's request size in etcd.
            uncounted = sorted(f"{r}.{g}" if g else r for g in rule.api_groups for r in rule.resources
                               if "/" not in r and (f"{r}.{g}" if g else r) not in counted)
            if uncounted:
                problems.append(doc.problem(where, f"role bundle '{name}' lets members create {', '.join(uncounted)}, which "
                                            "guardRails.objects.kinds does not count: once the cluster serves them (CRDs installed), add a count for each "
                                            "(a count for a kind it does not serve stops the namespace's quota)",
                                            severity="warning"))
    return problems


def check_tenant_bundles(tenant, doc, platform) -> list[Problem]:
    """Every bundle a tenant names must be offered by the stack.

    >>> check_tenant_bundles(tenant, prod.tenants[0].doc, prod.platform)
    []
    """
    offered = effective_bundles(platform)
    problems = []
    for role in ("owners", "developers", "viewers"):
        for index, name in enumerate(getattr(tenant.access, role).bundles):
            if name not in offered:
                problems.append(doc.problem(("access", role, "bundles", index), f"unknown role bundle '{name}'{did_you_mean(name, offered, listing='offered')} (bundles are shipped or defined in the stack's roleBundles)"))
    return problems


def check_environment_bundles(environment) -> list[Problem]:
    """The stack's bundles against the guard rails, and the bundles each deployed tenant names.

    >>> check_environment_bundles(prod)
    []
    """
    problems = check_role_bundles(environment.platform, environment.platform_doc)
    for loaded in environment.tenants:
        problems.extend(check_tenant_bundles(loaded.spec, loaded.doc, environment.platform))
    return problems

