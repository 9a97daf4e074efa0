"""RBAC of the prod stack on a real kube-apiserver: a SubjectAccessReview matrix
(also over every shipped role bundle, see BUNDLE_PROBES) and real requests by users authenticated with minted client certificates.

Subjects are the example tenants' own: for every tenant and role (owner,
developer, viewer) one user in the role's first group (or its first user), every
extra user, and every CI ServiceAccount. For each subject, every tenant
namespace (its own and the other tenants'), the resources below and the verbs
get, list, create, update, delete, the server's answer must be EXACTLY what the
PROMISE table says for the role the tenant files give that subject in the
namespace's tenant (none: nothing at all). Nodes, cluster-scoped, are readable
by tenant subjects only if the stack opts in (`tenantAccess.nodeRead`; prod does not).

Then the same questions are asked for real (writes with dryRun=All, so nothing
changes) in the tenants' primary namespaces, and each answer must agree with
the SubjectAccessReview (and so with the table): 403 "cannot <verb> resource"
for a denial, success otherwise.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from components.manifests.monitoring_rules import tenant_prometheus_rule
from components.load import load_environment

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
VERBS = ("get", "list", "create", "update", "delete")
ALL, READ, NONE = frozenset(VERBS), frozenset({"get", "list"}), frozenset()

# What the product promises, per role in a namespace of the tenant
# (docs: owners/developers write workloads and secrets; viewers read without
# secrets; nobody writes quota, LimitRange or NetworkPolicy; only owners manage
# RoleBindings; everybody reads them, to see who has access).
PROMISE: dict[str, dict[str, frozenset[str]]] = {
    #              pods  deployments  secrets  resourcequotas  limitranges  networkpolicies  rolebindings
    "owner":     {"pods": ALL, "deployments": ALL, "secrets": ALL, "resourcequotas": READ,
                  "limitranges": READ, "networkpolicies": READ, "rolebindings": ALL},
    "developer": {"pods": ALL, "deployments": ALL, "secrets": ALL, "resourcequotas": READ,
                  "limitranges": READ, "networkpolicies": READ, "rolebindings": READ},
    "viewer":    {"pods": READ, "deployments": READ, "secrets": NONE, "resourcequotas": READ,
                  "limitranges": READ, "networkpolicies": READ, "rolebindings": READ},
}
ENV = load_environment(REPO_ROOT, "prod")
# Through gpu-tenancy:cluster-viewer, only when the stack opts in to node read.
NODES_PROMISE = READ if ENV.platform.tenant_access.node_read else NONE

# resource -> (API group, REST prefix, probe object name in a primary namespace)
RESOURCES: dict[str, tuple[str, str, str]] = {
    "pods": ("", "/api/v1", "e2e-rbac-probe"),
    "deployments": ("apps", "/apis/apps/v1", "e2e-rbac-probe"),
    "secrets": ("", "/api/v1", "e2e-rbac-probe"),
    "resourcequotas": ("", "/api/v1", "tenant-quota"),
    "limitranges": ("", "/api/v1", "tenant-limits"),
    "networkpolicies": ("networking.k8s.io", "/apis/networking.k8s.io/v1", "tenant-network"),
    # Not the managed tenant-owners: the guard policy keeps tenants from changing that one at all.
    "rolebindings": ("rbac.authorization.k8s.io", "/apis/rbac.authorization.k8s.io/v1", "e2e-rbac-probe"),
}
RANK = {"viewer": 1, "developer": 2, "owner": 3}

TENANTS = {t.name: t.spec for t in ENV.tenants}
NAMESPACE_OWNER = {ns: t.name for t in ENV.tenants for ns in t.spec.all_namespaces}
PRIMARY = [t.name for t in ENV.tenants]


@dataclass(frozen=True)
class Subject:
    label: str                 # "<tenant>/<role>" or "<tenant>/sa:<ns>/<name>"
    user: str
    groups: tuple[str, ...]
    sa: tuple[str, str] | None = None  # (namespace, name) for a CI ServiceAccount

    def role_in(self, namespace: str) -> str | None:
        """The role the tenant files give this subject in `namespace` (highest of its memberships)."""
        tenant = TENANTS[NAMESPACE_OWNER[namespace]]
        if self.sa is not None:
            # CI ServiceAccounts are bound in their own namespace only (components/manifests/rbac.py).
            roles = [g.role for g in tenant.access.ci_service_accounts
                     if (g.namespace or tenant.name, g.name) == self.sa and self.sa[0] == namespace]
        else:
            roles = [role for role in RANK
                     if set(self.groups) & set(getattr(tenant.access, f"{role}s").groups)
                     or self.user in getattr(tenant.access, f"{role}s").users]
        return max(roles, key=RANK.__getitem__) if roles else None

    def expected(self, namespace: str | None, resource: str) -> frozenset[str]:
        if resource == "nodes":
            return NODES_PROMISE
        role = self.role_in(namespace)
        return PROMISE[role][resource] if role else NONE


def _subjects() -> list[Subject]:
    out: list[Subject] = []
    for name, spec in TENANTS.items():
        for role in ("owner", "developer", "viewer"):
            members = getattr(spec.access, f"{role}s")
            if members.groups:
                out.append(Subject(f"{name}/{role}", f"e2e-{role}@{name}", (members.groups[0],)))
            for user in members.users:
                out.append(Subject(f"{name}/{role}:{user}", user, ()))
        for grant in spec.access.ci_service_accounts:
            ns = grant.namespace or name
            out.append(Subject(f"{name}/sa:{ns}/{grant.name}", f"system:serviceaccount:{ns}:{grant.name}",
                               ("system:serviceaccounts", f"system:serviceaccounts:{ns}"), (ns, grant.name)))
    return sorted(set(out), key=lambda s: s.label)


SUBJECTS = _subjects()
NAMESPACES = sorted(NAMESPACE_OWNER)
CELLS = [(ns, res, verb) for ns in NAMESPACES for res in RESOURCES for verb in VERBS] + \
        [(None, "nodes", verb) for verb in VERBS]
MATRIX_SIZE = len(SUBJECTS) * len(CELLS)


def _request(api: client.ApiClient, method: str, path: str, body: dict | None = None,
             dry_run: bool = False) -> tuple[int, str]:
    request = api.param_serialize(method, path, query_params=[("dryRun", "All")] if dry_run else [],
                                  header_params={"Content-Type": "application/json", "Accept": "application/json"},
                                  body=body, auth_settings=["BearerToken"])
    response = api.call_api(*request)
    response.read()
    return response.status, response.data.decode(errors="replace")


def _sar(admin: client.ApiClient, subject: Subject, namespace: str | None, resource: str, verb: str) -> bool:
    group = "" if resource == "nodes" else RESOURCES[resource][0]
    attributes = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    status, text = _request(admin, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": subject.user, "groups": list(subject.groups), "resourceAttributes": attributes}})
    assert status == 201, text
    return bool(json.loads(text)["status"].get("allowed"))


@pytest.fixture(scope="module")
def sar_answers(apiserver, prod_stack, e2e_summary) -> dict[tuple, bool]:
    """Every cell of the matrix asked of the server, in parallel (SubjectAccessReview as admin)."""
    keys = [(s, *cell) for s in SUBJECTS for cell in CELLS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda k: _sar(apiserver.api_client, *k), keys))
    result = dict(zip(keys, answers))
    ok = sum(result[k] == (k[3] in k[0].expected(k[1], k[2])) for k in keys)
    e2e_summary.append(f"RBAC SubjectAccessReview matrix: {len(SUBJECTS)} subjects x {len(CELLS)} "
                       f"(namespace, resource, verb) = {MATRIX_SIZE} checks, {ok} as promised")
    return result


_TALLY: dict[str, list[int]] = {}


def _tally(key: str, checks: int, passed: int, subject: Subject, summary: list[str], what: str) -> None:
    """Add one subject's counts; after the last subject, one summary line for the lane."""
    counts = _TALLY.setdefault(key, [0, 0, 0])
    counts[0] += 1
    counts[1] += checks
    counts[2] += passed
    if subject == SUBJECTS[-1]:
        summary.append(f"{what}: {counts[2]}/{counts[1]} over {counts[0]} subjects")


