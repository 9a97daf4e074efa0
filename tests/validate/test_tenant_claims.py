"""What a tenant file may claim (issue 34): no namespace the platform owns, no `system:` subject.

The broken corpus (tests/validate/broken: reserved-namespace-*, subject-*) holds the attacks against
the example stacks; here are the stack settings that move the line and the neighbours that pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.fleet.tenant_claims import reserved_namespaces
from components.load import load_environment
from components.spec.stack import Platform
from components.spec.tenant import Tenant
from components.spec.yaml_source import parse_yaml
from components.validate.tenant import check_tenant

REPO = Path(__file__).resolve().parents[2]
TENANT = """apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: team
displayName: Team
costCenter: cc-1
"""


def _tenant(extra: str = "") -> tuple[Tenant, object]:
    text = TENANT + extra
    return Tenant.model_validate(yaml.safe_load(text)), parse_yaml(text, "tenants/team.yaml")


def _platform(**fields) -> Platform:
    return Platform.model_validate({"labelDomain": "gpu.example.com", **fields})


def _errors(extra: str, platform: Platform | None = None) -> list[str]:
    tenant, doc = _tenant(extra)
    return [str(p) for p in check_tenant(tenant, doc, platform or _platform()) if p.severity == "error"]


# --------------------------------------------------------------------------
# namespaces
# --------------------------------------------------------------------------

@pytest.mark.parametrize("namespace, owner", [
    ("gpu-operator", "the NVIDIA GPU Operator (gpuOperator.namespace)"),
    ("kueue-system", "Kueue (queues.kueue.namespace)"),
    ("kai-scheduler", "the KAI Scheduler (queues.kai.binderServiceAccount)"),
    ("kai-resource-reservation", "KAI's GPU-sharing reservation pods (queues.kai.reservationNamespace)"),
    ("kube-node-lease", "Kubernetes itself"),
    ("kube-flannel", "Kubernetes (every kube-* namespace)"),
    ("openshift-monitoring", "OpenShift (every openshift-* namespace)"),
])
def test_a_namespace_of_a_component_the_stack_configures_is_refused_naming_its_owner(namespace, owner):
    assert _errors(f"namespaces: [{namespace}]\n") == [
        f"tenants/team.yaml:6:14: namespaces[0]: namespace '{namespace}' is reserved for {owner}: a tenant holding it would "
        "read its Secrets, run pods as its ServiceAccounts and change its configuration; choose another name"]


def test_the_stack_moves_the_components_namespaces_and_names_its_own():
    platform = _platform(
        gpuOperator={"namespace": "nvidia-gpu"}, queues={"kueue": {"namespace": "queues"}, "kai": {
            "binderServiceAccount": "kai/binder", "reservationNamespace": "kai-reserved"}},
        clusterDns={"namespace": "dns"}, platformNamespaces={"ingress": ["ingress-nginx"]},
        monitoring={"namespace": "observability"}, reservedNamespaces={"cert-manager": "cert-manager", "argocd": "GitOps (Argo CD)"})
    table = reserved_namespaces(platform)
    assert {ns: table[ns] for ns in ("nvidia-gpu", "queues", "kai", "kai-reserved", "dns", "ingress-nginx", "observability", "argocd")} == {
        "nvidia-gpu": "the NVIDIA GPU Operator (gpuOperator.namespace)",
        "queues": "Kueue (queues.kueue.namespace)",
        "kai": "the KAI Scheduler (queues.kai.binderServiceAccount)",
        "kai-reserved": "KAI's GPU-sharing reservation pods (queues.kai.reservationNamespace)",
        "dns": "the cluster DNS (clusterDns.namespace)",
        "ingress-nginx": "the platform's ingress service (platformNamespaces.ingress)",
        "observability": "the tenants' GPU monitoring rules and dashboards (monitoring.namespace)",
        "argocd": "GitOps (Argo CD) (reservedNamespaces)",
    }
    errors = _errors("namespaces: [argocd, queues, gpu-operator]\n", platform)
    assert [e.split(": namespace ")[0] for e in errors] == ["tenants/team.yaml:6:14: namespaces[0]", "tenants/team.yaml:6:22: namespaces[1]"]
    assert "'argocd' is reserved for GitOps (Argo CD) (reservedNamespaces)" in errors[0]
    # gpu-operator is an ordinary name once the GPU Operator runs elsewhere.
    assert _errors("namespaces: [gpu-operator]\n", platform) == []


def test_the_operators_default_namespace_is_the_one_tenants_stacks_writes():
    from components.fleet.tenant_claims import OPERATOR_NAMESPACE
    from components.manifests.operator_stacks import OperatorSettings

    assert OperatorSettings("https://git.example/x").namespace == OPERATOR_NAMESPACE
    assert "Pulumi Kubernetes Operator" in _errors(f"namespaces: [{OPERATOR_NAMESPACE}]\n")[0]


def test_the_tenants_own_namespace_is_checked_at_its_name():
    text = TENANT.replace("name: team", "name: cert-manager")
    tenant, doc = Tenant.model_validate(yaml.safe_load(text)), parse_yaml(text, "tenants/cert-manager.yaml")
    problems = check_tenant(tenant, doc, _platform(reservedNamespaces={"cert-manager": "cert-manager"}))
    assert [str(p)[:95] for p in problems] == [
        "tenants/cert-manager.yaml:3:1: name: namespace 'cert-manager' is reserved for cert-manager (reservedNamespaces)"[:95]]


def test_a_previous_name_may_be_reserved_it_is_the_way_out():
    # previousNames adopt the old tenant's Pulumi resources, never a namespace made outside the tool.
    assert _errors("previousNames: [kueue-system]\n") == []


def test_ordinary_namespaces_pass():
    assert _errors("namespaces: [team-data, kueue-jobs, operators]\n") == []


def test_the_example_stacks_reserve_their_components_namespaces():
    for stack in ("prod", "staging", "dev"):
        table = reserved_namespaces(load_environment(REPO, stack).platform)
        assert {"gpu-operator", "kueue-system", "kai-scheduler", "kai-resource-reservation", "monitoring", "ingress-nginx",
                "kube-system", "default"} <= set(table), stack


# --------------------------------------------------------------------------
# subjects
# --------------------------------------------------------------------------

def test_every_role_refuses_system_names_at_the_entry():
    errors = _errors("access:\n  owners: {groups: [system:masters]}\n  developers: {users: [system:anonymous]}\n"
                     "  viewers: {groups: [team-readers, system:authenticated, system:serviceaccounts:team]}\n")
    assert [e.split(" is ")[0] for e in errors] == [
        "tenants/team.yaml:7:21: access.owners.groups[0]: system:masters",
        "tenants/team.yaml:8:24: access.developers.users[0]: system:anonymous",
        "tenants/team.yaml:9:36: access.viewers.groups[1]: system:authenticated",
        "tenants/team.yaml:9:58: access.viewers.groups[2]: system:serviceaccounts:team",
    ]
    assert errors[2].split(": ", 2)[2] == (
        "system:authenticated is every authenticated client of the cluster (every user and ServiceAccount of every "
        "tenant): a tenant role may name only the team's own users and groups, and ServiceAccounts of the tenant's "
        "namespaces (or add them to ciServiceAccounts); remove it, or ask the platform team to list it under "
        "tenantAccess.systemSubjects")
    assert "is every ServiceAccount of namespace team" in errors[3]


def test_another_namespaces_service_account_is_refused_and_the_tenants_own_pass():
    errors = _errors("namespaces: [team-data]\naccess:\n  developers:\n    users:\n"
                     "      - system:serviceaccount:team:ci\n      - system:serviceaccount:team-data:loader\n"
                     "      - system:serviceaccount:kube-system:replicaset-controller\n"
                     "      - system:serviceaccount:team:ci:extra\n")
    assert [e.split(": ")[1] for e in errors] == ["access.developers.users[2]", "access.developers.users[3]"]
    assert ("system:serviceaccount:kube-system:replicaset-controller is ServiceAccount replicaset-controller of namespace "
            "kube-system, which is not one of the tenant's namespaces (team, team-data)") in errors[0]
    assert "is a Kubernetes system identity" in errors[1]  # no ServiceAccount's name: a name of the prefix


def test_the_stack_lists_the_system_subjects_tenant_files_may_name():
    platform = _platform(tenantAccess={"systemSubjects": {"users": ["system:serviceaccount:ci:runner"], "groups": ["system:serviceaccounts:ci"]}})
    assert _errors("access:\n  developers: {users: [system:serviceaccount:ci:runner], groups: [system:serviceaccounts:ci]}\n", platform) == []
    # exact names, and per kind: the listed user is not a listed group
    assert len(_errors("access:\n  developers: {groups: [system:serviceaccount:ci:runner], users: [system:serviceaccount:ci:other]}\n",
                       platform)) == 2


def test_the_stacks_list_holds_system_names_only():
    with pytest.raises(ValueError, match="should match pattern"):
        _platform(tenantAccess={"systemSubjects": {"groups": ["team-a"]}})


def test_ordinary_subjects_pass():
    assert _errors("access:\n  owners: {groups: [team-leads], users: [ana@acme.dev, systems-bot]}\n") == []
