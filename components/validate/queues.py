"""Checks of the scheduler queue settings (Kueue, KAI), of each tenant and across tenants; what the
settings amount to is `components.fleet.queue_arithmetic`, shared with the builders."""

from __future__ import annotations

from fractions import Fraction

from ..fleet import gpu_capacity as cap
from ..fleet.queue_arithmetic import (
    KUEUE_CPU_FLAVOR,
    borrowing_limits,
    cohort_chain,
    cohort_of,
    compute_nominal,
    dedicated_only_classes,
    kai_amounts,
    kai_declared_amount,
    kai_department_of,
    kai_parent_queue,
    lending_limits,
)
from ..spec.hints import closest, did_you_mean
from ..spec.problems import Problem
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from .platform import platform_path


def _queue_settings_used(tenant: Tenant) -> list[str]:
    queue = tenant.queue
    return [key for key, value in (("cohort", queue.cohort), ("weight", queue.weight), ("borrowingLimit", queue.borrowing_limit), ("lendingLimit", queue.lending_limit), ("admission", queue.admission if queue.admission != "queued" else None)) if value is not None]


def check_tenant_queue(tenant: Tenant, doc, platform: Platform) -> list[Problem]:
    """Problems of one tenant's `queue` settings against the stack's scheduler and GPU classes.

    >>> check_tenant_queue(staging.tenants[0].spec, staging.tenants[0].doc, staging.platform)
    []
    """
    if platform.scheduler == "none":
        used = _queue_settings_used(tenant)
        found = [(("queue",), f"the stack's scheduler is 'none', so queue settings ({', '.join(used)}) have no effect; set `scheduler: kueue` or `kai` in the stack, or remove them", "warning")] if used else []
    else:
        found = [*_class_limit_findings(tenant, platform), *_scheduler_findings(tenant, platform)]
    return [doc.problem(path, message, severity=severity) for path, message, severity in found]


_Finding = tuple[tuple, str, str]   # (path, message, severity)


def _class_limit_findings(tenant: Tenant, platform: Platform) -> list[_Finding]:
    """The borrowing and lending limits that name a class the tenant's queue cannot limit."""
    found: list[_Finding] = []
    allowed = set(cap.allowed_classes(tenant, platform))
    dedicated = dedicated_only_classes(tenant, platform)
    borrowing, lending = borrowing_limits(tenant, platform), lending_limits(tenant, platform)
    for key, limits in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
        for name in sorted(limits or {}):
            path = ("queue", key, name)
            gpu_class = platform.gpu_classes.get(name)
            if gpu_class is None:
                found.append((path, f"unknown GPU class '{name}'{did_you_mean(name, platform.gpu_classes)}", "error"))
            elif name not in allowed:
                found.append((path, f"GPU class '{name}' is not one the tenant may use (allowed: {', '.join(sorted(allowed)) or 'none'}); add it to gpu.classes or remove the limit", "error"))
            elif cap.is_mig_mixed(gpu_class):
                found.append((path, f"GPU class '{name}' hands out MIG slices (mixed strategy); limits here are whole GPUs per class, and per-slice limits are not supported", "error"))
            elif name in dedicated and (key == "borrowingLimit" and limits[name] > 0):
                found.append((path, f"the tenant reaches GPU class '{name}' only through its dedicated pools, so it cannot run on other tenants' '{name}' nodes and cannot borrow them; remove the limit", "error"))
    return found


def _scheduler_findings(tenant: Tenant, platform: Platform) -> list[_Finding]:
    """Queue settings the stack's scheduler (Kueue or KAI) cannot honour or needs besides."""
    found: list[_Finding] = []
    borrowing, lending = borrowing_limits(tenant, platform), lending_limits(tenant, platform)
    if tenant.queue.admission == "direct" and borrowing:
        found.append((("queue", "borrowingLimit"), "with `admission: direct` the tenant's pods may bypass its queue, so its GPUs are only its nominal quota and its queue borrows nothing; remove borrowingLimit, or set `admission: queued`", "error"))
    if tenant.queue.admission == "direct":
        found += [(("queue", key), f"queue.{key} does nothing with `admission: direct`: the tenant has no queue (its GPUs are its "
                   "ResourceQuota), so it joins no cohort and shares nothing; remove it, or set `admission: queued`", "warning")
                  for key, value in (("cohort", tenant.queue.cohort), ("weight", tenant.queue.weight)) if value is not None]
    if platform.scheduler == "kueue" and borrowing and cohort_of(tenant, platform) is None:
        found.append((("queue", "borrowingLimit"), "borrowing needs a cohort to borrow from: set queue.cohort (or the stack's queues.defaultCohort)", "error"))
    if platform.scheduler == "kueue":
        missing = [r for r in ("cpu", "memory") if compute_nominal(tenant, platform, r) is None]
        if missing:
            found.append((("quota",), f"Kueue admits only workloads whose resources its ClusterQueue covers; without quota.{missing[0]}.requests (or the stack's cpuMemoryCapacity) workloads requesting {' or '.join(missing)} stay pending", "warning"))
    if platform.scheduler == "kai":
        if lending:
            found.append((("queue", "lendingLimit"), "KAI has no lending limit: a KAI queue lends all of its idle quota and takes it back by reclaim; remove lendingLimit", "warning"))
    return found


