"""NetworkPolicies: deny by default, then allow what the tenant file and the stack name.

Namespaces and quotas isolate no traffic; these policies do (given a CNI that enforces them).
Every tenant namespace gets `default-deny` (ingress and egress) and the allowances below, each
left out when it would allow nothing:

* `allow-same-tenant`: to and from pods in any namespace of the same tenant;
* `allow-dns`: egress to the cluster DNS pods on port 53, UDP and TCP (and to the node-local DNS
  cache, when the stack declares its address);
* `allow-from-platform`: ingress from the namespaces of the platform roles the tenant lists
  (e.g. ingress controllers, monitoring), on the ports named by the grant or the stack's
  `platformPorts` for the role, never every port;
* `allow-from-tenants`: ingress from other tenants' namespaces. Only the receiving tenant grants
  this; a tenant cannot open its way into another;
* `allow-to-tenants`: the matching egress, on the sending side: when tenant A accepts ingress
  from B, B may send to A's namespaces on A's ports (under default-deny egress the grant would do
  nothing otherwise);
* `allow-api-server`: egress to the API server endpoints the stack declares, for tenants with
  `network.apiServer`;
* `allow-egress`: egress to the CIDRs the tenant lists. A network wider than a cloud metadata
  endpoint (169.254.169.254/32, fd00:ec2::254/128) gets it as an `except`: the endpoint hands out
  the node's cloud credentials. A rule that names exactly the endpoint is an explicit grant.

Namespaces are always selected by `kubernetes.io/metadata.name`, which the API server sets to the
namespace's name and nobody can change (any other label can be set by whoever creates or labels
namespaces).
"""

from __future__ import annotations

import ipaddress

from ..fleet.facts import TenantView
from ..spec.tenant import PlatformIngress, Port, Tenant
from .meta import NAMESPACE_NAME_LABEL, KubeObject, kube_object, object_meta, owned_labels, plain_copy

NETWORKING_API = "networking.k8s.io/v1"
METADATA_ENDPOINTS = ("169.254.169.254/32", "fd00:ec2::254/128")

DEFAULT_DENY = "default-deny"
ALLOW_SAME_TENANT = "allow-same-tenant"
ALLOW_DNS = "allow-dns"
ALLOW_FROM_PLATFORM = "allow-from-platform"
ALLOW_FROM_TENANTS = "allow-from-tenants"
ALLOW_TO_TENANTS = "allow-to-tenants"
ALLOW_API_SERVER = "allow-api-server"
ALLOW_EGRESS = "allow-egress"
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


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


def _host(address: str) -> str:
    ip = ipaddress.ip_address(address)
    return f"{ip}/{ip.max_prefixlen}"


def metadata_excepts(cidr: str, excepts: list[str]) -> list[str]:
    """`except` entries of an egress CIDR: the tenant's, plus every metadata endpoint strictly inside it.

    >>> metadata_excepts("0.0.0.0/0", [])
    ['169.254.169.254/32']
    >>> metadata_excepts("169.254.169.254/32", [])
    []
    """
    network = ipaddress.ip_network(cidr)
    result = list(excepts)
    for endpoint in METADATA_ENDPOINTS:
        address = ipaddress.ip_network(endpoint)
        if address.version != network.version or network.prefixlen == address.prefixlen:
            continue
        covered = any(address.subnet_of(ipaddress.ip_network(e)) for e in result if ipaddress.ip_network(e).version == address.version)
        if address.subnet_of(network) and not covered:
            result.append(endpoint)
    return result


def platform_grants(tenant: Tenant, view: TenantView) -> list[tuple[str, list[Port]]]:
    """(role, ports) of each platform role the tenant accepts ingress from; ports from the grant or the stack.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com", platformPorts={"monitoring": [{"port": 9090}]}), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", network={"ingressFrom": {"platform": ["monitoring"]}})
    >>> platform_grants(t, env.view(t))[0][1][0].port
    9090
    """
    result = []
    for grant in tenant.network.ingress_from.platform:
        role, ports = (grant.role, grant.ports) if isinstance(grant, PlatformIngress) else (grant, [])
        result.append((role, list(ports) or list(view.platform.platform_ports.get(role, []))))
    return result


