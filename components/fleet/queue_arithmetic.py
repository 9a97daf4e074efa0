"""Scheduler queues (Kueue, KAI): what a tenant's queue settings amount to, and whether they hold up.

The nominal queue quota of a tenant is always its `quota` (per GPU class); `queue` only says how
it shares: which cohort (Kueue) or department (KAI parent queue) it borrows within, how much it
may borrow or lend per GPU class, and its weight. The arithmetic here is shared with the builders
(`components.manifests.kueue`, `components.manifests.kai`) so that checks and objects agree.

Lending and borrowing happen pool by pool (a Kueue flavor is a node pool): a member lends its
nominal quota on each pool, capped by its `lendingLimit`, and never a class only its dedicated
pools provide; a tenant can borrow only what is lent on pools it may reach (`lenders`,
`borrowable`). The ResourceQuota under a queue is nominal + `borrowable` (the one rule, see
`components.manifests.queues.gpu_ceiling_by_resource`).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

from ..spec.problems import Problem
from ..spec.stack import CONFIG_KEY, Platform
from ..spec.tenant import Tenant
from . import feasibility as feas
from . import gpu_capacity as cap

KAI_FALLBACK_DEPARTMENT = "tenants"
KAI_PARENT_PREFIX = "dept-"
KUEUE_CPU_FLAVOR = "default-flavor"
# KAI charges a MIG device as its compute slices (`nvidia.com/mig-3g.40gb` = 3 GPUs); `...+me`
# profiles do not match and are not counted. A time-slicing share counts as one GPU whether it is
# advertised as `nvidia.com/gpu` or renamed `nvidia.com/gpu.shared` (renaming must not empty the
# tenant's KAI GPU quota, nor turn its limit into 0).
_KAI_MIG = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


def _hint(value: str, known: Iterable[str]) -> str:
    known = sorted(known)
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(known) or 'none defined'})"


def _platform_path(*parts) -> tuple:
    return ("config", CONFIG_KEY, *parts)


# --- what the settings amount to ---------------------------------------------------------------


def cohort_of(tenant: Tenant, platform: Platform) -> str | None:
    """The Kueue cohort a tenant's ClusterQueue joins: its own `queue.cohort`, else the stack default.

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1"})
    >>> cohort_of(t, Platform.model_validate({"labelDomain": "x.dev", "queues": {"defaultCohort": "shared"}}))
    'shared'
    """
    return tenant.queue.cohort or platform.queues.default_cohort


def kai_department_of(tenant: Tenant, platform: Platform) -> str:
    """The KAI parent queue of a tenant's leaf queue (KAI schedules only queues that have a parent).

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1"})
    >>> kai_department_of(t, Platform.model_validate({"labelDomain": "x.dev"}))
    'tenants'
    """
    return cohort_of(tenant, platform) or KAI_FALLBACK_DEPARTMENT


def kai_parent_queue(department: str) -> str:
    """Name of a department's KAI parent Queue; prefixed, as parent and leaf (tenant) queues share one set of names.

    >>> kai_parent_queue("research")
    'dept-research'
    """
    return KAI_PARENT_PREFIX + department


def dedicated_only_classes(tenant: Tenant, platform: Platform) -> set[str]:
    """GPU classes the tenant reaches only through its dedicated pools (never lent to others)."""
    dedicated = {platform.node_pools[p].gpu_class for p in tenant.gpu.dedicated_pools if p in platform.node_pools}
    return dedicated - set(tenant.gpu.classes)


def expand_queue_limits(tenant: Tenant, platform: Platform) -> None:
    """Turn a plain-number `borrowingLimit` / `lendingLimit` into the same number per GPU class the
    tenant has quota for (whole-GPU classes; MIG slices take no per-class limit), so that checks
    and builders only ever see maps.

    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {c: {
    ...     "model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi"} for c in ("a100", "b")}})
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "gpu": {"classes": ["a100", "b"]}, "quota": {"gpu": {"a100": 8, "b": 2}},
    ...     "queue": {"borrowingLimit": 4}})
    >>> expand_queue_limits(t, p); t.queue.borrowing_limit
    {'a100': 4, 'b': 4}
    """
    classes = [
        name for name in cap.gpu_quota_by_class(tenant, platform)
        if name in platform.gpu_classes and not cap.is_mig_mixed(platform.gpu_classes[name])
    ]
    dedicated = dedicated_only_classes(tenant, platform)
    if isinstance(tenant.queue.borrowing_limit, int):
        tenant.queue.borrowing_limit = {name: tenant.queue.borrowing_limit for name in classes if name not in dedicated}
    if isinstance(tenant.queue.lending_limit, int):
        tenant.queue.lending_limit = {name: tenant.queue.lending_limit for name in classes}


def _queue_group(tenant: Tenant, platform: Platform) -> str | None:
    """Whom the tenant's queue borrows from: its Kueue cohort, or its KAI department (always one)."""
    if platform.scheduler == "kueue":
        return cohort_of(tenant, platform)
    if platform.scheduler == "kai":
        return kai_department_of(tenant, platform)
    return None