def check_queues(environment) -> list[Problem]:
    """Problems between tenants' queues: borrowing beyond the cohort, KAI departments and names.

    >>> check_queues(prod), check_queues(staging)
    ([], [])
    """
    platform: Platform = environment.platform
    doc = environment.platform_doc
    problems: list[Problem] = []
    active = [t for t in environment.tenants if not t.spec.is_decommissioned]
    if platform.scheduler != "kai" and platform.queues.kai.departments:
        problems.append(doc.problem(platform_path("queues", "kai", "departments"), f"KAI departments have no effect with scheduler '{platform.scheduler}'", severity="warning"))
    if platform.scheduler == "kueue":
        if platform.queues.kueue.preemption.borrow_within_cohort != "Never" and platform.queues.kueue.preemption.reclaim_within_cohort == "Never":
            problems.append(doc.problem(platform_path("queues", "kueue", "preemption", "borrowWithinCohort"), "borrowWithinCohort needs reclaimWithinCohort other than Never (Kueue rejects the ClusterQueue otherwise)"))
        if KUEUE_CPU_FLAVOR in platform.node_pools:
            problems.append(doc.problem(platform_path("nodePools", KUEUE_CPU_FLAVOR), f"'{KUEUE_CPU_FLAVOR}' is the name of the Kueue ResourceFlavor for cpu and memory (GPU flavors are named after their node pools); rename the node pool"))
        problems.extend(_device_class_mapping_problems(platform, doc))
    problems.extend(_cohort_tree_problems(platform, doc))
    if platform.scheduler == "kueue":
        for pool, why in environment.facts.unqueued_pools.items():
            problems.append(doc.problem(platform_path("nodePools", pool), f"nothing queued can ever be admitted on node pool '{pool}': {why}", severity="warning"))
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


# Kueue v0.19.2's limits on `resources.deviceClassMappings` (pkg/config/validation.go): Kueue refuses
# to start on a Configuration past them. A mapping's name is a label key, whose name part is at most
# 63 characters of [-A-Za-z0-9_.] (the implicit resource's part is the DeviceClass name).
KUEUE_MAX_MAPPINGS, KUEUE_MAX_CLASSES_PER_MAPPING, KUEUE_MAX_NAME_PART = 16, 8, 63


def _device_class_mapping_problems(platform: Platform, doc) -> list[Problem]:
    """The DeviceClasses Kueue's `deviceClassMappings` (`cap.device_class_queue_resource`) cannot hold."""
    problems = []
    by_resource: dict[str, list[str]] = {}
    for name in sorted(platform.device_classes):
        resource = cap.device_class_queue_resource(platform, name)
        if resource is None:
            continue
        by_resource.setdefault(resource, []).append(name)
        if len(resource.rpartition("/")[2]) > KUEUE_MAX_NAME_PART:
            problems.append(doc.problem(platform_path("deviceClasses", name), (
                f"Kueue counts this DeviceClass as '{resource}', whose name after the '/' may have at most "
                f"{KUEUE_MAX_NAME_PART} characters (a Kueue deviceClassMappings name); shorten the DeviceClass name")))
    for resource, names in sorted(by_resource.items()):
        if len(names) > KUEUE_MAX_CLASSES_PER_MAPPING:
            problems.append(doc.problem(platform_path("deviceClasses", names[KUEUE_MAX_CLASSES_PER_MAPPING]), (
                f"{len(names)} DeviceClasses are counted as '{resource}' ({', '.join(names)}); Kueue maps at most "
                f"{KUEUE_MAX_CLASSES_PER_MAPPING} classes to one resource; remove some of them")))
    if len(by_resource) > KUEUE_MAX_MAPPINGS:
        problems.append(doc.problem(platform_path("deviceClasses"), (
            f"the DeviceClasses need {len(by_resource)} Kueue deviceClassMappings ({', '.join(sorted(by_resource))}); "
            f"Kueue accepts at most {KUEUE_MAX_MAPPINGS}; remove DeviceClasses or give some no gpuClass")))
    return problems


