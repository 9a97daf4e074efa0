"""vCluster values against the host's RBAC on a real kube-apiserver (issue 34).

No vCluster runs here (no Helm, no images in this lane). The rules below are what the vcluster chart
0.36.1 puts into its ClusterRole `vc-vcluster-v-<namespace>` and Role `vc-vcluster` (both bound to
the ServiceAccount `vc-vcluster` of the tenant's namespace) beyond what it renders for the example's
generated values, for one tenant override each. They were rendered once, by hand, with Helm's own
template engine (helm.sh/helm/v3 v3.18.6 `pkg/engine`) from the chart at tag v0.36.1 and the values
`components.manifests.vcluster.vcluster_values` builds, and are written out here, since the chart is
not rendered in this lane (as in test_tenancy_dra.py).

The rules the chart renders for the generated values themselves (dev's llm-finetune, no override)
are written out too, with the SHA-256 of the values file they were rendered from: before the
generated values turned `networking.advanced.proxyKubelets` and `sync.fromHost.priorityClasses`
off, the ClusterRole held the kubelet API of every node and every verb on PriorityClasses
(`BEFORE_GENERATED_CLUSTER_RULES`); now it holds reads of pods, nodes and nodes/status, for the
node sync. A change of the generated values fails the digest check until they are rendered again.

What the server proves: with the rules of a refused value (`sync.fromHost.secrets`, mapping only a
Secret of the tenant's own namespace) whoever can run a pod as `vc-vcluster` lists another tenant's
Secrets, contents included, which no member of the tenant may; with the rules of the allowed values,
the ServiceAccount gains nothing the tenant's developers do not hold already. `tenants validate`
refuses the first and accepts the second (the input is the attack). Not proven here: that Helm
renders exactly these rules in a deployment (the hand rendering did), or what a running syncer does.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.load import load_environment
from components.manifests.vcluster import vcluster_release, values_yaml
from components.validate.vcluster import schema_errors, values_problems

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = load_environment(REPO_ROOT, "prod")
TENANT = next(t.spec for t in ENV.tenants if t.name == "llm-finetune")
OTHER = "inference"                        # another tenant's namespace in the prod stack
VCLUSTER_SA = "vc-vcluster"
SA_USER = (f"system:serviceaccount:{TENANT.name}:{VCLUSTER_SA}", ["system:serviceaccounts", f"system:serviceaccounts:{TENANT.name}"])
DEVELOPER = (f"e2e-developer@{TENANT.name}", [TENANT.access.developers.groups[0]])
E2E_ROLE = "e2e-vc-vcluster-values"

REFUSED_VALUES = {"sync": {"fromHost": {"secrets": {"enabled": True, "mappings": {"byName": {"/own": "default/own"}}}}}}
# What the chart adds to its ClusterRole for REFUSED_VALUES: the Secrets rule names no namespace.
REFUSED_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": [TENANT.name], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["own"]},
]

# Rendered by hand (Helm v3.18.6 pkg/engine, chart v0.36.1, release `vcluster` in namespace
# llm-finetune, Kubernetes 1.37) from `values_yaml` of dev's llm-finetune release. Its SHA-256 changed
# since (e30471bd... then) only by `sync.fromHost.nodes.selector.labels`, from `gpu-class: l4` to none:
# the chart's RBAC templates (templates/clusterrole.yaml, role.yaml, _rbac.tpl) read
# `sync.fromHost.nodes.enabled` and `syncBackChanges`, never the selector, so the rules below stand.
GENERATED_VALUES_SHA256 = "fad26ea9a91e4218fd897d6d47ba4ff2ac1d1f107ed53713b41a380c5b5cd842"
GENERATED_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["pods", "nodes", "nodes/status"], "verbs": ["get", "watch", "list"]},
]
GENERATED_ROLE_RULES = [
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services", "pods", "pods/attach", "pods/portforward", "pods/exec", "persistentvolumeclaims"],
     "verbs": ["create", "delete", "patch", "update", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/status", "pods/ephemeralcontainers"], "verbs": ["patch", "update"]},
    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch", "update"]},
    {"apiGroups": ["apps"], "resources": ["statefulsets", "replicasets", "deployments"], "verbs": ["get", "list", "watch", "patch", "update"]},
    {"apiGroups": [""], "resources": ["endpoints", "pods/log"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["create", "delete", "patch", "update"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["create", "list", "get", "delete", "patch", "update", "watch"]},
]
# The same render from the values generated before (proxyKubelets at the chart's default, PriorityClasses synced in).
BEFORE_GENERATED_CLUSTER_RULES = [
    *GENERATED_CLUSTER_RULES,
    {"apiGroups": [""], "resources": ["nodes/metrics", "nodes/stats", "nodes/proxy"], "verbs": ["get"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["create", "delete", "patch", "update", "get", "list", "watch"]},
]

ALLOWED_VALUES = {
    "sync": {"toHost": {"ingresses": {"enabled": True}, "serviceAccounts": {"enabled": True}},
             "fromHost": {"storageClasses": {"enabled": True}, "runtimeClasses": {"enabled": True}}},
    "controlPlane": {"statefulSet": {"resources": {"requests": {"cpu": "200m", "memory": "512Mi"}}}},
    "exportKubeConfig": {"context": "finetune", "secret": {"name": "kubeconfig"}},
    "networking": {"replicateServices": {"toHost": [{"from": "default/web", "to": "web"}]}},
}
# What the chart adds for ALLOWED_VALUES: to its Role (the tenant's namespace) and its ClusterRole.
ALLOWED_ROLE_RULES = [
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["create", "delete", "patch", "update", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create", "delete", "patch", "update", "get", "list", "watch"]},
]
ALLOWED_CLUSTER_RULES = [
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "watch", "list"]},
    {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["get", "watch", "list"]},
]


def may(apiserver, subject: tuple[str, list[str]], verb: str, group: str, resource: str, namespace: str | None) -> bool:
    """A SubjectAccessReview as admin: may `subject` do `verb` on `resource` (in `namespace`)?"""
    attributes = {"verb": verb, "group": group, "resource": resource, **({"namespace": namespace} if namespace else {})}
    review = client.AuthorizationV1Api(apiserver.api_client).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": subject[0], "groups": subject[1], "resourceAttributes": attributes}})
    return bool(review.status.allowed)


def bind_chart_rules(apiserver, cluster_rules: list[dict], role_rules: list[dict] = ()) -> None:
    """The chart's rules, bound to vc-vcluster as the chart binds them (ClusterRoleBinding, RoleBinding)."""
    rbac = "rbac.authorization.k8s.io"
    subject = [{"kind": "ServiceAccount", "name": VCLUSTER_SA, "namespace": TENANT.name}]
    apiserver.apply({"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": E2E_ROLE}, "rules": cluster_rules})
    apiserver.apply({"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": E2E_ROLE},
                     "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": E2E_ROLE}, "subjects": subject})
    if role_rules:
        apiserver.apply({"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": E2E_ROLE, "namespace": TENANT.name}, "rules": list(role_rules)})
        apiserver.apply({"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": E2E_ROLE, "namespace": TENANT.name},
                         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": E2E_ROLE}, "subjects": subject})


def unbind_chart_rules(apiserver) -> None:
    rbac = client.RbacAuthorizationV1Api(apiserver.api_client)
    for delete in (lambda: rbac.delete_cluster_role_binding(E2E_ROLE), lambda: rbac.delete_cluster_role(E2E_ROLE),
                   lambda: rbac.delete_namespaced_role_binding(E2E_ROLE, TENANT.name),
                   lambda: rbac.delete_namespaced_role(E2E_ROLE, TENANT.name)):
        try:
            delete()
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def other_tenants_secret(apiserver, prod_stack):
    core = client.CoreV1Api(apiserver.api_client)
    name = f"e2e-db-password-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_secret(OTHER, {"metadata": {"name": name}, "stringData": {"password": "hunter2"}})
    yield name
    core.delete_namespaced_secret(name, OTHER)
    unbind_chart_rules(apiserver)


def test_a_refused_from_host_sync_would_read_another_tenants_secrets(apiserver, other_tenants_secret):
    assert [path for path, _ in values_problems(REFUSED_VALUES, TENANT)] == [("sync", "fromHost", "secrets")]
    secrets_of = lambda: client.CoreV1Api(apiserver.client_for(*SA_USER)).list_namespaced_secret(OTHER)  # noqa: E731
    with pytest.raises(ApiException) as before:
        secrets_of()
    assert before.value.status == 403
    assert not may(apiserver, DEVELOPER, "list", "", "secrets", OTHER)

    bind_chart_rules(apiserver, REFUSED_CLUSTER_RULES)
    listed = apiserver.wait_for(secrets_of, what="the chart's fromHost-secrets ClusterRole to take effect")
    stolen = {s.metadata.name: s.data for s in listed.items}
    assert stolen[other_tenants_secret] == {"password": "aHVudGVyMg=="}, "the ServiceAccount reads the other tenant's Secret"
    assert not may(apiserver, DEVELOPER, "list", "", "secrets", OTHER), "no member of the tenant may do the same"


def test_allowed_values_give_the_vcluster_nothing_a_developer_lacks(apiserver, other_tenants_secret):
    assert values_problems(ALLOWED_VALUES, TENANT) == [] and schema_errors(ALLOWED_VALUES) == []
    bind_chart_rules(apiserver, ALLOWED_CLUSTER_RULES, ALLOWED_ROLE_RULES)
    granted = [(verb, group, resource, namespace)
               for rules, namespace in ((ALLOWED_ROLE_RULES, TENANT.name), (ALLOWED_CLUSTER_RULES, None))
               for rule in rules for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]]
    apiserver.wait_for(lambda: all(may(apiserver, SA_USER, *cell) for cell in granted), what="the chart's rules to take effect")
    beyond = [cell for cell in granted if not may(apiserver, DEVELOPER, *cell)]
    assert beyond == [], f"the vCluster's ServiceAccount may do what the tenant's developers may not: {beyond}"
    for verb in ("get", "list"):
        assert not may(apiserver, SA_USER, verb, "", "secrets", OTHER)


