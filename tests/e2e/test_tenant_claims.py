"""What a tenant file may claim, on a real kube-apiserver (issue 34).

`claimlab`, a tenant made for this module in the prod inventory, names each legitimate kind of
subject: a group and a user of the team, one of its own ServiceAccounts by user name
(`system:serviceaccount:claimlab:reporter`) and a CI ServiceAccount. Its rendered objects are
applied next to the example prod stack, and each member does what its role allows.

Each attack is the same file with one field changed: a namespace of a component the stack
configures (the GPU Operator's, Kueue's, KAI's), a `system:` subject, another namespace's
ServiceAccount. Validate refuses it at the field before any object is built, so nothing reaches
the API server: `gpu-operator`, which the GPU Operator holds there (tools/applied_stack.py creates
it as its chart would), stays unlabelled and unbound.

What an owner binds by hand is the guard policy's: test_tenancy_isolation.py (class 4) shows an
owner's RoleBinding to `system:authenticated`, `system:unauthenticated` or another namespace's
ServiceAccount refused, and the tenant's own group and ServiceAccount admitted (dry run). Here an
owner binds its own ServiceAccount for real and the account then works, while the user-name form
of the same account is refused to the owner: the guard never lets an owner bind a `system:`
name, validate lets the tenant file name its own accounts, which the platform's identity binds.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.cli.main import main
from components.load import environment_from_data
from components.manifests.build import environment_objects
from components.spec.base import API_VERSION
from components.spec.problems import InvalidInput
from components.spec.stack import CONFIG_KEY
from tools.applied_stack import apply_tenant, remove_tenant

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
NAME = "claimlab"
PLATFORM = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"][CONFIG_KEY]
OWN_ACCOUNT = f"system:serviceaccount:{NAME}:reporter"
GUARD = f"ValidatingAdmissionPolicy 'gpu-tenancy-guard' with binding 'gpu-tenancy-guard-{NAME}' denied request"


def _file() -> dict[str, Any]:
    """The legitimate tenant file: every kind of subject a tenant role may name."""
    return {"apiVersion": API_VERSION, "kind": "Tenant", "name": NAME, "displayName": "Claim lab", "costCenter": "cc-e2e",
            "access": {"owners": {"groups": [f"{NAME}-leads"]}, "developers": {"users": [f"dana@{NAME}.dev"]},
                       "viewers": {"groups": [f"{NAME}-readers"], "users": [OWN_ACCOUNT]},
                       "ciServiceAccounts": [{"name": "ci", "role": "developer"}]}}


def _render(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The tenant's objects in the prod inventory, validated as `tenants validate` would (raises InvalidInput)."""
    platform = {**copy.deepcopy(PLATFORM), "tenants": "all"}
    # The prod stack grants hosts to its tenant `inference` (ingressHosts.tenantDomains), which this
    # one-tenant inventory lacks; validate refuses a grant to no tenant file (h2-hosts).
    platform.get("ingressHosts", {}).pop("tenantDomains", None)
    return environment_objects(environment_from_data("prod", platform, {NAME: data}))[NAME]


def _with(path: tuple, value: Any) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        data = _file()
        *parents, last = path
        target = data
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
        return data
    return make


# (what, the attacking file, where validate says it, a fragment of why)
ATTACKS = [
    ("the GPU Operator's namespace", _with(("namespaces",), ["gpu-operator"]), "namespaces[0]",
     "namespace 'gpu-operator' is reserved for the NVIDIA GPU Operator (gpuOperator.namespace)"),
    ("Kueue's namespace", _with(("namespaces",), ["kueue-system"]), "namespaces[0]",
     "namespace 'kueue-system' is reserved for Kueue (queues.kueue.namespace)"),
    ("KAI's namespace", _with(("namespaces",), ["kai-scheduler"]), "namespaces[0]",
     "namespace 'kai-scheduler' is reserved for the KAI Scheduler (queues.kai.binderServiceAccount)"),
    ("KAI's reservation namespace", _with(("namespaces",), ["kai-resource-reservation"]), "namespaces[0]",
     "namespace 'kai-resource-reservation' is reserved for KAI's GPU-sharing reservation pods"),
    ("every authenticated client as viewers", _with(("access", "viewers", "groups"), ["system:authenticated"]),
     "access.viewers.groups[0]", "system:authenticated is every authenticated client of the cluster"),
    ("requests without credentials as developers", _with(("access", "developers", "groups"), ["system:unauthenticated"]),
     "access.developers.groups[0]", "system:unauthenticated is every request without credentials"),
    ("the anonymous user as owner", _with(("access", "owners", "users"), ["system:anonymous"]),
     "access.owners.users[0]", "system:anonymous is the user of every request without credentials"),
    ("cluster-admin's group as owners", _with(("access", "owners", "groups"), ["system:masters"]),
     "access.owners.groups[0]", "system:masters is the group that bypasses all authorization"),
    ("KAI's binder as developer", _with(("access", "developers", "users"), ["system:serviceaccount:kai-scheduler:binder"]),
     "access.developers.users[0]", "ServiceAccount binder of namespace kai-scheduler, which is not one of the tenant's namespaces"),
    ("a neighbour's ServiceAccount as viewer", _with(("access", "viewers", "users"), ["system:serviceaccount:eval:default"]),
     "access.viewers.users[0]", "ServiceAccount default of namespace eval"),
]


