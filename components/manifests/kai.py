"""KAI Scheduler objects: a tree of `scheduling.run.ai/v2` Queues and the policy pinning tenants to theirs.

* one parent Queue `dept-<department>` per department (the tenants' `queue.cohort`, else the
  stack's `queues.defaultCohort`, else `tenants`): quotas from `queues.kai.departments`, else the
  sum of its tenants' quotas (of every tenant below it, for a department others nest under:
  `queues.cohorts.<name>.parent` is its `parentQueue`). The prefix keeps department names apart from
  tenant names, as both kinds of queue are cluster-scoped Queues;
* one leaf Queue per tenant, named like the tenant, whose quota is the tenant's `quota` in KAI's
  units: GPUs (a MIG slice counts as its compute slices, as KAI charges it), CPU millicores and
  memory in MB (10^6 bytes), both from the quota's requests. `limit` is -1 (no cap beyond the
  ResourceQuota) unless `queue.borrowingLimit` bounds every GPU class of the tenant;
* a ValidatingAdmissionPolicy and binding: KAI lets any pod name any queue, so in tenant
  namespaces a pod's `kai.scheduler/queue` label, and a PodGroup's `spec.queue`, must be the
  tenant's own leaf queue. The PodGroup rule also catches workloads without the label, which KAI
  would otherwise put in its default queue. A GPU share by annotation (`gpu-fraction`, `gpu-memory`,
  `gpu-fraction-num-devices`), which only the queue meters, must go through it, with a value KAI
  charges (`SHARE_VALUES`: over several devices the queue is charged devices x share; zero devices,
  devices without a share, or a fraction outside (0, 1] would be charged nothing).
"""

from __future__ import annotations

from fractions import Fraction

from ..fleet import gpu_capacity as cap
from ..fleet.facts import FleetFacts, TenantView
from ..fleet.queue_arithmetic import (
    KaiAmounts,
    cohort_chain,
    kai_declared_amount,
    kai_department_of,
    kai_gpu_units,
    kai_parent_queue,
)
from ..spec.tenant import Tenant
from .cel import cel_list
from .kai_config import kai_config
from .kai_sharing_policy import kai_sharing_policy
from .placement_policy import requests_gpu
from .meta import deny_binding, KAI_GPU_SHARING_ANNOTATIONS, KAI_QUEUE_LABEL, KAI_SCHEDULER_NAME, QUEUE_ADMISSION_LABEL, TENANT_LABEL, KubeObject, kube_object, object_meta, owned_labels, platform_labels

API_VERSION = "scheduling.run.ai/v2"
POLICY_NAME = "gpu-tenancy-kai-queue"
UNLIMITED = -1
WHOLE = "^[1-9][0-9]*$"
# What KAI v0.17 meters of each GPU-sharing annotation (pkg/scheduler/api/pod_info/pod_info.go): a
# fraction in (0, 1] of one GPU, MiB of one GPU, and the number of GPUs either is taken on (the queue
# is charged count x fraction). Any other value KAI ignores or charges as nothing: the annotation,
# CREATE only (it cannot change later), is refused unless its value is one KAI meters.
# (annotation, pattern of its value, what it must be, an annotation it needs beside it)
SHARE_VALUES = (
    ("gpu-fraction", "^(0?[.][0-9]*[1-9][0-9]*|1([.]0*)?)$", "a fraction of one GPU above 0 and at most 1 (0.5)", None),
    ("gpu-fraction-num-devices", WHOLE, "a whole number of GPUs above 0, beside gpu-fraction or gpu-memory (the share of each)",
     ("gpu-fraction", "gpu-memory")),
    ("gpu-memory", WHOLE, "MiB of one GPU, a whole number above 0 (2000)", None),
)


def _number(value: Fraction | int) -> int | float:
    """A JSON number: an int when whole (stable output), else a float (fractional GPUs)."""
    value = Fraction(value)
    return int(value) if value.denominator == 1 else float(value)


def _resource(quota: Fraction | int, limit: Fraction | int, weight: int) -> dict:
    return {"limit": _number(limit), "overQuotaWeight": weight, "quota": _number(quota)}


