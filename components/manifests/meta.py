"""Names, labels and metadata shared by every builder, so all generated objects look alike.

Every builder in this package is a pure function: validated specs in, plain Kubernetes objects
(JSON-ready dicts with camelCase keys, quantities as strings) out. No Pulumi import here.

Every label and annotation key a builder writes, selects on or reads back (`tenants import`) is
defined here, with the helpers that make label sets, so that one value (the environment label above
all) cannot be spelt two ways; tests/manifests/test_meta.py fails on a key spelt elsewhere.
"""

from __future__ import annotations

import functools
import marshal
from typing import Any, Callable, Mapping

from ..fleet.environment import Environment
from ..fleet.facts import TenantView
from ..spec.stack import Platform
from ..spec.tenant import Tenant

GROUP = "gpu-tenancy.dev"
TENANT_LABEL = f"{GROUP}/tenant"
ENVIRONMENT_LABEL = f"{GROUP}/environment"
COST_CENTER_LABEL = f"{GROUP}/cost-center"
LIFECYCLE_LABEL = f"{GROUP}/lifecycle"
# On the namespaces of a tenant with `queue.admission: direct`: the queue-pinning policies let its GPU pods start without the queue.
QUEUE_ADMISSION_LABEL = f"{GROUP}/queue-admission"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-tenancy"}
# On the operator's Stack CRs: whether the Stack deploys the environment's own objects or a shard.
STACK_ROLE_LABEL = f"{GROUP}/stack-role"

# Annotations of a tenant's namespaces (who it is, whom to call); the cost centre is also a label.
DISPLAY_NAME_ANNOTATION = f"{GROUP}/display-name"
DESCRIPTION_ANNOTATION = f"{GROUP}/description"
OWNERS_ANNOTATION = f"{GROUP}/owners"
CONTACTS_ANNOTATION = f"{GROUP}/contacts"
COST_CENTER_ANNOTATION = COST_CENTER_LABEL
PRIMARY_NAMESPACE_ANNOTATION = f"{GROUP}/primary-namespace"
# On a merged NetworkPolicy: the allow rules it stands for, for people reading the cluster.
NETWORK_RULES_ANNOTATION = f"{GROUP}/network-rules"
# On the PrometheusRule: where its alerts are explained.
DOCS_ANNOTATION = f"{GROUP}/docs"
# Grafana's dashboard sidecar files a dashboard ConfigMap into the folder this annotation names.
GRAFANA_FOLDER_ANNOTATION = "grafana_folder"

# Keys that others own and we write or select on.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Pod Security Admission reads `<prefix>/<mode>` and `<prefix>/<mode>-version` of a namespace.
POD_SECURITY_PREFIX = "pod-security.kubernetes.io"
POD_SECURITY_ENFORCE_LABEL = f"{POD_SECURITY_PREFIX}/enforce"
# What `tenants import` reads of namespaces and tenants made by others: their display name, the
# node selector that pins every pod of a namespace (PodNodeSelector admission, OpenShift's project
# node selector; Capsule writes the first on its Tenant's namespaces), a Capsule Tenant's description.
OPENSHIFT_DISPLAY_NAME_ANNOTATION = "openshift.io/display-name"
NODE_SELECTOR_ANNOTATIONS = ("scheduler.alpha.kubernetes.io/node-selector", "openshift.io/node-selector")
CAPSULE_DESCRIPTION_ANNOTATION = "info.projectcapsule.dev/description"
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
# The taint of shared GPU pools: GKE's own GPU node taint, the key the NVIDIA device plugin, GPU
# Operator and DCGM daemonsets already tolerate, and the one ExtendedResourceToleration adds for
# pods requesting nvidia.com/gpu; so platform daemonsets keep running and no second key is invented.
GPU_TAINT_KEY = "nvidia.com/gpu"
# What a GPU pod carries to run on shared GPU pools where no Kueue flavor adds it (docs/gpu-sharing.md).
GPU_TAINT_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
GPU_TAINT_VALUE = "present"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
KUEUE_QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"   # the scheduling gate Kueue's pod integration sets and lifts
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SCHEDULER_NAME = "kai-scheduler"  # KAI's default --scheduler-name
# Pod annotations by which KAI gives a pod a share of a GPU without any resource request
# (pkg/common/constants of KAI v0.17): ResourceQuota cannot see them, only KAI's queue meters them.
KAI_GPU_SHARING_ANNOTATIONS = ("gpu-fraction", "gpu-fraction-num-devices", "gpu-memory")
# KAI's admission webhook names a GPU-sharing pod's ConfigMaps by this pod annotation
# (`<owner>-<7 random>-shared-gpu`, kept if the pod already has one); the binder then writes
# `<prefix>-<container index>` (NVIDIA_VISIBLE_DEVICES, GPU_PORTION, CUDA_DEVICE_MEMORY_LIMIT) and
# `<prefix>-<index>-evar`, init containers `-i<index>` (pkg/binder/common/gpusharingconfigmap, KAI v0.17).
KAI_SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
KAI_SHARED_GPU_PREFIX_SUFFIX = "-shared-gpu"
KAI_SHARED_GPU_CONFIGMAP_PATTERN = "^.+-shared-gpu-i?[0-9]+(-evar)?$"
# kai-resource-isolator (HAMi's webhook that loads HAMi-core into KAI shares): "false" skips a pod.
HAMI_OPT_OUT_ANNOTATION = "kai-resource-isolator.io/inject"
FIELD_MANAGER = "gpu-tenancy"
# The Pulumi Kubernetes provider's annotations of a patch resource: its field manager and force.
# The provider applies them to the object too (they are inputs like any other), so two patches of
# one object that name different managers conflict on PATCH_FIELD_MANAGER itself. That is why a
# node's taint patch names none (`is_taint_patch`): the provider gives it a manager of its own,
# `pulumi-kubernetes-<random>`, kept in the stack's state (docs/gpu-sharing.md).
PATCH_FIELD_MANAGER = "pulumi.com/patchFieldManager"
PATCH_FORCE = "pulumi.com/patchForce"

