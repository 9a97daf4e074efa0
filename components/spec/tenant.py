"""The tenant file format: one `tenants/<name>.yaml` per team, edited in pull requests."""

from __future__ import annotations

import ipaddress
import re
from datetime import date
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator, model_validator

from .base import PATTERN_WORDS, DnsLabel, DnsSubdomain, LabelValue, Model, NonNegativeInt, TenantName, fresh
from .problems import printable
from .quantity import Quantity

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
Lifecycle = Literal["active", "suspended", "decommissioned"]


EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
PATTERN_WORDS[EMAIL_PATTERN] = "an email address (e.g. kim.lee@example.com)"


class Spec(Model):
    """Base of the tenant file's models: frozen once validated, so that what the checks judged is what
    the builders read (a change is a new spec: `model_copy(update=...)`). Not in the JSON Schema.

    >>> try:
    ...     Contact(name="ops").name = "dev"
    ... except ValueError as err:
    ...     print(err.errors()[0]["type"])
    frozen_instance
    """

    model_config = ConfigDict(**Model.model_config, frozen=True)


class Contact(Spec):
    """A person or channel to reach about this tenant; becomes an annotation on its namespaces."""

    name: Optional[str] = Field(None, description="person or team name")
    email: Optional[Annotated[str, Field(pattern=EMAIL_PATTERN)]] = Field(None, description="email address")
    chat: Optional[str] = Field(None, description="chat channel, e.g. #team-llm")


class Subjects(Spec):
    """Identity-provider groups and users that hold a role in the tenant's namespaces."""

    groups: list[Annotated[str, Field(min_length=1)]] = fresh(list, description="group names as the identity provider sends them (RoleBinding subjects of kind Group)")
    users: list[Annotated[str, Field(min_length=1)]] = fresh(list, description="user names as the identity provider sends them; prefer groups")
    bundles: list[DnsLabel] = fresh(
        list, description="role bundles of the stack this role also gets, e.g. [ray, kserve] (viewers: their read verbs only)"
    )


class ServiceAccountGrant(Spec):
    """A CI service account (created in the tenant's namespace unless `namespace` names another of its namespaces)."""

    name: DnsLabel = Field(description="ServiceAccount name")
    namespace: Optional[DnsLabel] = Field(None, description="one of the tenant's namespaces; default: the tenant's own")
    role: Literal["owner", "developer", "viewer"] = Field("developer", description="the role the account holds in its own namespace (CI accounts are bound nowhere else)")


class Access(Spec):
    """Who may do what in the tenant's namespaces. Roles are explicit rules, never the built-in admin."""

    owners: Subjects = fresh(Subjects, description="manage workloads and secrets and bind developers and viewers; cannot change quota, LimitRange or NetworkPolicy")
    developers: Subjects = fresh(Subjects, description="create and change workloads")
    viewers: Subjects = fresh(Subjects, description="read-only, without secrets")
    ci_service_accounts: list[ServiceAccountGrant] = fresh(list, description="ServiceAccounts created for CI pipelines, with a role")


class RequestsLimits(Spec):
    """Total requests and limits allowed across all pods of a namespace."""

    requests: Optional[Quantity] = Field(None, description="sum of the requests of all pods (requests.<resource>)")
    limits: Optional[Quantity] = Field(None, description="sum of the limits of all pods (limits.<resource>); at least requests")


class StorageClassQuota(Spec):
    """Caps for one StorageClass."""

    requests: Optional[Quantity] = Field(None, description="total storage requested from this StorageClass")
    persistent_volume_claims: Optional[NonNegativeInt] = Field(None, description="number of PersistentVolumeClaims of this StorageClass")


class StorageQuota(Spec):
    """Persistent storage: total requested bytes and per-StorageClass caps."""

    requests: Optional[Quantity] = Field(None, description="total storage requested by all PersistentVolumeClaims")
    storage_classes: dict[DnsSubdomain, StorageClassQuota] = fresh(dict, description="caps per StorageClass name")


# The kinds ObjectCounts names by their own fields; `kinds` may not repeat them.
_TYPED_COUNTS = {"pods": "pods", "services": "services", "persistentvolumeclaims": "persistentVolumeClaims",
                 "configmaps": "configMaps", "secrets": "secrets"}