def lendable_on_pools(tenant: Tenant, environment) -> dict[feas.Commodity, dict[str, int]]:
    """What the tenant's queue lends while idle, per commodity and pool (its flavors).

    Its nominal quota on each pool (the split of `feasibility.quota_split`), capped per flavor by
    `lendingLimit` (Kueue; KAI lends all idle quota), and nothing of a class it reaches only through
    its dedicated pools (nobody else can be placed there).
    """
    platform = environment.platform
    split = feas.quota_split(environment).get(tenant.name, {})
    dedicated = dedicated_only_classes(tenant, platform)
    limits = (tenant.queue.lending_limit or {}) if platform.scheduler == "kueue" else {}
    result: dict[feas.Commodity, dict[str, int]] = {}
    for commodity, by_pool in split.items():
        kind, name = commodity
        if kind == "class" and name in dedicated:
            continue
        cap_ = limits.get(name) if kind == "class" else None
        result[commodity] = {p: (n if cap_ is None else min(cap_, n)) for p, n in by_pool.items()}
    return result


def lenders(tenant: Tenant, environment) -> dict[str, dict[feas.Commodity, int]]:
    """Per other member of the tenant's cohort (KAI: department): what it lends on pools the tenant may reach.

    Borrowing happens flavor by flavor, and a flavor is a pool: quota lent on a pool the tenant
    cannot reach is no use to it.
    """
    platform = environment.platform
    group = _queue_group(tenant, platform)
    if group is None:
        return {}
    owners = feas.pool_owners([(t.name, t.spec) for t in environment.tenants], platform)
    reach = set(feas.reachable_pools(tenant.name, tenant, platform, owners))
    result: dict[str, dict[feas.Commodity, int]] = {}
    for member in environment.tenants:
        if member.name == tenant.name or member.spec.lifecycle == "decommissioned":
            continue
        if _queue_group(member.spec, platform) != group:
            continue
        for commodity, by_pool in lendable_on_pools(member.spec, environment).items():
            units = sum(n for p, n in by_pool.items() if p in reach)
            if units:
                result.setdefault(member.name, {})[commodity] = units
    return result


def borrowable(tenant: Tenant, environment, apply_limits: bool = True) -> dict[feas.Commodity, int]:
    """GPUs per commodity the tenant's queue can actually borrow: what `lenders` lend it, capped by
    `borrowingLimit` (unless `apply_limits` is false). A class reached only through dedicated pools
    borrows nothing."""
    platform = environment.platform
    totals: dict[feas.Commodity, int] = {}
    for lent in lenders(tenant, environment).values():
        for commodity, units in lent.items():
            totals[commodity] = totals.get(commodity, 0) + units
    limits = (tenant.queue.borrowing_limit or {}) if apply_limits else {}
    dedicated = dedicated_only_classes(tenant, platform)
    result = {}
    for commodity, units in sorted(totals.items()):
        kind, name = commodity
        if kind == "class":
            if name in dedicated:
                continue
            if name in limits:
                units = min(units, limits[name])
        if units:
            result[commodity] = units
    return result


@dataclass(frozen=True)
class KaiAmounts:
    """A tenant's quota in KAI Queue units: GPUs (fractions allowed), CPU millicores, memory MB (10^6 bytes)."""

    gpu: Fraction
    cpu: int
    memory: int


def kai_gpu_units(resource: str, count: int) -> Fraction:
    """How many GPUs KAI charges for `count` devices of an extended resource.

    >>> kai_gpu_units("nvidia.com/mig-3g.40gb", 2), kai_gpu_units("nvidia.com/gpu.shared", 4)
    (Fraction(6, 1), Fraction(4, 1))
    """
    if resource in (cap.GPU, cap.GPU_SHARED):
        return Fraction(count)
    match = _KAI_MIG.match(resource)
    return Fraction(int(match[1]) * count) if match else Fraction(0)


