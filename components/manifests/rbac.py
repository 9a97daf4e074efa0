"""Who may do what: tenant Roles, their bindings, CI ServiceAccounts and the shared cluster read role.

The three tenant Roles (`tenant-owner`, `tenant-developer`, `tenant-viewer`) are explicit rules,
never the built-in `admin`/`edit` ClusterRoles, whose contents change between Kubernetes releases
and include writing ResourceQuota-adjacent and policy objects. Invariants the tests pin:

* no `*` in apiGroups, resources or verbs;
* no tenant role writes resourcequotas, limitranges, networkpolicies or namespaces (reading them
  is allowed: people need to see why a pod was rejected);
* owners may create RoleBindings, but `bind` is granted only on the tenant's own three Roles, so
  the API server's escalation check stops them binding any ClusterRole or any other Role with
  permissions they do not already hold;
* tenant subjects are bound cluster-wide only to `gpu-tenancy:cluster-viewer` (read
  PriorityClasses, StorageClasses, RuntimeClasses; Nodes only when the stack sets
  `tenantAccess.nodeRead`, because a Node shows every tenant's labels, taints, capacity,
  addresses and the images its pods run).

What RBAC cannot say (which subjects a RoleBinding names, which RoleBindings are ours) the guard
admission policy enforces (`guard_policy.py`).

A decommissioned tenant's members all read, as viewers do, and write nothing (`RULES_BY_LIFECYCLE`):
its namespaces only wait to be deleted, and nobody should create Ingresses, RoleBindings or pods
there any more. The Roles keep their names and change their rules in place (an update, so no
moment without a Role), and the RoleBindings stay as they are: a RoleBinding's `roleRef` cannot
change, so pointing them at the viewer Role would delete and re-create them.

Limits of namespace RBAC, stated because they cannot be fixed here: anyone who may create pods
in a namespace may run them as any ServiceAccount of that namespace, so a CI ServiceAccount with
role `owner` lends owner rights to the namespace's developers. CI ServiceAccounts are bound only
in their own namespace, and no role may mint ServiceAccount tokens (`serviceaccounts/token`).
"""

from __future__ import annotations

import functools

from typing import Callable, Iterable

from ..fleet.facts import FleetFacts, TenantView
from ..spec.role_bundles import READ_VERBS
from ..spec.tenant import ServiceAccountGrant, Subjects, Tenant
from .claim_policy import claim_rules
from .meta import KubeObject, kube_object, object_meta, owned_labels, plain_copier, platform_labels

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"

ROLES = ("owner", "developer", "viewer")
CLUSTER_VIEWER = "gpu-tenancy:cluster-viewer"
PLATFORM_ADMIN_BINDING = "gpu-tenancy:platform-admins"

READ = ("get", "list", "watch")
WRITE = (*READ, "create", "update", "patch", "delete", "deletecollection")
INTERACT = ("create", "get")

# Workloads and their inputs: owners and developers create, change and delete these.
_MANAGED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("", ("configmaps", "persistentvolumeclaims", "pods", "secrets", "serviceaccounts", "services")),
    ("apps", ("deployments", "statefulsets")),
    ("autoscaling", ("horizontalpodautoscalers",)),
    ("batch", ("cronjobs", "jobs")),
    ("jobset.x-k8s.io", ("jobsets",)),
    ("kubeflow.org", ("jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs")),
    ("networking.k8s.io", ("ingresses",)),
    ("trainer.kubeflow.org", ("trainjobs",)),
)
# Visible to every role, written only by controllers or the platform. Quota, LimitRange and
# NetworkPolicy are here so people can see why something was rejected; PodDisruptionBudgets
# because one that allows no disruption would block draining GPU nodes for maintenance; Kueue
# workloads and queues because their admission state belongs to the scheduler.
_VISIBLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("", ("endpoints", "events", "limitranges", "pods/log", "resourcequotas")),
    ("apps", ("replicasets",)),
    ("discovery.k8s.io", ("endpointslices",)),
    ("events.k8s.io", ("events",)),
    ("kueue.x-k8s.io", ("localqueues", "workloads")),
    ("networking.k8s.io", ("networkpolicies",)),
    ("policy", ("poddisruptionbudgets",)),
    (RBAC_GROUP, ("rolebindings", "roles")),
)
# Everything a viewer may not read, although developers may.
_HIDDEN_FROM_VIEWERS = frozenset({"secrets"})

# Per lifecycle, whose rules each tenant role gets: its own, or (decommissioned) the viewer's, so that
# from the deploy that decommissions a tenant until its namespaces are gone nobody writes there.
RULES_BY_LIFECYCLE: dict[str, dict[str, str]] = {
    "active": {role: role for role in ROLES},
    "suspended": {role: role for role in ROLES},
    "decommissioned": {role: "viewer" for role in ROLES},
}