CountResource = Annotated[
    str,
    Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", max_length=253,
          description="<resource>.<group> (plural, lower case), or the resource alone for the core group, e.g. deployments.apps, serviceaccounts"),
]


class ObjectCounts(Spec):
    """Caps on object counts (`count/...` style quota keys). Unset counts take the stack's `guardRails.objects`."""

    pods: Optional[NonNegativeInt] = Field(None, description="pods that are not finished")
    services: Optional[NonNegativeInt] = Field(None, description="Services of any type")
    services_load_balancers: Optional[NonNegativeInt] = Field(None, description="Services of type LoadBalancer; unset: the stack's guardRails (0 by default)")
    services_node_ports: Optional[NonNegativeInt] = Field(None, description="node ports (of NodePort and LoadBalancer Services); unset: the stack's guardRails (0 by default)")
    persistent_volume_claims: Optional[NonNegativeInt] = Field(None, description="PersistentVolumeClaims")
    config_maps: Optional[NonNegativeInt] = Field(None, description="ConfigMaps")
    secrets: Optional[NonNegativeInt] = Field(None, description="Secrets")
    kinds: dict[CountResource, NonNegativeInt] = fresh(
        dict,
        description="any other namespaced kind, as the quota key count/<resource>.<group>, e.g. {deployments.apps: 50, "
        "rayclusters.ray.io: 5}; each kind not listed takes the stack's guardRails.objects.kinds. Only kinds the cluster "
        "serves: a count for one it does not (a CRD not installed) stops the namespace's quota usage from being "
        "computed, and the quota then refuses every pod",
    )

    @field_validator("kinds")
    @classmethod
    def _not_typed(cls, value: dict[str, int]) -> dict[str, int]:
        for key in value:
            if key in _TYPED_COUNTS:
                raise ValueError(f"'{key}' has its own field: write objects.{_TYPED_COUNTS[key]} instead of kinds.{key}")
        return value


class PriorityCap(Spec):
    """What the tenant may run at one PriorityClass (a ResourceQuota scoped to that class)."""

    pods: Optional[NonNegativeInt] = Field(None, description="pods at this priority (0: the class may not be used)")
    cpu: Optional[Quantity] = Field(None, description="CPU requests at this priority")
    memory: Optional[Quantity] = Field(None, description="memory requests at this priority")
    gpu: Optional[NonNegativeInt] = Field(None, description="GPUs (all classes) at this priority")


GpuQuota = Union[NonNegativeInt, dict[DnsLabel, NonNegativeInt]]
# Queue limits per GPU class; a plain number means the same for each class the tenant has quota for
# (as a map per class: `fleet.queue_arithmetic.borrowing_limits` / `lending_limits`, on the view).
QueueLimit = Union[NonNegativeInt, dict[DnsLabel, NonNegativeInt]]


class Quota(Spec):
    """What the tenant may declare (enforced at admission). Not a runtime limit; `memory` is never GPU memory."""

    cpu: Optional[RequestsLimits] = Field(None, description="CPUs, e.g. {requests: \"8\", limits: \"16\"}; needs a LimitRange default (limits or the stack)")
    memory: Optional[RequestsLimits] = Field(None, description="container memory, e.g. {requests: 32Gi, limits: 64Gi}; never GPU memory")
    ephemeral_storage: Optional[RequestsLimits] = Field(None, description="node-local scratch space of the pods")
    gpu: Optional[GpuQuota] = Field(
        None,
        description="Whole GPUs per GPU class ({h100: 8}); a plain number when the tenant may use exactly one class",
    )
    mig: dict[Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb(\+me)?$")], NonNegativeInt] = fresh(
        dict, description="MIG slices per profile, e.g. {1g.10gb: 4}"
    )
    storage: Optional[StorageQuota] = Field(None, description="persistent volume storage")
    objects: ObjectCounts = fresh(ObjectCounts)
    priority_classes: dict[DnsLabel, PriorityCap] = fresh(
        dict, description="caps per PriorityClass; classes not listed get the stack's default cap"
    )
    cross_namespace_affinity: bool = Field(
        False,
        description="allow pod (anti-)affinity terms that look at other namespaces (namespaces or namespaceSelector); "
        "off: a quota with scope CrossNamespacePodAffinity admits no such pod",
    )