@pytest.mark.parametrize("subject", SUBJECTS, ids=[f"{s.label}:{len(CELLS)}-checks" for s in SUBJECTS])
def test_access_matrix_matches_promise(sar_answers, subject):
    wrong = []
    for namespace, resource, verb in CELLS:
        want = verb in subject.expected(namespace, resource)
        got = sar_answers[(subject, namespace, resource, verb)]
        if got != want:
            role = subject.role_in(namespace) if namespace else "-"
            wrong.append(f"{verb} {resource} in {namespace or '(cluster)'} [role there: {role}]: "
                         f"server says {'allowed' if got else 'denied'}, promise says {'allowed' if want else 'denied'}")
    assert not wrong, f"{subject.label} ({subject.user}, groups {list(subject.groups)}):\n" + "\n".join(wrong)


def test_matrix_covers_every_role_and_namespace_kind():
    """The matrix is not vacuous: it has owners, developers, viewers and ServiceAccounts, each with
    some namespace where they hold no role, and a subject with different roles in two tenants."""
    roles = {s.role_in(ns) for s in SUBJECTS for ns in NAMESPACES}
    assert {"owner", "developer", "viewer", None} <= roles
    assert any(s.sa for s in SUBJECTS)
    assert any(len({s.role_in(ns) for ns in NAMESPACES} - {None}) > 1 for s in SUBJECTS)