def kai_amounts(tenant: Tenant, platform: Platform) -> KaiAmounts:
    """The tenant's quota as KAI counts it; memory and CPU from the quota's requests, rounded down.

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "quota": {"cpu": {"requests": "1500m"}, "memory": {"requests": "1Gi"}}})
    >>> kai_amounts(t, Platform.model_validate({"labelDomain": "x.dev"}))
    KaiAmounts(gpu=Fraction(0, 1), cpu=1500, memory=1073)
    """
    gpu = sum(
        (kai_gpu_units(resource, count) for resource, count in cap.gpu_quota_by_resource(tenant, platform).items()),
        Fraction(0),
    )
    cpu = tenant.quota.cpu.requests.value * 1000 if tenant.quota.cpu and tenant.quota.cpu.requests is not None else 0
    memory = (
        tenant.quota.memory.requests.value / 10**6 if tenant.quota.memory and tenant.quota.memory.requests is not None else 0
    )
    return KaiAmounts(gpu=gpu, cpu=math.floor(cpu), memory=math.floor(memory))


# --- checks -------------------------------------------------------------------------------------


def _queue_settings_used(tenant: Tenant) -> list[str]:
    queue = tenant.queue
    return [key for key, value in (("cohort", queue.cohort), ("weight", queue.weight), ("borrowingLimit", queue.borrowing_limit), ("lendingLimit", queue.lending_limit)) if value is not None]


def check_tenant_queue(tenant: Tenant, doc, platform: Platform) -> list[Problem]:
    """Problems of one tenant's `queue` settings against the stack's scheduler and GPU classes."""
    problems: list[Problem] = []

    def add(path: tuple, message: str, severity: str = "error") -> None:
        problems.append(doc.problem(path, message, severity=severity))

    used = _queue_settings_used(tenant)
    if platform.scheduler == "none":
        if used:
            add(("queue",), f"the stack's scheduler is 'none', so queue settings ({', '.join(used)}) have no effect; set `scheduler: kueue` or `kai` in the stack, or remove them", "warning")
        return problems
    allowed = set(cap.allowed_classes(tenant, platform))
    dedicated = dedicated_only_classes(tenant, platform)
    for key, limits in (("borrowingLimit", tenant.queue.borrowing_limit), ("lendingLimit", tenant.queue.lending_limit)):
        for name in sorted(limits or {}):
            path = ("queue", key, name)
            gpu_class = platform.gpu_classes.get(name)
            if gpu_class is None:
                add(path, f"unknown GPU class '{name}'{_hint(name, platform.gpu_classes)}")
            elif name not in allowed:
                add(path, f"GPU class '{name}' is not one the tenant may use (allowed: {', '.join(sorted(allowed)) or 'none'}); add it to gpu.classes or remove the limit")
            elif cap.is_mig_mixed(gpu_class):
                add(path, f"GPU class '{name}' hands out MIG slices (mixed strategy); limits here are whole GPUs per class, and per-slice limits are not supported")
            elif name in dedicated and (key == "borrowingLimit" and limits[name] > 0):
                add(path, f"the tenant reaches GPU class '{name}' only through its dedicated pools, so it cannot run on other tenants' '{name}' nodes and cannot borrow them; remove the limit")
    if platform.scheduler == "kueue" and tenant.queue.borrowing_limit and cohort_of(tenant, platform) is None:
        add(("queue", "borrowingLimit"), "borrowing needs a cohort to borrow from: set queue.cohort (or the stack's queues.defaultCohort)")
    if platform.scheduler == "kueue":
        missing = [r for r in ("cpu", "memory") if _compute_nominal(tenant, platform, r) is None]
        if missing:
            add(("quota",), f"Kueue admits only workloads whose resources its ClusterQueue covers; without quota.{missing[0]}.requests (or the stack's cpuMemoryCapacity) workloads requesting {' or '.join(missing)} stay pending", "warning")
    if platform.scheduler == "kai":
        if tenant.queue.lending_limit:
            add(("queue", "lendingLimit"), "KAI has no lending limit: a KAI queue lends all of its idle quota and takes it back by reclaim; remove lendingLimit", "warning")
    return problems


def _compute_nominal(tenant: Tenant, platform: Platform, resource: str):
    pair = getattr(tenant.quota, resource)
    if pair is not None and pair.requests is not None:
        return pair.requests
    return platform.cpu_memory_capacity.get(resource)


