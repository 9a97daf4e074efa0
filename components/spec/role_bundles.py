"""Role bundles: named sets of RBAC rules that a tenant adds to one of its roles.

The three tenant roles cover core Kubernetes workloads. Teams also run Kubeflow notebooks and
pipelines, Ray clusters, KServe inference services, LeaderWorkerSets, PodDisruptionBudgets and
their own controllers' leases: the stack offers such rules as bundles (`roleBundles`, on top of the
shipped ones below) and a tenant opts in per role (`access.developers.bundles: [ray]`). Viewers
get the read verbs of a bundle only.

A bundle never grants what the escalation guard rails forbid: RBAC objects, ResourceQuota,
LimitRange, NetworkPolicy, namespace writes, scheduler queues, admission and API registration,
ServiceAccount tokens, pod bindings and ephemeral containers, wildcards, and the verbs escalate,
bind, impersonate (and approve, sign, use). `check_role_bundles` refuses such a rule at its line.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Annotated

from pydantic import Field

from .base import Model
from .problems import Problem

STACK_CONFIG_KEY = "gpu-tenancy:platform"  # stack.CONFIG_KEY (stack.py imports this module)
READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = (*READ_VERBS, "create", "update", "patch", "delete", "deletecollection")


class BundleRule(Model):
    """One RBAC PolicyRule of a bundle (a namespaced Role rule: no resourceNames, no URLs)."""

    api_groups: list[Annotated[str, Field(max_length=253)]] = Field(min_length=1, description="API groups, e.g. [ray.io]; \"\" is the core group")
    resources: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(min_length=1, description="resources (plural, lower case), optionally with a subresource, e.g. rayclusters, leaderworkersets/scale")
    verbs: list[Annotated[str, Field(min_length=1, max_length=63)]] = Field(min_length=1, description="verbs, e.g. [get, list, watch, create, update, patch, delete]; no '*'")


class RoleBundle(Model):
    """Rules a tenant may add to a role by naming the bundle under `access.<role>.bundles`."""

    description: str = Field(min_length=1, description="what the bundle is for, for the tenants that choose it")
    rules: list[BundleRule] = Field(min_length=1, description="RBAC rules; checked against the escalation guard rails")


def _write(group: str, *resources: str, extra: tuple[str, ...] = ()) -> dict:
    return {"apiGroups": [group], "resources": list(resources), "verbs": [*WRITE_VERBS, *extra]}


# Shipped bundles: the API groups and resources of each project's CRDs.
SHIPPED_BUNDLES: dict[str, dict] = {
    "kubeflow-notebooks": {
        "description": "Kubeflow Notebooks (Jupyter servers) and the PodDefaults they select (kubeflow.org).",
        "rules": [_write("kubeflow.org", "notebooks", "poddefaults")],
    },
    "kubeflow-pipelines": {
        "description": "Kubeflow Pipelines: pipelines, versions, experiments, runs and recurring runs "
        "(pipelines.kubeflow.org, with the API server's own verbs), ScheduledWorkflows and the Argo Workflows they run.",
        "rules": [
            _write("pipelines.kubeflow.org", "experiments", "jobs", "pipelines", "pipelines/versions", "pipelineversions", "recurringruns", "runs"),
            {"apiGroups": ["pipelines.kubeflow.org"], "resources": ["experiments", "jobs", "recurringruns", "runs"],
             "verbs": ["archive", "disable", "enable", "readArtifact", "reportMetrics", "retry", "terminate", "unarchive"]},
            _write("kubeflow.org", "scheduledworkflows"),
            _write("argoproj.io", "workflows"),
        ],
    },
    "ray": {
        "description": "KubeRay: RayClusters, RayJobs and RayServices (ray.io).",
        "rules": [_write("ray.io", "rayclusters", "rayjobs", "rayservices")],
    },
    "kserve": {
        "description": "KServe model serving: InferenceServices, InferenceGraphs, ServingRuntimes and TrainedModels (serving.kserve.io).",
        "rules": [_write("serving.kserve.io", "inferencegraphs", "inferenceservices", "servingruntimes", "trainedmodels")],
    },
    "leaderworkersets": {
        "description": "LeaderWorkerSets for multi-node inference (leaderworkerset.x-k8s.io), with scaling.",
        "rules": [
            _write("leaderworkerset.x-k8s.io", "leaderworkersets"),
            {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets/scale"], "verbs": ["get", "patch", "update"]},
        ],
    },
    "pod-disruption-budgets": {
        "description": "PodDisruptionBudgets for serving teams (policy). One that allows no disruption blocks "
        "draining its nodes: grant it to teams that keep spare replicas.",
        "rules": [_write("policy", "poddisruptionbudgets")],
    },
    "leases": {
        "description": "Leases for leader election of the team's own controllers and operators (coordination.k8s.io).",
        "rules": [_write("coordination.k8s.io", "leases")],
    },
}


@functools.lru_cache(maxsize=1)
def shipped_bundles() -> dict[str, RoleBundle]:
    """The shipped bundles as models.

    >>> sorted(shipped_bundles())[:2]
    ['kserve', 'kubeflow-notebooks']
    """
    return {name: RoleBundle.model_validate(data) for name, data in SHIPPED_BUNDLES.items()}


def effective_bundles(platform) -> dict[str, RoleBundle]:
    """The bundles a stack offers: the shipped ones, then its `roleBundles` (adding or replacing by name)."""
    return {**shipped_bundles(), **platform.role_bundles}


# --------------------------------------------------------------------------------------------
# Guard rails
# --------------------------------------------------------------------------------------------

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
}
# Exact (group, resource/subresource) no bundle may grant at all.
NEVER = {
    ("", "serviceaccounts/token"): "it mints tokens of the namespace's ServiceAccounts (CI accounts included)",
    ("", "pods/binding"): "it sets a pod's node past the scheduler and the GPU placement policy",
    ("", "pods/ephemeralcontainers"): "ephemeral containers are not checked by the GPU placement policy",
}
_GROUP = re.compile(r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]+)?$")
_VERB = re.compile(r"^[a-zA-Z]+$")


def rule_problems(rule: BundleRule) -> list[tuple[tuple, str]]:
    """(path inside the rule, message) for every guard rail the rule breaks.

    >>> [m for _, m in rule_problems(BundleRule(apiGroups=["ray.io"], resources=["rayclusters"], verbs=["get"]))]
    []
    >>> rule_problems(BundleRule(apiGroups=[""], resources=["resourcequotas"], verbs=["get", "patch"]))[0][0]
    ('verbs', 1)
    """
    found: list[tuple[tuple, str]] = []
    writes = [(i, v) for i, v in enumerate(rule.verbs) if v not in READ_VERBS]
    for index, verb in enumerate(rule.verbs):
        if verb in FORBIDDEN_VERBS:
            found.append((("verbs", index), f"verb '{verb}' is not allowed in a bundle: {FORBIDDEN_VERBS[verb]}"))
        elif not _VERB.match(verb):
            found.append((("verbs", index), f"'{verb}' is not a verb (letters only, e.g. get, create, patch)"))
    for index, group in enumerate(rule.api_groups):
        if "*" in group:
            found.append((("apiGroups", index), "a wildcard API group grants every group, present and future; name the groups"))
        elif not _GROUP.match(group):
            found.append((("apiGroups", index), f"'{group}' is not an API group (\"\" for the core group, or a DNS name such as ray.io)"))
        elif group in FORBIDDEN_GROUPS:
            found.append((("apiGroups", index), f"API group '{group}' is not allowed in a bundle: {FORBIDDEN_GROUPS[group]}"))
    for index, resource in enumerate(rule.resources):
        if "*" in resource:
            found.append((("resources", index), "a wildcard resource grants every resource (and subresource), present and future; name them"))
            continue
        if not _RESOURCE.match(resource):
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
    """Guard-rail problems of the stack's own `roleBundles`, each at its line in the stack file."""
    problems = []
    for name, bundle in sorted(platform.role_bundles.items()):
        for index, rule in enumerate(bundle.rules):
            where = ("config", STACK_CONFIG_KEY, "roleBundles", name, "rules", index)
            for path, message in rule_problems(rule):
                problems.append(doc.problem(where + path, f"role bundle '{name}': {message}"))
    return problems


def _close(value: str, known) -> str:
    close = difflib.get_close_matches(value, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else f" (offered: {', '.join(sorted(known))})"


def check_tenant_bundles(tenant, doc, platform) -> list[Problem]:
    """Every bundle a tenant names must be offered by the stack."""
    offered = effective_bundles(platform)
    problems = []
    for role in ("owners", "developers", "viewers"):
        for index, name in enumerate(getattr(tenant.access, role).bundles):
            if name not in offered:
                problems.append(doc.problem(("access", role, "bundles", index), f"unknown role bundle '{name}'{_close(name, offered)} (bundles are shipped or defined in the stack's roleBundles)"))
    return problems




def check_environment_bundles(environment) -> list[Problem]:
    """The stack's bundles against the guard rails, and the bundles each deployed tenant names."""
    problems = check_role_bundles(environment.platform, environment.platform_doc)
    for loaded in environment.tenants:
        problems.extend(check_tenant_bundles(loaded.spec, loaded.doc, environment.platform))
    return problems