def gpu_limit(tenant: Tenant, view: TenantView) -> Fraction | int:
    """The leaf queue's GPU limit: quota plus borrowing when every class is bounded, else -1; the quota with `admission: direct`.

    KAI limits GPUs as one number across classes, so a bound exists only if `borrowingLimit`
    names each class the tenant may use (an unnamed class may borrow without limit).

    >>> from components.fleet.facts import FleetFacts
    >>> from components.spec.stack import Platform
    >>> p = Platform.model_validate({"labelDomain": "x.dev", "gpuClasses": {"a100": {
    ...     "model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi"}}})
    >>> t = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
    ...     "displayName": "A", "costCenter": "cc-1", "gpu": {"classes": ["a100"]}, "quota": {"gpu": 8},
    ...     "queue": {"borrowingLimit": {"a100": 2}}})
    >>> gpu_limit(t, FleetFacts("dev", p, ()).view(t))
    Fraction(10, 1)
    """
    platform = view.platform
    if tenant.queue.admission == "direct":
        # Its pods may bypass KAI, and its ResourceQuota is the nominal quota: nothing to borrow into.
        return view.kai_quota.gpu
    limits = view.borrowing_limits
    classes = [name for name in view.allowed_classes if name in platform.gpu_classes]
    if limits is None or any(name not in limits for name in classes):
        return UNLIMITED
    quota = view.kai_quota.gpu
    extra = sum(
        (kai_gpu_units(cap.class_resource(platform.gpu_classes[name]), limits[name]) for name in classes),
        Fraction(0),
    )
    return quota + extra


def leaf_queue(tenant: Tenant, view: TenantView) -> KubeObject:
    """The tenant's leaf Queue under its department.

    >>> leaf_queue(staging.tenants[0].spec, staging.view(staging.tenants[0].spec))["spec"]["parentQueue"]
    'dept-research'
    """
    platform = view.platform
    amounts = view.kai_quota
    weight = tenant.queue.weight if tenant.queue.weight is not None else 1
    spec = {
        "displayName": tenant.display_name,
        "parentQueue": kai_parent_queue(kai_department_of(tenant, platform)),
        "resources": {
            "cpu": _resource(amounts.cpu, UNLIMITED, weight),
            "gpu": _resource(amounts.gpu, gpu_limit(tenant, view), weight),
            "memory": _resource(amounts.memory, UNLIMITED, weight),
        },
    }
    return kube_object(API_VERSION, "Queue", object_meta(tenant.name, labels=owned_labels(tenant, view)), spec=spec)


def _members(facts: FleetFacts) -> list[Tenant]:
    return [spec for _, spec in facts.active]


def department_queues(facts: FleetFacts) -> list[KubeObject]:
    """One parent Queue per department that has tenants or is declared in the stack (`queues.kai.departments`,
    `queues.cohorts`), under the Queue of its `queues.cohorts.<name>.parent` when it has one.

    >>> [q["metadata"]["name"] for q in department_queues(staging.facts)]
    ['dept-research', 'dept-serving']
    """
    platform = facts.platform
    declared = platform.queues.kai.departments
    tenants: dict[str, list[KaiAmounts]] = {}
    for name in [*declared, *platform.queues.cohorts]:
        for department in cohort_chain(name, platform):
            tenants.setdefault(department, [])
    for tenant in _members(facts):
        for department in cohort_chain(kai_department_of(tenant, platform), platform):
            tenants.setdefault(department, [])
        tenants[kai_department_of(tenant, platform)].append(facts.view(tenant).kai_quota)
    below: dict[str, list[str]] = {}
    for name in tenants:
        chain = cohort_chain(name, platform)
        if len(chain) > 1:
            below.setdefault(chain[1], []).append(name)

    def quota(name: str, resource: str, seen: frozenset = frozenset()) -> Fraction:
        # Unless declared: its own tenants' quotas plus its sub-departments' (a cycle, refused by
        # validation, counts once).
        own = getattr(declared[name], resource) if name in declared else None
        if own is not None:
            return kai_declared_amount(resource, own)
        total = sum((getattr(a, resource) for a in tenants[name]), Fraction(0))
        return total + sum((quota(child, resource, seen | {name}) for child in below.get(name, []) if child not in seen | {name}), Fraction(0))

    labels = platform_labels(facts.environment_label)
    queues = []
    for name in sorted(tenants):
        department = declared.get(name)
        weight = department.over_quota_weight if department and department.over_quota_weight is not None else 1
        resources = {resource: _resource(quota(name, resource), UNLIMITED, weight) for resource in ("cpu", "gpu", "memory")}
        spec: dict = {"displayName": (department.display_name if department and department.display_name else name), "resources": resources}
        chain = cohort_chain(name, platform)
        if len(chain) > 1:
            spec["parentQueue"] = kai_parent_queue(chain[1])
        queues.append(kube_object(API_VERSION, "Queue", object_meta(kai_parent_queue(name), labels=labels), spec=spec))
    return queues