def kueue_compute_nominal(tenant: Tenant, platform: Platform) -> dict[str, str]:
    """Nominal cpu/memory (and ephemeral-storage) of the tenant's ClusterQueue: its quota's requests,
    else (cpu, memory) the stack's cluster capacity.

    >>> from components.spec.stack import Platform
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "quota": {"cpu": {"requests": "8"}}})
    >>> kueue_compute_nominal(t, Platform.model_validate({"labelDomain": "x.dev", "cpuMemoryCapacity": {"memory": "1Ti"}}))
    {'cpu': '8', 'memory': '1Ti'}
    """
    result = {}
    for resource in ("cpu", "memory"):
        value = _compute_nominal(tenant, platform, resource)
        if value is not None:
            result[resource] = str(value)
    # Kueue applies the namespace's LimitRange defaults to a workload's requests, so a tenant whose
    # LimitRange gives containers ephemeral-storage requests submits workloads that request it: the
    # ClusterQueue must cover it (Kueue blocks resources it does not cover), at the quota's requests.
    storage = tenant.quota.ephemeral_storage
    if storage is not None and storage.requests is not None:
        result["ephemeral-storage"] = str(storage.requests)
    return dict(sorted(result.items()))


def check_queues(environment) -> list[Problem]:
    """Problems between tenants' queues: borrowing beyond the cohort, KAI departments and names."""
    platform: Platform = environment.platform
    doc = environment.platform_doc
    problems: list[Problem] = []
    active = [t for t in environment.tenants if t.spec.lifecycle != "decommissioned"]
    if platform.scheduler != "kai" and platform.queues.kai.departments:
        problems.append(doc.problem(_platform_path("queues", "kai", "departments"), f"KAI departments have no effect with scheduler '{platform.scheduler}'", severity="warning"))
    if platform.scheduler == "kueue":
        if platform.queues.kueue.preemption.borrow_within_cohort != "Never" and platform.queues.kueue.preemption.reclaim_within_cohort == "Never":
            problems.append(doc.problem(_platform_path("queues", "kueue", "preemption", "borrowWithinCohort"), "borrowWithinCohort needs reclaimWithinCohort other than Never (Kueue rejects the ClusterQueue otherwise)"))
        if KUEUE_CPU_FLAVOR in platform.node_pools:
            problems.append(doc.problem(_platform_path("nodePools", KUEUE_CPU_FLAVOR), f"'{KUEUE_CPU_FLAVOR}' is the name of the Kueue ResourceFlavor for cpu and memory (GPU flavors are named after their node pools); rename the node pool"))
    lookalikes = _lookalike_cohorts(active, platform)
    if platform.scheduler == "kueue":
        problems.extend(_borrowing_problems(active, environment, lookalikes))
    if platform.scheduler == "kai":
        problems.extend(_kai_problems(active, platform, doc))
    erred = {(p.file, p.stack) for p in problems if p.field.endswith("queue.cohort") and p.severity == "error"}
    typos = {cohort for loaded, cohort, _, _ in lookalikes if (loaded.doc.file, loaded.doc.stack or "") in erred}
    for loaded, cohort, meant, members in lookalikes:
        if cohort in typos or meant in typos:
            continue  # already an error on the typo, which names this tenant's cohort as meant
        word = "department" if platform.scheduler == "kai" else "cohort"
        problems.append(loaded.doc.problem(("queue", "cohort"), (
            f"{word} '{cohort}' has no other member, while '{meant}' has {', '.join(members) or 'the stack settings'}; "
            f"did you mean '{meant}'?"
        ), severity="warning"))
    return problems


def _lookalike_cohorts(active, platform: Platform) -> list[tuple]:
    """Tenants alone in a cohort (KAI department) whose name is close to another cohort's (or one
    the stack declares): most likely a typo, which otherwise shows only as the others' borrowing
    errors.
    Returns (tenant, its cohort, the close cohort, that cohort's members) tuples."""
    if platform.scheduler == "none":
        return []
    of = (lambda t: kai_department_of(t, platform)) if platform.scheduler == "kai" else (lambda t: cohort_of(t, platform))
    members: dict[str, list] = {}
    for loaded in active:
        cohort = of(loaded.spec)
        if cohort is not None:
            members.setdefault(cohort, []).append(loaded)
    declared = {platform.queues.default_cohort, *platform.queues.kai.departments} - {None}
    shared = sorted(set(members) | declared)
    result = []
    for cohort, alone in sorted(members.items()):
        if len(alone) != 1 or cohort in declared or alone[0].spec.queue.cohort is None:
            continue
        close = difflib.get_close_matches(cohort, [c for c in shared if c != cohort], n=1, cutoff=0.8)
        if close:
            result.append((alone[0], cohort, close[0], sorted(m.name for m in members.get(close[0], []))))
    return result


