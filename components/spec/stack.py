"""The per-environment cluster inventory, read from `stacks/Pulumi.<env>.yaml`.

It lives under the Pulumi config key `gpu-tenancy:platform`, so `pulumi up` (through
`pulumi.Config().require_object("platform")`) and the offline tools read the same file.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Optional, Union

from pydantic import Field, model_validator

from .base import DnsLabel, DnsSubdomain, LabelValue, Model, NonNegativeInt
from .tenant import LimitRangeSpec, PodSecurityLevel, PriorityCap, ResourceValues

CONFIG_KEY = "gpu-tenancy:platform"


class PodSecurity(Model):
    level: PodSecurityLevel = "baseline"
    version: Annotated[str, Field(pattern=r"^(latest|v1\.[0-9]+)$")] = "v1.30"


class TimeSlicing(Model):
    """GPU time-slicing: several pods take turns on one GPU. No memory or fault isolation between them."""

    replicas: Annotated[int, Field(ge=2, le=64)]
    rename_by_default: bool = Field(False, description="advertise the shares as nvidia.com/gpu.shared")
    fail_requests_greater_than_one: bool = True


class MigSharing(Model):
    """MIG partitions each GPU into isolated instances (own memory and compute slices)."""

    strategy: Literal["mixed", "single"] = "mixed"


class GpuClass(Model):
    """A kind of GPU device as tenants see it: model plus how it is shared."""

    model: str = Field(description="GPU model, e.g. H100-80GB (a key of the MIG geometry table for MIG classes)")
    product: LabelValue = Field(description="GPU Feature Discovery label nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3")
    memory: Annotated[str, Field(pattern=r"^[0-9]+(Gi|G)$")] = Field(description="GPU memory per device, e.g. 80Gi")
    sharing: Literal["exclusive", "mig", "timeSlicing"] = "exclusive"
    time_slicing: Optional[TimeSlicing] = None
    mig: Optional[MigSharing] = None
    overcommit: Annotated[Decimal, Field(ge=1, le=10)] = Field(
        Decimal(1), description="how far the sum of tenant quotas may exceed capacity (1 = not at all)"
    )
    description: str = ""

    @model_validator(mode="after")
    def _sharing_settings(self) -> "GpuClass":
        if self.sharing == "timeSlicing" and self.time_slicing is None:
            raise ValueError("sharing 'timeSlicing' needs `timeSlicing: {replicas: N}`")
        if self.sharing != "timeSlicing" and self.time_slicing is not None:
            raise ValueError(f"`timeSlicing` is set but sharing is '{self.sharing}'")
        if self.sharing == "mig" and self.mig is None:
            self.mig = MigSharing()
        if self.sharing != "mig" and self.mig is not None:
            raise ValueError(f"`mig` is set but sharing is '{self.sharing}'")
        return self


class NodePool(Model):
    """Nodes of one GPU class: static node names, and/or a selector for an autoscaled group."""

    gpu_class: DnsLabel
    gpus_per_node: Annotated[int, Field(ge=1, le=64)]
    nodes: list[DnsSubdomain] = Field([], description="static nodes; labelled by NodePatch")
    node_selector: dict[str, LabelValue] = Field(
        {}, description="labels that an autoscaled node group carries (its definition must set them)"
    )
    max_nodes: Optional[NonNegativeInt] = Field(None, description="capacity of an autoscaled pool, in nodes")
    patch_taints: bool = Field(
        False,
        description="opt-in: patch taints onto static nodes (spec.taints is one atomic list; see docs)",
    )
    mig_layout: Optional[str] = Field(None, description="MIG layout of every GPU in the pool (MIG classes)")
    description: str = ""

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

    devices: Union[Literal["all"], list[Annotated[int, Field(ge=0, le=63)]]] = "all"
    profiles: dict[Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb(\+me)?$")], Annotated[int, Field(ge=1)]]


class PriorityClassSpec(Model):
    value: Annotated[int, Field(ge=-2147483648, le=1000000000)]
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    description: str = Field(min_length=1)
    global_default: bool = False
    default_tenant_cap: Optional[PriorityCap] = Field(
        None, description="cap for tenants that do not list this class (e.g. {pods: 0} to require a grant)"
    )


class ClusterDns(Model):
    namespace: DnsLabel = "kube-system"
    pod_labels: dict[str, LabelValue] = {"k8s-app": "kube-dns"}


def _default_priority_classes() -> dict[str, PriorityClassSpec]:
    return {
        "online-inference": PriorityClassSpec(
            value=100000,
            description="Online inference serving users; preempts lower classes. Tenants need a grant.",
            default_tenant_cap=PriorityCap(pods=0),
        ),
        "training": PriorityClassSpec(value=50000, description="Training and fine-tuning jobs."),
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


class VClusterPlatform(Model):
    chart_version: str = "0.36.1"
    repository: str = "https://charts.loft.sh"


class Platform(Model):
    """The cluster inventory and defaults of one environment (one Pulumi stack)."""

    environment: Optional[DnsLabel] = Field(None, description="defaults to the stack name")
    kube_context: Optional[str] = Field(None, description="kubeconfig context to deploy to (explicit provider)")
    protect_namespaces: bool = Field(False, description="Pulumi `protect` on every tenant namespace")
    label_domain: DnsSubdomain = Field(description="prefix of node labels and taints, e.g. gpu.example.com")
    pod_security: PodSecurity = PodSecurity()
    platform_admin_group: str = "platform-admins"
    platform_namespaces: dict[DnsLabel, list[DnsLabel]] = Field(
        {}, description="platform roles and their namespaces, e.g. {ingress: [ingress-nginx], monitoring: [monitoring]}"
    )
    cluster_dns: ClusterDns = ClusterDns()
    gpu_classes: dict[DnsLabel, GpuClass] = {}
    node_pools: dict[DnsLabel, NodePool] = {}
    mig_layouts: dict[Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")], list[MigDeviceGroup]] = Field(
        {}, description="custom MIG layouts; `all-<profile>` names are built in"
    )
    priority_classes: dict[DnsLabel, PriorityClassSpec] = Field(default_factory=_default_priority_classes)
    limit_range_defaults: LimitRangeSpec = Field(default_factory=_default_limit_range)
    cpu_memory_capacity: dict[Literal["cpu", "memory"], str] = Field(
        {}, description="optional cluster cpu/memory for the capacity report"
    )
    capacity_warning_ratio: Annotated[Decimal, Field(gt=0, le=1)] = Decimal("0.9")
    tenants: Union[Literal["all"], list[DnsLabel]] = Field("all", description="tenants enabled in this environment")
    scheduler: Literal["none", "kueue", "kai"] = "none"
    vcluster: VClusterPlatform = VClusterPlatform()


class StackConfig(Model):
    """A whole `Pulumi.<env>.yaml`: provider settings plus our `gpu-tenancy:platform` object."""

    model_config = {"extra": "allow"}
    config: dict[str, object]
