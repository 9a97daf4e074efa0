"""What a tenant file may claim: no namespace the platform owns, no identity of the cluster's own.

A tenant file comes from a team by pull request and is deployed by the platform's identity, so
whatever it names, the deployment creates. Two names reach beyond the team:

* a **namespace** the platform owns. The first deployment adopts an existing namespace (docs/importing.md),
  labels it the tenant's and binds the tenant's roles there: its owners then read the
  component's Secrets, run pods as its ServiceAccounts (the GPU Operator's, Kueue's, KAI's
  binder's, the deployment's own kubeconfig in the Pulumi operator's) and rewrite its
  configuration (the MIG layouts), and the tenant's Pod Security level refuses the component's
  own privileged pods. `reserved_namespaces` is the one table of them,
  from the stack; `namespace_owner` adds the prefixes Kubernetes and OpenShift keep.
* a **subject** of the `system:` prefix, which Kubernetes gives its own identities:
  `system:authenticated` is every client with credentials, `system:unauthenticated` every request
  without, `system:masters` cluster-admin's group, `system:serviceaccount:<ns>:<name>` a
  ServiceAccount of any namespace. `subject_refusal` says why one may not hold a tenant role: only
  the tenant's own ServiceAccounts (the guard policy lets owners bind those too) and the names the
  stack lists (`tenantAccess.systemSubjects`) may.

Validate (validate/tenant.py) and `tenants import` (authoring/) both ask here, so a file the
importer writes is one validate accepts.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..spec.stack import Platform

# Namespaces of these prefixes belong to the distribution whatever their name (kube-public,
# kube-node-lease, kube-flannel, openshift-monitoring, ...).
RESERVED_PREFIXES = {"kube-": "Kubernetes (every kube-* namespace)", "openshift-": "OpenShift (every openshift-* namespace)"}
_KUBERNETES = "Kubernetes itself"
_KUBERNETES_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Where `tenants stacks --format operator` puts the Pulumi Kubernetes Operator's Stacks and the
# kubeconfig Secrets of the deployment's identity (manifests/operator_stacks.py `OperatorSettings`,
# a command-line setting, not the stack's; a stack whose operator runs elsewhere lists that
# namespace under reservedNamespaces).
OPERATOR_NAMESPACE = "pulumi-operator"

SYSTEM_PREFIX = "system:"
# system:serviceaccount:<namespace>:<name>, as the API server names a ServiceAccount's requests.
_SERVICE_ACCOUNT = re.compile(r"^system:serviceaccount:(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?):(?P<name>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$")
# What the well-known system: names are, for the message (by subject kind; other system: names get
# the generic reason).
_SYSTEM_NAMES = {
    "groups": {
        "system:authenticated": "every authenticated client of the cluster (every user and ServiceAccount of every tenant)",
        "system:unauthenticated": "every request without credentials (anyone who reaches the API server)",
        "system:masters": "the group that bypasses all authorization (cluster-admin of the API server)",
        "system:serviceaccounts": "every ServiceAccount of every namespace",
        "system:nodes": "every kubelet of the cluster",
        "system:bootstrappers": "every node bootstrap token",
        "system:monitoring": "the API server's metrics readers",
    },
    "users": {
        "system:anonymous": "the user of every request without credentials (anyone who reaches the API server)",
        "system:kube-controller-manager": "the controller manager",
        "system:kube-scheduler": "the scheduler",
        "system:kube-proxy": "kube-proxy on every node",
        "system:apiserver": "the API server itself",
    },
}
_PREFIXED = {
    "groups": (("system:serviceaccounts:", "every ServiceAccount of namespace {rest}"),),
    "users": (("system:node:", "the kubelet of node {rest}"),),
}


def reserved_namespaces(platform: Platform) -> dict[str, str]:
    """Every namespace of the stack no tenant may hold, with what owns it (several owners joined).

    >>> table = reserved_namespaces(prod.platform)
    >>> table["gpu-operator"], table["kueue-system"], table["kai-scheduler"]
    ('the NVIDIA GPU Operator (gpuOperator.namespace)', 'Kueue (queues.kueue.namespace)', 'the KAI Scheduler (queues.kai.binderServiceAccount)')
    >>> table["kube-system"]
    'Kubernetes itself and the cluster DNS (clusterDns.namespace)'
    """
    owned: list[tuple[str, str]] = [(namespace, _KUBERNETES) for namespace in _KUBERNETES_NAMESPACES]
    owned.append((platform.cluster_dns.namespace, "the cluster DNS (clusterDns.namespace)"))
    owned.append((OPERATOR_NAMESPACE, "the Pulumi Kubernetes Operator (the default namespace of `tenants stacks --format operator`)"))
    for role, namespaces in sorted(platform.platform_namespaces.items()):
        owned.extend((namespace, f"the platform's {role} service (platformNamespaces.{role})") for namespace in namespaces)
    owned.append((platform.gpu_operator.namespace, "the NVIDIA GPU Operator (gpuOperator.namespace)"))
    # Reserved whichever scheduler the stack names today: a namespace a tenant holds stays its
    # own when the stack turns the scheduler on.
    owned.append((platform.queues.kueue.namespace, "Kueue (queues.kueue.namespace)"))
    owned.append((platform.queues.kai.binder_service_account.split("/", 1)[0], "the KAI Scheduler (queues.kai.binderServiceAccount)"))
    owned.append((platform.queues.kai.reservation_namespace, "KAI's GPU-sharing reservation pods (queues.kai.reservationNamespace)"))
    if platform.monitoring is not None:
        owned.append((platform.monitoring.namespace, "the tenants' GPU monitoring rules and dashboards (monitoring.namespace)"))
    owned.extend((namespace, f"{owner} (reservedNamespaces)") for namespace, owner in sorted(platform.reserved_namespaces.items()))
    table: dict[str, list[str]] = {}
    for namespace, owner in owned:
        owners = table.setdefault(namespace, [])
        if owner not in owners:
            owners.append(owner)
    return {namespace: " and ".join(owners) for namespace, owners in table.items()}


def namespace_owner(namespace: str, reserved: dict[str, str]) -> str | None:
    """What owns `namespace` (`reserved` is `reserved_namespaces(platform)`), or None when a tenant may hold it.

    >>> table = reserved_namespaces(prod.platform)
    >>> namespace_owner("kube-flannel", table), namespace_owner("kai-resource-reservation", table)
    ('Kubernetes (every kube-* namespace)', "KAI's GPU-sharing reservation pods (queues.kai.reservationNamespace)")
    >>> namespace_owner("research", table) is None
    True
    """
    if namespace in reserved:
        return reserved[namespace]
    return next((owner for prefix, owner in RESERVED_PREFIXES.items() if namespace.startswith(prefix)), None)


def subject_refusal(platform: Platform, kind: str, name: str, namespaces: Iterable[str]) -> str | None:
    """Why `name` (a user or group, `kind` "users" or "groups") may not hold a role of a tenant whose
    namespaces are `namespaces`, or None when it may.

    >>> subject_refusal(prod.platform, "groups", "system:authenticated", ["eval"])
    'system:authenticated is every authenticated client of the cluster (every user and ServiceAccount of every tenant)'
    >>> subject_refusal(prod.platform, "users", "system:serviceaccount:kai-scheduler:binder", ["eval"])
    "system:serviceaccount:kai-scheduler:binder is ServiceAccount binder of namespace kai-scheduler, which is not one of the tenant's namespaces (eval)"
    >>> subject_refusal(prod.platform, "users", "system:serviceaccount:eval:ci", ["eval"]) is None
    True
    >>> subject_refusal(prod.platform, "groups", "eval-leads", ["eval"]) is None
    True
    """
    if not name.startswith(SYSTEM_PREFIX):
        return None
    listed = platform.tenant_access.system_subjects
    if name in (listed.users if kind == "users" else listed.groups):
        return None
    namespaces = list(namespaces)
    account = _SERVICE_ACCOUNT.fullmatch(name) if kind == "users" else None
    if account is not None:
        if account["namespace"] in namespaces:
            return None
        return (f"{name} is ServiceAccount {account['name']} of namespace {account['namespace']}, which is not one of the "
                f"tenant's namespaces ({', '.join(namespaces)})")
    known = _SYSTEM_NAMES[kind].get(name)
    if known is None:
        known = next((what.format(rest=name[len(prefix):]) for prefix, what in _PREFIXED[kind] if name.startswith(prefix)), None)
    return f"{name} is {known}" if known else f"{name} is a Kubernetes system identity (the system: prefix is the cluster's own)"