_CLUSTER_VISIBLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("node.k8s.io", ("runtimeclasses",)),
    ("scheduling.k8s.io", ("priorityclasses",)),
    ("storage.k8s.io", ("storageclasses",)),
)


def role_name(role: str) -> str:
    """Name of a tenant Role.

    >>> role_name("owner")
    'tenant-owner'
    """
    return f"tenant-{role}"


def role_binding_name(role: str) -> str:
    """Name of the RoleBinding that grants a tenant Role to its subjects.

    >>> role_binding_name("viewer")
    'tenant-viewers'
    """
    return f"tenant-{role}s"


def cluster_viewer_binding_name(tenant: str) -> str:
    """Name of the tenant's ClusterRoleBinding to the shared read-only ClusterRole.

    >>> cluster_viewer_binding_name("team-a")
    'gpu-tenancy:team-a:cluster-viewer'
    """
    return f"gpu-tenancy:{tenant}:cluster-viewer"


def rules_of(tenant: Tenant, role: str) -> str:
    """The role whose rules `role` of `tenant` gets in its lifecycle (`RULES_BY_LIFECYCLE`).

    >>> retired = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", lifecycle="decommissioned", decommission={"confirm": "a"})
    >>> rules_of(retired, "owner"), rules_of(retired.model_copy(update={"lifecycle": "active"}), "owner")
    ('viewer', 'owner')
    """
    return RULES_BY_LIFECYCLE[tenant.lifecycle][role]


def rule(api_group: str, resources: Iterable[str], verbs: Iterable[str], resource_names: Iterable[str] = ()) -> dict:
    """One PolicyRule with sorted lists.

    >>> rule("apps", ["statefulsets", "deployments"], ["get"])
    {'apiGroups': ['apps'], 'resources': ['deployments', 'statefulsets'], 'verbs': ['get']}
    """
    result = {"apiGroups": [api_group], "resources": sorted(resources), "verbs": sorted(verbs)}
    names = sorted(resource_names)
    if names:
        result["resourceNames"] = names
    return result


def role_rules(role: str) -> list[dict]:
    """The PolicyRules of one tenant role (`owner`, `developer` or `viewer`), as a fresh copy.

    >>> [r["resources"] for r in role_rules("owner") if "bind" in r["verbs"]]
    [['roles']]
    """
    if role not in ROLES:
        raise ValueError(f"unknown tenant role '{role}' (known: {', '.join(ROLES)})")
    # The rules are the same for every tenant: build them once, hand out copies (objects must
    # not share mutable parts).
    return _role_rules_copier(role)()


@functools.lru_cache(maxsize=None)
def _role_rules_copier(role: str) -> Callable[[], list[dict]]:
    return plain_copier(list(_role_rules(role)))


@functools.lru_cache(maxsize=None)
def _role_rules(role: str) -> tuple[dict, ...]:
    rules = []
    if role == "viewer":
        for group, resources in _MANAGED:
            visible = [r for r in resources if r not in _HIDDEN_FROM_VIEWERS]
            if visible:
                rules.append(rule(group, visible, READ))
    else:
        rules.extend(rule(group, resources, WRITE) for group, resources in _MANAGED)
        rules.append(rule("", ("pods/attach", "pods/exec", "pods/portforward"), INTERACT))
        rules.append(rule("apps", ("deployments/scale", "statefulsets/scale"), ("get", "patch", "update")))
    rules.extend(rule(group, resources, READ) for group, resources in _VISIBLE)
    rules.append(rule("metrics.k8s.io", ("pods",), ("get", "list")))
    if role == "owner":
        # deletecollection left out: one call would remove every binding, the owners' own included.
        rules.append(rule(RBAC_GROUP, ("rolebindings",), ("create", "delete", "patch", "update")))
        rules.append(rule(RBAC_GROUP, ("roles",), ("bind",), [role_name(r) for r in ROLES]))
    return tuple(sorted(rules, key=lambda r: (r["apiGroups"], r["resources"], r["verbs"])))


# --------------------------------------------------------------------------------------------
# Role bundles (components/spec/role_bundles.py): extra rules a tenant adds to one of its roles.
# They are appended after the role's own rules; the stack's validation has already refused any
# bundle rule that breaks the guard rails (RBAC, quota, LimitRange, NetworkPolicy, namespaces,
# wildcards, escalate/bind/impersonate), and viewers keep only the read verbs.
# --------------------------------------------------------------------------------------------