def _policy(name: str, namespace: str, labels: dict[str, str], types: list[str], **rules) -> KubeObject:
    spec = {"podSelector": {}, "policyTypes": types, **rules}
    return kube_object(NETWORKING_API, "NetworkPolicy", object_meta(name, namespace=namespace, labels=labels), spec=spec)


def _ingress_rule(peer_namespaces: list[str], ports: list[Port], direction: str) -> dict:
    rule: dict = {direction: [_namespaces_named(peer_namespaces)]}
    if ports:
        rule["ports"] = [port(p) for p in ports]
    return rule


def policy_specs(tenant: Tenant, view: TenantView) -> list[tuple[str, list[str], dict]]:
    """(name, policyTypes, rules) of every policy a tenant namespace gets, in a fixed order.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant",
    ...     name="a", displayName="A", costCenter="cc-1")
    >>> [name for name, _, _ in policy_specs(t, env.view(t))]
    ['default-deny', 'allow-same-tenant', 'allow-dns']
    """
    platform = view.platform
    network = tenant.network
    own = _namespaces_named(tenant.all_namespaces)
    dns_peer: dict = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: platform.cluster_dns.namespace}}}
    if platform.cluster_dns.pod_labels:
        dns_peer["podSelector"] = {"matchLabels": dict(sorted(platform.cluster_dns.pod_labels.items()))}
    dns_peers = [dns_peer]
    if platform.cluster_dns.node_local:
        dns_peers.append({"ipBlock": {"cidr": _host(platform.cluster_dns.node_local)}})
    specs: list[tuple[str, list[str], dict]] = [
        (DEFAULT_DENY, ["Ingress", "Egress"], {}),
        (ALLOW_SAME_TENANT, ["Ingress", "Egress"], {"ingress": [{"from": [own]}], "egress": [{"to": [plain_copy(own)]}]}),
        (ALLOW_DNS, ["Egress"], {"egress": [{"to": dns_peers, "ports": list(DNS_PORTS)}]}),
    ]
    from_platform = []
    for role, ports in platform_grants(tenant, view):
        namespaces = platform.platform_namespaces.get(role, [])
        if namespaces and ports:  # validate rejects a grant without ports: never every port
            from_platform.append(_ingress_rule(namespaces, ports, "from"))
    if from_platform:
        specs.append((ALLOW_FROM_PLATFORM, ["Ingress"], {"ingress": from_platform}))
    peers = sorted(ns for _, namespaces in view.granted_namespaces for ns in namespaces)
    if peers:
        specs.append((ALLOW_FROM_TENANTS, ["Ingress"], {"ingress": [_ingress_rule(peers, network.ingress_from.ports, "from")]}))
    to_tenants = [_ingress_rule(list(namespaces), list(ports), "to") for _, namespaces, ports in view.accepting]
    if to_tenants:
        specs.append((ALLOW_TO_TENANTS, ["Egress"], {"egress": to_tenants}))
    api_server = platform.cluster_network.api_server
    if network.api_server and api_server is not None:
        specs.append((
            ALLOW_API_SERVER,
            ["Egress"],
            {"egress": [{"to": [{"ipBlock": {"cidr": c}} for c in api_server.cidrs], "ports": [port(p) for p in api_server.ports]}]},
        ))
    egress = []
    for entry in network.egress:
        block: dict = {"cidr": entry.cidr}
        excepts = metadata_excepts(entry.cidr, list(entry.except_))
        if excepts:
            block["except"] = excepts
        item: dict = {"to": [{"ipBlock": block}]}
        if entry.ports:
            item["ports"] = [port(p) for p in entry.ports]
        egress.append(item)
    if egress:
        specs.append((ALLOW_EGRESS, ["Egress"], {"egress": egress}))
    return specs


def network_policies(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """Every NetworkPolicy of the tenant, the same set in each of its namespaces.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", namespaces=["a-data"])
    >>> len(network_policies(t, env.view(t)))
    6
    """
    labels = owned_labels(tenant, view)
    specs = policy_specs(tenant, view)
    return [
        _policy(name, namespace, labels, list(types), **plain_copy(rules))
        for namespace in tenant.all_namespaces
        for name, types, rules in specs
    ]
