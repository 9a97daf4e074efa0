"""The tenant file format: one `tenants/<name>.yaml` per team, edited in pull requests."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, field_validator, model_validator

from .base import API_VERSION, DnsLabel, DnsSubdomain, LabelValue, Model, NonNegativeInt, TenantName
from .quantity import Quantity

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
Lifecycle = Literal["active", "suspended", "decommissioned"]


class Contact(Model):
    """A person or channel to reach about this tenant; becomes an annotation on its namespaces."""

    name: Optional[str] = None
    email: Optional[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]] = None
    chat: Optional[str] = Field(None, description="chat channel, e.g. #team-llm")


class Subjects(Model):
    """Identity-provider groups and users that hold a role in the tenant's namespaces."""

    groups: list[Annotated[str, Field(min_length=1)]] = []
    users: list[Annotated[str, Field(min_length=1)]] = []


class ServiceAccountGrant(Model):
    """A CI service account (created in the tenant's namespace unless `namespace` names another of its namespaces)."""

    name: DnsLabel
    namespace: Optional[DnsLabel] = None
    role: Literal["owner", "developer", "viewer"] = "developer"


class Access(Model):
    """Who may do what in the tenant's namespaces. Roles are explicit rules, never the built-in admin."""

    owners: Subjects = Subjects()
    developers: Subjects = Subjects()
    viewers: Subjects = Subjects()
    ci_service_accounts: list[ServiceAccountGrant] = []


class RequestsLimits(Model):
    """Total requests and limits allowed across all pods of a namespace."""

    requests: Optional[Quantity] = None
    limits: Optional[Quantity] = None


class StorageClassQuota(Model):
    requests: Optional[Quantity] = None
    persistent_volume_claims: Optional[NonNegativeInt] = None


class StorageQuota(Model):
    """Persistent storage: total requested bytes and per-StorageClass caps."""

    requests: Optional[Quantity] = None
    storage_classes: dict[DnsSubdomain, StorageClassQuota] = {}


class ObjectCounts(Model):
    """Caps on object counts (`count/...` style quota keys)."""

    pods: Optional[NonNegativeInt] = None
    services: Optional[NonNegativeInt] = None
    services_load_balancers: Optional[NonNegativeInt] = None
    services_node_ports: Optional[NonNegativeInt] = None
    persistent_volume_claims: Optional[NonNegativeInt] = None
    config_maps: Optional[NonNegativeInt] = None
    secrets: Optional[NonNegativeInt] = None


class PriorityCap(Model):
    """What the tenant may run at one PriorityClass (a ResourceQuota scoped to that class)."""

    pods: Optional[NonNegativeInt] = None
    cpu: Optional[Quantity] = None
    memory: Optional[Quantity] = None
    gpu: Optional[NonNegativeInt] = Field(None, description="GPUs (all classes) at this priority")


GpuQuota = Union[NonNegativeInt, dict[DnsLabel, NonNegativeInt]]


class Quota(Model):
    """What the tenant may declare (enforced at admission). Not a runtime limit; `memory` is never GPU memory."""

    cpu: Optional[RequestsLimits] = None
    memory: Optional[RequestsLimits] = None
    ephemeral_storage: Optional[RequestsLimits] = None
    gpu: Optional[GpuQuota] = Field(
        None,
        description="Whole GPUs per GPU class ({h100: 8}); a plain number when the tenant may use exactly one class",
    )
    mig: dict[Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb(\+me)?$")], NonNegativeInt] = Field(
        {}, description="MIG slices per profile, e.g. {1g.10gb: 4}"
    )
    storage: Optional[StorageQuota] = None
    objects: ObjectCounts = ObjectCounts()
    priority_classes: dict[DnsLabel, PriorityCap] = Field(
        {}, description="caps per PriorityClass; classes not listed get the stack's default cap"
    )


class ResourceValues(Model):
    cpu: Optional[Quantity] = None
    memory: Optional[Quantity] = None
    ephemeral_storage: Optional[Quantity] = None


class LimitRangeSpec(Model):
    """Per-container defaults and bounds (a LimitRange). Unset values fall back to the stack's defaults."""

    default_request: ResourceValues = ResourceValues()
    default: ResourceValues = ResourceValues()
    max: ResourceValues = ResourceValues()
    min: ResourceValues = ResourceValues()


