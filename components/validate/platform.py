"""Checks of one stack's inventory: references between GPU classes, pools and MIG layouts, the
PriorityClasses and the Pod Security pin; one small validator per concern, run by `check_platform`."""

from __future__ import annotations

from ..fleet import gpu_capacity as cap
from ..fleet import mig
from ..fleet.ingress_hosts import at_or_below
from ..fleet.isolation import fraction_isolation, isolation_of, mode_of
from ..spec.hints import did_you_mean
from ..spec.problems import Problem
from ..spec.platform.inventory import TAINT_PATCH_SUFFIX
from ..spec.stack import CONFIG_KEY, Platform
from ..spec.yaml_source import SourceDocument, yaml_text


def platform_path(*parts) -> tuple:
    """Where a setting of the stack's `gpu-tenancy:platform` config is, for `doc.problem`.

    >>> platform_path("nodePools", "h100-train")
    ('config', 'gpu-tenancy:platform', 'nodePools', 'h100-train')
    """
    return ("config", CONFIG_KEY, *parts)


def node_pools_are_consistent(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """Each pool names a known GPU class and a MIG layout exactly when the class is MIG-shared; a
    node is in one pool; static nodes the tool does not taint are pointed out.

    >>> node_pools_are_consistent(prod.platform, prod.platform_doc), node_pools_are_consistent(staging.platform, staging.platform_doc)
    ([], [])
    """
    problems: list[Problem] = []
    node_owner: dict[str, str] = {}
    every_node = {node for pool in platform.node_pools.values() for node in pool.nodes}
    for pool_name, pool in sorted(platform.node_pools.items()):
        where = platform_path("nodePools", pool_name)
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        if gpu_class is None:
            problems.append(doc.problem(where + ("gpuClass",), f"unknown GPU class '{pool.gpu_class}'{did_you_mean(pool.gpu_class, platform.gpu_classes)}"))
            continue
        for index, node in enumerate(pool.nodes):
            if node in node_owner:
                problems.append(doc.problem(where + ("nodes", index), f"node '{node}' is already in pool '{node_owner[node]}'; a node belongs to one pool: remove it from one of them"))
            node_owner.setdefault(node, pool_name)
        for index, node in enumerate(pool.nodes):
            base = node.removesuffix(TAINT_PATCH_SUFFIX)
            if base != node and base in every_node:
                problems.append(doc.problem(where + ("nodes", index), (
                    f"node '{node}' has the Pulumi name of node '{base}''s taint patch (its name plus "
                    f"'{TAINT_PATCH_SUFFIX}'): the two would be one resource; rename one of the nodes in this list")))
        if pool.patch_taints is False and pool.nodes:
            problems.append(doc.problem(where + ("patchTaints",), "static nodes are not tainted here: if the pool is dedicated to a tenant, its nodes must register with the taint "
                                        f"{platform.label_domain}/tenant=<tenant>:NoSchedule themselves, or pods that select no node can land on them; "
                                        "if it is shared, with nvidia.com/gpu=present:NoSchedule, or CPU-only pods can fill them and strand their GPUs", severity="warning"))
        if mode_of(gpu_class).partitions_gpus:
            problems.extend(_check_pool_layout(platform, doc, pool_name))
        elif pool.mig_layout is not None:
            problems.append(doc.problem(where + ("migLayout",), f"pool's GPU class '{pool.gpu_class}' is not shared by MIG (sharing: {gpu_class.sharing}); remove migLayout or use a MIG class"))
    return problems


def mig_layouts_do_not_overlap(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """In a named MIG layout, each GPU index is in one group, and `devices: all` stands alone.

    >>> mig_layouts_do_not_overlap(prod.platform, prod.platform_doc), mig_layouts_do_not_overlap(staging.platform, staging.platform_doc)
    ([], [])
    """
    problems: list[Problem] = []
    for name, layout in sorted(platform.mig_layouts.items()):
        seen: set[int] = set()
        for index, group in enumerate(layout):
            if group.devices == "all" and len(layout) > 1:
                problems.append(doc.problem(platform_path("migLayouts", name, index, "devices"), "`devices: all` cannot be combined with other groups in the same layout"))
            elif group.devices != "all":
                overlap = seen & set(group.devices)
                if overlap:
                    problems.append(doc.problem(platform_path("migLayouts", name, index, "devices"), f"GPU index(es) {yaml_text(sorted(overlap))} appear in two groups"))
                seen |= set(group.devices)
    return problems


def one_default_priority_class(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """At most one PriorityClass is the cluster's globalDefault.

    >>> one_default_priority_class(prod.platform, prod.platform_doc), one_default_priority_class(staging.platform, staging.platform_doc)
    ([], [])
    """
    if sum(1 for pc in platform.priority_classes.values() if pc.global_default) > 1:
        return [doc.problem(platform_path("priorityClasses"), "at most one PriorityClass may be globalDefault")]
    return []


# The Pod Security version the tool is tested against (tools/versions.env); a pin below the cluster
# misses the checks added since (e.g. baseline refuses probe and lifecycle `host` from v1.34).
TESTED_KUBERNETES_MINOR = 37


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def pod_security_is_current(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """The Pod Security version the stack pins must not be older than the cluster's (warning).

    >>> pod_security_is_current(prod.platform, prod.platform_doc), pod_security_is_current(staging.platform, staging.platform_doc)
    ([], [])
    """
    pinned = platform.pod_security.version
    if pinned == "latest":
        return []
    cluster = platform.kubernetes_version
    floor = _minor(cluster) if cluster else TESTED_KUBERNETES_MINOR
    if _minor(pinned) >= floor:
        return []
    against = f"the cluster ({cluster})" if cluster else f"v1.{TESTED_KUBERNETES_MINOR} (set kubernetesVersion to compare with the cluster)"
    return [doc.problem(
        platform_path("podSecurity", "version"),
        f"Pod Security is pinned to {pinned}, older than {against}: pods pass checks added since (e.g. the probe "
        "and lifecycle `host` field, baseline from v1.34); use latest or the cluster's version",
        severity="warning",
    )]


def memory_bound_acknowledgements_are_needed(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """`gpuSharing.acknowledgeNoMemoryBound` names GPU classes, and only classes whose shared GPUs bound no pod's memory.

    >>> memory_bound_acknowledgements_are_needed(dev.platform, dev.platform_doc)
    []
    >>> from components.spec.platform.inventory import GpuSharing
    >>> p = prod.platform.model_copy(update={"gpu_sharing": GpuSharing(acknowledgeNoMemoryBound=["a100-mig", "h10"])})
    >>> [x.message for x in memory_bound_acknowledgements_are_needed(p, prod.platform_doc)]  # doctest: +NORMALIZE_WHITESPACE
    ["GPU class 'a100-mig' is shared by MIG, which bounds each pod's GPU memory: there is nothing to acknowledge;
      remove it from the list", "unknown GPU class 'h10'; did you mean 'h100'?"]
    """
    problems: list[Problem] = []
    for index, name in enumerate(platform.gpu_sharing.acknowledge_no_memory_bound):
        where = platform_path("gpuSharing", "acknowledgeNoMemoryBound", index)
        gpu_class = platform.gpu_classes.get(name)
        if gpu_class is None:
            problems.append(doc.problem(where, f"unknown GPU class '{name}'{did_you_mean(name, platform.gpu_classes)}"))
            continue
        isolation = fraction_isolation(gpu_class) or isolation_of(gpu_class)
        if isolation.shares_a_gpu and not isolation.bounds_memory:
            continue
        why = (
            f"is shared by {isolation.mode}, which bounds each pod's GPU memory"
            if isolation.shares_a_gpu
            else f"is {isolation.mode}: no two pods share one of its GPUs"
        )
        problems.append(doc.problem(where, f"GPU class '{name}' {why}: there is nothing to acknowledge; remove it from the list", severity="warning"))
    return problems


def kai_fractions_have_kai_and_one_memory_bound(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """`kaiFractions` needs `scheduler: kai`, and says one `memoryBound` for every class: KAI's
    `hamicore` binder plugin is on or off for the whole cluster, so a class cannot differ.

    >>> kai_fractions_have_kai_and_one_memory_bound(staging.platform, staging.platform_doc)
    []
    >>> p = staging.platform.model_copy(update={"scheduler": "kueue"})
    >>> [x.message for x in kai_fractions_have_kai_and_one_memory_bound(p, staging.platform_doc)]
    ["kaiFractions needs `scheduler: kai` (scheduler is 'kueue'): only KAI places pods by gpu-fraction; remove it or set `scheduler: kai`"]
    """
    declared = {name: c.kai_fractions.memory_bound for name, c in sorted(platform.gpu_classes.items()) if c.kai_fractions}
    problems: list[Problem] = []
    if declared and platform.scheduler != "kai":
        for name in declared:
            problems.append(doc.problem(platform_path("gpuClasses", name, "kaiFractions"), (
                f"kaiFractions needs `scheduler: kai` (scheduler is '{platform.scheduler}'): only KAI places pods by "
                "gpu-fraction; remove it or set `scheduler: kai`")))
    if len(set(declared.values())) > 1:
        said = ", ".join(f"{n}: {b}" for n, b in declared.items())
        for name, bound in declared.items():
            if bound != "hamicore":
                continue
            problems.append(doc.problem(platform_path("gpuClasses", name, "kaiFractions", "memoryBound"), (
                f"kaiFractions.memoryBound must be the same for every class (KAI's hamicore binder plugin is on or off "
                f"for the whole cluster, so it would bound the others' shares too); got {said}: set the same value on each")))
    return problems


def _check_pool_layout(platform: Platform, doc: SourceDocument, pool_name: str) -> list[Problem]:
    pool = platform.node_pools[pool_name]
    gpu_class = platform.gpu_classes[pool.gpu_class]
    where = platform_path("nodePools", pool_name, "migLayout")
    if pool.mig_layout is None:
        return [doc.problem(platform_path("nodePools", pool_name), f"pool of MIG class '{pool.gpu_class}' needs `migLayout` (a name from migLayouts, or all-<profile>)")]
    if gpu_class.model not in mig.geometry():
        return [doc.problem(platform_path("gpuClasses", pool.gpu_class, "model"), f"GPU model '{gpu_class.model}' does not support MIG{did_you_mean(gpu_class.model, mig.geometry())}")]
    if pool.mig_layout in platform.mig_layouts:
        groups = platform.mig_layouts[pool.mig_layout]
        problems = []
        for index, group in enumerate(groups):
            for reason in mig.layout_problems(gpu_class.model, group.profiles):
                problems.append(doc.problem(platform_path("migLayouts", pool.mig_layout, index, "profiles"), f"invalid for pool '{pool_name}' ({gpu_class.model}): {reason}{_counters(gpu_class)}"))
            if group.devices != "all":
                beyond = [d for d in group.devices if d >= pool.gpus_per_node]
                if beyond:
                    problems.append(doc.problem(platform_path("migLayouts", pool.mig_layout, index, "devices"), f"GPU index(es) {yaml_text(beyond)} do not exist on pool '{pool_name}' ({pool.gpus_per_node} GPUs per node)"))
        if gpu_class.mig and gpu_class.mig.strategy == "single":
            profiles = {p for g in groups for p in g.profiles}
            if len(profiles) > 1:
                problems.append(doc.problem(where, f"the single MIG strategy needs one profile on every GPU; layout '{pool.mig_layout}' mixes {yaml_text(sorted(profiles))} (use strategy: mixed)"))
        return problems
    if mig.expand_named_layout(pool.mig_layout, gpu_class.model) is None:
        return [doc.problem(where, f"unknown MIG layout '{pool.mig_layout}': define it under migLayouts or use all-<profile> with a profile of {gpu_class.model} ({', '.join(mig.geometry()[gpu_class.model].profiles)})")]
    return []


def _counters(gpu_class) -> str:
    """What a layout beyond one GPU means when the DRA driver partitions it: more than its shared counters."""
    if gpu_class.serving != "dra":
        return ""
    return "; through DRA that is more than one GPU's shared counters (memory-slice-0..7, multiprocessors): the scheduler cannot allocate it"


def limit_range_defaults_within_guard_rails(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """`limitRangeDefaults` ephemeral-storage values no larger than `guardRails.ephemeralStorage.max`,
    the bound every tenant is held to.

    >>> limit_range_defaults_within_guard_rails(prod.platform, prod.platform_doc)
    []
    """
    problems: list[Problem] = []
    bound = platform.guard_rails.ephemeral_storage.max
    for part, key in (("default_request", "defaultRequest"), ("default", "default"), ("max", "max")):
        value = getattr(platform.limit_range_defaults, part).ephemeral_storage
        if value is not None and value > bound:
            problems.append(doc.problem(platform_path("limitRangeDefaults", key, "ephemeralStorage"),
                                        f"{value} is above guardRails.ephemeralStorage.max ({bound}), the bound of every tenant; "
                                        "lower it, or raise the guard rail"))
    return problems


def ingress_host_grants_have_one_tenant(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """A domain of `ingressHosts.tenantDomains` is granted to one tenant and lies outside the
    ingressDomain (whose names belong to the tenant of each name already).

    >>> ingress_host_grants_have_one_tenant(prod.platform, prod.platform_doc)
    []
    >>> from components.spec.platform.network import IngressHostGrants
    >>> twice = prod.platform.model_copy(update={"ingress_hosts": IngressHostGrants(tenantDomains={"a": ["x.acme.ai"], "b": ["x.acme.ai", "b.apps.acme.dev"]})})
    >>> [p.message.split(";")[0] for p in ingress_host_grants_have_one_tenant(twice, prod.platform_doc)]
    ["'x.acme.ai' is also granted to tenant 'b'", "'x.acme.ai' is also granted to tenant 'a'", "'b.apps.acme.dev' is under the stack's ingressDomain (apps.acme.dev)"]
    """
    grants = platform.ingress_hosts.tenant_domains if platform.ingress_hosts else {}
    holders: dict[str, list[str]] = {}
    for tenant, domains in grants.items():
        for domain in dict.fromkeys(domains):
            holders.setdefault(domain, []).append(tenant)
    problems: list[Problem] = []
    for tenant, domains in grants.items():
        for index, domain in enumerate(domains):
            where = platform_path("ingressHosts", "tenantDomains", tenant, index)
            others = [o for o in holders[domain] if o != tenant]
            if others:
                problems.append(doc.problem(where, (
                    f"'{domain}' is also granted to tenant {', '.join(repr(o) for o in others)}; a domain has one tenant "
                    "(grant a name below it to the other, the more specific grant wins there)")))
            if platform.ingress_domain and at_or_below(domain, platform.ingress_domain):
                problems.append(doc.problem(where, (
                    f"'{domain}' is under the stack's ingressDomain ({platform.ingress_domain}); names there belong to "
                    f"the tenant of each name (<tenant>.{platform.ingress_domain}) and cannot be granted to another")))
    return problems


def classes_fit_the_gpu_stack(platform: Platform, doc: SourceDocument) -> list[Problem]:
    r"""Every class is served the way `gpuStack` can serve it, and MIG classes keep their MIG Manager (`GPU_STACKS`).

    >>> from components.spec.yaml_source import parse_yaml
    >>> p = Platform(labelDomain="g.dev", gpuStack="dra", gpuClasses={"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi"}})
    >>> [x.message.split(" (")[0] for x in classes_fit_the_gpu_stack(p, parse_yaml("config: {}\n", "stacks/Pulumi.dev.yaml"))]
    ["serving 'devicePlugin' cannot work on gpuStack 'dra'"]
    """
    role, stack, problems = platform.gpu_stack_role, platform.effective_gpu_stack, []
    for name, gpu_class in sorted(platform.gpu_classes.items()):
        where = platform_path("gpuClasses", name)
        if gpu_class.serving not in role.servings:
            fix = ("give it `devices` (its ResourceSlice attributes) and `serving: dra`, or keep `gpuStack: both` until it has them"
                   if stack == "dra" else "set `gpuStack: both` while the DRA driver runs beside the device plugin")
            field = "product" if gpu_class.serving == "devicePlugin" and gpu_class.product else "serving"
            problems.append(doc.problem(where + (field,), f"serving '{gpu_class.serving}' cannot work on gpuStack '{stack}' "
                                        f"(its pools key on {role.pools_key_on}); {fix}"))
        if gpu_class.sharing == "mig" and gpu_class.serving != "dra" and not role.mig_config_label:
            problems.append(doc.problem(where + ("sharing",), (
                f"sharing 'mig' needs the MIG Manager and its nvidia.com/mig.config node label, which gpuStack '{stack}' "
                "does not run; serve it through DRA (`serving: dra` and `devices`: the driver's MIG partitions), or keep "
                "`gpuStack: both` until then")))
    return problems


def mig_through_dra_is_modelled(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """MIG through DRA: each MIG DeviceClass names a profile the GPU model holds, no profile is both a device
    plugin's and a DRA driver's (a tenant's quota.mig would be granted twice), and KAI, which would charge a
    partition as a whole GPU, is not the scheduler (Kueue counts each profile's DeviceClass as mapped).

    >>> mig_through_dra_is_modelled(dra_mig.platform, dra_mig.platform_doc)
    []
    """
    problems: list[Problem] = []
    plugin_profiles = {p for c in platform.gpu_classes.values() if c.sharing == "mig" and c.serving != "dra"
                       for p in _class_profiles(platform, c)}
    for name, device_class in sorted(platform.device_classes.items()):
        gpu_class = platform.gpu_classes.get(device_class.gpu_class) if device_class.gpu_class else None
        if device_class.mig_profile is None or gpu_class is None:
            continue
        where = platform_path("deviceClasses", name, "migProfile")
        geometry = mig.geometry().get(gpu_class.model)
        if gpu_class.sharing != "mig" or gpu_class.serving != "dra":
            problems.append(doc.problem(where, f"gpuClasses.{device_class.gpu_class} is not MIG served by DRA (sharing "
                                        f"'{gpu_class.sharing}', serving '{gpu_class.serving}'); remove migProfile or make it so"))
        elif geometry is None or device_class.mig_profile not in geometry.profiles:
            known = ", ".join(geometry.profiles) if geometry else "none: the model has no MIG"
            problems.append(doc.problem(where, f"a {gpu_class.model} GPU has no MIG profile {device_class.mig_profile} "
                                        f"(its profiles: {known}); the driver publishes no such device"))
        elif device_class.mig_profile in plugin_profiles:
            problems.append(doc.problem(where, f"MIG profile {device_class.mig_profile} is also a device-plugin class's: "
                                        "a tenant's quota.mig would be granted once to each (twice the slices); serve "
                                        "the profile one way"))
        elif platform.scheduler == "kai":
            problems.append(doc.problem(where, "KAI charges a queue one whole GPU per device claimed from a DeviceClass "
                                        "named with 'gpu' and nothing for any other, never a MIG partition's compute "
                                        "slices: its queues would not count MIG through DRA as their quotas say; use "
                                        "`scheduler: kueue` (deviceClassMappings per profile) or `none`"))
    return problems


def dra_classes_are_counted_by_kai(platform: Platform, doc: SourceDocument) -> list[Problem]:
    r"""On `scheduler: kai`, every GPU class's DeviceClass is one KAI's queues count.

    KAI charges a queue for a pod's ResourceClaims only for `exactly` requests (the claim policy
    refuses `firstAvailable` there) of a DeviceClass whose name contains "gpu" (its
    `IsGPUDeviceClass`, pkg/common/resources/dra.go), and of a pod's requests counts only
    `nvidia.com/gpu` and MIG resources as GPUs: a class named otherwise, or a DRA-backed extended
    resource of another name, would be metered by the ResourceQuota and held by no queue.

    >>> from components.spec.yaml_source import parse_yaml
    >>> p = dra.platform.model_copy(update={"scheduler": "kai"})
    >>> [x.message.split(":")[0] for x in dra_classes_are_counted_by_kai(p, parse_yaml("config: {}\n", "stacks/Pulumi.dra.yaml"))]
    ["KAI counts no pod request of 'gpu.dra.dev/b200' as GPUs"]
    """
    if platform.scheduler != "kai":
        return []
    problems: list[Problem] = []
    for name, device_class in sorted(platform.device_classes.items()):
        if not device_class.gpu_class or device_class.mig_profile:
            continue
        where = platform_path("deviceClasses", name)
        if "gpu" not in name.lower():
            problems.append(doc.problem(where, (
                f"KAI counts claims toward a queue's GPUs only for DeviceClasses whose name contains 'gpu': claims of "
                f"'{name}' would be metered by the ResourceQuota and held by no queue; rename it, e.g. "
                f"'{device_class.gpu_class}.gpu.{platform.label_domain}'")))
        mapped = device_class.extended_resource_name
        if mapped is not None and mapped != cap.GPU:
            problems.append(doc.problem(where + ("extendedResourceName",), (
                f"KAI counts no pod request of '{mapped}' as GPUs: pods asking for it would be metered by the "
                f"ResourceQuota and held by no queue; map {cap.GPU} or remove it (pods then claim '{name}' "
                "through a ResourceClaim)")))
    return problems


def _class_profiles(platform: Platform, gpu_class) -> set[str]:
    names = [n for n, c in platform.gpu_classes.items() if c is gpu_class]
    return {p for n in names for p in platform.layout_profiles(n)}


PLATFORM_VALIDATORS = (
    classes_fit_the_gpu_stack,
    mig_through_dra_is_modelled,
    dra_classes_are_counted_by_kai,
    node_pools_are_consistent,
    mig_layouts_do_not_overlap,
    one_default_priority_class,
    pod_security_is_current,
    memory_bound_acknowledgements_are_needed,
    kai_fractions_have_kai_and_one_memory_bound,
    limit_range_defaults_within_guard_rails,
    ingress_host_grants_have_one_tenant,
)


def check_platform(platform: Platform, doc: SourceDocument) -> list[Problem]:
    """Problems in one stack's inventory: references between classes, pools and MIG layouts.

    >>> from components.spec.yaml_source import parse_yaml
    >>> platform = Platform(labelDomain="gpu.example.com", nodePools={"p": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1"]}})
    >>> [p.message for p in check_platform(platform, parse_yaml("config: {}\\n", "stacks/Pulumi.dev.yaml"))]
    ["unknown GPU class 'h100' (known: none defined)"]
    """
    return [problem for validator in PLATFORM_VALIDATORS for problem in validator(platform, doc)]
