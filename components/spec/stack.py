"""The per-environment cluster inventory, read from `stacks/Pulumi.<env>.yaml`.

It lives under the Pulumi config key `gpu-tenancy:platform`, so `pulumi up` (through
`pulumi.Config().require_object("platform")`) and the offline tools read the same file.
`Platform` is the root; its parts are models of `spec/platform/` by concept (the GPU inventory,
scheduling and queues, the cluster network, admission, tenant access), re-exported here so that
`from components.spec.stack import GpuClass` keeps working.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Optional, Union

from pydantic import Field, model_validator

from .base import DnsLabel, DnsSubdomain, Model
from .monitoring import Monitoring
from .platform.access import ApiFairness, SystemName, SystemSubjects, TenantAccessSettings
from .platform.admission import (
    CUSTOM_RESOURCE_KINDS,
    DEFAULT_KIND_COUNTS,
    NGINX,
    AnnotationKey,
    EphemeralStorageGuardRail,
    GuardRails,
    ImagePolicy,
    IngressAnnotations,
    PodSecurity,
    ServiceAccountTokens,
)
from .platform.inventory import (
    GPU_STACKS,
    TAINT_PATCH_SUFFIX,
    DeviceClassSpec,
    DraDevices,
    ExtendedResourceName,
    GpuClass,
    GpuOperator,
    GpuSharing,
    GpuStackRole,
    KaiFractions,
    MigDeviceGroup,
    MigSharing,
    Mps,
    NodePool,
    TimeSlicing,
)
from .platform.network import ApiServer, Cidr, ClusterDns, ClusterNetwork, GrantedDomain, IngressHostGrants
from .platform.scheduling import (
    CohortSettings,
    KaiDepartment,
    KaiSettings,
    KueuePreemption,
    KueueSettings,
    PriorityClassSpec,
    QueueSettings,
    default_priority_classes,
)
from .role_bundles import RoleBundle
from .sharding import Sharding
from .tenant import LimitRangeSpec, Port, ResourceValues

# The models of spec/platform/ stay importable from here while code moves to the concept modules.
__all__ = [
    "CONFIG_KEY", "Platform", "StackConfig", "VClusterPlatform",
    "ApiFairness", "SystemName", "SystemSubjects", "TenantAccessSettings",
    "CUSTOM_RESOURCE_KINDS", "DEFAULT_KIND_COUNTS", "NGINX", "AnnotationKey", "EphemeralStorageGuardRail", "GuardRails",
    "ImagePolicy", "IngressAnnotations", "PodSecurity", "ServiceAccountTokens",
    "TAINT_PATCH_SUFFIX", "DeviceClassSpec", "DraDevices", "ExtendedResourceName", "GpuClass", "GpuOperator", "GpuSharing",
    "KaiFractions", "MigDeviceGroup", "MigSharing", "Mps", "NodePool", "TimeSlicing",
    "ApiServer", "Cidr", "ClusterDns", "ClusterNetwork", "GrantedDomain", "IngressHostGrants",
    "CohortSettings", "KaiDepartment", "KaiSettings", "KueuePreemption", "KueueSettings", "PriorityClassSpec", "QueueSettings",
]

CONFIG_KEY = "gpu-tenancy:platform"


def _default_limit_range() -> LimitRangeSpec:
    return LimitRangeSpec(
        default_request=ResourceValues(cpu="100m", memory="256Mi"),
        default=ResourceValues(cpu="1", memory="1Gi"),
    )


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
    api_fairness: ApiFairness = Field(
        ApiFairness(), description="tenants' namespaced writes in an API Priority and Fairness level of their own, queued per "
        "namespace, so one tenant's churn cannot starve the others or the platform (docs/security.md)")
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
        default_factory=default_priority_classes,
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
    gpu_stack: Optional[Literal["devicePlugin", "dra", "both"]] = Field(
        None,
        description="the GPU Operator's stack: devicePlugin (GPU Feature Discovery, device plugin, MIG Manager), dra "
        "(the NVIDIA DRA driver alone: no nvidia.com/gpu.product or nvidia.com/mig.config labels), or both during the "
        "cutover; decides which gpuClasses.<c>.serving can work (docs/gpu-sharing.md, The cutover); unset: "
        "devicePlugin, or both when a class is served by DRA",
    )
    role_bundles: dict[DnsLabel, RoleBundle] = Field(
        {},
        description="named RBAC rule bundles tenants may add to a role (access.<role>.bundles), besides the shipped "
        "ones (kubeflow-notebooks, kubeflow-pipelines, ray, kserve, leaderworkersets, pod-disruption-budgets, leases; "
        "an entry of the same name replaces one); never RBAC, quota, LimitRange, NetworkPolicy, namespace writes or wildcards",
    )
    monitoring: Optional[Monitoring] = Field(
        None, description="per-tenant GPU monitoring (PrometheusRule, Grafana dashboards); off when absent"
    )

    # First of the DRA checks below (pydantic runs after-validators in the order they are defined).
    @model_validator(mode="after")
    def _device_classes_from_devices(self) -> "Platform":
        """A class with `devices` gets its generated DeviceClass, or its selector in the entries naming it."""
        for class_name, gpu_class in sorted(self.gpu_classes.items()):
            if gpu_class.devices is None:
                continue
            if gpu_class.sharing == "mig":
                self._mig_device_classes(class_name, gpu_class.devices)
                continue
            selector = gpu_class.devices.selector
            named = {n: d for n, d in self.device_classes.items() if d.gpu_class == class_name}
            for device_class in named.values():
                if device_class.owner == "tool" and device_class.selector is None:
                    device_class.selector = selector
                    device_class.driver = device_class.driver or gpu_class.devices.driver
            if not named:
                self.device_classes[f"{class_name}.{self.label_domain}"] = DeviceClassSpec(
                    gpuClass=class_name, driver=gpu_class.devices.driver, selector=selector,
                    extendedResourceName="nvidia.com/gpu" if gpu_class.serving == "both" else None,
                    description=f"generated from gpuClasses.{class_name}.devices")
        return self

    def _mig_device_classes(self, class_name: str, devices: DraDevices) -> None:
        """MIG through DRA: a DeviceClass per profile of the class's pool layouts (`mig_device_class_name`),
        selecting the driver's MIG devices of that profile; entries naming the class and profile get the selector."""
        for profile in self.layout_profiles(class_name):
            named = [d for d in self.device_classes.values() if d.gpu_class == class_name and d.mig_profile == profile]
            for device_class in named:
                if device_class.owner == "tool" and device_class.selector is None:
                    device_class.selector = devices.mig_selector(profile)
                    device_class.driver = device_class.driver or devices.driver
            if not named:
                self.device_classes[mig_device_class_name(class_name, profile, self.label_domain)] = DeviceClassSpec(
                    gpuClass=class_name, driver=devices.driver, selector=devices.mig_selector(profile), migProfile=profile,
                    description=f"generated from gpuClasses.{class_name}.devices: its {profile} MIG devices")

    def layout_profiles(self, class_name: str) -> list[str]:
        """The MIG profiles the layouts of the class's pools name (`all-<profile>` included), sorted.

        >>> Platform(labelDomain="g.dev", nodePools={"p": {"gpuClass": "a", "gpusPerNode": 1, "nodes": ["n"],
        ...     "migLayout": "all-1g.10gb"}}).layout_profiles("a")
        ['1g.10gb']
        """
        profiles: set[str] = set()
        for pool in self.node_pools.values():
            if pool.gpu_class != class_name or pool.mig_layout is None:
                continue
            if pool.mig_layout in self.mig_layouts:
                profiles |= {p for group in self.mig_layouts[pool.mig_layout] for p in group.profiles}
            elif pool.mig_layout.startswith("all-"):
                profiles.add(pool.mig_layout.removeprefix("all-"))
        return sorted(profiles)

    @model_validator(mode="after")
    def _device_classes_match_gpu_classes(self) -> "Platform":
        if self.device_classes and self.kubernetes_version is not None and int(self.kubernetes_version.split(".")[1]) < 34:
            raise ValueError(f"deviceClasses need resource.k8s.io/v1 (Kubernetes v1.34 or newer); kubernetesVersion is {self.kubernetes_version}")
        for name, device_class in self.device_classes.items():
            gpu_class = self.gpu_classes.get(device_class.gpu_class) if device_class.gpu_class else None
            if device_class.gpu_class is None:
                continue
            if gpu_class is None:
                raise ValueError(f"deviceClasses.{name}.gpuClass: '{device_class.gpu_class}' is not a key of gpuClasses; name one of: {', '.join(sorted(self.gpu_classes)) or 'none'}")
            if gpu_class.serving == "devicePlugin":
                raise ValueError(f"deviceClasses.{name} meters gpuClasses.{device_class.gpu_class}, which is served by the device plugin only; set its `serving: dra` or `both`")
        return self

    # After the check above: pydantic runs a model's after-validators in the order they are defined.
    @model_validator(mode="after")
    def _dra_classes_have_device_classes(self) -> "Platform":
        plugin_resource = "nvidia.com/gpu"
        for class_name, gpu_class in self.gpu_classes.items():
            if gpu_class.serving == "devicePlugin":
                continue
            if gpu_class.sharing == "mps":
                raise ValueError(f"gpuClasses.{class_name}: MPS and the DRA driver's ConsumableShares cannot both share one device; "
                                 "keep `serving: devicePlugin` for MPS, or set `sharing: exclusive` and let DRA share it")
            if gpu_class.sharing == "mig":
                _check_mig_through_dra(class_name, gpu_class)
            elif gpu_class.sharing != "exclusive":
                raise ValueError(f"gpuClasses.{class_name}: serving '{gpu_class.serving}' needs sharing 'exclusive' or 'mig' (a DRA driver's own time-slicing is not modelled yet)")
            served_by = {n: d for n, d in self.device_classes.items() if d.gpu_class == class_name}
            if not served_by:
                raise ValueError(f"gpuClasses.{class_name} is served by DRA but no deviceClasses entry has `gpuClass: {class_name}`")
            for name, device_class in served_by.items():
                if gpu_class.serving == "both" and device_class.extended_resource_name != plugin_resource:
                    raise ValueError(
                        f"deviceClasses.{name}: gpuClasses.{class_name} is served by both the device plugin and DRA, so the "
                        f"DeviceClass must set `extendedResourceName: {plugin_resource}`; otherwise device-plugin GPUs and "
                        "ResourceClaims would each get the whole grant (twice the GPUs)"
                    )
        return self

    @property
    def effective_gpu_stack(self) -> str:
        """`gpuStack`, or when unset `devicePlugin`, or `both` when a class is served by DRA.

        >>> Platform(labelDomain="g.dev").effective_gpu_stack
        'devicePlugin'
        """
        if self.gpu_stack is not None:
            return self.gpu_stack
        return "both" if any(c.serving != "devicePlugin" for c in self.gpu_classes.values()) else "devicePlugin"

    @property
    def gpu_stack_role(self) -> GpuStackRole:
        """The consequences of the stack's GPU stack (`GPU_STACKS`).

        >>> Platform(labelDomain="g.dev", gpuStack="dra").gpu_stack_role.mig_config_label
        False
        """
        return GPU_STACKS[self.effective_gpu_stack]

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


