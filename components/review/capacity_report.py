"""`tenants capacity`: GPU capacity of a stack against the quotas its tenants hold.

`capacity_table` is pure (an environment in, JSON-ready data out) so that two tables can be
compared; the formatters only lay it out. The arithmetic is the one `tenants validate` uses:
capacity = nodes x GPUs per node (x replicas when time-sliced, x slices per GPU for MIG), limit =
capacity x overcommit, requested = the sum of active tenants' quotas, free = limit - requested.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from ..fleet import gpu_capacity as cap
from ..fleet import feasibility as feas
from ..fleet import mig
from ..fleet.environment import Environment, LoadedTenant
from ..fleet.isolation import fraction_isolation, mode_of
from ..fleet.queue_arithmetic import kai_amounts
from ..manifests.device_classes import device_class_grants
from ..manifests.kai import department_queues
from ..spec.platform.inventory import GpuClass
from ..spec.stack import Platform
from ..spec.yaml_source import yaml_text

FORMAT_VERSION = 1


def _number(value: Fraction | int) -> int | float:
    value = Fraction(value)
    return int(value) if value.denominator == 1 else float(value)


def _status(requested: int, limit: Fraction, ratio: Fraction) -> str:
    if requested > limit:
        return "over"
    if limit and requested >= limit * ratio:
        return "warning"
    return "ok"


def sharing_mode(gpu_class: GpuClass) -> str:
    """Short name of how a class is shared, e.g. `time-slicing x4`.

    >>> from components.spec.platform.inventory import GpuClass
    >>> sharing_mode(GpuClass(model="A100-80GB", product="NVIDIA-A100-SXM4-80GB", memory="80Gi", sharing="mig"))
    'MIG (mixed)'
    """
    return mode_of(gpu_class).label(gpu_class)


def fraction_statement(gpu_class: GpuClass) -> str:
    """What KAI fractions on a class's GPUs bound ("" when the class declares none).

    >>> fraction_statement(staging.platform.gpu_classes["a100"])[:68]
    'KAI fractions (gpu-fraction, gpu-memory): several pods on one GPU, m'
    """
    record = fraction_isolation(gpu_class)
    if record is None:
        return ""
    return (f"KAI fractions (gpu-fraction, gpu-memory): several pods on one GPU, metered by the tenant's KAI queue only "
            f"(not by ResourceQuota); memory bound: {record.memory_bound}; fault isolation: {record.fault_isolation}")


def isolation(gpu_class: GpuClass) -> str:
    """A plain statement of what sharing means for the pods on one GPU.

    >>> from components.spec.platform.inventory import GpuClass
    >>> isolation(GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="timeSlicing",
    ...     time_slicing={"replicas": 4}))
    'up to 4 pods take turns on each GPU with no memory or fault isolation: one can use all the memory or crash the others'
    """
    return mode_of(gpu_class).statement(gpu_class)


def dra_statement(platform: Platform, name: str) -> str:
    """How a DRA-served class's devices are handed out and metered ("" for a device-plugin class).

    >>> dra_statement(dra.platform, "b200")  # doctest: +NORMALIZE_WHITESPACE
    'DRA: claims of DeviceClass b200.gpu.dra.dev, each device allocated to one claim by the driver;
     metered by requests.deviceclass.resource.kubernetes.io/b200.gpu.dra.dev, b200.gpu.dra.dev.deviceclass.resource.k8s.io/devices,
     requests.gpu.dra.dev/b200'
    """
    gpu_class = platform.gpu_classes[name]
    if gpu_class.serving == "devicePlugin":
        return ""
    keys: list[str] = []
    names = sorted(n for n, spec in platform.device_classes.items() if spec.gpu_class == name)
    for device_class in names:
        keys += cap.device_class_quota_keys(device_class)
        mapped = platform.device_classes[device_class].extended_resource_name
        if mapped is not None:
            keys.append(cap.quota_key(mapped))
    how = "and pods through the device plugin" if gpu_class.serving == "both" else "each device allocated to one claim by the driver"
    return f"DRA: claims of DeviceClass {', '.join(names)}, {how}; metered by {', '.join(dict.fromkeys(keys))}"


def capacity_table(environment: Environment) -> dict[str, Any]:
    """Per GPU class and per MIG profile: capacity, sharing, limit, requested quotas, free, per-tenant split.

    >>> capacity_table(prod)["gpuClasses"]["h100"]["capacity"]
    64
    """
    platform = environment.platform
    capacity = cap.capacity(platform)
    ratio = Fraction(platform.capacity_warning_ratio)
    active = [t for t in environment.tenants if t.spec.holds_capacity]
    grants = {t.name: device_class_grants(cap.gpu_quota_by_class(t.spec, platform), platform, cap.gpu_quota_by_resource(t.spec, platform)) for t in active}
    classes = {name: _class_entry(platform, capacity, active, grants, ratio, name, gpu_class)
               for name, gpu_class in sorted(platform.gpu_classes.items())}
    pools = pool_rows(environment)
    return {
        "formatVersion": FORMAT_VERSION,
        "environment": environment.name,
        "warningRatio": _number(ratio),
        "gpuClasses": classes,
        "migProfiles": _profile_entries(platform, capacity, active, ratio),
        "pools": pools,
        "kaiQueues": kai_queue_row(environment) if platform.scheduler == "kai" else None,
        "tenants": _tenant_entries(environment),
    }


def _class_entry(platform: Platform, capacity: cap.Capacity, active: list[LoadedTenant], grants: dict[str, dict[str, int]],
                 ratio: Fraction, name: str, gpu_class: GpuClass) -> dict[str, Any]:
    pools = {p: pool for p, pool in sorted(platform.node_pools.items()) if pool.gpu_class == name}
    by_tenant = {}
    for loaded in active:
        count = cap.gpu_quota_by_class(loaded.spec, platform).get(name, 0)
        if count:
            by_tenant[loaded.name] = count
    limit = capacity.limit_for_class(platform, name)
    requested = sum(by_tenant.values())
    return {
        "model": gpu_class.model,
        "sharing": sharing_mode(gpu_class),
        "isolation": "; ".join(filter(None, (isolation(gpu_class), dra_statement(platform, name), fraction_statement(gpu_class)))),
        "kaiFractions": gpu_class.kai_fractions.memory_bound if gpu_class.kai_fractions else None,
        "deviceClasses": sorted(n for n, spec in platform.device_classes.items() if spec.gpu_class == name),
        "draDevices": {dc: _dra_devices(dc, grants) for dc in sorted(n for n, spec in platform.device_classes.items() if spec.gpu_class == name)},
        # What its pods ask for: a class served by DRA alone is never requested as nvidia.com/gpu.
        "resource": ", ".join(cap.queue_resources(platform, name, cap.class_resource(gpu_class))),
        "pools": list(pools),
        "nodes": sum(pool.node_count for pool in pools.values()),
        "gpus": sum(pool.node_count * pool.gpus_per_node for pool in pools.values()),
        "capacity": capacity.per_class.get(name, 0),
        "overcommit": _number(Fraction(gpu_class.overcommit)),
        "limit": _number(limit),
        "requested": requested,
        "free": _number(limit - requested),
        "status": _status(requested, limit, ratio),
        "byTenant": dict(sorted(by_tenant.items())),
    }


def _profile_entries(platform: Platform, capacity: cap.Capacity, active: list[LoadedTenant], ratio: Fraction) -> dict[str, Any]:
    profiles: dict[str, Any] = {}
    wanted = set(capacity.per_mig_profile) | {p for t in active for p, c in t.spec.quota.mig.items() if c}
    for profile in sorted(wanted):
        by_tenant = {t.name: t.spec.quota.mig[profile] for t in active if t.spec.quota.mig.get(profile)}
        owners = capacity.mig_profile_classes.get(profile, [])
        overcommit = min((Fraction(platform.gpu_classes[c].overcommit) for c in owners), default=Fraction(1))
        limit = capacity.limit_for_profile(platform, profile)
        requested = sum(by_tenant.values())
        profiles[profile] = {
            "resource": mig.resource_name(profile),
            "classes": sorted(owners),
            "capacity": capacity.per_mig_profile.get(profile, 0),
            "overcommit": _number(overcommit),
            "limit": _number(limit),
            "requested": requested,
            "free": _number(limit - requested),
            "status": _status(requested, limit, ratio),
            "byTenant": dict(sorted(by_tenant.items())),
        }
    return profiles


def _tenant_entries(environment: Environment) -> dict[str, Any]:
    platform = environment.platform
    tenants = {}
    for loaded in environment.tenants:
        tenants[loaded.name] = {
            "lifecycle": loaded.spec.lifecycle,
            "counted": loaded.spec.holds_capacity,
            "gpu": {k: v for k, v in cap.gpu_quota_by_class(loaded.spec, platform).items() if v},
            "mig": {k: v for k, v in sorted(loaded.spec.quota.mig.items()) if v},
            "draDevices": {k: v for k, v in sorted(device_class_grants(cap.gpu_quota_by_class(loaded.spec, platform), platform, cap.gpu_quota_by_resource(loaded.spec, platform)).items()) if v},
        }
        if platform.scheduler == "kai":
            tenants[loaded.name]["kaiQueueGpu"] = _number(kai_amounts(loaded.spec, platform).gpu)
    return dict(sorted(tenants.items()))


def _dra_devices(device_class: str, grants: dict[str, dict[str, int]]) -> dict[str, Any]:
    by_tenant = {t: g[device_class] for t, g in sorted(grants.items()) if g.get(device_class)}
    return {"requested": sum(by_tenant.values()), "byTenant": by_tenant}


def kai_queue_row(environment: Environment) -> dict[str, Any]:
    """The GPU quota of the active tenants' KAI leaf queues and of their departments (parent queues),
    in KAI's units, fractions included (a department's `gpu` may be 12.5).

    KAI charges a pod's `gpu-fraction` (or `gpu-memory` share) against these numbers; the namespace
    ResourceQuota never sees the share.

    >>> kai_queue_row(staging)["byTenant"]
    {'eval': 50, 'inference': 8, 'llm-finetune': 12}
    """
    platform = environment.platform
    by_tenant = {t.name: kai_amounts(t.spec, platform).gpu for t in environment.tenants if t.spec.holds_capacity}
    by_tenant = {t: v for t, v in sorted(by_tenant.items()) if v}
    departments = {q["metadata"]["name"]: q["spec"]["resources"]["gpu"]["quota"] for q in department_queues(environment.facts)}
    return {
        "requested": _number(sum(by_tenant.values(), Fraction(0))),
        "byTenant": {t: _number(v) for t, v in by_tenant.items()},
        "departments": departments,
        "fractions": sorted(n for n, c in platform.gpu_classes.items() if c.kai_fractions),
        "memoryBound": platform.kai_memory_bound,
    }


def pool_rows(environment: Environment) -> dict[str, Any]:
    """Per node pool and GPU resource: capacity, limit, the quota the feasibility check places there.

    `requested` is each active tenant's share of its quota on this pool as the flow places it (the
    same split as the Kueue flavors); `status` is over when the pool is among those an
    over-promised set of tenants shares, warning when the pools linked by shared tenants are
    near full together, unqueued (Kueue) when nothing queued can ever be admitted there. With
    Kueue, `freeFor` says who can be admitted on what is free: the spare cohort, or no queue.

    >>> pool_rows(prod)["a100-shared"]
    {'gpuClass': 'a100', 'dedicatedTo': None, 'nodes': 2, 'resources': {'nvidia.com/gpu': {'capacity': 16, 'limit': 20, 'requested': 20, 'free': 0, 'status': 'warning', 'byTenant': {'eval': 20}, 'freeFor': '-'}}}
    """
    platform = environment.platform
    ratio = Fraction(platform.capacity_warning_ratio)
    facts = environment.facts
    owners, results = facts.pool_owners, facts.placement   # the flow of the tenants holding capacity, solved once
    rows: dict[str, Any] = {}
    for name, pool in sorted(platform.node_pools.items()):
        if pool.gpu_class not in platform.gpu_classes:
            continue
        resources: dict[str, Any] = {}
        for commodity, units in sorted(feas.pool_supply(platform, pool).items()):
            result = results.get(commodity)
            by_tenant = {t: f[name] for t, f in sorted(result.flow.items()) if f.get(name)} if result else {}
            limit = feas.pool_limit(platform, pool, units)
            status = "ok"
            if result is not None and name in result.pools_of(result.violators):
                status = "over"
            elif result is not None:
                for tenants_, pools_ in feas.components(result):
                    held = sum(result.limit[p] for p in pools_)
                    if name in pools_ and held and sum(result.demand[t] for t in tenants_) >= held * ratio:
                        status = "warning"
            free = limit - sum(by_tenant.values())
            if name in facts.unqueued_pools and status == "ok":
                status = "unqueued"
            resource = ", ".join(cap.queue_resources(platform, pool.gpu_class, feas.commodity_resource(platform, commodity)))
            resources[resource] = {
                "capacity": units, "limit": limit, "requested": sum(by_tenant.values()),
                "free": free, "status": status, "byTenant": by_tenant,
            }
            if platform.scheduler == "kueue":
                resources[resource]["freeFor"] = _free_for(facts, name, commodity, free)
        rows[name] = {"gpuClass": pool.gpu_class, "dedicatedTo": owners.get(name), "nodes": pool.node_count,
                      "resources": resources}
        if pool.max_nodes is not None:
            rows[name]["autoscaled"] = _autoscaled(pool, resources)
    return rows


def _autoscaled(pool, resources: dict[str, Any]) -> dict[str, Any]:
    """An autoscaled pool promised (static nodes + maxNodes, what capacity counts) against present
    (static nodes + minNodes, what is there without the autoscaler): nodes, and limit per resource."""
    present = pool.present_node_count
    return {"staticNodes": len(pool.nodes), "minNodes": pool.min_nodes or 0, "maxNodes": pool.max_nodes,
            "presentNodes": present,
            "presentLimit": {r: res["limit"] * present // pool.node_count if pool.node_count else 0 for r, res in resources.items()}}


def _autoscaled_lines(table: dict[str, Any], bullet: str) -> list[str]:
    """Per autoscaled pool: the nodes and devices it holds now, against what capacity counts it for."""
    lines = []
    for name, row in table["pools"].items():
        scaled = row.get("autoscaled")
        if scaled is None:
            continue
        devices = ", ".join(f"{r} {scaled['presentLimit'][r]} present of {res['limit']} promised, {res['requested']} placed"
                            for r, res in row["resources"].items())
        lines.append(f"{bullet}{name}: nodes {scaled['presentNodes']} present ({scaled['staticNodes']} static + minNodes "
                     f"{scaled['minNodes']}) of {row['nodes']} promised (maxNodes {scaled['maxNodes']}); {devices}")
    return lines


def _free_for(facts, pool: str, commodity, free: int) -> str:
    """Who can be admitted on a pool's free capacity, as Kueue sees it: the spare cohort's tree
    (its Cohort holds it), or no queue."""
    if free <= 0:
        return "-"
    if pool in facts.unqueued_pools:
        return "nothing queued"
    lent = facts.pool_spare.get(commodity, {}).get(pool, 0)
    return f"cohort {facts.spare_cohort}" if lent and facts.spare_borrowers.get(pool) else "no queue"


# --- formatters --------------------------------------------------------------------------------

_CLASS_COLUMNS = ["class", "sharing", "resource", "nodes", "capacity", "overcommit", "limit", "requested", "free", "status"]
_PROFILE_COLUMNS = ["profile", "resource", "classes", "capacity", "overcommit", "limit", "requested", "free", "status"]
LEGEND = (
    "capacity: devices in the unit quotas use; limit = capacity x overcommit; "
    "requested = sum of active tenants' quotas; free = limit - requested"
)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(value) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    if value is None or isinstance(value, bool):
        return yaml_text(value)
    return str(value)


def _class_rows(table: dict[str, Any]) -> list[list[str]]:
    return [[name] + [_cell(row[c]) for c in _CLASS_COLUMNS[1:]] for name, row in table["gpuClasses"].items()]


def _profile_rows(table: dict[str, Any]) -> list[list[str]]:
    return [[name] + [_cell(row[c]) for c in _PROFILE_COLUMNS[1:]] for name, row in table["migProfiles"].items()]


_POOL_COLUMNS = ["pool", "class", "dedicated to", "resource", "capacity", "limit", "requested", "free", "status", "free for"]


def _pool_resources(table: dict[str, Any]) -> list[dict[str, Any]]:
    return [res for row in table["pools"].values() for res in row["resources"].values()]


def _pool_rows(table: dict[str, Any]) -> list[list[str]]:
    return [
        [name, row["gpuClass"], row["dedicatedTo"] or "-", resource] + [_cell(res[c]) for c in _POOL_COLUMNS[4:-1]]
        + [res.get("freeFor", "-")]
        for name, row in table["pools"].items() for resource, res in row["resources"].items()
    ]


def _split(by_tenant: dict[str, int]) -> str:
    return ", ".join(f"{t} {c}" for t, c in by_tenant.items()) or "-"


def _tenant_line(data: dict[str, Any]) -> str:
    parts = [f"{c} {n}" for c, n in data["gpu"].items()] + [f"mig {p} {n}" for p, n in data["mig"].items()]
    parts += [f"DRA {d} {_cell(n)}" for d, n in data["draDevices"].items()]
    if "kaiQueueGpu" in data:
        parts.append(f"KAI queue {_cell(data['kaiQueueGpu'])} GPU")
    text = ", ".join(parts) or "no GPU quota"
    if not data["counted"]:
        return f"{text} ({data['lifecycle']}: not counted)"
    return f"{text} (suspended: counted, its running pods keep their GPUs)" if data["lifecycle"] == "suspended" else text


def _dra_and_kai_lines(table: dict[str, Any], bullet: str) -> list[str]:
    """DRA devices per DeviceClass of a class, and the KAI queues' GPU quota (fractions included)."""
    lines = [
        f"{bullet}DRA {device_class} (class {name}): devices {row['requested']} ({_split(row['byTenant'])}), "
        f"quota key {device_class}{cap.CLAIM_DEVICES_SUFFIX}"
        for name, klass in table["gpuClasses"].items() for device_class, row in klass["draDevices"].items() if row["byTenant"]
    ]
    kai = table.get("kaiQueues")
    if kai:
        fractions = (f"KAI fractions on {', '.join(kai['fractions'])}, memory bound {kai['memoryBound']}" if kai["fractions"]
                     else "no class declares KAI fractions")
        lines.append(f"{bullet}KAI queues: {_cell(kai['requested'])} GPU ({_split({t: _cell(v) for t, v in kai['byTenant'].items()})}), "
                     f"departments {_split({d: _cell(v) for d, v in kai['departments'].items()})}, in KAI's units, against "
                     f"which each pod's gpu-fraction is charged; {fractions}")
    return lines


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = {"nodes", "capacity", "overcommit", "limit", "requested", "free"}

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if header[i] in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), *(line(r) for r in rows)]


