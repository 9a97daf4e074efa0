"""The per-environment cluster inventory, read from `stacks/Pulumi.<env>.yaml`.

It lives under the Pulumi config key `gpu-tenancy:platform`, so `pulumi up` (through
`pulumi.Config().require_object("platform")`) and the offline tools read the same file.
"""

from __future__ import annotations

import ipaddress
import re
from decimal import Decimal
from typing import Annotated, Literal, Optional, Union

from pydantic import AfterValidator, Field, field_validator, model_validator

from .base import DnsLabel, DnsSubdomain, LabelValue, Model, NonNegativeInt, TenantName
from .monitoring import Monitoring
from .quantity import Quantity
from .role_bundles import RoleBundle
from .sharding import Sharding
from .tenant import (
    Hostname,
    ImageRegistry,
    LimitRangeSpec,
    ObjectCounts,
    PodSecurityLevel,
    Port,
    PriorityCap,
    RequestsLimits,
    ResourceValues,
    StorageQuota,
    _network,
)

CONFIG_KEY = "gpu-tenancy:platform"

# A static node's taint patch is registered under its label patch's Pulumi name plus this
# (resources/kubernetes.py `logical_name`), so a node may not be named like another node plus it
# (validate/platform.py).
TAINT_PATCH_SUFFIX = "-taints"


class PodSecurity(Model):
    """Pod Security Admission for every tenant namespace."""

    level: PodSecurityLevel = Field("baseline", description="Pod Security Standard enforced on every tenant namespace (tenants may only tighten it)")
    version: Annotated[str, Field(pattern=r"^(latest|v1\.[0-9]+)$")] = Field(
        "latest",
        description="version of the standard; latest (the cluster's own checks) or a pin no older than the "
        "cluster (validate warns about an older pin: it misses checks added since, e.g. probe `host` in v1.34)",
    )


class TimeSlicing(Model):
    """GPU time-slicing: several pods take turns on one GPU. No memory or fault isolation between them."""

    replicas: Annotated[int, Field(ge=2, le=64)] = Field(description="shares advertised per GPU")
    rename_by_default: bool = Field(False, description="advertise the shares as nvidia.com/gpu.shared")
    fail_requests_greater_than_one: bool = Field(True, description="reject pods that ask for more than one share (more shares would not mean more GPU)")


class Mps(Model):
    """CUDA MPS: up to `replicas` pods run on one GPU at once through the device plugin's MPS server,
    each limited to 1/replicas of the GPU's memory and of its compute threads. A fatal GPU fault in
    one pod can still end every pod on that GPU."""

    # The plugin's MPS control daemon refuses more than 48 clients on Volta or newer GPUs.
    replicas: Annotated[int, Field(ge=2, le=48)] = Field(description="MPS clients per GPU; each gets memory/replicas of GPU memory")
    rename_by_default: bool = Field(False, description="advertise the shares as nvidia.com/gpu.shared")


class MigSharing(Model):
    """MIG partitions each GPU into isolated instances (own memory and compute slices)."""

    strategy: Literal["mixed", "single"] = Field("mixed", description="mixed: each profile is its own resource nvidia.com/mig-<profile> (quota.mig); single: every slice is an nvidia.com/gpu")


class KaiFractions(Model):
    """KAI Scheduler GPU shares (pod annotations `gpu-fraction`, `gpu-memory`) on this class's whole GPUs.

    `memoryBound: hamicore` turns on KAI's `hamicore` binder plugin: the binder writes
    `CUDA_DEVICE_MEMORY_LIMIT` (the pod's fraction of the GPU's memory) into the pod's KAI ConfigMap,
    and HAMi-core (`libvgpu.so`, loaded into the container by LD_PRELOAD, e.g. by
    kai-resource-isolator) fails CUDA allocations past it. The bound is soft: a process that does not
    go through the library (a static CUDA runtime, direct driver calls, a changed preload) is not held
    to it, and there is no fault isolation.
    """

    memory_bound: Literal["none", "hamicore"] = Field(
        "none",
        description="none: a share is scheduling accounting only (any pod can use all of the GPU's memory); hamicore: "
        "KAI's hamicore binder plugin sets CUDA_DEVICE_MEMORY_LIMIT, enforced in the container by HAMi-core (soft: "
        "a process that bypasses the library is not bounded)",
    )