class NamespaceQuota(Spec):
    """Part of the tenant's compute and GPU budget given to one of its extra namespaces.

    The tenant's own namespace keeps the rest, so the tenant-wide total stays what `quota` says.
    """

    cpu: Optional[RequestsLimits] = None
    memory: Optional[RequestsLimits] = None
    ephemeral_storage: Optional[RequestsLimits] = None
    gpu: Optional[GpuQuota] = Field(None, description="GPUs per class, as in quota.gpu")
    mig: dict[Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb(\+me)?$")], NonNegativeInt] = fresh(
        dict, description="MIG slices per profile, as in quota.mig"
    )


class ResourceValues(Spec):
    """CPU, memory and ephemeral storage of one container."""

    cpu: Optional[Quantity] = Field(None, description="CPUs per container")
    memory: Optional[Quantity] = Field(None, description="memory per container")
    ephemeral_storage: Optional[Quantity] = Field(None, description="ephemeral storage per container")


class LimitRangeSpec(Spec):
    """Per-container defaults and bounds (a LimitRange). Unset values fall back to the stack's defaults."""

    default_request: ResourceValues = fresh(ResourceValues, description="requests given to containers that set none")
    default: ResourceValues = fresh(ResourceValues, description="limits given to containers that set none")
    max: ResourceValues = fresh(ResourceValues, description="largest limits one container may set")
    min: ResourceValues = fresh(ResourceValues, description="smallest requests one container may set")


class Port(Spec):
    """A port or port range."""

    port: Annotated[int, Field(ge=1, le=65535)] = Field(description="port number (first of the range with endPort)")
    end_port: Optional[Annotated[int, Field(ge=1, le=65535)]] = Field(None, description="last port of a range")
    protocol: Literal["TCP", "UDP", "SCTP"] = Field("TCP", description="IP protocol")

    @model_validator(mode="after")
    def _range(self) -> "Port":
        if self.end_port is not None and self.end_port < self.port:
            raise ValueError(f"endPort ({self.end_port}) must be >= port ({self.port}); swap them, or write the range's first port as port")
        return self


class EgressRule(Spec):
    """Traffic the tenant's pods may send outside the cluster's default deny."""

    cidr: str = Field(description="destination network, e.g. 10.20.0.0/16 (host bits must be zero)")
    except_: list[str] = fresh(list, alias="except", description="networks inside cidr that stay blocked")
    ports: list[Port] = fresh(list, description="empty means every port")
    description: str = Field("", description="why the traffic is needed (kept as an annotation)")

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
        try:
            meant = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"'{value}' is not a CIDR such as 10.0.0.0/8 ({err})") from None
        address = value.split("/", 1)[0]
        single = f"{address}/{meant.max_prefixlen}"
        raise ValueError(
            f"'{value}' is not a CIDR: it has host bits set; write the network {meant} "
            f"(every address of the /{meant.prefixlen}), or {single} for the one address"
        ) from None


class PlatformIngress(Spec):
    """Ingress from one platform role, on named ports."""

    role: DnsLabel = Field(description="platform role of the stack (platformNamespaces), e.g. monitoring")
    ports: list[Port] = fresh(list, description="ports of the tenant's pods the role may reach; empty: the stack's platformPorts for the role")


class IngressFrom(Spec):
    """Who may connect to the tenant's pods, besides the pods of its own namespaces."""

    tenants: list[DnsLabel] = fresh(list, description="other tenants whose pods may connect to this tenant (they get the matching egress)")
    platform: list[Union[DnsLabel, PlatformIngress]] = fresh(
        list,
        description="platform roles from the stack, e.g. monitoring or {role: ingress, ports: [{port: 8000}]}; "
        "a plain role name reaches the ports the stack lists for it in platformPorts",
    )
    ports: list[Port] = fresh(list, description="restrict ingress from other tenants to these ports; empty = all")


# At least two labels, the last one starting with a letter: IP addresses never match.
HOST_PATTERN = r"^(\*\.)?([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]([-a-z0-9]*[a-z0-9])?$"
PATTERN_WORDS[HOST_PATTERN] = ("a host name: lower-case DNS labels joined by '.', optionally beginning with '*.', "
                               "without scheme, port or path (e.g. api.example.com)")

