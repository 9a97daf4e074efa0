"""What the dataplane lane probes for one stack, and what the project's evaluator expects of it.

Pure: from a loaded environment and its rendered objects to endpoints (pods and outside
addresses, each with the IPv4 address the lane gives it), the (protocol, port) pairs to try and
one expected verdict per cell from `tests/manifests/network_reachability.py`. The lane
(`dataplane.py`) then builds exactly these endpoints and asks the real agent.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable

from tests.manifests.network_reachability import Address, Cluster, Endpoint, Pod

METADATA = "169.254.169.254"
# TEST-NET-1 (RFC 5737): an address no example policy names, answered by a namespace of the lane.
UNNAMED_OUTSIDE = "192.0.2.10"
DEFAULT_POD_CIDR = "10.244.0.0/16"
PROBE_LABELS = {"app": "probe"}
PEER_LABELS = {"app": "peer"}   # a second pod in each tenant namespace: traffic that stays inside one
# A namespace anyone who may create namespaces can label as a tenant: it must get none of its access.
INTRUDER = ("intruder", {"gpu-tenancy.dev/tenant": "eval"})


@dataclass(frozen=True)
class PlannedEndpoint:
    """A pod (namespace set) or an outside address (namespace None) with its lane address."""

    name: str
    ip: str
    namespace: str | None = None
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None

    def evaluated(self) -> Endpoint:
        """The same endpoint as the evaluator sees it.

        >>> PlannedEndpoint("dns", "10.244.0.10", "kube-system", (("k8s-app", "kube-dns"),)).evaluated()
        Pod(namespace='kube-system', labels=(('k8s-app', 'kube-dns'),))
        """
        return Pod(self.namespace, self.labels) if self.is_pod else Address(self.ip)


@dataclass(frozen=True)
class Cell:
    source: PlannedEndpoint
    destination: PlannedEndpoint
    protocol: str
    port: int
    expected: bool

    def __str__(self) -> str:
        verdict = "allowed" if self.expected else "denied"
        return f"{self.source.name} -> {self.destination.name} {self.protocol}/{self.port} (evaluator: {verdict})"


@dataclass
class Plan:
    stack: str
    endpoints: list[PlannedEndpoint]
    probes: list[tuple[str, int]]           # (protocol, port), the unnamed port last per protocol
    cells: list[Cell]
    extra_namespaces: dict[str, dict[str, str]]   # namespaces the stack does not render, with labels

    def counts(self) -> tuple[int, int]:
        """(allowed, denied) cells as the evaluator expects them."""
        allowed = sum(c.expected for c in self.cells)
        return allowed, len(self.cells) - allowed


def _ip_blocks(policies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks = []
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            blocks += [p["ipBlock"] for p in rule.get("from") or [] if "ipBlock" in p]
        for rule in policy["spec"].get("egress") or []:
            blocks += [p["ipBlock"] for p in rule.get("to") or [] if "ipBlock" in p]
    return blocks


def _named_ports(policies: Iterable[dict[str, Any]]) -> set[tuple[str, int]]:
    named = set()
    for policy in policies:
        for key in ("ingress", "egress"):
            for rule in policy["spec"].get(key) or []:
                for entry in rule.get("ports") or []:
                    if isinstance(entry.get("port"), int):
                        named.add((entry.get("protocol", "TCP"), entry["port"]))
                        if "endPort" in entry:
                            named.add((entry.get("protocol", "TCP"), entry["endPort"]))
    return named


def _inside(block: dict[str, Any]) -> str:
    """An address of the block outside its exceptions (its first host, or the address of a /32)."""
    network = ipaddress.ip_network(block["cidr"])
    excepts = [ipaddress.ip_network(e) for e in block.get("except", [])]
    for candidate in ([network.network_address] if network.num_addresses == 1 else network.hosts()):
        if not any(candidate in e for e in excepts):
            return str(candidate)
    raise ValueError(f"ipBlock {block} has no address outside its exceptions")


def plan_stack(stack: str, environment: Any, objects: list[dict[str, Any]]) -> Plan:
    """Endpoints, ports and expected verdicts for one stack's rendered objects.

    >>> from components.load import load_environment
    >>> from components.manifests.build import environment_objects
    >>> from tests.e2e.conftest import REPO_ROOT
    >>> env = load_environment(REPO_ROOT, "prod")
    >>> plan = plan_stack("prod", env, [o for objs in environment_objects(env).values() for o in objs])
    >>> ("UDP", 53) in plan.probes and any(e.name == "metadata" for e in plan.endpoints)
    True
    """
    platform = environment.platform
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    rendered_namespaces = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    blocks = [b for b in _ip_blocks(policies) if ipaddress.ip_network(b["cidr"]).version == 4]

    extra = {ns: {} for role in sorted(platform.platform_namespaces) for ns in platform.platform_namespaces[role]}
    dns = platform.cluster_dns
    extra.setdefault(dns.namespace, {})
    extra[INTRUDER[0]] = dict(INTRUDER[1])

    pod_cidr = ipaddress.ip_network((platform.cluster_network.pods or [DEFAULT_POD_CIDR])[0])
    for block in blocks:
        # Whether an ipBlock matches pod addresses is implementation-defined (the agent matches
        # them, the evaluator does not); validate keeps egress CIDRs off clusterNetwork.pods.
        excepted = any(pod_cidr.subnet_of(ipaddress.ip_network(e)) for e in block.get("except", [])
                       if ipaddress.ip_network(e).version == 4)
        if pod_cidr.overlaps(ipaddress.ip_network(block["cidr"])) and not excepted:
            raise ValueError(f"{stack}: ipBlock {block['cidr']} overlaps the pod range {pod_cidr}; "
                             "the dataplane and the evaluator would disagree by definition, not by a bug")
    hosts = pod_cidr.hosts()
    for _ in range(9):  # leave .1-.9 (gateways in real clusters) unused
        next(hosts)

    def pod(name: str, namespace: str, labels: dict[str, str]) -> PlannedEndpoint:
        return PlannedEndpoint(name, str(next(hosts)), namespace, tuple(sorted(labels.items())))

    endpoints = [pod(ns, ns, PROBE_LABELS) for ns in rendered_namespaces]
    endpoints += [pod(f"{ns}-peer", ns, PEER_LABELS) for ns in rendered_namespaces]
    endpoints += [pod(ns, ns, PROBE_LABELS) for ns in extra if ns != dns.namespace]
    endpoints.append(pod("cluster-dns", dns.namespace, dict(dns.pod_labels)))
    endpoints.append(pod(f"{dns.namespace}-other", dns.namespace, PROBE_LABELS))

    addresses: dict[str, str] = {}   # ip -> name, first name wins
    api = platform.cluster_network.api_server
    for cidr in (api.cidrs if api else []):
        addresses.setdefault(_inside({"cidr": cidr}), "api-server")
    if dns.node_local:
        addresses.setdefault(dns.node_local, "node-local-dns")
    addresses.setdefault(METADATA, "metadata")
    for block in blocks:
        addresses.setdefault(_inside(block), f"egress-{block['cidr']}")
    addresses.setdefault(UNNAMED_OUTSIDE, "outside")
    endpoints += [PlannedEndpoint(name, ip) for ip, name in addresses.items()]

    named = _named_ports(policies) | {(p.protocol, p.port) for p in (api.ports if api else [])}
    unnamed = max(port for _, port in named) + 1
    probes = sorted(named) + [("TCP", unnamed), ("UDP", unnamed)]

    cluster = Cluster.from_objects(objects, extra)
    cells = [
        Cell(src, dst, protocol, port, cluster.may_reach(src.evaluated(), dst.evaluated(), port, protocol))
        for src in endpoints for dst in endpoints
        if src != dst and (src.is_pod or dst.is_pod)   # address to address crosses no policy
        for protocol, port in probes
    ]
    return Plan(stack, endpoints, probes, cells, extra)
