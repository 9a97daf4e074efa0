"""What KAI's GPU sharing writes into tenant namespaces stays KAI's: one cluster-wide admission policy.

For a pod with a GPU share (`gpu-fraction`, `gpu-memory`) KAI's webhook sets the pod annotation
`runai/shared-gpu-configmap: <owner>-<7 random>-shared-gpu` and points the container's
`NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION` (and with `hamicore` `CUDA_DEVICE_MEMORY_LIMIT`) at the
ConfigMap `<prefix>-<container index>`, plus `envFrom` of `<prefix>-<index>-evar`; KAI's binder
creates both in the pod's namespace, owned by the pod, and writes the GPU it reserved into them.
The tenant roles may write ConfigMaps, so without this policy a developer could point their own
share at every GPU of the node or lift its memory limit by editing one. The policy
(`gpu-tenancy-kai-sharing`, namespaces with the tenant label) refuses:

* creating, updating or deleting a ConfigMap named like KAI's (`...-shared-gpu-<n>`,
  `...-shared-gpu-i<n>`, either with `-evar`) by anyone but KAI's binder
  (`queues.kai.binderServiceAccount`), the namespace's garbage collector (it deletes them with
  their pod) and platform operators: so a name a future pod's ConfigMap will use cannot be
  squatted either;
* a pod's `runai/shared-gpu-configmap` that does not end in `-shared-gpu` (KAI keeps a value the
  pod brings, and the binder would then write ConfigMaps outside the protected names), and any
  change of it after creation;
* with `kaiFractions.memoryBound: hamicore`: the per-pod opt-out of HAMi-core injection
  (annotation `kai-resource-isolator.io/inject`), added at creation or later.

A tenant member may still delete their own pod, and with it (by garbage collection) its ConfigMaps.
"""

from __future__ import annotations

from ..fleet.facts import FleetFacts
from ..spec.stack import Platform
from .cel import cel_string
from .meta import (
    deny_binding,
    HAMI_OPT_OUT_ANNOTATION,
    KAI_SHARED_GPU_CONFIGMAP_ANNOTATION,
    KAI_SHARED_GPU_CONFIGMAP_PATTERN,
    KAI_SHARED_GPU_PREFIX_SUFFIX,
    TENANT_LABEL,
    KubeObject,
    kube_object,
    object_meta,
    platform_labels,
)

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_NAME = "gpu-tenancy-kai-sharing"
_CONFIG_MAP = "request.resource.resource == 'configmaps'"
_POD = "request.resource.resource == 'pods'"


def binder_username(service_account: str) -> str:
    """The API server's username of a `namespace/name` ServiceAccount.

    >>> binder_username("kai-scheduler/binder")
    'system:serviceaccount:kai-scheduler:binder'
    """
    namespace, name = service_account.split("/")
    return f"system:serviceaccount:{namespace}:{name}"


def _annotation(obj: str, key: str) -> str:
    """CEL: the annotation's value on `obj`, or "" (the annotation absent)."""
    return (f"(has({obj}.metadata.annotations) && {cel_string(key)} in {obj}.metadata.annotations ? "
            f"{obj}.metadata.annotations[{cel_string(key)}] : '')")


def kai_sharing_policy(facts: FleetFacts) -> list[KubeObject]:
    """ValidatingAdmissionPolicy + binding that keep KAI's per-pod GPU-sharing ConfigMaps KAI's.

    >>> policy, binding = kai_sharing_policy(staging.facts)
    >>> policy["spec"]["variables"][0]["expression"]
    "request.userInfo.username == 'system:serviceaccount:kai-scheduler:binder'"
    """
    labels = platform_labels(facts.environment_label)
    policy_spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["configmaps"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
            ],
        },
        "variables": _variables(binder_username(facts.platform.queues.kai.binder_service_account)),
        "validations": [_config_map_rule(facts.platform), *_share_prefix_rules(), *_memory_bound_rules(facts.platform)],
    }
    policy = kube_object(API_VERSION, "ValidatingAdmissionPolicy", object_meta(POLICY_NAME, labels=labels), spec=policy_spec)
    return [policy, deny_binding(POLICY_NAME, labels)]