KubeObject = dict[str, Any]

# Fields the API server refuses to change in place, by (API group, kind): a change replaces the
# object (deleted, then created again with the same name). The provider knows the built-in ones;
# for our custom resources they come from the vendored CRDs (CEL `self == oldSelf`, checked by
# tests/resources). The Pulumi shell marks them `replace_on_changes`; `tenants diff` warns.
IMMUTABLE_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("kueue.x-k8s.io", "LocalQueue"): ("spec.clusterQueue",),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("roleRef",),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("roleRef",),
}


def immutable_fields(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields of `obj` that cannot change in place (dotted paths).

    >>> immutable_fields({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue"})
    ('spec.clusterQueue',)
    """
    return IMMUTABLE_FIELDS.get((obj["apiVersion"].rpartition("/")[0], obj["kind"]), ())


def gpu_class_label(platform: Platform) -> str:
    """Node label naming a node's GPU class.

    >>> gpu_class_label(Platform.model_validate({"labelDomain": "gpu.example.com"}))
    'gpu.example.com/gpu-class'
    """
    return f"{platform.label_domain}/gpu-class"


def pool_label(platform: Platform) -> str:
    """Node label naming a node's pool.

    >>> pool_label(Platform.model_validate({"labelDomain": "gpu.example.com"}))
    'gpu.example.com/pool'
    """
    return f"{platform.label_domain}/pool"


def tenant_label(platform: Platform) -> str:
    """Node label and taint key naming the tenant a dedicated node belongs to.

    >>> tenant_label(Platform.model_validate({"labelDomain": "gpu.example.com"}))
    'gpu.example.com/tenant'
    """
    return f"{platform.label_domain}/tenant"


def environment_label(environment: Environment) -> str:
    """The one value of the environment label: the stack's `environment`, else the stack name (a fleet fact).

    >>> platform = Platform(labelDomain="gpu.example.com", environment="production")
    >>> environment_label(Environment("prod", platform, None, []))
    'production'
    """
    return environment.facts.environment_label


def tenant_labels(tenant: str, environment: str) -> dict[str, str]:
    """Labels on every object that belongs to a tenant; `environment` is `environment_label(...)`.

    >>> tenant_labels("team-a", "prod")["gpu-tenancy.dev/tenant"]
    'team-a'
    """
    return {**MANAGED_BY, TENANT_LABEL: tenant, ENVIRONMENT_LABEL: environment}


def platform_labels(environment: str) -> dict[str, str]:
    """Labels on cluster-wide objects that belong to no single tenant; `environment` is `environment_label(...)`.

    >>> platform_labels("prod")
    {'app.kubernetes.io/managed-by': 'gpu-tenancy', 'gpu-tenancy.dev/environment': 'prod'}
    """
    return {**MANAGED_BY, ENVIRONMENT_LABEL: environment}


def owned_labels(tenant: Tenant, view: TenantView) -> dict[str, str]:
    """Labels every object of the tenant carries (namespaced or not).

    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
    >>> owned_labels(t, Environment("dev", Platform(labelDomain="gpu.example.com"), None, []).view(t))
    {'app.kubernetes.io/managed-by': 'gpu-tenancy', 'gpu-tenancy.dev/tenant': 'a', 'gpu-tenancy.dev/environment': 'dev'}
    """
    return tenant_labels(tenant.name, view.environment_label)


def object_meta(
    name: str,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`metadata` with sorted labels and annotations; empty maps are left out.

    >>> object_meta("quota", namespace="team-a", labels={"b": "2", "a": "1"}, annotations={})
    {'name': 'quota', 'namespace': 'team-a', 'labels': {'a': '1', 'b': '2'}}
    """
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def kube_object(api_version: str, kind: str, metadata: dict[str, Any], **fields: Any) -> KubeObject:
    """A Kubernetes object as a plain dict, fields in the conventional order.

    >>> kube_object("v1", "ConfigMap", object_meta("settings", namespace="team-a"), data={"mode": "strict"})
    {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'settings', 'namespace': 'team-a'}, 'data': {'mode': 'strict'}}
    """
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **{k: v for k, v in fields.items() if v is not None}}


ADMISSION_API = "admissionregistration.k8s.io/v1"


def deny_binding(policy_name: str, labels: Mapping[str, str]) -> KubeObject:
    """The ValidatingAdmissionPolicyBinding that enforces a policy of the same name (`Deny`).

    >>> deny_binding("gpu-tenancy-guard-a", {})["spec"]
    {'policyName': 'gpu-tenancy-guard-a', 'validationActions': ['Deny']}
    """
    return kube_object(ADMISSION_API, "ValidatingAdmissionPolicyBinding", object_meta(policy_name, labels=labels),
                       spec={"policyName": policy_name, "validationActions": ["Deny"]})


TENANT_GRANT_API = "gpu-tenancy.dev/v1alpha1"
TENANT_GRANT_KIND = "TenantGrant"


def param_binding(name: str, policy_name: str, tenant: str, labels: Mapping[str, str]) -> KubeObject:
    """A binding that applies the environment's policy `policy_name` to the tenant's namespaces with
    the tenant's TenantGrant as its parameters (`Deny`, also when the grant is missing).

    >>> param_binding("gpu-tenancy-guard-a", "gpu-tenancy-guard", "a", {})["spec"]["paramRef"]
    {'name': 'a', 'parameterNotFoundAction': 'Deny'}
    """
    return kube_object(
        ADMISSION_API,
        "ValidatingAdmissionPolicyBinding",
        object_meta(name, labels=labels),
        spec={
            "matchResources": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant}}},
            "paramRef": {"name": tenant, "parameterNotFoundAction": "Deny"},
            "policyName": policy_name,
            "validationActions": ["Deny"],
        },
    )