# --------------------------------------------------------------------------
# Role bundles: every shipped bundle, for every subject and namespace
# --------------------------------------------------------------------------

# One resource of each shipped bundle (components/spec/role_bundles.py). The example tenants opt
# roles into bundles (tenants/*.yaml, access.<role>.bundles). The promise: a subject may use a
# bundle's resource in a namespace only through a role it holds there whose tenant opted that role
# into the bundle (every verb; viewers get/list only); nobody else, in no other tenant's namespace.
# The API server needs no CRD for this: RBAC answers for any group and resource.
BUNDLE_PROBES: dict[str, tuple[str, str]] = {
    "kubeflow-notebooks": ("kubeflow.org", "notebooks"),
    "kubeflow-pipelines": ("pipelines.kubeflow.org", "runs"),
    "ray": ("ray.io", "rayclusters"),
    "kserve": ("serving.kserve.io", "inferenceservices"),
    "leaderworkersets": ("leaderworkerset.x-k8s.io", "leaderworkersets"),
    "pod-disruption-budgets": ("policy", "poddisruptionbudgets"),
    "leases": ("coordination.k8s.io", "leases"),
}
# What every role of a tenant holds on a probe without any bundle: everybody reads PodDisruptionBudgets.
BUNDLE_BASE = {"pod-disruption-budgets": READ}


def _roles_in(subject: Subject, namespace: str) -> set[str]:
    """Every role (not only the highest) the tenant files give `subject` in `namespace`."""
    tenant = TENANTS[NAMESPACE_OWNER[namespace]]
    if subject.sa is not None:
        return {g.role for g in tenant.access.ci_service_accounts
                if (g.namespace or tenant.name, g.name) == subject.sa and subject.sa[0] == namespace}
    return {role for role in RANK
            if set(subject.groups) & set(getattr(tenant.access, f"{role}s").groups)
            or subject.user in getattr(tenant.access, f"{role}s").users}


def bundle_expected(subject: Subject, namespace: str, bundle: str) -> frozenset[str]:
    roles = _roles_in(subject, namespace)
    tenant = TENANTS[NAMESPACE_OWNER[namespace]]
    allowed = set(BUNDLE_BASE.get(bundle, NONE)) if roles else set()
    for role in roles:
        if bundle in getattr(tenant.access, f"{role}s").bundles:
            allowed |= READ if role == "viewer" else ALL
    return frozenset(allowed)