def format_text(table: dict[str, Any]) -> str:
    """Aligned columns for a terminal.

    >>> format_text(capacity_table(prod)).splitlines()[0]
    'GPU capacity of stack prod'
    """
    out = [f"GPU capacity of stack {table['environment']}", LEGEND, ""]
    out += _aligned(_CLASS_COLUMNS, _class_rows(table))
    if table["migProfiles"]:
        out += [""] + _aligned(_PROFILE_COLUMNS, _profile_rows(table))
    out += ["", "Per node pool (quota placed where each tenant may run; dedicated pools count for their owner only):"]
    out += _aligned(_POOL_COLUMNS, _pool_rows(table))
    scaled = _autoscaled_lines(table, "  ")
    if scaled:
        out += ["", "Autoscaled pools (capacity counts maxNodes; present: static nodes + minNodes, there without a scale-up):", *scaled]
    out += ["", "Sharing:"]
    out += [f"  {name}: {row['sharing']}: {row['isolation']}" for name, row in table["gpuClasses"].items()]
    out += ["", "Requested by tenant:"]
    out += [f"  {name}: {_split(row['byTenant'])}" for name, row in table["gpuClasses"].items() if row["byTenant"]]
    out += [f"  mig {name}: {_split(row['byTenant'])}" for name, row in table["migProfiles"].items() if row["byTenant"]]
    out += _dra_and_kai_lines(table, "  ")
    out += ["", "Tenants:"]
    out += [f"  {name}: {_tenant_line(data)}" for name, data in table["tenants"].items()]
    return "\n".join(out) + "\n"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"] + [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows
    ]