@pytest.fixture(scope="module")
def claimlab(apiserver, prod_stack) -> Iterator[list[dict[str, Any]]]:
    objects = _render(_file())
    apply_tenant(apiserver, objects)
    probe = _binding({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"})
    owner = client.RbacAuthorizationV1Api(apiserver.client_for(f"lee@{NAME}.dev", [f"{NAME}-leads"]))

    def guarded() -> bool:  # the guard binding of a new tenant takes effect a moment after it is applied
        try:
            owner.create_namespaced_role_binding(NAME, probe, dry_run="All")
        except ApiException as exc:
            return exc.status == 403 and GUARD in _message(exc)
        return False
    apiserver.wait_for(guarded, what=f"the guard policy of {NAME} in force")
    yield objects
    remove_tenant(apiserver, objects)


def _binding(subject: dict[str, Any], role: str = "tenant-developer") -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}, "subjects": [subject]}


def _message(exc: ApiException) -> str:
    try:
        return json.loads(exc.body)["message"]
    except (TypeError, ValueError, KeyError):
        return str(exc)


def _config_map() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"}, "data": {"k": "v"}}


def _status(call: Callable[[], Any]) -> int:
    try:
        call()
    except ApiException as exc:
        return exc.status
    return 200


@pytest.mark.parametrize("what, make, field, fragment", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_each_claim_is_refused_by_validate_before_anything_is_applied(apiserver, claimlab, what, make, field, fragment):
    with pytest.raises(InvalidInput) as refused:
        _render(make())
    errors = [p for p in refused.value.problems if p.severity == "error"]
    assert [(p.file, p.field) for p in errors] == [(f"data:tenants/{NAME}", field)], [str(p) for p in errors]
    assert fragment in errors[0].message and ("choose another name" in errors[0].message or "remove it" in errors[0].message)
    # Nothing was built, so nothing reached the cluster: the component keeps its namespace, and no
    # RoleBinding of the tenant names a system: subject other than its own ServiceAccount.
    core = client.CoreV1Api(apiserver.api_client)
    labels = core.read_namespace("gpu-operator").metadata.labels or {}
    assert not any(key.endswith("/tenant") for key in labels), labels
    rbac = client.RbacAuthorizationV1Api(apiserver.api_client)
    for namespace in ("gpu-operator", NAME):
        named = {s.name for b in rbac.list_namespaced_role_binding(namespace).items for s in b.subjects or []}
        assert {n for n in named if n.startswith("system:")} <= {OWN_ACCOUNT}, (namespace, named)


def test_the_legitimate_subjects_hold_their_roles(apiserver, claimlab):
    developer = client.CoreV1Api(apiserver.client_for(f"dana@{NAME}.dev"))
    assert developer.create_namespaced_config_map(NAME, _config_map(), dry_run="All").metadata.name
    # The tenant's own ServiceAccount, named by user name in viewers: it reads, without Secrets.
    reporter = client.CoreV1Api(apiserver.client_for(OWN_ACCOUNT, ["system:serviceaccounts", f"system:serviceaccounts:{NAME}"]))
    assert reporter.list_namespaced_pod(NAME).items == []
    assert _status(lambda: reporter.list_namespaced_secret(NAME)) == 403
    assert _status(lambda: reporter.create_namespaced_config_map(NAME, _config_map(), dry_run="All")) == 403
    # ...and only in the tenant's namespaces.
    assert _status(lambda: reporter.list_namespaced_pod("eval")) == 403


def test_an_owner_binds_its_own_service_account_and_it_works_but_never_by_system_user_name(apiserver, claimlab):
    owner = client.RbacAuthorizationV1Api(apiserver.client_for(f"lee@{NAME}.dev", [f"{NAME}-leads"]))
    builder = client.CoreV1Api(apiserver.client_for(f"system:serviceaccount:{NAME}:builder",
                                                    ["system:serviceaccounts", f"system:serviceaccounts:{NAME}"]))
    assert _status(lambda: builder.create_namespaced_config_map(NAME, _config_map(), dry_run="All")) == 403
    account = {"kind": "ServiceAccount", "name": "builder", "namespace": NAME}
    with pytest.raises(ApiException) as refused:
        owner.create_namespaced_role_binding(NAME, _binding({"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                                                             "name": f"system:serviceaccount:{NAME}:builder"}))
    assert refused.value.status == 403 and GUARD in _message(refused.value) and "never system: users or groups" in _message(refused.value)
    bound = owner.create_namespaced_role_binding(NAME, _binding(account))
    try:
        apiserver.wait_for(lambda: _status(lambda: builder.create_namespaced_config_map(NAME, _config_map(), dry_run="All")) == 200,
                           what="the owner's binding of its own ServiceAccount in force")
    finally:
        owner.delete_namespaced_role_binding(bound.metadata.name, NAME)


def test_tenants_import_from_the_cluster_refuses_kueues_namespace_and_imports_a_teams(apiserver, claimlab, project_copy, capsys):
    for namespace in ("kueue-system", "claimimport"):
        apiserver.create_namespace(namespace)
    try:
        tenants = project_copy / "tenants"
        before = sorted(p.name for p in tenants.iterdir())
        args = ["--root", str(project_copy), "import", "--stack", "prod", "--kubeconfig", str(apiserver.kubeconfig), "--context", "e2e"]
        capsys.readouterr()
        assert main([*args, "--namespace", "kueue-system"]) == 1
        out, err = capsys.readouterr()
        assert "Namespace kueue-system: namespace: not imported: 'kueue-system' is reserved for Kueue (queues.kueue.namespace)" in err, err
        assert "nothing to import" in err and "wrote" not in out
        assert sorted(p.name for p in tenants.iterdir()) == before
        assert main([*args, "--namespace", "claimimport"]) == 0
        out, err = capsys.readouterr()
        assert "wrote tenants/claimimport.yaml" in out, err
        assert (tenants / "claimimport.yaml").exists()
        assert main(["--root", str(project_copy), "validate", "--stack", "prod"]) == 0
    finally:
        for namespace in ("kueue-system", "claimimport"):
            apiserver.delete_namespace(namespace)