class Port(Model):
    port: Annotated[int, Field(ge=1, le=65535)]
    end_port: Optional[Annotated[int, Field(ge=1, le=65535)]] = None
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"

    @model_validator(mode="after")
    def _range(self) -> "Port":
        if self.end_port is not None and self.end_port < self.port:
            raise ValueError(f"endPort ({self.end_port}) must be >= port ({self.port})")
        return self


class EgressRule(Model):
    """Traffic the tenant's pods may send outside the cluster's default deny."""

    cidr: str
    except_: list[str] = Field([], alias="except")
    ports: list[Port] = Field([], description="empty means every port")
    description: str = ""

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        return _network(value)

    @field_validator("except_")
    @classmethod
    def _except(cls, value: list[str]) -> list[str]:
        return [_network(item) for item in value]


def _network(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as err:
        raise ValueError(f"'{value}' is not a CIDR such as 10.0.0.0/8 ({err})") from None


class IngressFrom(Model):
    tenants: list[DnsLabel] = Field([], description="other tenants whose pods may connect to this tenant")
    platform: list[DnsLabel] = Field([], description="platform roles from the stack, e.g. ingress, monitoring")
    ports: list[Port] = Field([], description="restrict ingress from other tenants to these ports; empty = all")


class Network(Model):
    """Exceptions to the default deny. Same-namespace traffic and cluster DNS are always allowed."""

    ingress_from: IngressFrom = IngressFrom()
    egress: list[EgressRule] = []


class GpuAccess(Model):
    """Which GPUs the tenant's pods may land on, enforced by an admission policy (a taint alone is not)."""

    classes: list[DnsLabel] = []
    dedicated_pools: list[DnsLabel] = Field([], description="node pools reserved for this tenant alone")


class VClusterSpec(Model):
    """Optional virtual control plane in the tenant's namespace."""

    enabled: bool = False
    values: dict[str, Any] = Field({}, description="vCluster chart values merged over the generated ones")


class QueueSpec(Model):
    """Optional scheduler queue settings (used when the stack's scheduler is kueue or kai)."""

    cohort: Optional[DnsLabel] = None
    weight: Optional[Annotated[int, Field(ge=0)]] = None
    borrowing_limit: Optional[dict[DnsLabel, NonNegativeInt]] = None
    lending_limit: Optional[dict[DnsLabel, NonNegativeInt]] = None


class Decommission(Model):
    """Explicit consent to delete a tenant's namespaces and everything in them."""

    confirm: str = Field(description="must repeat the tenant's name exactly")


class Tenant(Model):
    """One team sharing the cluster. `name` is also its default namespace.

    >>> Tenant.model_validate({"apiVersion": API_VERSION, "kind": "Tenant", "name": "team-a",
    ...     "displayName": "Team A", "costCenter": "cc-1"}).name
    'team-a'
    """

    api_version: Literal["gpu-tenancy.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Tenant"]
    name: TenantName
    previous_names: list[TenantName] = Field([], description="former names; their resources are adopted (Pulumi aliases)")
    display_name: str = Field(min_length=1)
    description: str = ""
    cost_center: LabelValue
    contacts: list[Contact] = []
    lifecycle: Lifecycle = "active"
    decommission: Optional[Decommission] = None
    namespaces: list[DnsLabel] = Field([], description="extra namespaces besides the one named like the tenant")
    access: Access = Access()
    quota: Quota = Quota()
    limits: LimitRangeSpec = LimitRangeSpec()
    network: Network = Network()
    gpu: GpuAccess = GpuAccess()
    pod_security: Optional[PodSecurityLevel] = Field(None, description="stricter Pod Security level than the stack's")
    vcluster: VClusterSpec = VClusterSpec()
    queue: QueueSpec = QueueSpec()
    environments: dict[DnsLabel, dict[str, Any]] = Field(
        {}, description="per-environment overrides merged over this file, e.g. {dev: {quota: {gpu: 1}}}"
    )

    @property
    def all_namespaces(self) -> list[str]:
        """The tenant's namespaces, its own first."""
        return [self.name, *self.namespaces]

    @model_validator(mode="after")
    def _decommission_confirmed(self) -> "Tenant":
        if self.lifecycle == "decommissioned" and (self.decommission is None or self.decommission.confirm != self.name):
            raise ValueError(
                f"lifecycle 'decommissioned' deletes every namespace of the tenant and all data in them; "
                f"to confirm, add `decommission: {{confirm: {self.name}}}`"
            )
        return self
