"""DRA claims a tenant may write: only its granted DeviceClasses, no admin access, no `All`.

A tenant with a grant of some DeviceClass (`device_classes.device_class_grants` above 0) gets the
claim verbs on `resourceclaims` and `resourceclaimtemplates` (owners and developers write, viewers
read) together with a ValidatingAdmissionPolicy on both, in the tenant's namespaces; a tenant
without a grant gets neither (role bundles refuse `resource.k8s.io`). The policy checks every
request and every `firstAvailable` subrequest:

* `deviceClassName` is one of the tenant's granted DeviceClasses (quota meters each class, but a
  class the stack does not list has no quota key at all);
* `adminAccess` is not set: it gives access to devices already allocated to other claims, other
  tenants' included;
* `allocationMode: All` is refused: it takes every matching device of a node, and quota charges
  it 32 devices, so it is never what a tenant with a per-class grant means;
* a request of a kind the policy does not know (neither `exactly` nor `firstAvailable`) is refused;
* on `scheduler: kai` (`_SCHEDULER_RULES`): `firstAvailable` is refused too, since KAI's queues count
  only `exactly` requests; and a standalone ResourceClaim must carry `kai.scheduler/queue: <tenant>`,
  without which KAI leaves its pod unschedulable.

Where the devices are. A claim is allocated when a pod that uses it is scheduled, on devices of
the node the pod lands on, so the pod's placement is the claim's placement: the placement policy
treats a pod with `resourceClaims`, or asking for a DRA extended resource, as a GPU pod that must
select the tenant's pools. Request `selectors` are CEL over device attributes and can only narrow
the DeviceClass's own selection, never reach a node the pod cannot; they are left to the tenant.
"""

from __future__ import annotations

from typing import Callable

from ..fleet.facts import TenantView
from ..spec.tenant import Tenant
from .cel import cel_list, names_or_none
from .device_classes import device_class_grants
from .meta import deny_binding, KAI_QUEUE_LABEL, TENANT_LABEL, KubeObject, kube_object, object_meta, owned_labels

API_VERSION = "admissionregistration.k8s.io/v1"
NAME_PREFIX = "gpu-tenancy-claims"
DRA_GROUP = "resource.k8s.io"
CLAIM_RESOURCES = ("resourceclaims", "resourceclaimtemplates")


def claimable_device_classes(tenant: Tenant, view: TenantView) -> list[str]:
    """DeviceClasses the tenant has a grant for: the only ones its claims may name.

    >>> claimable_device_classes(dra.tenants[0].spec, dra.view(dra.tenants[0].spec))
    ['h100.gpu.dra.dev']
    """
    return sorted(name for name, count in device_class_grants(view.gpu_quota_by_class, view.platform, view.gpu_quota_by_resource).items() if count > 0)


def claim_rules(tenant: Tenant, role: str, view: TenantView) -> list[dict]:
    """RBAC rules for claims of one tenant role: write for owners and developers, read for viewers, none without a grant.

    >>> claim_rules(dra.tenants[0].spec, "viewer", dra.view(dra.tenants[0].spec))
    [{'apiGroups': ['resource.k8s.io'], 'resources': ['resourceclaims', 'resourceclaimtemplates'], 'verbs': ['get', 'list', 'watch']}]
    """
    if not claimable_device_classes(tenant, view):
        return []
    verbs = ["get", "list", "watch"]
    if role != "viewer":
        verbs += ["create", "update", "patch", "delete", "deletecollection"]
    return [{"apiGroups": [DRA_GROUP], "resources": list(CLAIM_RESOURCES), "verbs": verbs}]


def _subrequests() -> str:
    """CEL: each request's device choices (its `exactly`, or its `firstAvailable` list)."""
    return "variables.requests.map(r, has(r.exactly) ? [r.exactly] : (has(r.firstAvailable) ? r.firstAvailable : []))"


def _variables() -> list[dict[str, str]]:
    # A claim's devices are under spec, a template's under spec.spec; both checked by the same rules.
    devices = (
        'request.resource.resource == "resourceclaims" ? '
        "(has(object.spec.devices) ? object.spec.devices : {}) : "
        "(has(object.spec.spec.devices) ? object.spec.spec.devices : {})"
    )
    return [
        {"name": "devices", "expression": devices},
        {"name": "requests", "expression": "has(variables.devices.requests) ? variables.devices.requests : []"},
        {"name": "choices", "expression": _subrequests()},
    ]