class GpuClass(Model):
    """A kind of GPU device as tenants see it: model plus how it is shared."""

    model: str = Field(description="GPU model, e.g. H100-80GB (a key of the MIG geometry table for MIG classes)")
    product: LabelValue = Field(description="GPU Feature Discovery label nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3")
    memory: Annotated[str, Field(pattern=r"^[0-9]+(Gi|G)$")] = Field(description="GPU memory per device, e.g. 80Gi")
    sharing: Literal["exclusive", "mig", "timeSlicing", "mps"] = Field(
        "exclusive",
        description="exclusive: one pod per GPU; timeSlicing: pods take turns; mps: pods run at once, each with "
        "a share of memory and compute; mig: isolated MIG instances",
    )
    time_slicing: Optional[TimeSlicing] = None
    mps: Optional[Mps] = None
    mig: Optional[MigSharing] = None
    kai_fractions: Optional[KaiFractions] = Field(
        None,
        description="KAI Scheduler GPU shares by pod annotation on this class's GPUs (needs `scheduler: kai` and "
        "`sharing: exclusive`); unset: the class is not meant for KAI fractions",
    )
    overcommit: Annotated[Decimal, Field(ge=1, le=10)] = Field(
        Decimal(1), description="how far the sum of tenant quotas may exceed capacity (1 = not at all)"
    )
    serving: Literal["devicePlugin", "dra", "both"] = Field(
        "devicePlugin",
        description="who hands out the class's GPUs: the NVIDIA device plugin (extended resources), a DRA driver "
        "(ResourceClaims of the `deviceClasses` naming this class), or both during a migration (then each such "
        "DeviceClass must map `extendedResourceName` to the class's device-plugin resource: one budget, no double count)",
    )
    description: str = Field("", description="what the class is for, shown to tenants")

    @model_validator(mode="after")
    def _sharing_settings(self) -> "GpuClass":
        if self.sharing == "timeSlicing" and self.time_slicing is None:
            raise ValueError("sharing 'timeSlicing' needs `timeSlicing: {replicas: N}`")
        if self.sharing != "timeSlicing" and self.time_slicing is not None:
            raise ValueError(f"`timeSlicing` is set but sharing is '{self.sharing}'")
        if self.sharing == "mps" and self.mps is None:
            raise ValueError("sharing 'mps' needs `mps: {replicas: N}`")
        if self.sharing != "mps" and self.mps is not None:
            raise ValueError(f"`mps` is set but sharing is '{self.sharing}'")
        if self.sharing == "mig" and self.mig is None:
            self.mig = MigSharing()
        if self.sharing != "mig" and self.mig is not None:
            raise ValueError(f"`mig` is set but sharing is '{self.sharing}'")
        if self.kai_fractions is not None and self.sharing != "exclusive":
            # KAI divides whole GPUs; on device-plugin shares or MIG slices a fraction would share a share.
            raise ValueError(f"`kaiFractions` needs sharing 'exclusive' (KAI divides whole GPUs), not '{self.sharing}'")
        return self

    @property
    def replication(self) -> TimeSlicing | Mps | None:
        """The device plugin's sharing settings (time-slicing or MPS); None when it advertises whole GPUs or MIG.

        >>> GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="mps", mps={"replicas": 4}).replication.replicas
        4
        """
        return self.time_slicing if self.sharing == "timeSlicing" else self.mps if self.sharing == "mps" else None


ExtendedResourceName = Annotated[
    str,
    Field(
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        description="extended resource name such as nvidia.com/gpu",
    ),
]


class DeviceClassSpec(Model):
    """A DRA DeviceClass of the cluster (resource.k8s.io/v1). Every one is in every tenant's quota:
    the grant of its `gpuClass`, else 0, under both DRA quota keys (see docs/gpu-sharing.md, DRA)."""

    owner: Literal["tool", "driver"] = Field(
        "tool", description="tool: this tool creates the DeviceClass; driver: a DRA driver installs it (e.g. gpu.nvidia.com, mig.nvidia.com) and it is only metered"
    )
    gpu_class: Optional[DnsLabel] = Field(
        None, description="GPU class (a key of gpuClasses) whose tenant grant meters this DeviceClass; unset: every tenant is pinned at 0"
    )
    driver: Optional[DnsSubdomain] = Field(None, description="tool-owned classes: the DRA driver whose devices the class selects, e.g. gpu.nvidia.com")
    selector: Optional[Annotated[str, Field(min_length=1)]] = Field(
        None, description="tool-owned classes: a further CEL device selector, e.g. device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
    )
    extended_resource_name: Optional[ExtendedResourceName] = Field(
        None,
        description="the class's KEP-5004 extendedResourceName: pods asking for it get devices of this class (for "
        "driver-owned classes, what the driver sets, so the quota meters it)",
    )
    description: str = Field("", description="what the class is for")

    @model_validator(mode="after")
    def _owner_fields(self) -> "DeviceClassSpec":
        if self.owner == "tool" and self.driver is None:
            raise ValueError("a tool-owned DeviceClass needs `driver` (the DRA driver whose devices it selects, e.g. gpu.nvidia.com)")
        if self.owner == "driver" and (self.driver is not None or self.selector is not None):
            raise ValueError("`driver` and `selector` describe a DeviceClass this tool creates; the driver writes its own (remove them, or set `owner: tool`)")
        return self


class NodePool(Model):
    """Nodes of one GPU class: static node names, and/or a selector for an autoscaled group."""

    gpu_class: DnsLabel = Field(description="the GPU class of every GPU in the pool (a key of gpuClasses)")
    gpus_per_node: Annotated[int, Field(ge=1, le=64)] = Field(description="GPUs in each node")
    nodes: list[DnsSubdomain] = Field([], description="static nodes; labelled by NodePatch")
    node_selector: dict[str, LabelValue] = Field(
        {}, description="labels that an autoscaled node group carries (its definition must set them)"
    )
    max_nodes: Optional[NonNegativeInt] = Field(None, description="capacity of an autoscaled pool, in nodes")
    patch_taints: Optional[bool] = Field(
        None,
        description="patch the pool's taint onto its static nodes (a dedicated pool: <labelDomain>/tenant=<tenant>; "
        "a shared pool, MIG included: nvidia.com/gpu=present), in a patch of its own beside the forced label patch, "
        "never forced (spec.taints is one atomic list); unset: yes; set false only if the nodes register with the taint themselves",
    )
    mig_layout: Optional[str] = Field(None, description="MIG layout of every GPU in the pool (MIG classes)")
    description: str = Field("", description="what the pool is for")

    @property
    def node_count(self) -> int:
        return len(self.nodes) + (self.max_nodes or 0)

    @model_validator(mode="after")
    def _has_nodes(self) -> "NodePool":
        if not self.nodes and self.max_nodes is None:
            raise ValueError("a pool needs static `nodes` or `maxNodes` for an autoscaled group")
        if self.max_nodes is not None and not self.node_selector:
            raise ValueError("an autoscaled pool (`maxNodes`) needs `nodeSelector` labels of its node group")
        return self


