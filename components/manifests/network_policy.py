"""NetworkPolicies: deny by default, then allow what the tenant file and the stack name.

Namespaces and quotas isolate no traffic; these policies do (given a CNI that enforces them).
Every tenant namespace gets one NetworkPolicy, `tenant-network`, that selects every pod for
ingress and egress (deny by default) and holds the rules of the allowances below, each left out
when it would allow nothing. One object per namespace instead of one per allowance: rules of
policies that select the same pods are ORed whether they sit in one policy or in several, so the
merge allows exactly the same traffic with five fewer resources per namespace for the engine to
diff. The `gpu-tenancy.dev/network-rules` annotation says which allowance each rule comes from:

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
from typing import Callable

from ..fleet.facts import TenantView
from ..spec.stack import Platform
from ..spec.tenant import PlatformIngress, Port, Tenant
from .meta import NAMESPACE_NAME_LABEL, NETWORK_RULES_ANNOTATION, KubeObject, kube_object, object_meta, owned_labels, plain_copy

NETWORKING_API = "networking.k8s.io/v1"
METADATA_ENDPOINTS = ("169.254.169.254/32", "fd00:ec2::254/128")

TENANT_NETWORK = "tenant-network"
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
    own = _namespaces_named(tenant.all_namespaces)
    specs: list[tuple[str, list[str], dict]] = [
        (DEFAULT_DENY, ["Ingress", "Egress"], {}),
        (ALLOW_SAME_TENANT, ["Ingress", "Egress"], {"ingress": [{"from": [own]}], "egress": [{"to": [plain_copy(own)]}]}),
        (ALLOW_DNS, ["Egress"], {"egress": [{"to": _dns_peers(view.platform), "ports": list(DNS_PORTS)}]}),
    ]
    for name, direction, rules_of in _ALLOWANCES:
        rules = rules_of(tenant, view)
        if rules:
            specs.append((name, [direction], {direction.lower(): rules}))
    return specs


def _dns_peers(platform: Platform) -> list[dict]:
    dns_peer: dict = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: platform.cluster_dns.namespace}}}
    if platform.cluster_dns.pod_labels:
        dns_peer["podSelector"] = {"matchLabels": dict(sorted(platform.cluster_dns.pod_labels.items()))}
    dns_peers = [dns_peer]
    if platform.cluster_dns.node_local:
        dns_peers.append({"ipBlock": {"cidr": _host(platform.cluster_dns.node_local)}})
    return dns_peers


def _from_platform(tenant: Tenant, view: TenantView) -> list[dict]:
    from_platform = []
    for role, ports in platform_grants(tenant, view):
        namespaces = view.platform.platform_namespaces.get(role, [])
        if namespaces and ports:  # validate rejects a grant without ports: never every port
            from_platform.append(_ingress_rule(namespaces, ports, "from"))
    return from_platform


def _from_tenants(tenant: Tenant, view: TenantView) -> list[dict]:
    peers = sorted(ns for _, namespaces in view.granted_namespaces for ns in namespaces)
    return [_ingress_rule(peers, tenant.network.ingress_from.ports, "from")] if peers else []


def _to_tenants(tenant: Tenant, view: TenantView) -> list[dict]:
    return [_ingress_rule(list(namespaces), list(ports), "to") for _, namespaces, ports in view.accepting]


def _to_api_server(tenant: Tenant, view: TenantView) -> list[dict]:
    api_server = view.platform.cluster_network.api_server
    if not (tenant.network.api_server and api_server is not None):
        return []
    return [{"to": [{"ipBlock": {"cidr": c}} for c in api_server.cidrs], "ports": [port(p) for p in api_server.ports]}]


def _egress(tenant: Tenant, view: TenantView) -> list[dict]:
    egress = []
    for entry in tenant.network.egress:
        block: dict = {"cidr": entry.cidr}
        excepts = metadata_excepts(entry.cidr, list(entry.except_))
        if excepts:
            block["except"] = excepts
        item: dict = {"to": [{"ipBlock": block}]}
        if entry.ports:
            item["ports"] = [port(p) for p in entry.ports]
        egress.append(item)
    return egress


# The allowances a tenant's namespaces get only when its file or the stack asks: (policy name, its
# one direction, its rules; none: no policy), in the order of `policy_specs`.
_ALLOWANCES: tuple[tuple[str, str, Callable[[Tenant, TenantView], list[dict]]], ...] = (
    (ALLOW_FROM_PLATFORM, "Ingress", _from_platform),
    (ALLOW_FROM_TENANTS, "Ingress", _from_tenants),
    (ALLOW_TO_TENANTS, "Egress", _to_tenants),
    (ALLOW_API_SERVER, "Egress", _to_api_server),
    (ALLOW_EGRESS, "Egress", _egress),
)


def merged_policy_spec(specs: list[tuple[str, list[str], dict]]) -> tuple[dict, str]:
    """One NetworkPolicy spec holding every allowance's rules, and the annotation naming their origins.

    Every allowance selects all pods (`podSelector: {}`), so concatenating the rules per direction
    allows the same traffic as the separate policies did.

    >>> spec, origins = merged_policy_spec([
    ...     ("default-deny", ["Ingress", "Egress"], {}),
    ...     ("allow-dns", ["Egress"], {"egress": [{"ports": [{"protocol": "UDP", "port": 53}]}]})])
    >>> spec
    {'podSelector': {}, 'policyTypes': ['Ingress', 'Egress'], 'egress': [{'ports': [{'protocol': 'UDP', 'port': 53}]}]}
    >>> origins
    'egress[0]=allow-dns'
    """
    spec: dict = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    origins: list[str] = []
    for direction in ("ingress", "egress"):
        rules = [(name, rule) for name, _, allowance in specs for rule in allowance.get(direction, [])]
        if rules:
            spec[direction] = [rule for _, rule in rules]
            origins.extend(f"{direction}[{index}]={name}" for index, (name, _) in enumerate(rules))
    return spec, " ".join(origins)


def network_policies(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's NetworkPolicy (`tenant-network`), the same in each of its namespaces.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1", namespaces=["a-data"])
    >>> [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in network_policies(t, env.view(t))]
    [('a', 'tenant-network'), ('a-data', 'tenant-network')]
    """
    labels = owned_labels(tenant, view)
    spec, origins = merged_policy_spec(policy_specs(tenant, view))
    annotations = {NETWORK_RULES_ANNOTATION: origins} if origins else None
    return [
        kube_object(
            NETWORKING_API,
            "NetworkPolicy",
            object_meta(TENANT_NETWORK, namespace=namespace, labels=labels, annotations=annotations),
            spec=plain_copy(spec),
        )
        for namespace in tenant.all_namespaces
    ]
