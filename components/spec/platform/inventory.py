"""The GPU inventory of a stack: GPU classes and how their GPUs are shared, DRA DeviceClasses,
node pools, MIG layouts, and where the NVIDIA GPU Operator runs (`Platform.gpuClasses`,
`deviceClasses`, `nodePools`, `migLayouts`, `gpuSharing`, `gpuOperator`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Literal, Optional, Union

from pydantic import Field, model_validator

from ..base import DnsLabel, DnsSubdomain, LabelValue, Model, NonNegativeInt


# A static node's taint patch is registered under its label patch's Pulumi name plus this
# (resources/kubernetes.py `logical_name`), so a node may not be named like another node plus it
# (validate/platform.py).
TAINT_PATCH_SUFFIX = "-taints"


@dataclass(frozen=True)
class GpuStackRole:
    """What one `platform.gpuStack` means for the rest of the stack: the single table of its consequences."""

    servings: frozenset[str]      # the `gpuClasses.<c>.serving` values that can work on this stack
    quota_keys: str               # what a tenant's GPU grant is metered under
    kueue: str                    # what the Kueue ClusterQueues count for a class
    pools_key_on: str             # how a node pool's GPUs are told apart
    mig_config_label: bool        # the MIG Manager runs and reads nodes' nvidia.com/mig.config label
    gfd_labels: bool              # GPU Feature Discovery labels nodes (nvidia.com/gpu.product)


# The GPU Operator's two stacks and the migration between them (docs/gpu-sharing.md, The cutover).
GPU_STACKS: dict[str, GpuStackRole] = {
    "devicePlugin": GpuStackRole(
        frozenset({"devicePlugin"}), "requests.nvidia.com/gpu (nvidia.com/mig-<profile> for MIG classes)",
        "one ResourceFlavor per class counting nvidia.com/gpu", "node labels: nvidia.com/gpu.product and the pool label", True, True),
    "both": GpuStackRole(
        frozenset({"devicePlugin", "dra", "both"}), "requests.nvidia.com/gpu and <deviceclass>.deviceclass.resource.kubernetes.io/devices",
        "nvidia.com/gpu flavors for plugin classes, deviceClassMappings for DRA classes", "node labels, or ResourceSlice attributes for classes with `devices`", True, True),
    "dra": GpuStackRole(
        frozenset({"dra"}), "<deviceclass>.deviceclass.resource.kubernetes.io/devices only",
        "deviceClassMappings only: no nvidia.com/gpu flavor", "ResourceSlice attributes (`devices`) and the pool label", False, False),
}


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


class DraDevices(Model):
    """The devices of a GPU class as its DRA driver publishes them in ResourceSlices: what the class's
    generated DeviceClass selects (no node label involved, so no GPU Feature Discovery needed)."""

    driver: DnsSubdomain = Field("gpu.nvidia.com", description="the DRA driver publishing the devices (ResourceSlice spec.driver)")
    product_name: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[^'\\]+$")] = Field(
        description="the driver's `productName` attribute, e.g. NVIDIA B200 (as `nvidia-smi --query-gpu=name` prints it)"
    )
    device_type: Optional[Annotated[str, Field(pattern=r"^[a-z0-9-]+$")]] = Field(
        "gpu", description="the driver's `type` attribute (the NVIDIA driver: gpu, mig); keeps MIG devices of the same product out; null: not checked"
    )
    min_memory: Optional[Annotated[str, Field(pattern=r"^[0-9]+(Mi|Gi|M|G)$")]] = Field(
        None,
        description="least `memory` capacity a device must publish, e.g. 170Gi; the driver publishes the device's real "
        "total, a little below the nominal `memory` (so that is not used); unset: not checked",
    )

    @property
    def selector(self) -> str:
        """The CEL device selector of these attributes (beside the DeviceClass's `device.driver` check).

        >>> DraDevices(productName="NVIDIA B200", minMemory="170Gi").selector   # doctest: +NORMALIZE_WHITESPACE
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200' && device.attributes['gpu.nvidia.com'].type == 'gpu'
         && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('170Gi')) >= 0"
        """
        # The pattern of each value keeps quotes and backslashes out, so the literals need no escaping.
        clauses = [f"device.attributes['{self.driver}'].productName == '{self.product_name}'"]
        if self.device_type is not None:
            clauses.append(f"device.attributes['{self.driver}'].type == '{self.device_type}'")
        if self.min_memory is not None:
            clauses.append(f"device.capacity['{self.driver}'].memory.compareTo(quantity('{self.min_memory}')) >= 0")
        return " && ".join(clauses)

    def mig_selector(self, profile: str) -> str:
        """The CEL selector of the MIG devices of one profile the driver publishes for these GPUs
        (`type: mig`, its `profile` attribute, the parent's `productName`).

        >>> DraDevices(productName="NVIDIA A100-SXM4-40GB").mig_selector("1g.5gb")   # doctest: +NORMALIZE_WHITESPACE
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB' && device.attributes['gpu.nvidia.com'].type == 'mig'
         && device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
        """
        attributes = f"device.attributes['{self.driver}']"
        return f"{attributes}.productName == '{self.product_name}' && {attributes}.type == 'mig' && {attributes}.profile == '{profile}'"


class GpuClass(Model):
    """A kind of GPU device as tenants see it: model plus how it is shared."""

    model: str = Field(description="GPU model, e.g. H100-80GB (a key of the MIG geometry table for MIG classes)")
    product: Optional[LabelValue] = Field(
        None,
        description="GPU Feature Discovery label nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3; required unless the "
        "class is served by DRA alone with `devices` (the GPU Operator's DRA stack runs no GPU Feature Discovery)",
    )
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
    devices: Optional[DraDevices] = Field(
        None,
        description="DRA classes: the ResourceSlice attributes of the class's devices; the tool then generates the "
        "DeviceClass <class>.<labelDomain> selecting them (unless a deviceClasses entry names this class), and fills "
        "in the selector of entries that name the class and set none",
    )
    description: str = Field("", description="what the class is for, shown to tenants")

    @model_validator(mode="after")
    def _sharing_settings(self) -> "GpuClass":
        if self.product is None and not (self.serving == "dra" and self.devices is not None):
            raise ValueError("`product` (the nvidia.com/gpu.product label) is required unless `serving: dra` with `devices` "
                             "(the ResourceSlice attributes of the class's devices)")
        if self.devices is not None and self.serving == "devicePlugin":
            raise ValueError("`devices` describes DRA devices, but serving is 'devicePlugin'; set `serving: dra` or `both`, or remove it")
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


MigProfileName = Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb(\+me)?$")]

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
    mig_profile: Optional[MigProfileName] = Field(
        None,
        description="MIG through DRA: the class holds the MIG devices of this profile (the driver's `profile` attribute) "
        "of its gpuClass, a `sharing: mig` class served by DRA, and meters the tenant's quota.mig.<profile> instead of "
        "its quota.gpu; generated per profile of the class's pool layouts when the class has `devices`",
    )
    description: str = Field("", description="what the class is for")

    @model_validator(mode="after")
    def _owner_fields(self) -> "DeviceClassSpec":
        if self.owner == "tool" and self.driver is None:
            raise ValueError("a tool-owned DeviceClass needs `driver` (the DRA driver whose devices it selects, e.g. gpu.nvidia.com)")
        if self.owner == "driver" and (self.driver is not None or self.selector is not None):
            raise ValueError("`driver` and `selector` describe a DeviceClass this tool creates; the driver writes its own (remove them, or set `owner: tool`)")
        if self.mig_profile is not None and self.gpu_class is None:
            raise ValueError("`migProfile` says which MIG devices of a GPU class the DeviceClass holds: it needs `gpuClass`")
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
    min_nodes: Optional[NonNegativeInt] = Field(
        None,
        description="autoscaled pools: nodes the group always keeps (its minimum size); unset: 0. Quotas may promise up "
        "to `maxNodes`; validate warns when they need nodes beyond the static ones and `minNodes`, which may not be there yet",
    )
    patch_taints: Optional[bool] = Field(
        None,
        description="patch the pool's taint onto its static nodes (a dedicated pool: <labelDomain>/tenant=<tenant>; "
        "a shared pool, MIG included: nvidia.com/gpu=present), in a patch of its own beside the forced label patch, "
        "never forced (spec.taints is one atomic list); unset: yes; set false only if the nodes register with the taint themselves",
    )
    mig_layout: Optional[str] = Field(None, description="MIG layout of every GPU in the pool (MIG classes)")
    autoscaler: Optional[Literal["karpenter", "cluster-autoscaler"]] = Field(
        None,
        description="autoscaled pools: what creates the group's nodes. validate, render (`_node-groups.yaml`) and the "
        "stack output then give the fragment to copy into its definition: for karpenter the NodePool's "
        "`spec.template` labels and taints, for cluster-autoscaler the node-template tags it reads to scale the "
        "group from zero (labels, taints, GPU resources; the AWS Auto Scaling group form)",
    )
    description: str = Field("", description="what the pool is for")

    @property
    def node_count(self) -> int:
        """Nodes the pool may have: its static nodes plus the most its autoscaled group may add (what quotas may promise)."""
        return len(self.nodes) + (self.max_nodes or 0)

    @property
    def present_node_count(self) -> int:
        """Nodes the pool always has: its static nodes plus its group's `minNodes` (0 when unset).

        >>> NodePool(gpuClass="l4", gpusPerNode=2, nodes=["n1"], nodeSelector={"pool": "l4"}, maxNodes=3).present_node_count
        1
        """
        return len(self.nodes) + (self.min_nodes or 0)

    @model_validator(mode="after")
    def _has_nodes(self) -> "NodePool":
        if not self.nodes and self.max_nodes is None:
            raise ValueError("a pool needs static `nodes` or `maxNodes` for an autoscaled group")
        if self.max_nodes is not None and not self.node_selector:
            raise ValueError("an autoscaled pool (`maxNodes`) needs `nodeSelector` labels of its node group")
        if self.min_nodes is not None and (self.max_nodes is None or self.min_nodes > self.max_nodes):
            raise ValueError("`minNodes` is the least size of an autoscaled group: it needs `maxNodes`, and at most as many nodes")
        if self.autoscaler is not None and self.max_nodes is None:
            raise ValueError("`autoscaler` names what grows an autoscaled group: it needs `maxNodes` (static nodes are patched instead)")
        return self


class MigDeviceGroup(Model):
    """MIG devices for some or all GPUs of a node (the mig-parted `mig-devices` entry)."""

    devices: Union[Literal["all"], list[Annotated[int, Field(ge=0, le=63)]]] = Field("all", description="GPU indexes on the node, or all; GPUs no group covers keep MIG disabled")
    profiles: dict[Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb(\+me)?$")], Annotated[int, Field(ge=1)]] = Field(description="MIG instances per GPU, e.g. {3g.40gb: 2}; checked against the GPU's geometry")


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
