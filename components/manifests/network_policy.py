"""NetworkPolicies: deny by default, then allow what the tenant file and the stack name.

Namespaces and quotas isolate no traffic; these policies do (given a CNI that enforces them).
Every tenant namespace gets `default-deny` (ingress and egress) and the allowances below, each
left out when it would allow nothing:

* `allow-same-tenant`: to and from pods in any namespace of the same tenant (selected by the
  tenant label, which only the platform can set because tenants cannot write Namespaces);
* `allow-dns`: egress to the cluster DNS pods on port 53, UDP and TCP;
* `allow-from-platform`: ingress from the namespaces of the platform roles the tenant lists
  (e.g. ingress controllers, monitoring);
* `allow-from-tenants`: ingress from other tenants' namespaces. Only the receiving tenant grants
  this; a tenant cannot open its way into another;
* `allow-egress`: egress to the CIDRs the tenant lists.

Namespaces are selected by `kubernetes.io/metadata.name`, which the API server sets and nobody
can change.
"""

from __future__ import annotations

from ..model.load import Environment
from ..model.tenant import Port, Tenant
from .meta import TENANT_LABEL, KubeObject, kube_object, object_meta
from .namespace import owned_labels

NETWORKING_API = "networking.k8s.io/v1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

DEFAULT_DENY = "default-deny"
ALLOW_SAME_TENANT = "allow-same-tenant"
ALLOW_DNS = "allow-dns"
ALLOW_FROM_PLATFORM = "allow-from-platform"
ALLOW_FROM_TENANTS = "allow-from-tenants"
ALLOW_EGRESS = "allow-egress"


def port(spec: Port) -> dict:
    """A NetworkPolicyPort from the tenant file's port.

    >>> port(Port(port=8000, endPort=8100))
    {'protocol': 'TCP', 'port': 8000, 'endPort': 8100}
    """
    result: dict = {"protocol": spec.protocol, "port": spec.port}
    if spec.end_port is not None:
        result["endPort"] = spec.end_port
    return result


def _namespaces_named(names: list[str]) -> dict:
    return {"namespaceSelector": {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(names)}]}}


def _policy(name: str, namespace: str, labels: dict[str, str], types: list[str], **rules) -> KubeObject:
    spec = {"podSelector": {}, "policyTypes": types, **rules}
    return kube_object(NETWORKING_API, "NetworkPolicy", object_meta(name, namespace=namespace, labels=labels), spec=spec)


def policy_specs(tenant: Tenant, environment: Environment) -> list[tuple[str, list[str], dict]]:
    """(name, policyTypes, rules) of every policy a tenant namespace gets, in a fixed order.

    >>> from components.model.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> [name for name, _, _ in policy_specs(Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant",
    ...     name="a", displayName="A", costCenter="cc-1"), env)]
    ['default-deny', 'allow-same-tenant', 'allow-dns']
    """
    platform = environment.platform
    network = tenant.network

    def same_tenant() -> dict:
        return {"namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant.name}}}

    dns_peer = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: platform.cluster_dns.namespace}},
    }
    if platform.cluster_dns.pod_labels:
        dns_peer["podSelector"] = {"matchLabels": dict(sorted(platform.cluster_dns.pod_labels.items()))}
    specs: list[tuple[str, list[str], dict]] = [
        (DEFAULT_DENY, ["Ingress", "Egress"], {}),
        (ALLOW_SAME_TENANT, ["Ingress", "Egress"], {"ingress": [{"from": [same_tenant()]}], "egress": [{"to": [same_tenant()]}]}),
        (
            ALLOW_DNS,
            ["Egress"],
            {"egress": [{"to": [dns_peer], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]},
        ),
    ]
    platform_namespaces = sorted(
        {ns for role in network.ingress_from.platform for ns in platform.platform_namespaces.get(role, [])}
    )
    if platform_namespaces:
        specs.append((ALLOW_FROM_PLATFORM, ["Ingress"], {"ingress": [{"from": [_namespaces_named(platform_namespaces)]}]}))
    granted = sorted(set(network.ingress_from.tenants) - {tenant.name})
    if granted:
        rule: dict = {"from": [{"namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "In", "values": granted}]}}]}
        if network.ingress_from.ports:
            rule["ports"] = [port(p) for p in network.ingress_from.ports]
        specs.append((ALLOW_FROM_TENANTS, ["Ingress"], {"ingress": [rule]}))
    egress = []
    for entry in network.egress:
        block: dict = {"cidr": entry.cidr}
        if entry.except_:
            block["except"] = list(entry.except_)
        item: dict = {"to": [{"ipBlock": block}]}
        if entry.ports:
            item["ports"] = [port(p) for p in entry.ports]
        egress.append(item)
    if egress:
        specs.append((ALLOW_EGRESS, ["Egress"], {"egress": egress}))
    return specs


def network_policies(tenant: Tenant, environment: Environment) -> list[KubeObject]:
    """Every NetworkPolicy of the tenant, the same set in each of its namespaces.

    >>> from components.model.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> len(network_policies(Tenant(apiVersion="gpu-tenancy.dev/v1alpha1", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", namespaces=["a-data"]), env))
    6
    """
    labels = owned_labels(tenant, environment)
    return [
        _policy(name, namespace, labels, types, **rules)
        for namespace in tenant.all_namespaces
        for name, types, rules in policy_specs(tenant, environment)
    ]