def bundle_rules(tenant: Tenant, role: str, view: TenantView) -> list[dict]:
    """The rules of the bundles `tenant` opts into for `role`, in bundle-name order; for viewers
    (and every role of a decommissioned tenant, `rules_of`) only their read verbs (and never secrets).

    >>> from components.spec.stack import Platform
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"viewers": {"groups": ["g"], "bundles": ["ray"]}})
    >>> bundle_rules(t, "viewer", FleetFacts("dev", Platform(labelDomain="gpu.example.com"), ()).view(t))[0]["verbs"]
    ['get', 'list', 'watch']
    """
    names = sorted(set(getattr(tenant.access, f"{role}s").bundles))
    if not names:
        return []
    offered = view.role_bundles
    reader = rules_of(tenant, role) == "viewer"
    rules = []
    for name in names:
        for entry in offered[name].rules:
            verbs = [v for v in entry.verbs if not reader or v in READ_VERBS]
            resources = [r for r in entry.resources if not reader or r.split("/", 1)[0] not in _HIDDEN_FROM_VIEWERS]
            if verbs and resources:
                rules.append({"apiGroups": sorted(entry.api_groups), "resources": sorted(resources), "verbs": sorted(verbs)})
    unique = {repr(r): r for r in rules}
    return list(unique.values())


def cluster_viewer_rules(node_read: bool = False) -> list[dict]:
    """Rules of the shared `gpu-tenancy:cluster-viewer` ClusterRole: read cluster-scoped inventory.

    >>> [r["resources"] for r in cluster_viewer_rules()][0]
    ['runtimeclasses']
    >>> [r["resources"] for r in cluster_viewer_rules(node_read=True)][0]
    ['nodes']
    """
    visible = ((("", ("nodes",)),) if node_read else ()) + _CLUSTER_VISIBLE
    return [rule(group, resources, READ) for group, resources in visible]


def _people(subjects: Subjects) -> list[dict]:
    groups = [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": name} for name in subjects.groups]
    users = [{"kind": "User", "apiGroup": RBAC_GROUP, "name": name} for name in subjects.users]
    return [*groups, *users]


def _service_account_subject(grant: ServiceAccountGrant, tenant: Tenant) -> dict:
    return {"kind": "ServiceAccount", "name": grant.name, "namespace": grant.namespace or tenant.name}


def _unique_sorted(subjects: list[dict]) -> list[dict]:
    unique = {(s["kind"], s.get("namespace", ""), s["name"]): s for s in subjects}
    return [unique[key] for key in sorted(unique)]


def role_subjects(tenant: Tenant, role: str, namespace: str) -> list[dict]:
    """Subjects holding `role` in `namespace`: its groups and users, and CI ServiceAccounts of that namespace.

    >>> role_subjects(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"viewers": {"groups": ["g"]}}), "viewer", "a")[0]["name"]
    'g'
    """
    people = _people(getattr(tenant.access, f"{role}s"))
    accounts = [
        _service_account_subject(grant, tenant)
        for grant in tenant.access.ci_service_accounts
        if grant.role == role and (grant.namespace or tenant.name) == namespace
    ]
    return _unique_sorted([*people, *accounts])


def all_subjects(tenant: Tenant) -> list[dict]:
    """Every subject with any role in the tenant (people of all roles and every CI ServiceAccount).

    >>> [s["kind"] for s in all_subjects(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant",
    ...     name="a", displayName="A", costCenter="cc-1", access={"ciServiceAccounts": [{"name": "ci"}]}))]
    ['ServiceAccount']
    """
    people = [s for role in ROLES for s in _people(getattr(tenant.access, f"{role}s"))]
    accounts = [_service_account_subject(grant, tenant) for grant in tenant.access.ci_service_accounts]
    return _unique_sorted([*people, *accounts])


def write_subjects(tenant: Tenant) -> list[str]:
    """Who may write in the tenant's namespaces while it is active (its owners, developers and CI
    ServiceAccounts of those roles), as `Kind name`: what a decommission takes away.

    >>> write_subjects(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"owners": {"groups": ["a-leads"]}, "viewers": {"groups": ["all"]},
    ...     "ciServiceAccounts": [{"name": "ci"}]}))
    ['Group a-leads', 'ServiceAccount a/ci']
    """
    people = [s for role in ROLES if role != "viewer" for s in _people(getattr(tenant.access, f"{role}s"))]
    accounts = [_service_account_subject(g, tenant) for g in tenant.access.ci_service_accounts if g.role != "viewer"]
    return [f"{s['kind']} {s['namespace'] + '/' if 'namespace' in s else ''}{s['name']}" for s in _unique_sorted([*people, *accounts])]


def roles(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The three tenant Roles in every tenant namespace; of a decommissioned tenant, all three with
    the viewer's rules (`rules_of`).

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"owners": {"groups": ["a-leads"]}, "ciServiceAccounts": [{"name": "ci"}]})
    >>> [r["metadata"]["name"] for r in roles(t, env.view(t))]
    ['tenant-owner', 'tenant-developer', 'tenant-viewer']
    """
    labels = owned_labels(tenant, view)
    return [
        kube_object(
            RBAC_API,
            "Role",
            object_meta(role_name(role), namespace=namespace, labels=labels),
            rules=[*role_rules(rules_of(tenant, role)), *bundle_rules(tenant, role, view),
                   *claim_rules(tenant, rules_of(tenant, role), view)],
        )
        for namespace in tenant.all_namespaces
        for role in ROLES
    ]


def role_bindings(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """A RoleBinding per tenant role and namespace that has subjects; none for an empty role.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"owners": {"groups": ["a-leads"]}, "ciServiceAccounts": [{"name": "ci"}]})
    >>> [b["roleRef"]["name"] for b in role_bindings(t, env.view(t))]
    ['tenant-owner', 'tenant-developer']
    """
    labels = owned_labels(tenant, view)
    bindings = []
    for namespace in tenant.all_namespaces:
        for role in ROLES:
            subjects = role_subjects(tenant, role, namespace)
            if not subjects:
                continue
            bindings.append(
                kube_object(
                    RBAC_API,
                    "RoleBinding",
                    object_meta(role_binding_name(role), namespace=namespace, labels=labels),
                    roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": role_name(role)},
                    subjects=subjects,
                )
            )
    return bindings


def service_accounts(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's CI ServiceAccounts, each in its namespace (the tenant's own unless stated).

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"owners": {"groups": ["a-leads"]}, "ciServiceAccounts": [{"name": "ci"}]})
    >>> [(s["metadata"]["namespace"], s["metadata"]["name"]) for s in service_accounts(t, env.view(t))]
    [('a', 'ci')]
    """
    labels = owned_labels(tenant, view)
    unique = {(grant.namespace or tenant.name, grant.name) for grant in tenant.access.ci_service_accounts}
    return [
        kube_object("v1", "ServiceAccount", object_meta(name, namespace=namespace, labels=labels))
        for namespace, name in sorted(unique)
    ]