def _variables(binder: str) -> list[dict[str, str]]:
    return [
        {"name": "binder", "expression": f"request.userInfo.username == '{binder}'"},
        {
            "name": "platformOperator",
            "expression": (
                "authorizer.group('admissionregistration.k8s.io').resource('validatingadmissionpolicies')"
                f".name('{POLICY_NAME}').check('update').allowed()"
            ),
        },
        {
            "name": "operator",
            "expression": (
                # kube-system controllers: the garbage collector deletes a pod's ConfigMaps with the pod.
                "request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || "
                "request.userInfo.username == 'system:kube-controller-manager' || "
                "has(namespaceObject.metadata.deletionTimestamp) || variables.platformOperator"
            ),
        },
        {"name": "name", "expression": "request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name"},
    ]


def _config_map_rule(platform: Platform) -> dict[str, str]:
    """KAI's GPU-sharing ConfigMaps (by their name) are written by KAI's binder only."""
    return {
        "expression": f"!({_CONFIG_MAP}) || variables.binder || variables.operator || !variables.name.matches({cel_string(KAI_SHARED_GPU_CONFIGMAP_PATTERN)})",
        "messageExpression": (
            "'ConfigMap ' + variables.name + ' has the name of a KAI GPU-sharing ConfigMap (<pod>-<id>-shared-gpu-<n>): "
            f"only KAI\\'s binder ({platform.queues.kai.binder_service_account}) may create, change or delete it, "
            "since it holds the GPU a share may use (NVIDIA_VISIBLE_DEVICES) and its memory limit; choose another name'"
        ),
        "reason": "Forbidden",
    }


def _share_prefix_rules() -> list[dict[str, str]]:
    """A pod's ConfigMap-prefix annotation names only KAI's ConfigMaps and stays as created."""
    prefix = _annotation("object", KAI_SHARED_GPU_CONFIGMAP_ANNOTATION)
    old_prefix = _annotation("oldObject", KAI_SHARED_GPU_CONFIGMAP_ANNOTATION)
    return [
        {
            "expression": (
                f"!({_POD}) || request.operation == 'DELETE' || variables.operator || "
                f"{prefix} == '' || {prefix}.endsWith({cel_string(KAI_SHARED_GPU_PREFIX_SUFFIX)})"
            ),
            "messageExpression": (
                f"'annotation {KAI_SHARED_GPU_CONFIGMAP_ANNOTATION} must end in {KAI_SHARED_GPU_PREFIX_SUFFIX} (got \\'' + "
                f"{prefix} + '\\'): KAI names the pod\\'s GPU-sharing ConfigMaps after it, and only such names are KAI\\'s; "
                "leave it out and KAI sets it'"
            ),
            "reason": "Forbidden",
        },
        {
            "expression": f"!({_POD}) || request.operation != 'UPDATE' || variables.operator || {prefix} == {old_prefix}",
            "message": (
                f"annotation {KAI_SHARED_GPU_CONFIGMAP_ANNOTATION} of a pod cannot be added, changed or removed after it is "
                "created: it names the ConfigMaps KAI's binder writes the pod's GPU into"
            ),
            "reason": "Forbidden",
        },
    ]


def _memory_bound_rules(platform: Platform) -> list[dict[str, str]]:
    """Under a HAMi-core memory bound, no pod opts out of it."""
    if platform.kai_memory_bound != "hamicore":
        return []
    opt_out = _annotation("object", HAMI_OPT_OUT_ANNOTATION)
    return [{
        "expression": f"!({_POD}) || request.operation == 'DELETE' || variables.operator || {opt_out} == ''",
        "message": (
            f"annotation {HAMI_OPT_OUT_ANNOTATION} is refused in tenant namespaces: the stack bounds KAI GPU shares by "
            "HAMi-core (kaiFractions.memoryBound: hamicore), and a pod may not opt out of the bound"
        ),
        "reason": "Forbidden",
    }]