def queue_pinning_policy(facts: FleetFacts) -> list[KubeObject]:
    """ValidatingAdmissionPolicy + binding: in tenant namespaces, only the tenant's own queue.

    The namespace's tenant label names the queue (leaf queues are named like tenants), so one
    policy serves every tenant; tenants cannot edit their namespace's labels.

    >>> [o["kind"] for o in queue_pinning_policy(staging.facts)]
    ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']
    """
    labels = platform_labels(facts.environment_label)
    policy_spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
                {"apiGroups": ["scheduling.run.ai"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["podgroups"]},
            ],
        },
        "validations": [*_share_rules(), _kai_gpu_rule(), _fixed_share_annotations_rule(), _own_queue_rule()],
        "variables": _pinning_variables(facts),
    }
    policy = kube_object(
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", object_meta(POLICY_NAME, labels=labels), spec=policy_spec
    )
    return [policy, deny_binding(POLICY_NAME, labels)]


def _pinning_variables(facts: FleetFacts) -> list[dict[str, str]]:
    queue = (
        f"request.kind.kind == 'Pod' ? "
        f"(has(object.metadata.labels) && '{KAI_QUEUE_LABEL}' in object.metadata.labels ? object.metadata.labels['{KAI_QUEUE_LABEL}'] : '') : "
        f"(has(object.spec) && has(object.spec.queue) ? object.spec.queue : '')"
    )
    return [
        {"expression": f"namespaceObject.metadata.labels['{TENANT_LABEL}']", "name": "tenant"},
        {"expression": queue, "name": "queue"},
        {"expression": (f"has(namespaceObject.metadata.labels) && '{QUEUE_ADMISSION_LABEL}' in namespaceObject.metadata.labels && "
                        f"namespaceObject.metadata.labels['{QUEUE_ADMISSION_LABEL}'] == 'direct'"), "name": "direct"},
        {"expression": f"request.kind.kind == 'Pod' && ({requests_gpu(facts.platform)})", "name": "requestsGpu"},
        # KAI and cluster admins (they may update PodGroup status; no tenant role may): exempt from the GPU rule.
        {"expression": ("authorizer.group('scheduling.run.ai').resource('podgroups').subresource('status')"
                        ".namespace(request.namespace).check('update').allowed()"), "name": "scheduler"},
        {"expression": _sharing_annotations("object"), "name": "sharingAnnotations"},
        {"expression": "request.operation == 'UPDATE' ? " + _sharing_annotations("oldObject") + " : []",
         "name": "oldSharingAnnotations"},
        {"expression": (f"{cel_list(list(KAI_GPU_SHARING_ANNOTATIONS))}.filter(k, request.kind.kind == 'Pod' && "
                        "has(object.metadata.annotations) && k in object.metadata.annotations)"), "name": "sharing"},
        {"expression": _unmetered_share(), "name": "unmeteredShare"},
    ]


def _share_rules() -> list[dict[str, str]]:
    return [
        {
            # A GPU share asked for by annotation is metered by nothing but the queue, so it must go
            # through KAI, in the tenant's own queue (an unlabelled pod would only wait, unexplained).
            "expression": (
                "request.kind.kind != 'Pod' || size(variables.sharing) == 0 || "
                f"(variables.queue == variables.tenant && has(object.spec.schedulerName) && object.spec.schedulerName == '{KAI_SCHEDULER_NAME}')"
            ),
            "messageExpression": (
                "'pods with the KAI GPU-sharing annotation ' + variables.sharing[0] + ' must set schedulerName: "
                f"{KAI_SCHEDULER_NAME} and label {KAI_QUEUE_LABEL}: ' + variables.tenant + ' (only the tenant\\'s KAI queue "
                "meters GPU shares; ResourceQuota cannot)'"
            ),
            "reason": "Forbidden",
        },
        {
            # The queue charges what KAI reads of the annotations; a value it cannot read (a fraction
            # of 0 or above 1, zero devices, devices without a share) is a share no queue counts.
            "expression": (
                "request.kind.kind != 'Pod' || request.operation != 'CREATE' || size(variables.unmeteredShare) == 0"
            ),
            "messageExpression": (
                "'annotation ' + variables.unmeteredShare[0] + '=\\'' + string(object.metadata.annotations[variables.unmeteredShare[0]]) + "
                "'\\' is refused: KAI\\'s queue, the only meter of GPU shares, cannot charge it as written; it must be ' + "
                + _share_requirements() + "[variables.unmeteredShare[0]]"
            ),
            "reason": "Forbidden",
        },
    ]