def _kai_exactly_only(tenant: str) -> dict[str, str]:
    # KAI charges a queue for a claim's `exactly` requests alone (pkg/common/resources/dra.go,
    # countGPUDevicesFromClaim): devices chosen from a `firstAvailable` list would be held by no queue.
    return {
        "expression": "variables.requests.all(r, !has(r.firstAvailable))",
        "message": "firstAvailable is refused on this KAI stack: KAI's queues count only `exactly` requests, so devices "
                   "chosen from a list would be held by no queue; ask for one DeviceClass with `exactly`",
        "reason": "Forbidden",
    }


def _kai_claim_queue_label(tenant: str) -> dict[str, str]:
    # KAI schedules a pod using a standalone claim (not one made from a template) only when the claim
    # carries the pod's queue label (its validateSharedGpuClaimQueueLabel): say so at creation, not as
    # an Unschedulable pod later.
    label = f'object.metadata.labels["{KAI_QUEUE_LABEL}"]'
    return {
        "expression": f'request.resource.resource != "resourceclaims" || (has(object.metadata.labels) && '
                      f'"{KAI_QUEUE_LABEL}" in object.metadata.labels && {label} == "{tenant}")',
        "message": f"a ResourceClaim of tenant {tenant} needs the label {KAI_QUEUE_LABEL}: {tenant} on this KAI stack: KAI "
                   "schedules a pod with a standalone claim only when the claim names the pod's queue (claims made from "
                   "a ResourceClaimTemplate need no label)",
        "reason": "Forbidden",
    }


# What a scheduler needs of claims, refused only where that scheduler runs.
_SCHEDULER_RULES: dict[str, tuple[Callable[[str], dict[str, str]], ...]] = {
    "kai": (_kai_exactly_only, _kai_claim_queue_label),
}


def _validations(tenant: str, allowed: list[str], scheduler: str = "none") -> list[dict[str, str]]:
    choices = "variables.choices.all(list, list.all(s, {}))"
    return [
        {
            "expression": "variables.requests.all(r, has(r.exactly) || has(r.firstAvailable))",
            "message": "every device request needs `exactly` or `firstAvailable` (other request kinds are not checked, so not allowed)",
            "reason": "Forbidden",
        },
        {
            "expression": choices.format(f"s.deviceClassName in {cel_list(allowed)}"),
            "message": f"a claim of tenant {tenant} may name only the DeviceClasses it has a grant for: {names_or_none(allowed)}",
            "reason": "Forbidden",
        },
        {
            "expression": "variables.requests.all(r, !has(r.exactly) || !has(r.exactly.adminAccess) || !r.exactly.adminAccess)",
            "message": "adminAccess is refused: it reaches devices already allocated to other claims, other tenants' included",
            "reason": "Forbidden",
        },
        {
            "expression": choices.format('!has(s.allocationMode) || s.allocationMode != "All"'),
            "message": "allocationMode All is refused (it takes every matching device of a node and quota charges it 32); ask for a count",
            "reason": "Forbidden",
        },
        *(rule(tenant) for rule in _SCHEDULER_RULES.get(scheduler, ())),
    ]


def claim_policy(tenant: Tenant, view: TenantView) -> KubeObject:
    """The tenant's ValidatingAdmissionPolicy on ResourceClaims and ResourceClaimTemplates.

    >>> [v["message"][:20] for v in claim_policy(dra.tenants[0].spec, dra.view(dra.tenants[0].spec))["spec"]["validations"]][:1]
    ['every device request']
    """
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant.name}},
            "resourceRules": [
                {"apiGroups": [DRA_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": list(CLAIM_RESOURCES)}
            ],
        },
        "variables": _variables(),
        "validations": _validations(tenant.name, claimable_device_classes(tenant, view), view.platform.scheduler),
    }
    name = f"{NAME_PREFIX}-{tenant.name}"
    return kube_object(API_VERSION, "ValidatingAdmissionPolicy", object_meta(name, labels=owned_labels(tenant, view)), spec=spec)


def claim_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The claim policy and its Deny binding, for tenants with a DeviceClass grant ([] otherwise: no claim verbs either).

    >>> [o["kind"] for o in claim_objects(dra.tenants[0].spec, dra.view(dra.tenants[0].spec))]
    ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']
    """
    if not claimable_device_classes(tenant, view):
        return []
    policy = claim_policy(tenant, view)
    return [policy, deny_binding(policy["metadata"]["name"], owned_labels(tenant, view))]