def _borrowing_problems(active, environment, lookalikes: list[tuple]) -> list[Problem]:
    platform = environment.platform
    problems = []
    for loaded in active:
        cohort = cohort_of(loaded.spec, platform)
        limits = loaded.spec.queue.borrowing_limit or {}
        if cohort is None or not limits:
            continue
        lent = lenders(loaded.spec, environment)
        for name, limit in sorted(limits.items()):
            if name not in platform.gpu_classes or limit == 0:
                continue
            held = {m: by.get(("class", name), 0) for m, by in lent.items()}
            total = sum(held.values())
            if limit > total:
                detail = ", ".join(f"{t}: {c}" for t, c in sorted(held.items()) if c) or "no other member lends any"
                typos = [(t, c) for t, c, meant, _ in lookalikes if meant == cohort]
                hint = "".join(f"; tenant '{t.name}' ({t.doc.file}) is in cohort '{c}': a typo of '{cohort}'?" for t, c in typos)
                problems.append(loaded.doc.problem(("queue", "borrowingLimit", name), f"borrowing limit {limit} is above what the rest of cohort '{cohort}' can lend of GPU class '{name}' on the pools this tenant may use ({total}; {detail}); lower it or add lenders to the cohort{hint}"))
                for typo, typed in typos:  # the file that most likely needs the fix hears of it too
                    problems.append(typo.doc.problem(("queue", "cohort"), (
                        f"cohort '{typed}' looks like a typo of '{cohort}': tenant '{loaded.name}' ({loaded.doc.file}) borrows "
                        f"up to {limit} GPUs of class '{name}' in '{cohort}', more than its members can lend ({total})"
                    )))
    return problems


def _kai_problems(active, platform: Platform, doc) -> list[Problem]:
    problems = []
    children: dict[str, list] = {}
    departments = {kai_department_of(loaded.spec, platform) for loaded in active} | set(platform.queues.kai.departments)
    for loaded in active:
        children.setdefault(kai_department_of(loaded.spec, platform), []).append(loaded)
        clash = [d for d in sorted(departments) if kai_parent_queue(d) == loaded.name]
        if clash:
            problems.append(loaded.doc.problem(("name",), f"tenant '{loaded.name}' has the name of the KAI parent queue of department '{clash[0]}'; parent and leaf queues share one set of names, rename the tenant or the department"))
    for name, department in sorted(platform.queues.kai.departments.items()):
        where = _platform_path("queues", "kai", "departments", name)
        members = children.get(name, [])
        for resource, unit in (("gpu", "GPUs"), ("cpu", "millicores"), ("memory", "MB")):
            declared = getattr(department, resource)
            if declared is None:
                continue
            parent = kai_declared_amount(resource, declared)
            amounts = {m.name: getattr(kai_amounts(m.spec, platform), resource) for m in members}
            for member in members:
                if amounts[member.name] > parent:
                    path = ("queue", "cohort") if member.spec.queue.cohort else ("quota",)
                    problems.append(member.doc.problem(path, f"the tenant's KAI {resource} quota ({_num(amounts[member.name])} {unit}) exceeds its department '{name}' ({_num(parent)} {unit}); raise the department's quota or lower the tenant's"))
            total = sum(amounts.values(), Fraction(0))
            if total > parent and not any(v > parent for v in amounts.values()):
                detail = ", ".join(f"{t}: {_num(v)}" for t, v in sorted(amounts.items()))
                problems.append(doc.problem(where + (resource,), f"the department's tenants hold {_num(total)} {unit} of {resource} quota ({detail}), more than its {_num(parent)}; KAI cannot guarantee every child's quota", severity="warning"))
    return problems


def kai_declared_amount(resource: str, value) -> Fraction:
    """A department's stack amount (`gpu: 40`, `cpu: "64"`, `memory: 512Gi`) in KAI units, rounded down.

    >>> from components.spec.quantity import Quantity
    >>> kai_declared_amount("cpu", Quantity.parse("1.5")), kai_declared_amount("memory", Quantity.parse("1G"))
    (Fraction(1500, 1), Fraction(1000, 1))
    """
    if resource == "gpu":
        return Fraction(value)
    if resource == "cpu":
        return Fraction(math.floor(value.value * 1000))
    return Fraction(math.floor(value.value / 10**6))


def _num(value) -> str:
    return f"{float(value):g}"


def check_environment_queues(environment) -> list[Problem]:
    """Every queue check of one environment: each enabled tenant's settings, then across tenants."""
    problems: list[Problem] = []
    for loaded in environment.tenants:
        if loaded.spec.lifecycle != "decommissioned":
            problems.extend(check_tenant_queue(loaded.spec, loaded.doc, environment.platform))
    problems.extend(check_queues(environment))
    return problems