def _kai_gpu_rule() -> dict[str, str]:
    return {
        # Every GPU a pod holds must be in KAI's books, or KAI cannot reclaim it for the
        # queue that is owed it; only a `queue.admission: direct` tenant may run beside KAI.
        "expression": (
            "request.kind.kind != 'Pod' || request.operation != 'CREATE' || variables.direct || !variables.requestsGpu || "
            "variables.scheduler || "
            # Any queue label will do here: the rule below says which one, in its own words.
            f"(variables.queue != '' && has(object.spec.schedulerName) && object.spec.schedulerName == '{KAI_SCHEDULER_NAME}')"
        ),
        "messageExpression": (
            f"'a pod that requests GPUs must set schedulerName: {KAI_SCHEDULER_NAME} and label {KAI_QUEUE_LABEL}: ' + variables.tenant"
            " + ' (GPUs are scheduled through the tenant\\'s KAI queue only; on a Deployment or StatefulSet, in the pod template)'"
        ),
        "reason": "Forbidden",
    }


def _fixed_share_annotations_rule() -> dict[str, str]:
    return {
        # Placement checks a pod's spec; these annotations are metadata, so a pending pod must not gain them later.
        "expression": (
            "request.kind.kind != 'Pod' || request.operation != 'UPDATE' || "
            "variables.sharingAnnotations == variables.oldSharingAnnotations"
        ),
        "message": (
            f"the KAI GPU-sharing annotations ({', '.join(KAI_GPU_SHARING_ANNOTATIONS)}) of a pod cannot be "
            "added, changed or removed after it is created; create a new pod"
        ),
        "reason": "Forbidden",
    }


def _own_queue_rule() -> dict[str, str]:
    return {
        "expression": "request.kind.kind == 'Pod' ? (variables.queue == '' || variables.queue == variables.tenant) : variables.queue == variables.tenant",
        "messageExpression": (
            f"'{KAI_QUEUE_LABEL} must be ' + variables.tenant + ', the queue of the tenant that owns namespace ' "
            f"+ request.namespace + ' (got \\'' + variables.queue + '\\')'"
        ),
        "reason": "Forbidden",
    }


def _unmetered_share() -> str:
    """CEL: the pod's GPU-sharing annotations whose value KAI would not meter (SHARE_VALUES)."""
    annotations = "object.metadata.annotations"
    checks = []
    for key, pattern, _, needs in SHARE_VALUES:
        bad = f"!string({annotations}['{key}']).matches('{pattern}')"
        if needs:
            bad += " || !(" + " || ".join(f"'{other}' in {annotations}" for other in needs) + ")"
        checks.append(f"('{key}' in {annotations} && ({bad})) ? '{key}' : ''")
    return (f"request.kind.kind == 'Pod' && has({annotations}) ? [" + ", ".join(checks) + "].filter(k, k != '') : []")


def _share_requirements() -> str:
    """CEL: a map from each GPU-sharing annotation to what its value must be (for the message)."""
    return "{" + ", ".join(f"'{key}': '{what}'" for key, _, what, _ in SHARE_VALUES) + "}"


def _sharing_annotations(obj: str) -> str:
    """CEL: the KAI GPU-sharing annotations of `obj` (a Pod; for a PodGroup, none), as `key=value` strings."""
    keys = cel_list(list(KAI_GPU_SHARING_ANNOTATIONS))
    # `key=value` strings: `object` is dyn (the policy matches Pods and PodGroups), and the API
    # server's type checker refuses a list mixing a string key with a dyn value.
    return (f"(request.kind.kind == 'Pod' && has({obj}.metadata.annotations) ? "
            f"{keys}.filter(k, k in {obj}.metadata.annotations).map(k, k + '=' + string({obj}.metadata.annotations[k])) : [])")


def tenant_kai_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's leaf Queue.

    >>> [(o["kind"], o["metadata"]["name"]) for o in tenant_kai_objects(staging.tenants[0].spec, staging.view(staging.tenants[0].spec))]
    [('Queue', 'eval')]
    """
    return [leaf_queue(tenant, view)]


def platform_kai_objects(facts: FleetFacts) -> list[KubeObject]:
    """Department Queues, the queue-pinning and GPU-sharing admission policies, and the `kai-config` fields the stack sets.

    >>> [(o["kind"], o["metadata"]["name"]) for o in platform_kai_objects(staging.facts)][2:]
    [('ValidatingAdmissionPolicy', 'gpu-tenancy-kai-queue'), ('ValidatingAdmissionPolicyBinding', 'gpu-tenancy-kai-queue'), ('ValidatingAdmissionPolicy', 'gpu-tenancy-kai-sharing'), ('ValidatingAdmissionPolicyBinding', 'gpu-tenancy-kai-sharing'), ('Config', 'kai-config')]
    """
    return [*department_queues(facts), *queue_pinning_policy(facts), *kai_sharing_policy(facts),
            *kai_config(facts.platform, facts.environment_label)]