def format_markdown(table: dict[str, Any]) -> str:
    """Tables for a pull-request comment.

    >>> format_markdown(capacity_table(prod)).splitlines()[0]
    '### GPU capacity of stack `prod`'
    """
    out = [f"### GPU capacity of stack `{table['environment']}`", "", f"_{LEGEND}_", ""]
    class_header = _CLASS_COLUMNS + ["by tenant"]
    class_rows = [r + [_split(row["byTenant"])] for r, row in zip(_class_rows(table), table["gpuClasses"].values())]
    out += _md_table(class_header, class_rows)
    if table["migProfiles"]:
        profile_rows = [r + [_split(row["byTenant"])] for r, row in zip(_profile_rows(table), table["migProfiles"].values())]
        out += ["", "#### MIG profiles", ""] + _md_table(_PROFILE_COLUMNS + ["by tenant"], profile_rows)
    out += ["", "#### Node pools", ""] + _md_table(_POOL_COLUMNS + ["by tenant"], [
        r + [_split(res["byTenant"])] for r, res in zip(_pool_rows(table), _pool_resources(table))])
    scaled = _autoscaled_lines(table, "- ")
    if scaled:
        out += ["", "#### Autoscaled pools", "", "_capacity counts maxNodes; present: static nodes + minNodes_", "", *scaled]
    out += ["", "#### Sharing", ""]
    out += [f"- **{name}** ({row['sharing']}): {row['isolation']}" for name, row in table["gpuClasses"].items()]
    extra = _dra_and_kai_lines(table, "- ")
    if extra:
        out += ["", "#### DRA devices and KAI queues", ""] + extra
    out += ["", "#### Tenants", ""]
    out += _md_table(["tenant", "quota"], [[name, _tenant_line(data)] for name, data in table["tenants"].items()])
    return "\n".join(out) + "\n"


def format_json(table: dict[str, Any]) -> str:
    """The table itself, for tools.

    >>> json.loads(format_json(capacity_table(prod)))["environment"]
    'prod'
    """
    return json.dumps(table, indent=2) + "\n"


FORMATTERS = {"text": format_text, "markdown": format_markdown, "json": format_json}