def cluster_viewer_binding(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's ClusterRoleBinding of every subject to the shared read-only ClusterRole.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"owners": {"groups": ["a-leads"]}, "ciServiceAccounts": [{"name": "ci"}]})
    >>> cluster_viewer_binding(t, env.view(t))[0]["roleRef"]["name"]
    'gpu-tenancy:cluster-viewer'
    """
    subjects = all_subjects(tenant)
    if not subjects:
        return []
    return [
        kube_object(
            RBAC_API,
            "ClusterRoleBinding",
            object_meta(cluster_viewer_binding_name(tenant.name), labels=owned_labels(tenant, view)),
            roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": CLUSTER_VIEWER},
            subjects=subjects,
        )
    ]


def tenant_rbac_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """Roles, RoleBindings, ServiceAccounts and the cluster-viewer binding of one tenant.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", access={"owners": {"groups": ["a-leads"]}, "ciServiceAccounts": [{"name": "ci"}]})
    >>> sorted({o["kind"] for o in tenant_rbac_objects(t, env.view(t))})
    ['ClusterRoleBinding', 'Role', 'RoleBinding', 'ServiceAccount']
    """
    return [
        *roles(tenant, view),
        *role_bindings(tenant, view),
        *service_accounts(tenant, view),
        *cluster_viewer_binding(tenant, view),
    ]


def platform_rbac_objects(facts: FleetFacts) -> list[KubeObject]:
    """The shared read-only ClusterRole and the platform admins' `cluster-admin` binding.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> [o["kind"] for o in platform_rbac_objects(env.facts)]
    ['ClusterRole', 'ClusterRoleBinding']
    """
    labels = platform_labels(facts.environment_label)
    return [
        kube_object(RBAC_API, "ClusterRole", object_meta(CLUSTER_VIEWER, labels=labels), rules=cluster_viewer_rules(facts.platform.tenant_access.node_read)),
        kube_object(
            RBAC_API,
            "ClusterRoleBinding",
            object_meta(PLATFORM_ADMIN_BINDING, labels=labels),
            roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "cluster-admin"},
            subjects=[{"kind": "Group", "apiGroup": RBAC_GROUP, "name": facts.platform.platform_admin_group}],
        ),
    ]