class MigDeviceGroup(Model):
    """MIG devices for some or all GPUs of a node (the mig-parted `mig-devices` entry)."""

    devices: Union[Literal["all"], list[Annotated[int, Field(ge=0, le=63)]]] = Field("all", description="GPU indexes on the node, or all; GPUs no group covers keep MIG disabled")
    profiles: dict[Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb(\+me)?$")], Annotated[int, Field(ge=1)]] = Field(description="MIG instances per GPU, e.g. {3g.40gb: 2}; checked against the GPU's geometry")


class PriorityClassSpec(Model):
    """A PriorityClass the platform creates."""

    value: Annotated[int, Field(ge=-2147483648, le=1000000000)] = Field(description="priority; higher runs first and may preempt lower")
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field("PreemptLowerPriority", description="whether pods of this class evict lower-priority pods to fit")
    description: str = Field(min_length=1, description="what the class is for (shown by kubectl get priorityclass)")
    global_default: bool = Field(False, description="the class of pods that name none (at most one class)")
    default_tenant_cap: Optional[PriorityCap] = Field(
        None, description="cap for tenants that do not list this class (e.g. {pods: 0} to require a grant)"
    )


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


# A count for every built-in namespaced kind a tenant role may create (and ReplicaSets, which
# Deployments create as often as their revisionHistoryLimit, which the tenant sets), so that the
# number of objects a namespace holds in etcd is bounded. Custom resources (JobSets, Kubeflow and
# Ray jobs, the bundles' kinds) are not counted by default: a count key for a kind the cluster does
# not serve stops the quota controller from computing the namespace's usage, and the quota then
# refuses every pod. A stack adds them here once their CRDs are installed;
# tests/manifests/test_quota.py keeps both lists complete against the roles and bundles.
DEFAULT_KIND_COUNTS = {
    "serviceaccounts": 100,
    "deployments.apps": 500, "statefulsets.apps": 200, "replicasets.apps": 5000,
    "horizontalpodautoscalers.autoscaling": 200,
    "cronjobs.batch": 200, "jobs.batch": 2000,
    "ingresses.networking.k8s.io": 100,
    "rolebindings.rbac.authorization.k8s.io": 100,
    "poddisruptionbudgets.policy": 100,
    "leases.coordination.k8s.io": 100,
}
# Kinds members may create that only a CRD or an optional API group serves: counted only when the
# stack lists them in guardRails.objects.kinds (see above).
CUSTOM_RESOURCE_KINDS = (
    "jobsets.jobset.x-k8s.io",
    *(f"{kind}.kubeflow.org" for kind in ("jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs")),
    "trainjobs.trainer.kubeflow.org",
    "resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io",
    "notebooks.kubeflow.org", "poddefaults.kubeflow.org", "scheduledworkflows.kubeflow.org",
    *(f"{kind}.pipelines.kubeflow.org" for kind in ("experiments", "jobs", "pipelines", "pipelineversions", "recurringruns", "runs")),
    "workflows.argoproj.io",
    *(f"{kind}.ray.io" for kind in ("rayclusters", "rayjobs", "rayservices")),
    *(f"{kind}.serving.kserve.io" for kind in ("inferencegraphs", "inferenceservices", "servingruntimes", "trainedmodels")),
    "leaderworkersets.leaderworkerset.x-k8s.io",
)


def _default_guard_objects() -> ObjectCounts:
    return ObjectCounts(
        pods=1000, services=100, servicesLoadBalancers=0, servicesNodePorts=0,
        persistentVolumeClaims=100, configMaps=1000, secrets=1000, kinds=DEFAULT_KIND_COUNTS,
    )


NGINX = "nginx.ingress.kubernetes.io/"
# ingress-nginx annotations that change only how the controller serves the tenant's own backends.
# Left out on purpose: anything that makes the controller fetch or send elsewhere (auth-url,
# auth-signin, mirror-target, mirror-uri, global-rate-limit*, custom-http-errors/default-backend,
# upstream-vhost, proxy-redirect-*), service-upstream, ssl-passthrough and every *snippet*.
_DEFAULT_INGRESS_ANNOTATIONS = tuple(NGINX + name for name in (
    "affinity", "affinity-mode", "app-root", "auth-realm", "auth-tls-pass-certificate-to-upstream", "auth-tls-verify-client",
    "auth-tls-verify-depth", "auth-type", "backend-protocol", "client-body-buffer-size", "cors-allow-credentials",
    "cors-allow-headers", "cors-allow-methods", "cors-allow-origin", "cors-expose-headers", "cors-max-age", "enable-cors",
    "force-ssl-redirect", "limit-burst-multiplier", "limit-connections", "limit-rpm", "limit-rps", "proxy-body-size",
    "proxy-buffer-size", "proxy-buffering", "proxy-connect-timeout", "proxy-next-upstream", "proxy-next-upstream-timeout",
    "proxy-next-upstream-tries", "proxy-read-timeout", "proxy-request-buffering", "proxy-send-timeout", "proxy-ssl-name",
    "proxy-ssl-server-name", "proxy-ssl-verify", "proxy-ssl-verify-depth", "rewrite-target", "session-cookie-expires",
    "session-cookie-max-age", "session-cookie-name", "session-cookie-path", "session-cookie-samesite", "ssl-redirect",
    "use-regex", "whitelist-source-range",
))
_DEFAULT_SECRET_ANNOTATIONS = tuple(NGINX + name for name in ("auth-secret", "auth-tls-secret", "proxy-ssl-secret"))
AnnotationKey = Annotated[str, Field(pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=316)]


class IngressAnnotations(Model):
    """Which ingress-controller annotations tenants may set: an allow-list, never a deny-list.

    An annotation whose key starts with a controller prefix is refused unless listed; others (your
    own, tools' tracking annotations) are not the controller's business and pass. `*snippet*` keys
    are refused always."""

    controller_prefixes: list[Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/$")]] = Field(
        [NGINX], description="annotation key prefixes the cluster's ingress controllers read, e.g. nginx.ingress.kubernetes.io/"
    )
    allowed: list[AnnotationKey] = Field(
        list(_DEFAULT_INGRESS_ANNOTATIONS),
        description="controller annotations tenants may set (full keys); the default is ingress-nginx's that change only "
        "how it serves the tenant's own backends (no auth-url, mirror-*, upstream-vhost, ...)",
    )
    secret_references: list[AnnotationKey] = Field(
        list(_DEFAULT_SECRET_ANNOTATIONS),
        description="controller annotations that name a Secret (`[namespace/]name`): allowed only naming a Secret "
        "of the Ingress's own namespace",
    )

    @model_validator(mode="after")
    def _meaningful(self) -> "IngressAnnotations":
        for key in (*self.allowed, *self.secret_references):
            if "snippet" in key:
                raise ValueError(f"'{key}': snippet annotations inject raw controller configuration and are never allowed")
            if not any(key.startswith(p) for p in self.controller_prefixes):
                raise ValueError(f"'{key}' has none of the controllerPrefixes ({', '.join(self.controller_prefixes)}): "
                                 "annotations of other prefixes are allowed anyway; list controller annotations only")
        return self


class ServiceAccountTokens(Model):
    """Bounds on the ServiceAccount tokens a pod asks the kubelet for (projected `serviceAccountToken`).

    Anyone who may create pods may run them as any ServiceAccount of the namespace, the tenant's CI
    account included, and the kubelet mints the token the pod spec asks for: without a bound, a
    developer gets the CI account's token for any audience and a lifetime of years."""

    max_expiration_seconds: Annotated[int, Field(ge=600, le=86400, strict=True)] = Field(
        3607, description="longest token lifetime a pod may ask for (the kube-api-access volume the API server injects asks 3607)"
    )
    audiences: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(
        [], description="audiences a pod may ask a token for besides the API server's own (audience unset), e.g. vault"
    )


class EphemeralStorageGuardRail(Model):
    """Node-local scratch space (container writable layers, logs, disk-backed emptyDirs) of every tenant
    namespace, unless the tenant sets its own `quota.ephemeralStorage` and `limits.*.ephemeralStorage`.

    The quota keys are admission-time accounting of what pods declare; the per-container limit is
    what the kubelet evicts a pod for exceeding (measured periodically, so a pod may overshoot
    between two measurements). `max` is also a bound: no tenant may set a larger per-container value.
    The LimitRange defaults always come with the quota keys, so a pod that states no ephemeral-storage
    is given some instead of being refused."""

    quota: RequestsLimits = Field(
        default_factory=lambda: RequestsLimits(requests="100Gi", limits="500Gi"),
        description="requests.ephemeral-storage and limits.ephemeral-storage of each namespace (a tenant with N namespaces may hold N times)",
    )
    default_request: Quantity = Field("256Mi", description="request given to containers that state none (what the scheduler reserves on a node)")
    default: Quantity = Field("4Gi", description="limit given to containers that state none (the kubelet evicts a pod above its limits)")
    max: Quantity = Field("100Gi", description="largest limit one container may set; tenants cannot raise it")

    @model_validator(mode="after")
    def _ordered(self) -> "EphemeralStorageGuardRail":
        if self.default_request > self.default:
            raise ValueError(f"defaultRequest ({self.default_request}) is above default ({self.default}); a defaulted container's request must not exceed its limit")
        if self.default > self.max:
            raise ValueError(f"default ({self.default}) is above max ({self.max}); every defaulted container would be refused")
        requests, limits = self.quota.requests, self.quota.limits
        if requests is not None and limits is not None and requests > limits:
            raise ValueError(f"quota.requests ({requests}) is above quota.limits ({limits}); every pod's limits are >= its requests, so the requests could never be used")
        if requests is not None and self.default_request > requests:
            raise ValueError(f"defaultRequest ({self.default_request}) is above quota.requests ({requests}); no defaulted pod could be admitted")
        if limits is not None and self.default > limits:
            raise ValueError(f"default ({self.default}) is above quota.limits ({limits}); no defaulted pod could be admitted")
        return self


class GuardRails(Model):
    """Quota keys every tenant namespace gets unless the tenant sets its own: object counts, storage and ephemeral storage."""

    objects: ObjectCounts = Field(default_factory=_default_guard_objects, description="object counts per namespace; unset counts are unlimited")
    storage: StorageQuota = Field(
        default_factory=lambda: StorageQuota(requests="1Ti"),
        description="storage per namespace: total requests.storage and per-StorageClass caps a tenant gets unless it sets its own",
    )
    ephemeral_storage: EphemeralStorageGuardRail = Field(
        default_factory=EphemeralStorageGuardRail,
        description="node-local scratch space per namespace (quota keys) and per container (LimitRange default and max) "
        "a tenant gets unless it sets its own; the max bounds every tenant",
    )
    storage_classes: list[DnsSubdomain] = Field(
        [],
        description="every StorageClass of the cluster; a class neither the tenant nor `storage` gives a cap is pinned at 0",
    )
    pdb_min_available: bool = Field(
        False,
        description="let tenants' PodDisruptionBudgets use minAvailable (below 100%); it blocks a node drain whenever it "
        "reaches the replica count, so by default only maxUnavailable of at least 1 is admitted",
    )
    service_account_tokens: ServiceAccountTokens = Field(
        default_factory=ServiceAccountTokens, description="lifetime and audiences of the tokens pods may ask for"
    )
    ingress_annotations: IngressAnnotations = Field(
        default_factory=IngressAnnotations, description="ingress-controller annotations tenants may set (an allow-list)"
    )
    data_bytes_per_object: Annotated[int, Field(ge=1024, le=1048576, strict=True)] = Field(
        262144,
        description="most bytes the data and binaryData of one ConfigMap or Secret may hold (checked at admission; the API "
        "server's own limit is 1 MiB), so that the object counts bound what a namespace stores in etcd",
    )


SystemName = Annotated[str, Field(pattern=r"^system:.+$", description="a name of the system: prefix, written in full")]


class SystemSubjects(Model):
    """`system:` users and groups tenant files may name in `access` (exact names).

    Kubernetes gives `system:` names to its own identities (every authenticated client, every
    request without credentials, cluster-admin's group, each ServiceAccount of each namespace), so a
    tenant role bound to one reaches far beyond the team. Validate refuses them in tenant files,
    except the tenant's own ServiceAccounts (`system:serviceaccount:<one of its namespaces>:<name>`)
    and the names listed here. The guard policy still never lets an owner bind a `system:` name.
    """

    users: list[SystemName] = Field(
        [], description="user names tenant files may name, e.g. [system:serviceaccount:ci:runner] (another namespace's ServiceAccount the platform vouches for)"
    )
    groups: list[SystemName] = Field(
        [], description="group names tenant files may name, e.g. [system:serviceaccounts:ci]"
    )


class TenantAccessSettings(Model):
    """Stack-wide limits on what tenant members can see and grant."""

    node_read: bool = Field(
        False,
        description="let every tenant member read Nodes (labels, taints, capacity, addresses, image lists of "
        "every node, other tenants' included); off: they read PriorityClasses, StorageClasses, RuntimeClasses only",
    )
    bindable_users: Optional[str] = Field(
        None, description="regular expression (RE2) of user names owners may bind besides the tenant's own, e.g. ^[a-z.]+@acme\\.dev$"
    )
    bindable_groups: Optional[str] = Field(
        None, description="regular expression (RE2) of group names owners may bind besides the tenant's own"
    )
    system_subjects: SystemSubjects = Field(
        SystemSubjects(),
        description="system: users and groups tenant files may name in access (exact names); any other system: name, "
        "and any ServiceAccount of a namespace not the tenant's, is refused by validate",
    )

    @field_validator("bindable_users", "bindable_groups")
    @classmethod
    def _regex(cls, value: Optional[str]) -> Optional[str]:
        if value is None:
            return value
        try:
            re.compile(value)
        except re.error as err:
            raise ValueError(f"'{value}' is not a regular expression ({err})") from None
        if not value.startswith("^") or not value.endswith("$"):
            raise ValueError(f"'{value}' must be anchored (^...$), or it matches names that merely contain it")
        return value


def _default_priority_classes() -> dict[str, PriorityClassSpec]:
    return {
        "online-inference": PriorityClassSpec(
            value=100000,
            description="Online inference serving users; preempts lower classes. Tenants need a grant.",
            default_tenant_cap=PriorityCap(pods=0),
        ),
        "training": PriorityClassSpec(
            value=50000,
            description="Training and fine-tuning jobs; preempts batch. Tenants need a grant.",
            default_tenant_cap=PriorityCap(pods=0),
        ),
        "interactive": PriorityClassSpec(
            value=40000,
            preemption_policy="Never",
            description="Notebooks and interactive sessions; never preempt others.",
        ),
        "batch": PriorityClassSpec(
            value=10000, description="Evaluation and batch jobs; first to be preempted.", global_default=True
        ),
    }


def _default_limit_range() -> LimitRangeSpec:
    return LimitRangeSpec(
        default_request=ResourceValues(cpu="100m", memory="256Mi"),
        default=ResourceValues(cpu="1", memory="1Gi"),
    )


class GpuSharing(Model):
    """How tenants may share GPUs across tenant lines (docs/gpu-sharing.md, the isolation table)."""

    acknowledge_no_memory_bound: list[DnsLabel] = Field(
        [],
        description="GPU classes (keys of gpuClasses) whose GPUs several tenants may share although nothing bounds a "
        "pod's GPU memory (time-slicing): one tenant's pod can take all of a GPU's memory or end the others' "
        "kernels with a fault; listing a class says this is accepted and silences validate's warning",
    )


class GpuOperator(Model):
    """Where the NVIDIA GPU Operator runs, and the ConfigMaps we render for it to reference."""

    namespace: DnsLabel = Field("gpu-operator", description="namespace of the GPU Operator (and of our ConfigMaps)")
    mig_config: DnsSubdomain = Field(
        "gpu-tenancy-mig-config", description="MIG layouts ConfigMap; set ClusterPolicy migManager.config.name to it"
    )
    device_plugin_config: DnsSubdomain = Field(
        "gpu-tenancy-device-plugin-config",
        description="time-slicing and MPS ConfigMap; set ClusterPolicy devicePlugin.config.name to it",
    )
    runtime_classes: list[DnsSubdomain] = Field(
        ["nvidia", "nvidia-cdi", "nvidia-legacy"],
        description="RuntimeClasses that expose GPUs; a pod may name one only if it requests GPUs",
    )


class KueuePreemption(Model):
    """How a Kueue ClusterQueue frees quota (the v1beta2 `spec.preemption` fields)."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        "Any", description="preempt other queues' borrowed workloads to get this queue's own quota back"
    )
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        "LowerPriority", description="preempt the tenant's own lower-priority workloads"
    )
    borrow_within_cohort: Literal["Never", "LowerPriority"] = Field(
        "Never", description="preempt others' workloads in order to borrow (needs reclaimWithinCohort != Never)"
    )


class KueueSettings(Model):
    """Stack-wide settings of the Kueue objects (used when `scheduler: kueue`)."""

    namespace: DnsLabel = Field(
        "kueue-system",
        description="namespace Kueue runs in (its controller, webhook and their ServiceAccounts); no tenant may hold it",
    )
    preemption: KueuePreemption = KueuePreemption()
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field("BestEffortFIFO", description="ClusterQueue queueingStrategy: BestEffortFIFO lets smaller workloads pass one that does not fit")


class KaiDepartment(Model):
    """A KAI parent queue: the tenants whose `queue.cohort` names it share its quota.

    Unset amounts are the sum of its tenants' quotas. `gpu` is in KAI's units: whole GPUs, a MIG
    slice counting as its compute slices (1g.10gb = 1, 3g.40gb = 3).
    """

    display_name: str = Field("", description="name shown for the parent queue")
    gpu: Optional[Annotated[Decimal, Field(ge=0)]] = Field(None, description="GPU quota of the department in KAI units; unset: its tenants' sum")
    cpu: Optional[Quantity] = Field(None, description="CPU quota of the department; unset: its tenants' sum")
    memory: Optional[Quantity] = Field(None, description="memory quota of the department; unset: its tenants' sum")
    over_quota_weight: Optional[Annotated[int, Field(ge=0)]] = Field(None, description="default 1")


class KaiSettings(Model):
    """Stack-wide settings of the KAI Scheduler queues (used when `scheduler: kai`)."""

    departments: dict[DnsLabel, KaiDepartment] = Field(
        {}, description="parent queues with explicit quotas, e.g. {research: {gpu: 40}}"
    )
    binder_service_account: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")] = Field(
        "kai-scheduler/binder",
        description="namespace/name of KAI's binder ServiceAccount: the only identity that may write KAI's per-pod "
        "GPU-sharing ConfigMaps in tenant namespaces (the KAI operator's default: kai-scheduler/binder); no tenant may hold "
        "its namespace",
    )
    reservation_namespace: DnsLabel = Field(
        "kai-resource-reservation",
        description="namespace of KAI's GPU-sharing reservation pods (the binder's --resource-reservation-namespace); no "
        "tenant may hold it",
    )


class CohortSettings(Model):
    """A cohort (Kueue) or department (KAI) of the stack: where it nests."""

    parent: Optional[DnsLabel] = Field(
        None,
        description="the cohort this one nests under (Kueue Cohort spec.parentName; KAI: the parent queue of its "
        "department queue); queues borrow across the whole tree; unset: a root",
    )


class QueueSettings(Model):
    """Scheduler queues of the environment: what `scheduler: kueue | kai` builds besides quotas."""

    default_cohort: Optional[DnsLabel] = Field(
        None,
        description="cohort (Kueue) or department (KAI) of tenants without queue.cohort; "
        "unset: Kueue queues borrow from no one, KAI queues go under the department 'tenants' (parent queue dept-tenants)",
    )
    cohorts: dict[DnsLabel, CohortSettings] = Field(
        {},
        description="cohorts (Kueue) or departments (KAI) that nest, e.g. {research: {parent: org}, prod: {parent: org}}; "
        "cohorts named only by tenants are roots",
    )
    spare_cohort: Optional[DnsLabel] = Field(
        None,
        description="Kueue: the cohort whose Cohort object holds every shared pool's spare capacity (what no "
        "ClusterQueue holds nominally), for any queue of its tree that reaches the pool to borrow; "
        "unset: the root of defaultCohort's tree; with neither, spare capacity is not queued (validate warns)",
    )
    kueue: KueueSettings = KueueSettings()
    kai: KaiSettings = KaiSettings()


class VClusterPlatform(Model):
    """The vcluster Helm chart used for tenants' virtual clusters."""

    chart_version: str = Field("0.36.1", description="version of the vcluster Helm chart (its values schema checks tenants' values)")
    repository: str = Field("https://charts.loft.sh", description="Helm repository of the chart")
    chart: Optional[str] = Field(
        None,
        description="a local copy of the chart instead of the repository: a chart directory or a packaged "
        "`.tgz`, relative to the project root, whose version is `chartVersion` (air-gapped clusters, "
        "previews without network)",
    )


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


class ImagePolicy(Model):
    """Where tenants' pods may pull images from, enforced at admission on every container (init and
    ephemeral ones too) and every image volume; off while neither the stack nor a tenant lists a registry
    and digests are not required."""

    registries: list[ImageRegistry] = Field(
        [],
        description="registries (or paths below one) every tenant may pull from, e.g. [nvcr.io/nvidia, registry.acme.dev]; "
        "a tenant's images.registries add to them; images must then be written in full (docker.io/library/nginx, not nginx)",
    )
    require_digest: bool = Field(
        False, description="every image pinned by digest (name@sha256:<64 hex>), so a re-pushed tag cannot change what runs"
    )


class Platform(Model):
    """The cluster inventory and defaults of one environment (one Pulumi stack)."""

    api_version: Optional[Literal["gpu-tenancy.dev/v1alpha2"]] = Field(
        None,
        alias="apiVersion",
        description="version of the stack file format; a stack file without it is v1alpha1: run `tenants migrate` "
        "(plain data given to the library is read as the current format)",
    )
    environment: Optional[DnsLabel] = Field(None, description="defaults to the stack name")
    kube_context: Optional[str] = Field(None, description="kubeconfig context to deploy to (explicit provider)")
    protect_namespaces: bool = Field(False, description="Pulumi `protect` on every tenant namespace")
    label_domain: DnsSubdomain = Field(description="prefix of node labels and taints, e.g. gpu.example.com")
    pod_security: PodSecurity = PodSecurity()
    platform_admin_group: str = Field("platform-admins", description="identity-provider group bound to cluster-admin")
    platform_namespaces: dict[DnsLabel, list[DnsLabel]] = Field(
        {}, description="platform roles and their namespaces, e.g. {ingress: [ingress-nginx], monitoring: [monitoring]}"
    )
    platform_ports: dict[DnsLabel, list[Port]] = Field(
        {}, description="ports each platform role reaches on tenant pods that list the role by name, e.g. {monitoring: [{port: 9090}]}"
    )
    cluster_dns: ClusterDns = ClusterDns()
    reserved_namespaces: dict[DnsLabel, Annotated[str, Field(min_length=1)]] = Field(
        {},
        description="other namespaces the platform owns, each with what owns it, e.g. {cert-manager: cert-manager, "
        "argocd: GitOps (Argo CD)}; no tenant may hold one, nor kube-*, default, the cluster DNS's, the GPU Operator's, "
        "Kueue's, KAI's, monitoring's, platformNamespaces' or pulumi-operator (a tenant holding one would run pods as "
        "its ServiceAccounts)",
    )
    cluster_network: ClusterNetwork = Field(ClusterNetwork(), description="the cluster's address ranges and API server endpoints")
    kubernetes_version: Optional[Annotated[str, Field(pattern=r"^v1\.[0-9]+$")]] = Field(
        None, description="minor version of the target cluster, e.g. v1.37 (validate warns about an older podSecurity.version pin)"
    )
    ingress_domain: Optional[DnsSubdomain] = Field(
        None, description="tenants' Ingresses may serve <tenant>.<ingressDomain> and its subdomains (plus their network.ingressHosts)"
    )
    ingress_hosts: Optional[IngressHostGrants] = Field(
        None,
        description="the hosts outside ingressDomain tenants may claim in network.ingressHosts; unset: any host no other "
        "tenant claims (validate warns at each such claim)",
    )
    guard_rails: GuardRails = Field(default_factory=GuardRails, description="quota keys every namespace gets: object counts, storage and ephemeral storage")
    tenant_access: TenantAccessSettings = Field(TenantAccessSettings(), description="what tenant members may see and bind")
    images: ImagePolicy = Field(ImagePolicy(), description="image registries tenants may pull from, and whether digests are required")
    gpu_classes: dict[DnsLabel, GpuClass] = {}
    gpu_sharing: GpuSharing = Field(GpuSharing(), description="what the stack accepts about GPUs shared between tenants")
    device_classes: dict[DnsSubdomain, DeviceClassSpec] = Field(
        {},
        description="DRA DeviceClasses of the cluster: those this tool creates and those DRA drivers install; each is "
        "in every tenant's quota at its gpuClass grant or 0 (a DeviceClass not listed here is not metered at all)",
    )
    node_pools: dict[DnsLabel, NodePool] = {}
    mig_layouts: dict[Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")], list[MigDeviceGroup]] = Field(
        {}, description="custom MIG layouts; `all-<profile>` names are built in"
    )
    priority_classes: dict[DnsLabel, PriorityClassSpec] = Field(
        default_factory=_default_priority_classes,
        description="PriorityClasses of the cluster; tenants are capped per class (quota.priorityClasses)",
    )
    limit_range_defaults: LimitRangeSpec = Field(
        default_factory=_default_limit_range, description="LimitRange values for tenants that do not set their own"
    )
    cpu_memory_capacity: dict[Literal["cpu", "memory"], str] = Field(
        {}, description="optional cluster cpu/memory for the capacity report"
    )
    capacity_warning_ratio: Annotated[Decimal, Field(gt=0, le=1)] = Field(
        Decimal("0.9"), description="warn when a class's quotas reach this share of capacity x overcommit"
    )
    tenants: Union[Literal["all"], list[DnsLabel]] = Field("all", description="tenants enabled in this environment")
    tenants_left_out: Union[Literal["others"], list[DnsLabel]] = Field(
        [],
        description="tenants this stack leaves out on purpose, or `others` for every tenant that `tenants` does not "
        "list: validate says so in one line instead of a warning for each (so --strict can pass)",
    )
    sharding: Optional[Sharding] = Field(
        None,
        description="split the tenants across shard stacks `<env>.<shard>` (this stack keeps the platform objects), "
        "so that a change previews only the stacks it touches; unset: this stack holds everything",
    )
    scheduler: Literal["none", "kueue", "kai"] = Field(
        "none", description="queueing scheduler for per-class GPU quotas and borrowing; none: ResourceQuota only"
    )
    queues: QueueSettings = QueueSettings()
    vcluster: VClusterPlatform = VClusterPlatform()
    gpu_operator: GpuOperator = GpuOperator()
    role_bundles: dict[DnsLabel, RoleBundle] = Field(
        {},
        description="named RBAC rule bundles tenants may add to a role (access.<role>.bundles), besides the shipped "
        "ones (kubeflow-notebooks, kubeflow-pipelines, ray, kserve, leaderworkersets, pod-disruption-budgets, leases; "
        "an entry of the same name replaces one); never RBAC, quota, LimitRange, NetworkPolicy, namespace writes or wildcards",
    )
    monitoring: Optional[Monitoring] = Field(
        None, description="per-tenant GPU monitoring (PrometheusRule, Grafana dashboards); off when absent"
    )

    @model_validator(mode="after")
    def _device_classes_match_gpu_classes(self) -> "Platform":
        if self.device_classes and self.kubernetes_version is not None and int(self.kubernetes_version.split(".")[1]) < 34:
            raise ValueError(f"deviceClasses need resource.k8s.io/v1 (Kubernetes v1.34 or newer); kubernetesVersion is {self.kubernetes_version}")
        for name, device_class in self.device_classes.items():
            gpu_class = self.gpu_classes.get(device_class.gpu_class) if device_class.gpu_class else None
            if device_class.gpu_class is None:
                continue
            if gpu_class is None:
                raise ValueError(f"deviceClasses.{name}.gpuClass '{device_class.gpu_class}' is not a key of gpuClasses ({', '.join(sorted(self.gpu_classes)) or 'none'})")
            if gpu_class.serving == "devicePlugin":
                raise ValueError(f"deviceClasses.{name} meters gpuClasses.{device_class.gpu_class}, which is served by the device plugin only; set its `serving: dra` or `both`")
        for class_name, gpu_class in self.gpu_classes.items():
            if gpu_class.serving == "devicePlugin":
                continue
            if gpu_class.sharing not in ("exclusive",):
                raise ValueError(f"gpuClasses.{class_name}: serving '{gpu_class.serving}' needs sharing 'exclusive' (a DRA driver's own sharing is not modelled yet)")
            served_by = {n: d for n, d in self.device_classes.items() if d.gpu_class == class_name}
            if not served_by:
                raise ValueError(f"gpuClasses.{class_name} is served by DRA but no deviceClasses entry has `gpuClass: {class_name}`")
            plugin_resource = "nvidia.com/gpu"
            for name, device_class in served_by.items():
                if gpu_class.serving == "both" and device_class.extended_resource_name != plugin_resource:
                    raise ValueError(
                        f"deviceClasses.{name}: gpuClasses.{class_name} is served by both the device plugin and DRA, so the "
                        f"DeviceClass must set `extendedResourceName: {plugin_resource}`; otherwise device-plugin GPUs and "
                        "ResourceClaims would each get the whole grant (twice the GPUs)"
                    )
        return self

    def leaves_out_on_purpose(self, tenant: str) -> bool:
        """Whether the stack's `tenantsLeftOut` names the tenant (or is `others` and `tenants` does not list it).

        >>> Platform(labelDomain="g.dev", tenants=["a"], tenantsLeftOut="others").leaves_out_on_purpose("b")
        True
        """
        if self.tenants_left_out == "others":
            return self.tenants != "all" and tenant not in self.tenants
        return tenant in self.tenants_left_out

    @property
    def kai_memory_bound(self) -> str:
        """`hamicore` when a class declares memory-bounded KAI fractions, else `none`.

        >>> Platform(labelDomain="g.dev").kai_memory_bound
        'none'
        """
        return next((c.kai_fractions.memory_bound for c in self.gpu_classes.values() if c.kai_fractions), "none")

    @model_validator(mode="after")
    def _monitoring_matches_scheduler(self) -> "Platform":
        if self.monitoring is None:
            return self
        for exporter in ("kueue", "kai"):
            if exporter in (self.monitoring.exporters or []) and self.scheduler != exporter:
                raise ValueError(
                    f"monitoring.exporters lists {exporter} but scheduler is '{self.scheduler}'; "
                    f"remove {exporter} from monitoring.exporters or set `scheduler: {exporter}`"
                )
        return self


class StackConfig(Model):
    """A whole `Pulumi.<env>.yaml`: provider settings plus our `gpu-tenancy:platform` object."""

    model_config = {"extra": "allow"}
    config: dict[str, object]
