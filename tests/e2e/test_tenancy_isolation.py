"""A hostile tenant member against the prod stack on a real kube-apiserver (issue 13).

Every attack class is tried as every role of the tenant (owner, developer, viewer, CI
ServiceAccount; minted client certificates), with writes as dry-run requests (admission runs in
full: RBAC, mutating plugins, ValidatingAdmissionPolicies, ResourceQuota, Pod Security). For each
(case, role) the server must answer exactly one of:

* the role may not even try (a SubjectAccessReview as admin says the verb is denied): 403 from RBAC,
  "cannot <verb> resource";
* the role may try: 403 whose message names the rule that refuses it (the policy and its text,
  the quota, Pod Security).

And the legitimate neighbour of each attack is admitted for every role RBAC lets try it.

Classes (issue 13): 1 dedicated nodes and GPU visibility, 2 priority, 3 cross-namespace affinity,
4 RoleBinding subjects and managed bindings, 5 Services, 6 Ingress, 7 Pod Security version,
8 guard-rail quotas, 9 service-account-token Secrets, 10 node read, 12 PodDisruptionBudgets
(issue 22). Class 11 (NetworkPolicy) needs a dataplane: tests/manifests/test_network_reachability.py
evaluates it, and the network lane (tests/e2e/network, `make e2e-network`) enforces it on packets
with kube-network-policies.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
from kubernetes import client

from components.fleet.budget import effective_limits, ephemeral_storage_quota
from components.load import load_environment
from components.spec.quantity import Quantity
from tests.e2e.queued import queued

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = load_environment(REPO_ROOT, "prod")
TENANTS = {t.name: t.spec for t in ENV.tenants}
DOMAIN = ENV.platform.label_domain
POOL, TENANT_KEY = f"{DOMAIN}/pool", f"{DOMAIN}/tenant"
GPU = "nvidia.com/gpu"
ROLES = ("owner", "developer", "viewer", "ci")


@dataclass(frozen=True)
class Member:
    tenant: str
    role: str
    user: str
    groups: tuple[str, ...]


def members(tenant: str, namespace: str) -> dict[str, Member]:
    """One member per role of the tenant: the first group of each role, and its CI ServiceAccount bound there."""
    spec = TENANTS[tenant]
    out = {}
    for role in ("owner", "developer", "viewer"):
        groups = getattr(spec.access, f"{role}s").groups
        if groups:
            out[role] = Member(tenant, role, f"e2e-{role}@{tenant}", (groups[0],))
    for grant in spec.access.ci_service_accounts:
        ns = grant.namespace or tenant
        if ns == namespace:
            out["ci"] = Member(tenant, "ci", f"system:serviceaccount:{ns}:{grant.name}",
                               ("system:serviceaccounts", f"system:serviceaccounts:{ns}"))
            break
    return out


# --------------------------------------------------------------------------
# requests
# --------------------------------------------------------------------------

PATHS = {
    "pods": "/api/v1/namespaces/{ns}/pods",
    "services": "/api/v1/namespaces/{ns}/services",
    "secrets": "/api/v1/namespaces/{ns}/secrets",
    "configmaps": "/api/v1/namespaces/{ns}/configmaps",
    "persistentvolumeclaims": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    "ingresses": "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
    "rolebindings": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "poddisruptionbudgets": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "nodes": "/api/v1/nodes",
    "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
}
GROUPS = {"ingresses": "networking.k8s.io", "poddisruptionbudgets": "policy", "rolebindings": "rbac.authorization.k8s.io", "priorityclasses": "scheduling.k8s.io"}
METHOD_VERB = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete", "GET": "get", "LIST": "list"}


def call(api: client.ApiClient, method: str, path: str, body: Any = None, dry_run: bool = True) -> tuple[int, str]:
    content = "application/merge-patch+json" if method == "PATCH" else "application/json"
    query = [("dryRun", "All")] if dry_run and method not in ("GET", "LIST") else []
    request = api.param_serialize("GET" if method == "LIST" else method, path, query_params=query,
                                  header_params={"Content-Type": content, "Accept": "application/json"},
                                  body=body, auth_settings=["BearerToken"])
    response = api.call_api(*request)
    response.read()
    text = response.data.decode(errors="replace")
    try:
        message = json.loads(text).get("message", text)
    except ValueError:
        message = text
    return response.status, message


def rbac_allows(admin: client.ApiClient, member: Member, verb: str, resource: str, namespace: str | None) -> bool:
    attributes = {"verb": verb, "group": GROUPS.get(resource, ""), "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    request = admin.param_serialize("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": member.user, "groups": list(member.groups), "resourceAttributes": attributes}},
        header_params={"Content-Type": "application/json", "Accept": "application/json"}, auth_settings=["BearerToken"])
    response = admin.call_api(*request)
    response.read()
    assert response.status == 201, response.data
    return bool(json.loads(response.data)["status"].get("allowed"))


# --------------------------------------------------------------------------
# bodies
# --------------------------------------------------------------------------


def pod(*, limits: dict | None = None, node_selector: dict | None = None, tolerations: list | None = None,
        affinity: dict | None = None, env: dict | None = None, **spec: Any) -> dict:
    container: dict = {"name": "main", "image": "registry.invalid/app:1",
                       "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    if limits:
        container["resources"] = {"limits": limits}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    for key in ("livenessProbe",):
        if key in spec:
            container[key] = spec.pop(key)
    body: dict = {"automountServiceAccountToken": False, "containers": [container],
                  "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}
    for key, value in (("nodeSelector", node_selector), ("tolerations", tolerations), ("affinity", affinity)):
        if value:
            body[key] = value
    body.update(spec)
    return queued({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"}, "spec": body})


def env_from_pod(*prefixes: str) -> dict:
    """A CPU pod reading every key of a ConfigMap as variables, once per prefix ("" for none)."""
    body = pod()
    body["spec"]["containers"][0]["envFrom"] = [
        {**({"prefix": p} if p else {}), "configMapRef": {"name": "settings", "optional": True}} for p in prefixes]
    return body


def own_pool(tenant: str) -> dict:
    pool = TENANTS[tenant].gpu.dedicated_pools[0]
    return {"node_selector": {POOL: pool},
            "tolerations": [{"key": TENANT_KEY, "operator": "Equal", "value": tenant, "effect": "NoSchedule"}]}


def required(*expressions: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


def service(**spec: Any) -> dict:
    spec.setdefault("ports", [{"port": 80, "targetPort": 8080}])
    if spec.get("type") == "ExternalName":
        spec.pop("ports")
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"}, "spec": spec}


def ingress(host: str, annotations: dict | None = None) -> dict:
    meta: dict = {"name": f"e2e-{uuid.uuid4().hex[:8]}"}
    if annotations:
        meta["annotations"] = annotations
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
            "spec": {"rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}]}}


def binding(subject: dict, name: str | None = None, role: str = "tenant-viewer") -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name or f"e2e-{uuid.uuid4().hex[:8]}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}, "subjects": [subject]}


def group(name: str) -> dict:
    return {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def pvc(size: str, storage_class: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class, "resources": {"requests": {"storage": size}}}}


def scratch_pod(*sizes: str) -> dict:
    """A pod with one container per size, each requesting and limited to that much ephemeral storage."""
    body = pod()
    template = body["spec"]["containers"][0]
    body["spec"]["containers"] = [
        {**template, "name": f"c{index}", "resources": {"requests": {"ephemeral-storage": size}, "limits": {"ephemeral-storage": size}}}
        for index, size in enumerate(sizes)
    ]
    return body


def data_object(kind: str, **fields: Any) -> dict:
    """A ConfigMap or Secret with the given data fields (data, binaryData, stringData)."""
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"}, **fields}


def b64(size: int) -> str:
    return base64.b64encode(b"x" * size).decode()


def token_pod(**token: Any) -> dict:
    """A pod running as the tenant's CI ServiceAccount with a projected token the kubelet would mint."""
    volume = {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token", **token}}]}}
    return pod(serviceAccountName=CI_ACCOUNT, volumes=[volume])


def pdb(**spec: Any) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def guard(tenant: str) -> str:
    return f"ValidatingAdmissionPolicy 'gpu-tenancy-guard' with binding 'gpu-tenancy-guard-{tenant}' denied request"


def placement(tenant: str) -> str:
    return f"ValidatingAdmissionPolicy 'gpu-tenancy-placement' with binding 'gpu-tenancy-placement-{tenant}' denied request"


# --------------------------------------------------------------------------
# the cases: (class, what, namespace, method, resource, body or path suffix, expected rule fragments)
# --------------------------------------------------------------------------


@dataclass
class Case:
    klass: int
    what: str
    namespace: str
    method: str
    resource: str
    body: Callable[[], Any] | None
    rule: tuple[str, ...] = ()         # fragments of the refusal (empty: a neighbour, must be admitted)
    suffix: str = ""                   # "/<name>" for PATCH/PUT/DELETE/GET
    setup: Callable[[Any], None] | None = field(default=None, repr=False)

    @property
    def tenant(self) -> str:
        return next(t for t, spec in TENANTS.items() if self.namespace in spec.all_namespaces)

    @property
    def id(self) -> str:
        return f"{self.klass}:{'attack' if self.rule else 'neighbour'}:{self.namespace}:{self.what}"


LF = "llm-finetune"
FOREIGN_POOL = "can reach node pool 'h100-serve', dedicated to tenant inference; dedicated nodes belong to their tenant for every pod"
GATED = "e2e-gated"
MANAGED = "tenant-owners"
CI_ACCOUNT = TENANTS[LF].access.ci_service_accounts[0].name
NGINX = "nginx.ingress.kubernetes.io/"
INGRESS_DOMAIN = ENV.platform.ingress_domain
OWN_HOST = f"{LF}.{INGRESS_DOMAIN}"
INFERENCE_HOST = ENV.platform.ingress_hosts.tenant_domains["inference"][0]
# eval sets no ephemeral storage of its own: the stack's guard rails bound it.
EVAL_SCRATCH_MAX = effective_limits(TENANTS["eval"], ENV.platform).max.ephemeral_storage
EVAL_SCRATCH_QUOTA = ephemeral_storage_quota(TENANTS["eval"], ENV.platform).requests
DATA_BYTES = ENV.platform.guard_rails.data_bytes_per_object
TOO_MUCH_DATA = (guard(LF), f"may hold at most {DATA_BYTES} bytes (guardRails.dataBytesPerObject)", f"this one holds {DATA_BYTES + 1}")
SHARED_TAINT = {"key": GPU, "operator": "Equal", "value": "present", "effect": "NoSchedule"}
CPU_ON_GPU_NODES = "only pods that request GPUs may tolerate taint nvidia.com/gpu (shared GPU pools)"
HOST_PROBE = {"httpGet": {"host": "169.254.169.254", "path": "/latest/meta-data/", "port": 80}}

def annotation_attack(what: str, name: str, value: str, refusal: str) -> Case:
    """An Ingress of llm-finetune's own host whose one controller annotation the guard refuses."""
    return Case(6, what, LF, "POST", "ingresses", lambda: ingress(OWN_HOST, {f"{NGINX}{name}": value}),
                (guard(LF), f"annotation {NGINX}{name} {refusal}"))


CASES: list[Case] = [
    # 1. Dedicated nodes belong to their tenant for every pod; GPU visibility needs a GPU request.
    Case(1, "CPU pod selecting another tenant's node by hostname", LF, "POST", "pods",
         lambda: pod(node_selector={"kubernetes.io/hostname": "gpu-h100-06"}), (placement(LF), FOREIGN_POOL)),
    Case(1, "CPU pod whose NotIn affinity leaves only another tenant's pool", LF, "POST", "pods",
         lambda: pod(affinity=required({"key": POOL, "operator": "NotIn", "values": ["h100-train", "a100-shared", "a100-mig"]},
                                       {"key": POOL, "operator": "Exists"})), (placement(LF), FOREIGN_POOL)),
    Case(1, "node name by matchFields", LF, "POST", "pods",
         lambda: pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
             {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-h100-07"]}]}]}}}), (placement(LF), FOREIGN_POOL)),
    Case(1, "hostname selector added to a gated pod", LF, "PATCH", "pods",
         lambda: {"spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-h100-08"}}}, (placement(LF), FOREIGN_POOL), suffix=f"/{GATED}"),
    Case(1, "NVIDIA_VISIBLE_DEVICES without a GPU request", LF, "POST", "pods",
         lambda: pod(env={"NVIDIA_VISIBLE_DEVICES": "all"}), (guard(LF), "environment variable NVIDIA_VISIBLE_DEVICES is refused")),
    Case(1, "NVIDIA_DRIVER_CAPABILITIES without a GPU request", LF, "POST", "pods",
         lambda: pod(env={"NVIDIA_DRIVER_CAPABILITIES": "all"}), (guard(LF), "environment variable NVIDIA_DRIVER_CAPABILITIES is refused")),
    Case(1, "envFrom prefix that spells NVIDIA_VISIBLE_DEVICES from a key", LF, "POST", "pods",
         lambda: env_from_pod("NVIDIA_"), (guard(LF), "envFrom prefix NVIDIA_ is refused")),
    Case(1, "ConfigMap key NVIDIA_VISIBLE_DEVICES (for envFrom)", LF, "POST", "configmaps",
         lambda: data_object("ConfigMap", data={"NVIDIA_VISIBLE_DEVICES": "all"}), (guard(LF), "key NVIDIA_VISIBLE_DEVICES is refused")),
    Case(1, "Secret stringData key NVIDIA_DRIVER_CAPABILITIES (for envFrom)", LF, "POST", "secrets",
         lambda: data_object("Secret", stringData={"NVIDIA_DRIVER_CAPABILITIES": "all"}), (guard(LF), "key NVIDIA_DRIVER_CAPABILITIES is refused")),
    Case(1, "envFrom with an ordinary prefix and with none", LF, "POST", "pods", lambda: env_from_pod("APP_", "")),
    Case(1, "ConfigMap with ordinary keys", LF, "POST", "configmaps",
         lambda: data_object("ConfigMap", data={"VISIBLE_DEVICES": "all", "MODEL": "llama"})),
    Case(1, "GPU RuntimeClass without a GPU request", LF, "POST", "pods",
         lambda: pod(runtimeClassName="nvidia"), (guard(LF), "RuntimeClass 'nvidia' exposes GPUs")),
    Case(1, "GPU pod on the tenant's own dedicated pool", LF, "POST", "pods", lambda: pod(limits={GPU: "1"}, **own_pool(LF))),
    Case(1, "CPU pod on shared nodes", LF, "POST", "pods", lambda: pod()),
    Case(1, "CPU pod on a shared node by hostname", LF, "POST", "pods", lambda: pod(node_selector={"kubernetes.io/hostname": "gpu-a100-01"})),
    Case(1, "CPU pod on the tenant's own node by hostname", LF, "POST", "pods",
         lambda: pod(node_selector={"kubernetes.io/hostname": "gpu-h100-01"}, tolerations=own_pool(LF)["tolerations"])),
    Case(1, "own-pool selector added to a gated pod", LF, "PATCH", "pods",
         lambda: {"spec": {"nodeSelector": {POOL: "h100-train"}}}, suffix=f"/{GATED}"),
    Case(1, "GPU pod with the nvidia RuntimeClass and driver capabilities", LF, "POST", "pods",
         lambda: pod(limits={GPU: "1"}, runtimeClassName="nvidia", env={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}, **own_pool(LF))),
    # 1. Shared GPU pools carry nvidia.com/gpu=present:NoSchedule: only GPU pods may tolerate it (issue 22 step 4).
    Case(1, "CPU pod tolerating the shared GPU pools' taint", "eval", "POST", "pods",
         lambda: pod(tolerations=[SHARED_TAINT]), (placement("eval"), CPU_ON_GPU_NODES)),
    Case(1, "CPU pod tolerating every value of the GPU taint key, on the shared pool", "eval", "POST", "pods",
         lambda: pod(node_selector={POOL: "a100-shared"}, tolerations=[{"key": GPU, "operator": "Exists"}]),
         (placement("eval"), CPU_ON_GPU_NODES)),
    Case(1, "GPU pod on the shared pool with the wildcard toleration", "eval", "POST", "pods",
         lambda: pod(limits={GPU: "1"}, node_selector={POOL: "a100-shared"}, tolerations=[{"operator": "Exists"}]),
         (placement("eval"), "a toleration with operator Exists and no key tolerates every taint")),
    Case(1, "GPU pod on a shared pool of a class the tenant is not granted", LF, "POST", "pods",
         lambda: pod(limits={GPU: "1"}, node_selector={POOL: "a100-shared"}, tolerations=[SHARED_TAINT]),
         (placement(LF), "node pool 'a100-shared' is not allowed for tenant llm-finetune")),
    Case(1, "GPU pod on its shared pool, tolerating the GPU taint", "eval", "POST", "pods",
         lambda: pod(limits={GPU: "1"}, node_selector={POOL: "a100-shared"}, tolerations=[SHARED_TAINT])),
    Case(1, "MIG pod tolerating the GPU taint by key (ExtendedResourceToleration's form)", "eval", "POST", "pods",
         lambda: pod(limits={"nvidia.com/mig-1g.10gb": "1"}, tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}])),
    # 2. Priority: only the platform's classes, each capped by quota.
    Case(2, "system-node-critical", LF, "POST", "pods", lambda: pod(priorityClassName="system-node-critical"),
         (guard(LF), "PriorityClass 'system-node-critical' is not granted to tenant llm-finetune")),
    Case(2, "system-cluster-critical", LF, "POST", "pods", lambda: pod(priorityClassName="system-cluster-critical"),
         (guard(LF), "PriorityClass 'system-cluster-critical' is not granted to tenant llm-finetune")),
    Case(2, "a granted class", LF, "POST", "pods", lambda: pod(priorityClassName="training")),
    # 3. Cross-namespace (anti-)affinity.
    Case(3, "required anti-affinity to every namespace", LF, "POST", "pods",
         lambda: pod(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
             {"labelSelector": {}, "namespaceSelector": {}, "topologyKey": "kubernetes.io/hostname"}]}}),
         (guard(LF), "pod (anti-)affinity with namespaces or a namespaceSelector is not granted to tenant llm-finetune")),
    Case(3, "anti-affinity within the namespace", LF, "POST", "pods",
         lambda: pod(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
             {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}})),
    # 4. RoleBinding subjects, managed RoleBindings.
    Case(4, "bind system:authenticated", LF, "POST", "rolebindings", lambda: binding(group("system:authenticated"), role="tenant-owner"),
         (guard(LF), "RoleBinding subject Group 'system:authenticated' is not a member of tenant llm-finetune")),
    Case(4, "bind system:unauthenticated", LF, "POST", "rolebindings", lambda: binding(group("system:unauthenticated"), role="tenant-owner"),
         (guard(LF), "RoleBinding subject Group 'system:unauthenticated' is not a member of tenant llm-finetune")),
    Case(4, "bind another namespace's ServiceAccount", LF, "POST", "rolebindings",
         lambda: binding({"kind": "ServiceAccount", "name": "default", "namespace": "eval"}),
         (guard(LF), "RoleBinding subject ServiceAccount 'default' in namespace eval is not a member of tenant llm-finetune")),
    Case(4, "make the tenant's viewers owners (edit the managed tenant-owners binding)", LF, "PATCH", "rolebindings",
         lambda: {"subjects": [group("llm-finetune-leads"), group("research-all")]}, (guard(LF), "are managed by the platform"),
         suffix=f"/{MANAGED}"),
    Case(4, "delete the managed tenant-owners binding", LF, "DELETE", "rolebindings", None,
         (guard(LF), "are managed by the platform"), suffix=f"/{MANAGED}"),
    Case(4, "bind the tenant's own group", LF, "POST", "rolebindings", lambda: binding(group("llm-finetune-eng"))),
    Case(4, "bind a ServiceAccount of the tenant's other namespace", LF, "POST", "rolebindings",
         lambda: binding({"kind": "ServiceAccount", "name": "default", "namespace": "llm-finetune-data"})),
    # 5. Services.
    Case(5, "spec.externalIPs", LF, "POST", "services", lambda: service(externalIPs=["10.20.0.5"]),
         (guard(LF), "may not set spec.externalIPs")),
    Case(5, "ExternalName not granted", LF, "POST", "services", lambda: service(type="ExternalName", externalName="datasets.acme.dev"),
         (guard(LF), "ExternalName 'datasets.acme.dev' is not granted to tenant llm-finetune")),
    Case(5, "ExternalName to an IP literal", "eval", "POST", "services", lambda: service(type="ExternalName", externalName="169.254.169.254"),
         (guard("eval"), "ExternalName '169.254.169.254' is not granted to tenant eval")),
    Case(5, "NodePort without a grant", LF, "POST", "services", lambda: service(type="NodePort"),
         ("exceeded quota: tenant-quota", "services.nodeports")),
    Case(5, "LoadBalancer without a grant", LF, "POST", "services", lambda: service(type="LoadBalancer"),
         ("exceeded quota: tenant-quota", "services.loadbalancers")),
    Case(5, "spec.loadBalancerIP", LF, "POST", "services", lambda: service(type="LoadBalancer", loadBalancerIP="203.0.113.7"),
         (guard(LF), "may not set spec.loadBalancerIP")),
    Case(5, "ClusterIP Service", LF, "POST", "services", lambda: service()),
    Case(5, "LoadBalancer where granted, address allocated", "inference", "POST", "services", lambda: service(type="LoadBalancer")),
    Case(5, "granted ExternalName", "eval", "POST", "services", lambda: service(type="ExternalName", externalName="datasets.acme.dev")),
    Case(5, "NodePort where granted", "inference", "POST", "services", lambda: service(type="NodePort")),
    # 6. Ingress.
    Case(6, "another tenant's hostname", LF, "POST", "ingresses", lambda: ingress("eval.apps.acme.dev"),
         (guard(LF), "Ingress host 'eval.apps.acme.dev' is not allowed")),
    Case(6, "configuration-snippet annotation", LF, "POST", "ingresses",
         lambda: ingress("llm-finetune.apps.acme.dev", {"nginx.ingress.kubernetes.io/configuration-snippet": "return 200;"}),
         (guard(LF), "annotation nginx.ingress.kubernetes.io/configuration-snippet is refused")),
    annotation_attack("auth-url to the metadata endpoint", "auth-url", "http://169.254.169.254/latest/meta-data/",
                      "is not on the allow-list of ingress-controller annotations"),
    annotation_attack("mirror-target to another tenant's pods", "mirror-target",
                      "http://web.inference.svc.cluster.local:8080$request_uri", "is not on the allow-list of ingress-controller annotations"),
    annotation_attack("auth-tls-secret naming another tenant's Secret", "auth-tls-secret", "inference/serving-ca",
                      "names a Secret of another namespace"),
    annotation_attack("proxy-ssl-secret naming another tenant's Secret", "proxy-ssl-secret", "eval/client-cert",
                      "names a Secret of another namespace"),
    # Issue 34: every host has one owner (validate refuses a tenant file claiming another's), so the
    # guard refuses the others' names and admits the tenant's own.
    Case(6, "a name below another tenant's hostname", LF, "POST", "ingresses", lambda: ingress("v2.eval.apps.acme.dev"),
         (guard(LF), "Ingress host 'v2.eval.apps.acme.dev' is not allowed")),
    Case(6, "another tenant's host outside the ingress domain (the stack grants api.acme.dev to inference)", LF, "POST",
         "ingresses", lambda: ingress(INFERENCE_HOST), (guard(LF), f"Ingress host '{INFERENCE_HOST}' is not allowed")),
    Case(6, "a wildcard over the ingress domain", LF, "POST", "ingresses", lambda: ingress(f"*.{INGRESS_DOMAIN}"),
         (guard(LF), f"Ingress host '*.{INGRESS_DOMAIN}' is not allowed")),
    Case(6, "the ingress domain itself", LF, "POST", "ingresses", lambda: ingress(INGRESS_DOMAIN),
         (guard(LF), f"Ingress host '{INGRESS_DOMAIN}' is not allowed")),
    Case(6, "the tenant's own host", LF, "POST", "ingresses", lambda: ingress(OWN_HOST)),
    Case(6, "the tenant's own wildcard", LF, "POST", "ingresses", lambda: ingress(f"*.{OWN_HOST}")),
    Case(6, "the host the stack grants the tenant", "inference", "POST", "ingresses", lambda: ingress(INFERENCE_HOST)),
    Case(6, "the tenant's own hostname", LF, "POST", "ingresses", lambda: ingress("ui.llm-finetune.apps.acme.dev")),
    Case(6, "ordinary controller annotations and the namespace's own client CA", LF, "POST", "ingresses",
         lambda: ingress(OWN_HOST, {f"{NGINX}rewrite-target": "/", f"{NGINX}proxy-body-size": "64m",
                                    f"{NGINX}auth-tls-secret": f"{LF}/client-ca", "cert-manager.io/cluster-issuer": "letsencrypt"})),
    # 12. PodDisruptionBudgets (inference owners hold the pod-disruption-budgets bundle): none that blocks a drain.
    Case(12, "maxUnavailable 0", "inference", "POST", "poddisruptionbudgets", lambda: pdb(maxUnavailable=0),
         (guard("inference"), "PodDisruptionBudgets of tenant inference must allow a disruption")),
    Case(12, "minAvailable 100%", "inference", "POST", "poddisruptionbudgets", lambda: pdb(minAvailable="100%"),
         (guard("inference"), "PodDisruptionBudgets of tenant inference must allow a disruption")),
    Case(12, "minAvailable (not allowed by the stack)", "inference", "POST", "poddisruptionbudgets", lambda: pdb(minAvailable=2),
         (guard("inference"), "minAvailable is refused by the stack (guardRails.pdbMinAvailable)")),
    Case(12, "a budget that allows one disruption", "inference", "POST", "poddisruptionbudgets", lambda: pdb(maxUnavailable=1)),
    # 7. Pod Security at the cluster's version (latest): probe host.
    Case(7, "probe with host", LF, "POST", "pods", lambda: pod(livenessProbe=HOST_PROBE),
         ('violates PodSecurity "baseline:latest"', "host")),
    Case(7, "probe without host", LF, "POST", "pods", lambda: pod(livenessProbe={"httpGet": {"path": "/healthz", "port": 8080}})),
    # 8. Guard-rail quotas.
    Case(8, "1 PiB claim", LF, "POST", "persistentvolumeclaims", lambda: pvc("1Pi", "standard"),
         ("exceeded quota: tenant-quota", "requests.storage")),
    Case(8, "claim on a StorageClass not granted", "eval", "POST", "persistentvolumeclaims", lambda: pvc("1Gi", "fast-nvme"),
         ("exceeded quota: tenant-quota", "fast-nvme.storageclass.storage.k8s.io/requests.storage")),
    Case(8, "pod with zero requests in a namespace with no compute budget", "llm-finetune-data", "POST", "pods",
         lambda: pod(limits={"cpu": "0", "memory": "0"}), ("exceeded quota: tenant-quota", "pods=0")),
    Case(8, "one container above the ephemeral-storage max (fills a node's disk)", "eval", "POST", "pods",
         lambda: scratch_pod(str(EVAL_SCRATCH_MAX + Quantity.parse("1Gi"))),
         (f"maximum ephemeral-storage usage per Container is {EVAL_SCRATCH_MAX}", "but limit is")),
    Case(8, "containers each at the max, together above the namespace's ephemeral-storage quota", "eval", "POST", "pods",
         lambda: scratch_pod(*[str(EVAL_SCRATCH_MAX)] * (int(EVAL_SCRATCH_QUOTA.value // EVAL_SCRATCH_MAX.value) + 1)),
         ("exceeded quota: tenant-quota", "requested: requests.ephemeral-storage=", f"limited: requests.ephemeral-storage={EVAL_SCRATCH_QUOTA}")),
    Case(8, "a container with scratch space within the guard rails", "eval", "POST", "pods", lambda: scratch_pod("10Gi")),
    Case(8, "a pod stating no ephemeral storage (gets the LimitRange default)", "eval", "POST", "pods", lambda: pod()),
    # Data bytes count keys too (one-letter keys below: 1 byte each).
    Case(8, "ConfigMap data one byte above the bound", LF, "POST", "configmaps",
         lambda: data_object("ConfigMap", data={"a": "x" * (DATA_BYTES // 2 - 1), "b": "x" * (DATA_BYTES - DATA_BYTES // 2)}), TOO_MUCH_DATA),
    Case(8, "ConfigMap data and binaryData together above the bound", LF, "POST", "configmaps",
         lambda: data_object("ConfigMap", data={"a": "x" * (DATA_BYTES - 2)}, binaryData={"b": b64(1)}), TOO_MUCH_DATA),
    Case(8, "ConfigMap of two-byte characters, few enough but too many bytes", LF, "POST", "configmaps",
         lambda: data_object("ConfigMap", data={"a": "\u00e9" * (DATA_BYTES // 2), "b": ""}), (guard(LF), "may hold at most")),
    Case(8, "Secret data above the bound", LF, "POST", "secrets", lambda: data_object("Secret", data={"a": b64(DATA_BYTES)}), TOO_MUCH_DATA),
    Case(8, "Secret stringData above the bound", LF, "POST", "secrets",
         lambda: data_object("Secret", stringData={"a": "x" * DATA_BYTES}), TOO_MUCH_DATA),
    Case(8, "many keys with small values above the bound", LF, "POST", "configmaps",
         lambda: data_object("ConfigMap", data={f"k{i:07d}": "" for i in range(DATA_BYTES // 8 + 1)}), (guard(LF), "may hold at most")),
    Case(8, "ConfigMap at the bound", LF, "POST", "configmaps",
         lambda: data_object("ConfigMap", data={"a": "x" * (DATA_BYTES - 12)}, binaryData={"b": b64(10)})),
    Case(8, "Secret at the bound", LF, "POST", "secrets", lambda: data_object("Secret", data={"a": b64(DATA_BYTES - 1)})),
    Case(8, "claim within the guard rails", LF, "POST", "persistentvolumeclaims", lambda: pvc("10Gi", "standard")),
    Case(8, "claim on the granted fast class", LF, "POST", "persistentvolumeclaims", lambda: pvc("1Ti", "fast-nvme")),
    # 9. Legacy ServiceAccount tokens.
    Case(9, "service-account-token Secret", LF, "POST", "secrets",
         lambda: {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                  "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}", "annotations": {"kubernetes.io/service-account.name": "trainer-ci"}}},
         (guard(LF), "Secrets of type kubernetes.io/service-account-token are refused")),
    Case(9, "the CI account's token for a foreign audience, valid 2^32 s, by a pod running as it", LF, "POST", "pods",
         lambda: token_pod(audience="https://ci.acme.dev", expirationSeconds=2**32),
         (guard(LF), "ServiceAccount tokens projected into pods of tenant llm-finetune must expire within")),
    Case(9, "the CI account's token for the API server, for its pipeline's pod", LF, "POST", "pods",
         lambda: token_pod(expirationSeconds=3600)),
    Case(9, "Opaque Secret", LF, "POST", "secrets",
         lambda: {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"}, "stringData": {"k": "v"}}),
]

ATTEMPTS = [(case, role) for case in CASES for role in ROLES if role in members(case.tenant, case.namespace)]


@pytest.fixture(scope="module")
def ready(apiserver, prod_stack):
    """RuntimeClass nvidia (the GPU Operator's), a gated pod to update, and every policy in effect."""
    admin = apiserver.api_client
    status, message = call(admin, "POST", "/apis/node.k8s.io/v1/runtimeclasses",
                           {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"},
                           dry_run=False)
    assert status in (201, 409), message
    gated = pod(schedulingGates=[{"name": "example.com/hold"}])
    gated["metadata"]["name"] = GATED
    status, message = call(admin, "POST", PATHS["pods"].format(ns=LF), gated, dry_run=False)
    assert status in (201, 409), message
    token = CASES[[c.what for c in CASES].index("service-account-token Secret")]

    def guards_in_effect() -> bool:
        return all(call(admin, "POST", PATHS["secrets"].format(ns=ns), token.body())[0] == 403 for ns in TENANTS)

    apiserver.wait_for(guards_in_effect, timeout=30, what="the guard policies to take effect")

    def placement_in_effect() -> bool:
        return call(admin, "POST", PATHS["pods"].format(ns=LF), CASES[0].body())[0] == 403

    apiserver.wait_for(placement_in_effect, timeout=30, what="the placement policies to take effect")
    return admin


_TALLY: dict[str, int] = {"attack": 0, "attack-by-rule": 0, "neighbour": 0, "neighbour-admitted": 0}


@pytest.mark.parametrize("case, role", ATTEMPTS, ids=[f"{c.id}:{r}" for c, r in ATTEMPTS])
def test_attack_is_refused_by_its_rule_and_neighbour_admitted(apiserver, ready, case, role, e2e_summary):
    member = members(case.tenant, case.namespace)[role]
    api = apiserver.client_for(member.user, member.groups)
    path = PATHS[case.resource].format(ns=case.namespace) + case.suffix
    status, message = call(api, case.method, path, case.body() if case.body else None)
    may_try = rbac_allows(ready, member, METHOD_VERB[case.method], case.resource, case.namespace)
    kind = "attack" if case.rule else "neighbour"
    _TALLY[kind] += 1
    if not may_try:
        assert status == 403 and f"cannot {METHOD_VERB[case.method]} resource" in message, (status, message)
    elif case.rule:
        assert status in (403, 422), (status, message)
        for fragment in case.rule:
            assert fragment in message, (fragment, message)
        _TALLY["attack-by-rule"] += 1
    else:
        assert 200 <= status < 300, (status, message)
        _TALLY["neighbour-admitted"] += 1
    if (case, role) == ATTEMPTS[-1]:
        e2e_summary.append(
            f"isolation (issue 13): {_TALLY['attack']} attacks as tenant members, {_TALLY['attack-by-rule']} refused by "
            f"the rule itself (the rest by RBAC); {_TALLY['neighbour']} neighbours, {_TALLY['neighbour-admitted']} admitted "
            "(the rest refused by RBAC)")


def test_every_attack_reaches_its_rule_for_some_role():
    """Not vacuous: for every attack at least one role gets past RBAC (checked statically from the roles)."""
    from components.manifests.rbac import bundle_rules, role_rules

    def may(role: str, verb: str, resource: str, tenant: str) -> bool:
        rbac_role = {"ci": "developer"}.get(role, role)
        rules = [*role_rules(rbac_role), *bundle_rules(TENANTS[tenant], rbac_role, ENV.view(TENANTS[tenant]))]
        return any(resource in r["resources"] and verb in r["verbs"] for r in rules)

    for case in CASES:
        roles = members(case.tenant, case.namespace)
        ci = next((g.role for g in TENANTS[case.tenant].access.ci_service_accounts), None)
        reach = [r for r in roles if may(ci if r == "ci" else r, METHOD_VERB[case.method], case.resource, case.tenant)]
        assert reach, case.id


@pytest.mark.parametrize("namespace", ["eval", LF])
def test_a_developers_pod_without_ephemeral_storage_gets_the_namespace_default(apiserver, prod_stack, ready, namespace):
    """The quota counts ephemeral-storage in every namespace, so the LimitRange must fill it in (else refused)."""
    member = members(namespace, namespace)["developer"]
    status, text = call(apiserver.client_for(member.user, member.groups), "POST", PATHS["pods"].format(ns=namespace), pod())
    assert status == 201, text
    resources = json.loads(text)["spec"]["containers"][0]["resources"]
    limits = effective_limits(TENANTS[namespace], ENV.platform)
    assert Quantity.parse(resources["requests"]["ephemeral-storage"]) == limits.default_request.ephemeral_storage
    assert Quantity.parse(resources["limits"]["ephemeral-storage"]) == limits.default.ephemeral_storage
    hard = prod_stack.find("ResourceQuota", "tenant-quota", namespace)["spec"]["hard"]
    assert {"requests.ephemeral-storage", "limits.ephemeral-storage"} <= set(hard)


# --------------------------------------------------------------------------
# 10. Node read is opt-in per stack (prod does not opt in)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_nodes_are_not_readable_but_scheduling_inventory_is(apiserver, prod_stack, role):
    assert not ENV.platform.tenant_access.node_read
    member = members(LF, LF)[role]
    api = apiserver.client_for(member.user, member.groups)
    for method, path in (("LIST", "/api/v1/nodes"), ("GET", "/api/v1/nodes/gpu-h100-06")):
        status, message = call(api, method, path)
        assert status == 403 and "cannot" in message and "resource \"nodes\"" in message, (status, message)
    status, message = call(api, "LIST", PATHS["priorityclasses"])
    assert status == 200, message


# --------------------------------------------------------------------------
# 4. After the refused bindings, anonymous requests still read nothing of the tenant
# --------------------------------------------------------------------------


def test_anonymous_requests_cannot_read_tenant_secrets(apiserver, ready):
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    try:
        with urllib.request.urlopen(f"{apiserver.url}/api/v1/namespaces/{LF}/secrets", context=context, timeout=10) as r:
            status = r.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    assert status in (401, 403)


# --------------------------------------------------------------------------
# Gateway API (issue 22 step 3b): no tenant role writes routes or ReferenceGrants
# --------------------------------------------------------------------------

GATEWAY_API = "gateway.networking.k8s.io"


def http_route(namespace: str) -> dict:
    """The attack a route would allow: attach to the platform's shared Gateway and send its traffic
    (and a mirror of it) to another tenant's Service."""
    foreign = {"name": "web", "namespace": "inference", "port": 8080}
    return {"apiVersion": f"{GATEWAY_API}/v1", "kind": "HTTPRoute", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}", "namespace": namespace},
            "spec": {"parentRefs": [{"name": "shared", "namespace": "gateway-system"}], "hostnames": ["eval.apps.acme.dev"],
                     "rules": [{"backendRefs": [foreign],
                                "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": foreign}}]}]}}


def reference_grant(namespace: str) -> dict:
    """Lets every HTTPRoute of another namespace reference the Services of this one."""
    return {"apiVersion": f"{GATEWAY_API}/v1beta1", "kind": "ReferenceGrant", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}", "namespace": namespace},
            "spec": {"from": [{"group": GATEWAY_API, "kind": "HTTPRoute", "namespace": "eval"}], "to": [{"group": "", "kind": "Service"}]}}


@pytest.mark.parametrize("resource, version, body", [("httproutes", "v1", http_route), ("referencegrants", "v1beta1", reference_grant)])
@pytest.mark.parametrize("tenant", sorted(TENANTS))
def test_no_tenant_member_writes_gateway_api_objects(apiserver, ready, tenant, resource, version, body):
    path = f"/apis/{GATEWAY_API}/{version}/namespaces/{tenant}/{resource}"
    # The API exists and the object is valid: the platform (admin) may create it, so a refusal is RBAC's.
    status, message = call(ready, "POST", path, body(tenant))
    assert status == 201, (status, message)
    roles = members(tenant, tenant)
    assert {"owner", "developer"} <= set(roles)
    for role, member in roles.items():
        api = apiserver.client_for(member.user, member.groups)
        for method in ("POST", "LIST"):
            status, message = call(api, method, path, body(tenant) if method == "POST" else None)
            verb = METHOD_VERB[method]
            assert status == 403 and f'cannot {verb} resource "{resource}" in API group "{GATEWAY_API}"' in message, (role, status, message)


def test_the_way_in_stays_the_guarded_ingress(apiserver, ready):
    """The neighbour of the Gateway API refusal: the same members publish their own host by Ingress."""
    for role in ("owner", "developer"):
        member = members(LF, LF)[role]
        status, message = call(apiserver.client_for(member.user, member.groups), "POST", PATHS["ingresses"].format(ns=LF), ingress(OWN_HOST))
        assert status == 201, (role, status, message)


# --------------------------------------------------------------------------
# The guard's parameters: one policy, a TenantGrant per tenant
# --------------------------------------------------------------------------

GRANTS = "/apis/gpu-tenancy.dev/v1alpha1/tenantgrants"


@pytest.mark.parametrize("tenant", sorted(TENANTS))
def test_no_tenant_member_changes_a_grant_or_the_guard(apiserver, ready, tenant):
    """A member who could widen its TenantGrant (or another's) would grant itself any group, host or
    priority; one who could update the shared guard policy would be an operator of every tenant."""
    own = next(m for m in members(tenant, tenant).values())
    writes = [
        ("PATCH", f"{GRANTS}/{tenant}", {"spec": {"groups": ["system:masters"]}}),
        *[("PATCH", f"{GRANTS}/{other}", {"spec": {"groups": [own.groups[0]]}}) for other in sorted(TENANTS) if other != tenant],
        ("DELETE", f"{GRANTS}/{tenant}", None),
        ("POST", GRANTS, {"apiVersion": "gpu-tenancy.dev/v1alpha1", "kind": "TenantGrant", "metadata": {"name": "e2e-mine"},
                          "spec": {"tenant": "e2e-mine"}}),
        ("PATCH", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/gpu-tenancy-guard",
         {"spec": {"failurePolicy": "Ignore"}}),
    ]
    for member in members(tenant, tenant).values():
        api = apiserver.client_for(member.user, member.groups)
        for method, path, body in writes:
            status, message = call(api, method, path, body)
            assert status == 403 and "cannot" in message, (member.role, method, path, status, message)
    # The neighbour: the platform's own identity may change it (a dry run here).
    status, message = call(ready, "PATCH", f"{GRANTS}/{tenant}", {"spec": {"groups": [own.groups[0]]}})
    assert status == 200, message


def test_without_its_grant_a_tenant_namespace_admits_nothing_the_guard_matches(apiserver, ready):
    """`parameterNotFoundAction: Deny`: a lost or not-yet-created TenantGrant fails closed (the guard
    and the placement policy alike). With it back, the same request is admitted again."""
    developer = members("eval", "eval")["developer"]
    api = apiserver.client_for(developer.user, developer.groups)
    plain = pod()
    assert 200 <= call(api, "POST", PATHS["pods"].format(ns="eval"), plain)[0] < 300
    grant = json.loads(_raw(ready, f"{GRANTS}/eval"))
    assert call(ready, "DELETE", f"{GRANTS}/eval", dry_run=False)[0] == 200
    try:
        def denied() -> bool:
            status, message = call(api, "POST", PATHS["pods"].format(ns="eval"), plain)
            return status in (403, 422) and "no params found" in message
        apiserver.wait_for(denied, timeout=30, what="the guard and placement bindings to deny without their TenantGrant")
        status, message = call(api, "POST", PATHS["pods"].format(ns="eval"), plain)
        # Both policies read the grant (pods match both); whichever the server evaluates first answers.
        assert "with binding 'gpu-tenancy-guard-eval'" in message or "with binding 'gpu-tenancy-placement-eval'" in message, message
        # A Service matches the guard alone: it too is refused.
        status, message = call(api, "POST", PATHS["services"].format(ns="eval"), service(ports=[{"port": 80}]))
        assert status in (403, 422) and "with binding 'gpu-tenancy-guard-eval'" in message and "no params found" in message, message
        # Another tenant's namespace keeps working: its own grant is there.
        neighbour = members("inference", "inference")["developer"]
        other = apiserver.client_for(neighbour.user, neighbour.groups)
        assert 200 <= call(other, "POST", PATHS["pods"].format(ns="inference"), pod())[0] < 300
    finally:
        body = {k: grant[k] for k in ("apiVersion", "kind", "spec")}
        body["metadata"] = {"name": "eval", "labels": grant["metadata"].get("labels", {})}
        assert call(ready, "POST", GRANTS, body, dry_run=False)[0] == 201
    apiserver.wait_for(lambda: 200 <= call(api, "POST", PATHS["pods"].format(ns="eval"), plain)[0] < 300,
                       timeout=30, what="the guard to admit again with its TenantGrant")


def _raw(api: client.ApiClient, path: str) -> str:
    request = api.param_serialize("GET", path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
    response = api.call_api(*request)
    response.read()
    return response.data.decode()