def plain_copy(value: Any) -> Any:
    """A deep copy of plain JSON-like data (dicts, lists and immutable scalars), several times faster
    than `copy.deepcopy`, which tracks shared references that built objects never rely on.

    >>> rules = {"ingress": [{"from": [{"podSelector": {}}]}]}
    >>> copied = plain_copy(rules)
    >>> copied == rules, copied["ingress"][0] is rules["ingress"][0]
    (True, False)
    """
    return plain_copier(value)()


def plain_copier(value: Any) -> Callable[[], Any]:
    """A function that returns a fresh deep copy of the plain data `value` on each call, as
    `plain_copy` does, with `value` walked once: for constants handed out thousands of times.

    >>> rules = plain_copier([{"verbs": ["get"]}])
    >>> first, second = rules(), rules()
    >>> first == second == [{"verbs": ["get"]}], first[0] is second[0]
    (True, False)
    """
    try:
        # marshal's C walk, in format version 2: it has no back-references, so nothing the
        # original shares is shared in the copy. Only exact built-in types are marshalled.
        return functools.partial(marshal.loads, marshal.dumps(value, 2))
    except ValueError:
        return functools.partial(_copied, value)


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def is_taint_patch(obj: Mapping[str, Any]) -> bool:
    """Whether an object is the taint patch of a Node: a partial Node with `spec.taints` and no labels
    (and no field manager annotation, `PATCH_FIELD_MANAGER`).

    A static GPU node has two partial Nodes of the same name (labels, taints); this tells them apart.

    >>> taints = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"taints": []}}
    >>> is_taint_patch(taints), is_taint_patch({**taints, "metadata": {"name": "n1", "labels": {"a": "b"}}})
    (True, False)
    """
    return (obj.get("kind") == "Node" and "taints" in (obj.get("spec") or {})
            and not obj["metadata"].get("labels") and PATCH_FIELD_MANAGER not in (obj["metadata"].get("annotations") or {}))


def object_id(obj: Mapping[str, Any]) -> str:
    """Stable identity of an object: `apiVersion/Kind/namespace/name` (namespace empty for cluster scope);
    a Node's taint patch (`is_taint_patch`) is `v1/Node//<name>#taints`, beside its label patch `v1/Node//<name>`.

    >>> object_id({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    'v1/Namespace//a'
    """
    meta = obj["metadata"]
    base = f"{obj['apiVersion']}/{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"
    return f"{base}#taints" if obj["kind"] == "Node" and is_taint_patch(obj) else base


def sort_objects(objects: list[KubeObject]) -> list[KubeObject]:
    """Deterministic order: namespaces first, then by kind and identity.

    >>> objects = [kube_object("v1", "ConfigMap", object_meta("b", namespace="team-a")),
    ...            kube_object("v1", "Namespace", object_meta("team-a")),
    ...            kube_object("v1", "ConfigMap", object_meta("a", namespace="team-a"))]
    >>> [(o["kind"], o["metadata"]["name"]) for o in sort_objects(objects)]
    [('Namespace', 'team-a'), ('ConfigMap', 'a'), ('ConfigMap', 'b')]
    """
    first = {"Namespace": 0, "PriorityClass": 1, "ClusterRole": 2}
    return sorted(objects, key=lambda o: (first.get(o["kind"], 9), o["kind"], object_id(o)))
