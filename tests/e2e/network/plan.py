"""What the dataplane lane probes for one stack, and what the project's evaluator expects of it.

Pure: from a loaded environment and its rendered objects to endpoints (pods and outside
addresses, each with the addresses the lane gives it), the (protocol, port) pairs to try and
one expected verdict per cell from `tests/manifests/network_reachability.py`. The lane
(`dataplane.py`) then builds exactly these endpoints and asks the real agent.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable

from tests.manifests.network_reachability import Address, Cluster, Endpoint, Pod

METADATA = {4: "169.254.169.254", 6: "fd00:ec2::254"}
# Documentation ranges (RFC 5737, RFC 3849): addresses no example policy names, answered by a
# namespace of the lane.
UNNAMED_OUTSIDE = {4: "192.0.2.10", 6: "2001:db8::10"}
DEFAULT_POD_CIDRS = {4: "10.244.0.0/16", 6: "fd00:10:244::/64"}
PROBE_LABELS = {"app": "probe"}
PEER_LABELS = {"app": "peer"}   # a second pod in each tenant namespace: traffic that stays inside one
# A namespace anyone who may create namespaces can label as a tenant: it must get none of its access.
INTRUDER = ("intruder", {"gpu-tenancy.dev/tenant": "eval"})


@dataclass(frozen=True)
class PlannedEndpoint:
    """A pod (namespace set; an IPv4 and an IPv6 address) or an outside address (namespace None)."""

    name: str
    addresses: tuple[str, ...]
    namespace: str | None = None
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None

    @property
    def families(self) -> set[int]:
        return {ipaddress.ip_address(a).version for a in self.addresses}

    def address(self, family: int) -> str:
        """The endpoint's address of one IP family.

        >>> PlannedEndpoint("eval", ("10.244.0.10", "fd00:10:244::a"), "eval").address(6)
        'fd00:10:244::a'
        """
        return next(a for a in self.addresses if ipaddress.ip_address(a).version == family)

    def evaluated(self, family: int) -> Endpoint:
        """The same endpoint as the evaluator sees it, with the address of the cell's family.

        >>> PlannedEndpoint("dns", ("10.244.0.10",), "kube-system", (("k8s-app", "kube-dns"),)).evaluated(4)
        Pod(namespace='kube-system', labels=(('k8s-app', 'kube-dns'),), ip='10.244.0.10')
        """
        if self.is_pod:
            return Pod(self.namespace, self.labels, self.address(family))
        return Address(self.address(family))


@dataclass(frozen=True)
class Cell:
    source: PlannedEndpoint
    destination: PlannedEndpoint
    family: int
    protocol: str
    port: int
    expected: bool

    def __str__(self) -> str:
        verdict = "allowed" if self.expected else "denied"
        return (f"{self.source.name} -> {self.destination.name} ({self.destination.address(self.family)}) "
                f"{self.protocol}/{self.port} (evaluator: {verdict})")


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


def pod_ranges(declared: list[str]) -> dict[int, Any]:
    """The pod range of each family: the stack's `clusterNetwork.pods`, else the defaults.

    >>> str(pod_ranges(["10.8.0.0/16"])[4]), str(pod_ranges([])[6])
    ('10.8.0.0/16', 'fd00:10:244::/64')
    """
    ranges = {4: ipaddress.ip_network(DEFAULT_POD_CIDRS[4]), 6: ipaddress.ip_network(DEFAULT_POD_CIDRS[6])}
    for cidr in reversed(declared):
        network = ipaddress.ip_network(cidr)
        ranges[network.version] = network
    return ranges


def plan_stack(stack: str, environment: Any, objects: list[dict[str, Any]]) -> Plan:
    """Endpoints, ports and expected verdicts for one stack's rendered objects.

    Pods have both families; a cell uses IPv4 unless one end is an IPv6-only address (so every
    pod also speaks IPv6 to the IPv6 addresses, and the agent must find pods by either address).

    >>> from components.load import load_environment
    >>> from components.manifests.build import environment_objects
    >>> from tools.control_plane import REPO_ROOT
    >>> env = load_environment(REPO_ROOT, "prod")
    >>> plan = plan_stack("prod", env, [o for objs in environment_objects(env).values() for o in objs])
    >>> ("UDP", 53) in plan.probes and {"metadata", "metadata-v6"} <= {e.name for e in plan.endpoints}
    True
    """
    platform = environment.platform
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    rendered_namespaces = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    blocks = _ip_blocks(policies)

    extra = {ns: {} for role in sorted(platform.platform_namespaces) for ns in platform.platform_namespaces[role]}
    dns = platform.cluster_dns
    extra.setdefault(dns.namespace, {})
    extra[INTRUDER[0]] = dict(INTRUDER[1])

    ranges = pod_ranges(platform.cluster_network.pods)
    pods: list[PlannedEndpoint] = []

    def pod(name: str, namespace: str, labels: dict[str, str]) -> None:
        index = 10 + len(pods)   # leave .1-.9 (gateways in real clusters) unused
        pods.append(PlannedEndpoint(name, (str(ranges[4][index]), str(ranges[6][index])), namespace,
                                    tuple(sorted(labels.items()))))

    for ns in rendered_namespaces:
        pod(ns, ns, PROBE_LABELS)
    for ns in rendered_namespaces:
        pod(f"{ns}-peer", ns, PEER_LABELS)
    for ns in extra:
        if ns != dns.namespace:
            pod(ns, ns, PROBE_LABELS)
    pod("cluster-dns", dns.namespace, dict(dns.pod_labels))
    pod(f"{dns.namespace}-other", dns.namespace, PROBE_LABELS)

    addresses: dict[str, str] = {}   # ip -> name, first name wins
    api = platform.cluster_network.api_server
    for cidr in (api.cidrs if api else []):
        addresses.setdefault(_inside({"cidr": cidr}), "api-server")
    if dns.node_local:
        addresses.setdefault(dns.node_local, "node-local-dns")
    addresses.setdefault(METADATA[4], "metadata")
    addresses.setdefault(METADATA[6], "metadata-v6")
    for block in blocks:
        addresses.setdefault(_inside(block), f"egress-{block['cidr']}")
    addresses.setdefault(UNNAMED_OUTSIDE[4], "outside")
    addresses.setdefault(UNNAMED_OUTSIDE[6], "outside-v6")
    endpoints = pods + [PlannedEndpoint(name, (ip,)) for ip, name in addresses.items()]

    named = _named_ports(policies) | {(p.protocol, p.port) for p in (api.ports if api else [])}
    unnamed = max(port for _, port in named) + 1
    probes = sorted(named) + [("TCP", unnamed), ("UDP", unnamed)]

    cluster = Cluster.from_objects(objects, extra)
    cells = []
    for src in endpoints:
        for dst in endpoints:
            common = src.families & dst.families
            if src == dst or not (src.is_pod or dst.is_pod) or not common:   # address to address crosses no policy
                continue
            family = min(common)
            cells += [Cell(src, dst, family, protocol, port,
                           cluster.may_reach(src.evaluated(family), dst.evaluated(family), port, protocol))
                      for protocol, port in probes]
    return Plan(stack, endpoints, probes, cells, extra)