def _cohort_tree_problems(platform: Platform, doc) -> list[Problem]:
    """Nested cohorts that form a cycle (Kueue stops every member of it; KAI needs a tree), and
    cohort settings a scheduler does not read."""
    problems = []
    settings = platform.queues
    if platform.scheduler == "none" and (settings.cohorts or settings.spare_cohort):
        key = "cohorts" if settings.cohorts else "spareCohort"
        problems.append(doc.problem(platform_path("queues", key), "the stack's scheduler is 'none', so cohort settings have no effect; set `scheduler: kueue` or `kai`, or remove them", severity="warning"))
    if platform.scheduler == "kai" and settings.spare_cohort:
        problems.append(doc.problem(platform_path("queues", "spareCohort"), "KAI queues have no per-pool quota: idle GPUs are shared by over-quota weight, and spareCohort has no effect; remove it", severity="warning"))
    reported: set[str] = set()
    for name in sorted(settings.cohorts):
        chain = cohort_chain(name, platform)
        last = settings.cohorts.get(chain[-1])
        if last is None or last.parent is None or last.parent not in chain:
            continue
        cycle = chain[chain.index(last.parent):]
        if reported & set(cycle):
            continue
        reported |= set(cycle)
        first = min(cycle)
        loop = cycle[cycle.index(first):] + cycle[:cycle.index(first)] + [first]
        problems.append(doc.problem(platform_path("queues", "cohorts", first, "parent"), (
            f"cohorts nest in a cycle ({' -> '.join(loop)}): Kueue stops admitting in every cohort of a cycle; "
            "unset the parent of one of them"
        )))
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
    declared = {platform.queues.default_cohort, platform.queues.spare_cohort, *platform.queues.kai.departments,
                *(c for name in platform.queues.cohorts for c in cohort_chain(name, platform))} - {None}
    shared = sorted(set(members) | declared)
    result = []
    for cohort, alone in sorted(members.items()):
        if len(alone) != 1 or cohort in declared or alone[0].spec.queue.cohort is None:
            continue
        close = closest(cohort, [c for c in shared if c != cohort], cutoff=0.8)
        if close:
            result.append((alone[0], cohort, close, sorted(m.name for m in members.get(close, []))))
    return result


def _borrowing_problems(active, environment, lookalikes: list[tuple]) -> list[Problem]:
    platform = environment.platform
    problems = []
    facts = environment.facts
    for loaded in active:
        cohort = cohort_of(loaded.spec, platform)
        limits = borrowing_limits(loaded.spec, platform) or {}
        if cohort is None or not limits:
            continue
        lent_in_all = facts.lent_to(loaded.spec)
        for name, limit in sorted(limits.items()):
            if name not in platform.gpu_classes or limit == 0:
                continue
            total = lent_in_all.get(("class", name), 0)
            if limit > total:
                # Who lends what is walked only for the message: the check itself stays linear.
                held = {m: by.get(("class", name), 0) for m, by in facts.lenders(loaded.spec).items()}
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
    departments = {c for name in {kai_department_of(loaded.spec, platform) for loaded in active}
                   | set(platform.queues.kai.departments) | set(platform.queues.cohorts) for c in cohort_chain(name, platform)}
    for loaded in active:
        children.setdefault(kai_department_of(loaded.spec, platform), []).append(loaded)
        clash = [d for d in sorted(departments) if kai_parent_queue(d) == loaded.name]
        if clash:
            problems.append(loaded.doc.problem(("name",), f"tenant '{loaded.name}' has the name of the KAI parent queue of department '{clash[0]}'; parent and leaf queues share one set of names, rename the tenant or the department"))
    for name, department in sorted(platform.queues.kai.departments.items()):
        where = platform_path("queues", "kai", "departments", name)
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


def _num(value) -> str:
    return f"{float(value):g}"


def check_environment_queues(environment) -> list[Problem]:
    """Every queue check of one environment: each enabled tenant's settings, then across tenants.

    >>> check_environment_queues(staging)
    []
    """
    problems: list[Problem] = []
    for loaded in environment.tenants:
        if not loaded.spec.is_decommissioned:
            problems.extend(check_tenant_queue(loaded.spec, loaded.doc, environment.platform))
    problems.extend(check_queues(environment))
    return problems