BUNDLE_CELLS = [(ns, bundle, verb) for ns in NAMESPACES for bundle in BUNDLE_PROBES for verb in VERBS]


def test_bundle_matrix_covers_every_shipped_bundle_both_ways():
    """Every shipped bundle has a probe, is opted into by some role of the prod tenants, and the
    matrix expects it allowed for some subject and denied (beyond the base) for others."""
    from components.spec.role_bundles import SHIPPED_BUNDLES

    assert set(BUNDLE_PROBES) == set(SHIPPED_BUNDLES)
    for bundle in BUNDLE_PROBES:
        answers = {bundle_expected(s, ns, bundle) for s in SUBJECTS for ns in NAMESPACES}
        assert ALL in answers, f"no subject may write {bundle}: opt a role of a prod tenant into it"
        assert BUNDLE_BASE.get(bundle, NONE) in answers and NONE in answers, bundle
    assert any(bundle_expected(s, ns, b) == READ and b not in BUNDLE_BASE
               for s in SUBJECTS for ns in NAMESPACES for b in BUNDLE_PROBES), "no viewer opted into a bundle"


@pytest.fixture(scope="module")
def bundle_answers(apiserver, prod_stack, e2e_summary) -> dict[tuple, bool]:
    def ask(key):
        subject, namespace, bundle, verb = key
        group, resource = BUNDLE_PROBES[bundle]
        status, text = _request(apiserver.api_client, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": subject.user, "groups": list(subject.groups), "resourceAttributes": {
                "namespace": namespace, "verb": verb, "group": group, "resource": resource}}})
        assert status == 201, text
        return bool(json.loads(text)["status"].get("allowed"))

    keys = [(s, *cell) for s in SUBJECTS for cell in BUNDLE_CELLS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        result = dict(zip(keys, pool.map(ask, keys)))
    ok = sum(result[k] == (k[3] in bundle_expected(k[0], k[1], k[2])) for k in keys)
    allowed = sum(result.values())
    e2e_summary.append(f"RBAC role bundles SubjectAccessReview matrix: {len(SUBJECTS)} subjects x {len(BUNDLE_CELLS)} "
                       f"(namespace, bundle, verb) = {len(keys)} checks over {len(BUNDLE_PROBES)} shipped bundles, "
                       f"{ok} as promised ({allowed} allowed)")
    return result


@pytest.mark.parametrize("subject", SUBJECTS, ids=[f"{s.label}:{len(BUNDLE_CELLS)}-bundle-checks" for s in SUBJECTS])
def test_bundle_matrix_matches_promise(bundle_answers, subject):
    wrong = []
    for namespace, bundle, verb in BUNDLE_CELLS:
        want = verb in bundle_expected(subject, namespace, bundle)
        got = bundle_answers[(subject, namespace, bundle, verb)]
        if got != want:
            wrong.append(f"{verb} {'/'.join(BUNDLE_PROBES[bundle])} ({bundle}) in {namespace} "
                         f"[roles there: {sorted(_roles_in(subject, namespace)) or '-'}]: server says "
                         f"{'allowed' if got else 'denied'}, promise says {'allowed' if want else 'denied'}")
    assert not wrong, f"{subject.label} ({subject.user}, groups {list(subject.groups)}):\n" + "\n".join(wrong)


# --------------------------------------------------------------------------
# The same questions as real requests by minted users
# --------------------------------------------------------------------------

_POD_SPEC = {
    "automountServiceAccountToken": False,
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "main", "image": "registry.invalid/app:1",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
}


def _own_group(namespace: str | None) -> str:
    """A group of the namespace's tenant: the guard policy refuses RoleBinding subjects from outside it."""
    access = TENANTS[NAMESPACE_OWNER[namespace]].access if namespace else None
    return next((g for role in ("viewers", "developers", "owners") for g in getattr(access, role).groups), "e2e-nobody") if access else "e2e-nobody"


def _new_body(resource: str, name: str, namespace: str | None = None) -> dict:
    meta = {"name": name}
    return {
        "pods": {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": _POD_SPEC},
        "deployments": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": _POD_SPEC}}},
        "secrets": {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"k": "v"}},
        "resourcequotas": {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta,
                           "spec": {"hard": {"pods": "1"}}},
        "limitranges": {"apiVersion": "v1", "kind": "LimitRange", "metadata": meta,
                        "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}},
        "networkpolicies": {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta,
                            "spec": {"podSelector": {}}},
        "rolebindings": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant-viewer"},
                         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": _own_group(namespace)}]},
        "nodes": {"apiVersion": "v1", "kind": "Node", "metadata": meta},
    }[resource]


@pytest.fixture(scope="module")
def probes(apiserver, prod_stack) -> dict[tuple[str | None, str], dict]:
    """(namespace, resource) -> the live object that get/update/delete requests target.

    Pods, Deployments and Secrets are created here (as admin) in each primary
    namespace; the others are the tenant's own rendered objects; for nodes, one
    of the stack's GPU nodes."""
    admin = apiserver.api_client
    out: dict[tuple[str | None, str], dict] = {}
    for ns in PRIMARY:
        for resource, (_, prefix, name) in RESOURCES.items():
            path = f"{prefix}/namespaces/{ns}/{resource}"
            if resource in ("pods", "deployments", "secrets", "rolebindings"):
                status, text = _request(admin, "POST", path, _new_body(resource, name, ns))
                assert status in (201, 409), text
            status, text = _request(admin, "GET", f"{path}/{name}")
            assert status == 200, text
            out[(ns, resource)] = json.loads(text)
    node = prod_stack.of_kind("Node")[0]["metadata"]["name"]
    status, text = _request(admin, "GET", f"/api/v1/nodes/{node}")
    assert status == 200, text
    out[(None, "nodes")] = json.loads(text)
    return out


def _real(api: client.ApiClient, probe: dict, namespace: str | None, resource: str, verb: str) -> tuple[bool, str]:
    """(allowed, detail) of one real request; writes are dry-run. Any answer other than success
    or an RBAC denial is a broken test, not a denial."""
    prefix = "/api/v1" if resource == "nodes" else RESOURCES[resource][1]
    collection = f"{prefix}/{resource}" if namespace is None else f"{prefix}/namespaces/{namespace}/{resource}"
    item = f"{collection}/{probe['metadata']['name']}"
    method, path, body = {
        "get": ("GET", item, None),
        "list": ("GET", collection, None),
        "create": ("POST", collection, _new_body(resource, "e2e-rbac-new", namespace)),
        "update": ("PUT", item, probe),
        "delete": ("DELETE", item, None),
    }[verb]
    status, text = _request(api, method, path, body, dry_run=verb in ("create", "update", "delete"))
    if 200 <= status < 300:
        return True, f"{status}"
    message = json.loads(text).get("message", text) if text.startswith("{") else text
    if status == 403 and f"cannot {verb} resource" in message:
        return False, message
    raise AssertionError(f"{method} {path}: unexpected {status}: {message}")


REAL_CELLS = [(ns, res, verb) for ns in PRIMARY for res in RESOURCES for verb in VERBS] + \
             [(None, "nodes", verb) for verb in VERBS]


@pytest.mark.parametrize("subject", SUBJECTS, ids=[f"{s.label}:{len(REAL_CELLS)}-requests" for s in SUBJECTS])
def test_real_requests_agree_with_access_review(apiserver, sar_answers, probes, subject, e2e_summary):
    api = apiserver.client_for(subject.user, subject.groups)
    disagree = []
    for namespace, resource, verb in REAL_CELLS:
        allowed, detail = _real(api, probes[(namespace, resource)], namespace, resource, verb)
        if allowed != sar_answers[(subject, namespace, resource, verb)]:
            disagree.append(f"{verb} {resource} in {namespace or '(cluster)'}: request "
                            f"{'succeeded' if allowed else 'denied'} ({detail}), SubjectAccessReview disagrees")
    _tally("real", len(REAL_CELLS), len(REAL_CELLS) - len(disagree), subject, e2e_summary,
           "RBAC real requests (minted client certs, writes dry-run) agreeing with the SubjectAccessReview")
    assert not disagree, f"{subject.label}:\n" + "\n".join(disagree)


# --------------------------------------------------------------------------
# Escalation paths: denied to every tenant subject, even in its own namespaces
# --------------------------------------------------------------------------

# (API group, resource, subresource, verb, scope): scope "own" = each namespace where the subject
# holds a role (object name = the namespace for `namespaces`), "cluster" = cluster-scoped.
NEVER: list[tuple[str, str, str, str, str]] = [
    ("", "namespaces", "", "patch", "own"),             # relabel: Pod Security level, tenant label (VAP scope)
    ("", "namespaces", "", "delete", "own"),
    ("", "resourcequotas", "status", "update", "own"),
    ("", "limitranges", "", "patch", "own"),
    ("networking.k8s.io", "networkpolicies", "", "patch", "own"),
    ("", "serviceaccounts", "token", "create", "own"),   # mint tokens of CI accounts
    ("", "pods", "binding", "create", "own"),            # set nodeName past the scheduler and the VAP
    ("", "bindings", "", "create", "own"),
    ("", "pods", "ephemeralcontainers", "patch", "own"),
    ("rbac.authorization.k8s.io", "roles", "", "create", "own"),
    ("rbac.authorization.k8s.io", "roles", "", "escalate", "own"),
    ("rbac.authorization.k8s.io", "clusterroles", "", "bind", "own"),
    ("rbac.authorization.k8s.io", "rolebindings", "", "deletecollection", "own"),
    ("kueue.x-k8s.io", "localqueues", "", "update", "own"),
    ("kueue.x-k8s.io", "workloads", "status", "update", "own"),
    ("", "nodes", "", "patch", "cluster"),
    ("", "persistentvolumes", "", "create", "cluster"),
    ("scheduling.k8s.io", "priorityclasses", "", "create", "cluster"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", "delete", "cluster"),
    # The guard is one policy for every tenant, each tenant's allowances its TenantGrant.
    ("admissionregistration.k8s.io", "validatingadmissionpolicies", "", "update", "cluster"),
    *[("gpu-tenancy.dev", "tenantgrants", "", verb, "cluster") for verb in ("create", "update", "patch", "delete")],
    ("rbac.authorization.k8s.io", "clusterrolebindings", "", "create", "cluster"),
    ("kueue.x-k8s.io", "clusterqueues", "", "update", "cluster"),
    # Each tenant's quota series are a PrometheusRule in the monitoring namespace: rewriting one
    # (its own or another's) would falsify the quota dashboards and silence the alerts.
    *[("monitoring.coreos.com", "prometheusrules", "", verb, "monitoring") for verb in ("create", "update", "patch", "delete")],
]
MONITORING_NAMESPACE = ENV.platform.monitoring.namespace if ENV.platform.monitoring else None


def _never_cells(subject: Subject) -> list[dict]:
    own = [ns for ns in NAMESPACES if subject.role_in(ns)]
    cells = []
    for group, resource, sub, verb, scope in NEVER:
        for ns in {"own": own, "monitoring": [MONITORING_NAMESPACE]}.get(scope, [None]):
            attrs = {"group": group, "resource": resource, "verb": verb}
            if sub:
                attrs["subresource"] = sub
            if ns:
                attrs["namespace"] = ns
                if resource == "namespaces":
                    attrs["name"] = ns
            cells.append(attrs)
    return cells


@pytest.mark.parametrize("subject", SUBJECTS, ids=[s.label for s in SUBJECTS])
def test_no_escalation_paths(apiserver, prod_stack, subject, e2e_summary):
    allowed = []
    cells = _never_cells(subject)
    for attrs in cells:
        status, text = _request(apiserver.api_client, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": subject.user, "groups": list(subject.groups), "resourceAttributes": attrs}})
        assert status == 201, text
        if json.loads(text)["status"].get("allowed"):
            allowed.append(attrs)
    _tally("never", len(cells), len(cells) - len(allowed), subject, e2e_summary,
           "RBAC escalation paths (SubjectAccessReviews) denied as promised")
    assert not allowed, f"{subject.label} may: " + json.dumps(allowed, indent=1)


def test_owner_cannot_bind_beyond_tenant_roles(apiserver, prod_stack):
    """Owners may create RoleBindings, but the API server's escalation check stops a binding to any
    built-in ClusterRole (admin, edit, even view) since they do not hold all its permissions; binding
    the tenant's own roles works. (A ClusterRole they fully hold, like gpu-tenancy:cluster-viewer, may
    be bound: that grants nothing new.)"""
    for tenant in PRIMARY:
        owner = next(s for s in SUBJECTS if s.label == f"{tenant}/owner")
        api = apiserver.client_for(owner.user, owner.groups)
        path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{tenant}/rolebindings"
        for kind, role in (("ClusterRole", "admin"), ("ClusterRole", "edit"), ("ClusterRole", "view"),
                           ("ClusterRole", "cluster-admin")):
            body = _new_body("rolebindings", "e2e-escalate", tenant)
            body["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}
            status, text = _request(api, "POST", path, body, dry_run=True)
            message = json.loads(text).get("message", "")
            assert status == 403 and "is attempting to grant RBAC permissions not currently held" in message, \
                f"{tenant} owner binding {kind} {role}: {status} {message}"
        for role in ("tenant-owner", "tenant-developer", "tenant-viewer"):
            body = _new_body("rolebindings", "e2e-escalate", tenant)
            body["roleRef"]["name"] = role
            status, text = _request(api, "POST", path, body, dry_run=True)
            assert status == 201, f"{tenant} owner binding {role}: {status} {text}"


def test_no_tenant_member_changes_a_monitoring_rule_the_platform_still_can(apiserver, prod_stack, e2e_summary):
    """For real, as every tenant subject: creating, replacing or deleting any PrometheusRule of the
    monitoring namespace (its own tenant's quota series included) is refused; the platform admin,
    the legitimate neighbour, still reads and replaces each one."""
    assert MONITORING_NAMESPACE, "prod has monitoring: its rules are what this test attacks"
    rules = prod_stack.of_kind("PrometheusRule")
    tenant_rules = [tenant_prometheus_rule(spec, ENV.view(spec)) for spec in TENANTS.values()]
    assert [r for r in tenant_rules if r] and all(r in rules for r in tenant_rules if r), "tenant rules not applied"
    base = f"/apis/monitoring.coreos.com/v1/namespaces/{MONITORING_NAMESPACE}/prometheusrules"
    attempts = 0
    for subject in SUBJECTS:
        api = apiserver.client_for(subject.user, subject.groups)
        forged = {**rules[0], "metadata": {"name": f"e2e-forged-{subject.user.replace(':', '-').replace('@', '-')}"[:63],
                                           "namespace": MONITORING_NAMESPACE}}
        requests = [("POST", base, forged)]
        for rule in rules:
            requests += [("PUT", f"{base}/{rule['metadata']['name']}", rule), ("DELETE", f"{base}/{rule['metadata']['name']}", None)]
        for method, path, body in requests:
            status, text = _request(api, method, path, body, dry_run=True)
            assert status == 403, (subject.label, method, path, status, text[:300])
            attempts += 1
    admin = apiserver.api_client
    for rule in rules:
        status, text = _request(admin, "GET", f"{base}/{rule['metadata']['name']}")
        assert status == 200, text[:300]
        status, text = _request(admin, "PUT", f"{base}/{rule['metadata']['name']}", json.loads(text), dry_run=True)
        assert status == 200, text[:300]
    e2e_summary.append(f"monitoring rules: {attempts} writes by {len(SUBJECTS)} tenant subjects refused; "
                       f"the admin reads and replaces all {len(rules)}")