# What a hostname written another way becomes once normalized, and why each step matters: hosts are
# compared as plain strings (the guard, who owns which host), so each name has one spelling only.
_HOST_SPELLINGS = (
    (lambda v: v.strip(), "without the spaces or line break around it"),
    (lambda v: re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*://", "", v), "without the scheme (a host, not a URL)"),
    (lambda v: re.sub(r"[/?#].*$", "", v), "without the path"),
    (lambda v: re.sub(r":[0-9]+$", "", v), "without the port"),
    (lambda v: v.rstrip("."), "without the trailing dot (Kubernetes refuses a host ending in '.')"),
    (lambda v: v.lower(), "in lower case (DNS ignores case; Kubernetes accepts only lower case)"),
    (lambda v: _idna(v), "in its IDNA form (xn--...), which is what clients send for a non-ASCII name (check the letters: a look-alike is another name)"),
)


def _idna(value: str) -> str:
    try:
        return value.encode("idna").decode("ascii") if not value.isascii() else value
    except UnicodeError:
        return value


def _hostname(value: Any) -> Any:
    """A DNS name in its one spelling: the whole string matches HOST_PATTERN (`$` alone would let a
    trailing line break through), else the message says how to write it (not a string: the type check's).

    >>> _hostname("api.example.com"), _hostname("*.example.com")
    ('api.example.com', '*.example.com')
    >>> _hostname("API.Example.com.")
    Traceback (most recent call last):
    ValueError: 'API.Example.com.' is not a hostname as Kubernetes writes it: write 'api.example.com', without the trailing dot (Kubernetes refuses a host ending in '.'), in lower case (DNS ignores case; Kubernetes accepts only lower case)
    """
    if not isinstance(value, str) or re.fullmatch(HOST_PATTERN[1:-1], value):
        return value
    shown = printable(value)
    candidate, steps = value, []
    for spell, why in _HOST_SPELLINGS:
        if spell(candidate) != candidate:
            candidate = spell(candidate)
            steps.append(why)
    if steps and re.fullmatch(HOST_PATTERN[1:-1], candidate):
        raise ValueError(f"'{shown}' is not a hostname as Kubernetes writes it: write '{candidate}', {', '.join(steps)}")
    raise ValueError(
        f"'{shown}' is not a hostname: write a DNS name such as api.example.com (at least two labels of a-z, 0-9 "
        "and '-', never an IP address), or *.example.com for every name below example.com ('*' only as the whole first label)"
    )


# The validator runs before the pattern, so that a wrong spelling gets its fix rather than the regex.
Hostname = Annotated[
    str,
    StringConstraints(pattern=HOST_PATTERN, max_length=253),
    BeforeValidator(_hostname),
    Field(description="DNS name such as api.example.com, or *.example.com for every subdomain (never an IP address)"),
]


class Network(Spec):
    """Exceptions to the default deny. Same-namespace traffic and cluster DNS are always allowed."""

    ingress_from: IngressFrom = fresh(IngressFrom, description="who else may connect to the tenant's pods")
    egress: list[EgressRule] = fresh(
        list,
        description="destinations outside the cluster the pods may reach; wide networks never include the cloud "
        "metadata endpoints (169.254.169.254, fd00:ec2::254) unless a rule names exactly that address",
    )
    api_server: bool = Field(False, description="egress to the Kubernetes API server (the endpoints the stack declares in clusterNetwork.apiServer)")
    ingress_hosts: list[Hostname] = fresh(
        list,
        description="hostnames the tenant's Ingresses may serve besides <tenant>.<stack ingressDomain> and its "
        "subdomains; `*.example.com` allows every subdomain",
    )
    external_names: list[Hostname] = fresh(
        list, description="hostnames an ExternalName Service may point to (none by default; never IP addresses)"
    )


# A registry host (with a dot, or localhost; optional port), optionally a path below it. Images must be
# written in full: a short name (`nginx`) is resolved by each node's runtime configuration.
REGISTRY_PATTERN = (
    r"^(localhost|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+)(:[0-9]{1,5})?"
    r"(/[a-z0-9]+([._-][a-z0-9]+)*)*$"
)


def _registry(value: str) -> str:
    if not re.fullmatch(REGISTRY_PATTERN, value):
        raise ValueError(
            f"'{value}' is not a registry: write its host in lower case with a dot or as localhost, optionally a port "
            "and a path (nvcr.io/nvidia, registry.acme.dev:5000, docker.io/library), without scheme, tag or trailing '/'"
        )
    return value


ImageRegistry = Annotated[
    str,
    AfterValidator(_registry),
    Field(max_length=255, json_schema_extra={"pattern": REGISTRY_PATTERN},
          description="registry host, or a path below it: nvcr.io/nvidia, registry.acme.dev:5000, docker.io/library"),
]


class TenantImages(Spec):
    """Where the tenant's pods may pull images from, besides the stack's `images.registries`."""

    registries: list[ImageRegistry] = fresh(
        list, description="registries (or paths below one) this tenant may pull from besides the stack's, e.g. [ghcr.io/acme-vision]"
    )


class GpuAccess(Spec):
    """Which GPUs the tenant's pods may land on, enforced by an admission policy (a taint alone is not)."""

    classes: list[DnsLabel] = fresh(list, description="GPU classes of the stack the tenant's pods may use (besides those of its dedicated pools)")
    dedicated_pools: list[DnsLabel] = fresh(list, description="node pools reserved for this tenant alone")


class VClusterSpec(Spec):
    """Optional virtual control plane (the vCluster chart) in the tenant's own namespace.

    Its pods run on the host under the namespace's quota, LimitRange, NetworkPolicies, Pod Security
    and GPU placement policy; the generated chart values mirror them (docs/queues-and-vclusters.md).
    """

    enabled: bool = Field(False, description="deploy a vCluster in the tenant's namespace")
    priority_class_name: Optional[DnsLabel] = Field(
        None,
        description="PriorityClass forced on every pod the vCluster runs on the host; "
        "unset: they run at the host's default priority (no host PriorityClass is synced in: the chart would "
        "grant the vCluster every verb on PriorityClasses)",
    )
    values: dict[str, Any] = fresh(
        dict,
        description="vCluster chart values merged over the generated ones (checked against the chart's "
        "values.schema.json; settings that isolate the tenant cannot be overridden)",
    )


class QueueSpec(Spec):
    """Scheduler queue settings, used when the stack's scheduler is kueue or kai.

    The tenant's nominal queue quota is always its `quota` (per GPU class); these settings only
    say how it shares with others. Limits are whole GPUs (or time-sliced shares) per GPU class.
    """

    cohort: Optional[DnsLabel] = Field(
        None,
        description="Kueue cohort / KAI department (parent queue) whose members borrow each other's "
        "unused quota; defaults to the stack's queues.defaultCohort",
    )
    weight: Optional[Annotated[int, Field(ge=0)]] = Field(
        None, description="share of the cohort's unused capacity (Kueue fairSharing.weight, KAI overQuotaWeight); default 1"
    )
    borrowing_limit: Optional[QueueLimit] = Field(
        None,
        description="GPUs per class the tenant may borrow above its quota, e.g. {a100: 4}; a plain number is the "
        "same for every GPU class the tenant has quota for; unset: no limit",
    )
    lending_limit: Optional[QueueLimit] = Field(
        None,
        description="GPUs per class of the tenant's quota that others may borrow while idle (Kueue only); a plain "
        "number is the same for every GPU class the tenant has quota for",
    )
    admission: Literal["queued", "direct"] = Field(
        "queued",
        description="how the tenant's GPU pods start on a kueue or kai stack. `queued` (default): every pod that "
        "requests GPUs (device plugin, DRA, KAI sharing annotation) must go through the tenant's queue, else it is "
        "refused at creation. `direct`: pods may also start without the queue (online inference that must not "
        "wait); the tenant's GPUs are then only its nominal quota (Kueue: it gets no queues at all)",
    )


class Decommission(Spec):
    """Explicit consent to delete a tenant's namespaces and everything in them."""

    confirm: str = Field(description="must repeat the tenant's name exactly")


class Tenant(Spec):
    """One team sharing the cluster. `name` is also its default namespace.

    >>> Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "team-a",
    ...     "displayName": "Team A", "costCenter": "cc-1"}).name
    'team-a'
    """

    api_version: Literal["gpu-tenancy.dev/v1alpha2"] = Field(
        alias="apiVersion", description="version of this file format; older files: run `tenants migrate`"
    )
    kind: Literal["Tenant"] = Field(description="always Tenant")
    name: TenantName = Field(description="the tenant's name, its file name and its own namespace")
    previous_names: list[TenantName] = fresh(list, description="former names; their resources are adopted (Pulumi aliases)")
    display_name: str = Field(min_length=1, description="human-readable team name")
    description: str = Field("", description="what the team runs on the cluster")
    cost_center: LabelValue = Field(description="cost centre, a label on every namespace for chargeback")
    contacts: list[Contact] = fresh(list, description="people or channels to reach about the tenant")
    # `decommission` comes before `lifecycle` so that the lifecycle validator can see it.
    decommission: Optional[Decommission] = Field(
        None, description="required with lifecycle 'decommissioned': {confirm: <the tenant's name>}"
    )
    lifecycle: Lifecycle = Field(
        "active",
        description="active; suspended (running pods keep running, no new pods are admitted); "
        "decommissioned (namespaces and everything in them are deleted)",
    )
    expires: Optional[date] = Field(
        None,
        description="last day (YYYY-MM-DD, UTC) the tenant is active: after it the stack suspends the tenant (as "
        "lifecycle suspended: no new pods, nothing deleted); validate warns 30 days ahead; decommission stays explicit",
    )
    namespaces: list[DnsLabel] = fresh(list, description="extra namespaces besides the one named like the tenant")
    access: Access = fresh(Access)
    quota: Quota = fresh(Quota)
    namespace_quotas: dict[DnsLabel, NamespaceQuota] = fresh(
        dict,
        description="compute/GPU budget carved out of quota for extra namespaces; without an entry an extra "
        "namespace gets none (it holds data: PVCs, Secrets, ConfigMaps), except a previous name of the tenant, "
        "which keeps the budget until the team moves (docs/renaming.md)",
    )
    limits: LimitRangeSpec = fresh(LimitRangeSpec)
    network: Network = fresh(Network)
    gpu: GpuAccess = fresh(GpuAccess)
    images: TenantImages = fresh(TenantImages, description="image registries the tenant's pods may pull from")
    pod_security: Optional[PodSecurityLevel] = Field(None, description="stricter Pod Security level than the stack's")
    vcluster: VClusterSpec = fresh(VClusterSpec)
    queue: QueueSpec = fresh(QueueSpec)
    environments: dict[DnsLabel, dict[str, Any]] = fresh(
        dict, description="per-environment overrides merged over this file, e.g. {dev: {quota: {gpu: 1}}}"
    )

    @property
    def all_namespaces(self) -> list[str]:
        """The tenant's namespaces, its own first."""
        return [self.name, *self.namespaces]

    @property
    def is_active(self) -> bool:
        """Whether the tenant is active: its pods are admitted (neither suspended nor decommissioned).

        >>> Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1").is_active
        True
        """
        return self.lifecycle == "active"

    @property
    def holds_capacity(self) -> bool:
        """Whether its quota counts against the pools' capacity: active, or suspended (its running pods
        keep their GPUs until they end: suspension admits no new pods and evicts none); not once
        decommissioned (its namespaces, and the pods in them, are deleted).

        >>> Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1",
        ...     lifecycle="suspended").holds_capacity
        True
        """
        return not self.is_decommissioned

    @property
    def is_suspended(self) -> bool:
        """Whether the tenant is suspended: running pods keep running, no new ones are admitted, nothing is deleted.

        >>> Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1",
        ...     lifecycle="suspended").is_suspended
        True
        """
        return self.lifecycle == "suspended"

    @property
    def is_decommissioned(self) -> bool:
        """Whether the tenant is decommissioned: its namespaces and all in them are deleted, its quota counts no more.

        >>> Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1",
        ...     lifecycle="decommissioned", decommission={"confirm": "a"}).is_decommissioned
        True
        """
        return self.lifecycle == "decommissioned"

    @field_validator("lifecycle")
    @classmethod
    def _decommission_confirmed(cls, value: str, info: ValidationInfo) -> str:
        # A field validator (not a model one) so that the error points at the `lifecycle` line.
        name = info.data.get("name")
        decommission = info.data.get("decommission")
        if value == "decommissioned" and name is not None and decommission is None:
            raise ValueError(
                f"'decommissioned' deletes every namespace of the tenant and all data in them; "
                f"to confirm, add `decommission: {{confirm: {name}}}`"
            )
        if value == "decommissioned" and name is not None and decommission.confirm != name:
            raise ValueError(
                f"'decommissioned' deletes every namespace of the tenant and all data in them, but the confirmation "
                f"does not match: decommission.confirm is '{decommission.confirm}', the tenant's name is '{name}'; "
                f"repeat the name exactly"
            )
        return value