@pytest.fixture
def chart_rules_unbound(apiserver, prod_stack):
    yield
    unbind_chart_rules(apiserver)


def _dev_release_values() -> dict:
    dev = load_environment(REPO_ROOT, "dev")
    spec = next(t.spec for t in dev.tenants if t.name == TENANT.name)
    return vcluster_release(spec, dev.view(spec))["values"]


def test_the_generated_values_give_no_kubelet_api_and_no_priority_class_writes(apiserver, chart_rules_unbound):
    values = _dev_release_values()
    assert hashlib.sha256(values_yaml(values).encode()).hexdigest() == GENERATED_VALUES_SHA256, (
        "the generated vCluster values changed: render the chart again and update the rules of this file")
    core, scheduling = client.CoreV1Api(apiserver.client_for(*SA_USER)), client.SchedulingV1Api(apiserver.client_for(*SA_USER))
    priority_class = {"metadata": {"name": "e2e-preempt-everyone"}, "value": 1_000_000_000}

    bind_chart_rules(apiserver, BEFORE_GENERATED_CLUSTER_RULES, GENERATED_ROLE_RULES)
    apiserver.wait_for(lambda: may(apiserver, SA_USER, "create", "scheduling.k8s.io", "priorityclasses", None),
                       what="the rules of the former generated values to take effect")
    assert may(apiserver, SA_USER, "get", "", "nodes/proxy", None), "the former values reached every kubelet"
    scheduling.create_priority_class(priority_class, dry_run="All")   # and could preempt every tenant

    bind_chart_rules(apiserver, GENERATED_CLUSTER_RULES, GENERATED_ROLE_RULES)
    apiserver.wait_for(lambda: not may(apiserver, SA_USER, "create", "scheduling.k8s.io", "priorityclasses", None),
                       what="the rules of the generated values to take effect")
    for verb, resource in (("get", "nodes/proxy"), ("get", "nodes/stats"), ("get", "nodes/metrics"),
                           ("create", "priorityclasses"), ("update", "priorityclasses"), ("delete", "priorityclasses")):
        assert not may(apiserver, SA_USER, verb, "scheduling.k8s.io" if resource == "priorityclasses" else "", resource, None), (verb, resource)
    with pytest.raises(ApiException) as refused:
        scheduling.create_priority_class(priority_class, dry_run="All")
    assert refused.value.status == 403
    name = core.list_node().items[0].metadata.name     # the node sync's reads are kept
    with pytest.raises(ApiException) as kubelet:
        core.connect_get_node_proxy_with_path(name, "pods")
    assert kubelet.value.status == 403, "the kubelet API of a node is out of reach"
    # What the vCluster needs to run: its pods, Services and endpoints in its namespace, and the node sync.
    for verb, group, resource, namespace in (
            ("create", "", "pods", TENANT.name), ("delete", "", "pods", TENANT.name), ("create", "", "services", TENANT.name),
            ("patch", "", "pods/status", TENANT.name), ("create", "discovery.k8s.io", "endpointslices", TENANT.name),
            ("list", "", "nodes", None), ("watch", "", "pods", None), ("create", "events.k8s.io", "events", TENANT.name)):
        assert may(apiserver, SA_USER, verb, group, resource, namespace), (verb, resource)
    assert not may(apiserver, SA_USER, "create", "", "pods", OTHER), "no writes beyond its namespace"
