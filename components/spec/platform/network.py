"""The cluster's network as tenants' policies see it: cluster DNS, the cluster's own address ranges
and API server, and the Ingress hosts each tenant may claim (`Platform.clusterDns`,
`clusterNetwork`, `ingressHosts`).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Optional

from pydantic import AfterValidator, Field, field_validator

from ..base import DnsLabel, LabelValue, Model, TenantName
from ..tenant import Hostname, Port, _network


class ClusterDns(Model):
    """Where the cluster DNS runs, so that every tenant's NetworkPolicy can allow it."""

    namespace: DnsLabel = Field("kube-system", description="namespace of the cluster DNS pods")
    pod_labels: dict[str, LabelValue] = Field({"k8s-app": "kube-dns"}, description="labels of the cluster DNS pods")
    node_local: Optional[str] = Field(
        None, description="address of a node-local DNS cache (e.g. 169.254.20.10); every tenant may reach it on port 53"
    )

    @field_validator("node_local")
    @classmethod
    def _address(cls, value: Optional[str]) -> Optional[str]:
        if value is None:
            return value
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            raise ValueError(f"'{value}' is not an IP address such as 169.254.20.10") from None


Cidr = Annotated[str, Field(description="network such as 10.0.0.0/8 (host bits zero)")]


def _networks(values: list[str]) -> list[str]:
    return [_network(value) for value in values]


class ApiServer(Model):
    """Where the Kubernetes API server answers, for tenants granted `network.apiServer`."""

    cidrs: list[Cidr] = Field(description="addresses of the API server endpoints (kubectl get endpointslices -n default), e.g. [10.0.0.10/32]")
    ports: list[Port] = Field([Port(port=443)], description="ports of the endpoints (443, or 6443 on many clusters)")

    _cidrs = field_validator("cidrs")(classmethod(lambda cls, v: _networks(v)))


class ClusterNetwork(Model):
    """The cluster's own address ranges: tenant egress rules may not overlap them (validate checks)."""

    pods: list[Cidr] = Field([], description="pod CIDRs")
    services: list[Cidr] = Field([], description="Service (cluster IP) CIDRs")
    nodes: list[Cidr] = Field([], description="node CIDRs")
    api_server: Optional[ApiServer] = Field(None, description="API server endpoints, for tenants with network.apiServer")

    _ranges = field_validator("pods", "services", "nodes")(classmethod(lambda cls, v: _networks(v)))


def _not_a_wildcard(value: str) -> str:
    if value.startswith("*."):
        raise ValueError(f"'{value}' is a wildcard; grant the domain '{value[2:]}': a grant is a domain and every name below it")
    return value


# A grant is a domain, written as a host is (one spelling: lower case, no trailing dot, IDNA).
GrantedDomain = Annotated[Hostname, AfterValidator(_not_a_wildcard)]


class IngressHostGrants(Model):
    """Which hosts outside `ingressDomain` each tenant may claim in its `network.ingressHosts`: the
    platform team owns the DNS zones, so a tenant file cannot take a name the stack did not give it."""

    tenant_domains: dict[TenantName, list[GrantedDomain]] = Field(
        {},
        description="domains each tenant may serve besides <tenant>.<ingressDomain>, e.g. {inference: [api.acme.dev]}: a "
        "domain, every name below it and wildcards there; a name granted to two tenants is the more specific grant's "
        "(acme.dev to one, api.acme.dev to another); a tenant not listed may claim no host outside ingressDomain",
    )