def mig_device_class_name(class_name: str, profile: str, label_domain: str) -> str:
    """The generated DeviceClass of one MIG profile of a class served by DRA (`+` of a profile as `.`).

    >>> mig_device_class_name("a100-mig", "1g.10gb+me", "gpu.example.com")
    'a100-mig-1g.10gb.me.gpu.example.com'
    """
    return f"{class_name}-{profile.replace('+', '.')}.{label_domain}"


def _check_mig_through_dra(class_name: str, gpu_class: GpuClass) -> None:
    """MIG through DRA: the driver publishes each profile's devices (no device plugin, no strategy), found by attributes."""
    if gpu_class.serving != "dra" or gpu_class.devices is None:
        raise ValueError(f"gpuClasses.{class_name}: MIG through DRA needs `serving: dra` and `devices` (the ResourceSlice "
                         "attributes of its GPUs); one class is partitioned by the MIG Manager or by the DRA driver, not both")
    if gpu_class.mig is not None and gpu_class.mig.strategy != "mixed":
        raise ValueError(f"gpuClasses.{class_name}: the MIG strategy is the device plugin's; MIG through DRA has a "
                         "DeviceClass per profile (strategy: mixed, the default)")


class StackConfig(Model):
    """A whole `Pulumi.<env>.yaml`: provider settings plus our `gpu-tenancy:platform` object."""

    model_config = {"extra": "allow"}
    config: dict[str, object]
