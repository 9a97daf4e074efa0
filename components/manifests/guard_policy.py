"""What a tenant member may not do with the objects RBAC lets them write, enforced at admission.

RBAC says *which* objects a role may write, never *what is in them*. The tenant roles may create
Pods, Services, Ingresses, ConfigMaps, Secrets, (owners) RoleBindings and (with a bundle) PodDisruptionBudgets; each of these carries a field that
reaches beyond the tenant. One ValidatingAdmissionPolicy for the environment (`gpu-tenancy-guard`),
applied to each tenant's namespaces by the tenant's binding (`gpu-tenancy-guard-<tenant>`) with the
tenant's TenantGrant as its parameters (tenant_grant.py), refuses:

* Pods: a PriorityClass the stack does not define (the system classes `system-node-critical` and
  `system-cluster-critical` preempt everything and escape every PriorityClass-scoped quota; the
  stack's classes are capped per tenant by quota); `NVIDIA_VISIBLE_DEVICES` set by hand (on a KAI
  stack, except as KAI's webhook sets it: in a share from the pod's own KAI ConfigMap, elsewhere
  `void` or `none`), or
  `NVIDIA_DRIVER_CAPABILITIES` or a GPU RuntimeClass without a GPU request (with the NVIDIA
  toolkit's defaults they expose GPUs no quota counted); on a stack whose KAI shares HAMi-core
  bounds (`kaiFractions.memoryBound: hamicore`), HAMi-core's own variables (`CUDA_DEVICE_MEMORY_LIMIT`
  and its per-device `_<n>` forms, `CUDA_DEVICE_SM_LIMIT[_<n>]`, `GPU_CORE_UTILIZATION_POLICY`,
  `CUDA_DEVICE_MEMORY_SHARED_CACHE`, `ACTIVE_OOM_KILLER`, `CUDA_TASK_PRIORITY`, `CUDA_REDIRECT`),
  except the bound KAI's webhook reads from the share's own KAI ConfigMap; the same variables through
  `envFrom`: a `prefix` that begins their names, and (ConfigMaps and Secrets) a key named like one,
  except in the ConfigMaps KAI's binder writes for GPU shares. Which variable is refused when is one
  table, `GUARDED_VARIABLES`;
* Pods: projected ServiceAccount tokens longer-lived than `guardRails.serviceAccountTokens` allows
  or for an audience it does not list (a pod may run as any ServiceAccount of its namespace, so
  otherwise a developer gets the CI account's token for any audience, for years);
* Services: `spec.externalIPs` (CVE-2020-8554: captures traffic for any IP); `type: ExternalName`
  except to the hostnames the tenant is granted (`network.externalNames`; none by default, never an
  IP address); `spec.loadBalancerIP` (claims a shared address; on UPDATE unless unchanged). A chosen
  `spec.clusterIP` cannot be refused here: the API server allocates the address before validating
  admission runs, so a chosen and an allocated one look the same to a policy;
* Ingresses: a host that is not the tenant's (`<tenant>.<ingressDomain>` and its subdomains, plus
  `network.ingressHosts`), a rule without host or a default backend (both catch every host), any
  `*snippet*` annotation (raw ingress-controller configuration), any controller annotation not on
  the stack's allow-list (`guardRails.ingressAnnotations`: nothing that makes the shared controller
  fetch, mirror or authenticate elsewhere, such as `auth-url` or `mirror-target`), and a Secret
  annotation (`auth-tls-secret`, `proxy-ssl-secret`, ...) naming another namespace's Secret;
* PodDisruptionBudgets (tenants with the `pod-disruption-budgets` bundle) that allow no disruption
  (`maxUnavailable: 0`, `minAvailable: 100%`) and, unless the stack sets `guardRails.pdbMinAvailable`,
  any `minAvailable` (it blocks a node drain whenever it reaches the replica count);
* Kueue Workloads (created by the Kueue controller from the tenant's Jobs) at a priority above the
  tenant's highest granted PriorityClass: a Job naming `system-node-critical` would otherwise get
  a Workload admitted ahead of everyone, although its pods are refused later;
* Secrets of type `kubernetes.io/service-account-token` (a token that never expires and outlives
  the membership of whoever created it);
* ConfigMaps and Secrets whose data (keys and values, binaryData too, in bytes) is above
  `guardRails.dataBytesPerObject` (256 KiB by default; the API server's own limit is 1 MiB), so that
  the object counts bound what they store in etcd;
* RoleBindings: subjects that are not the tenant's (its groups and users, ServiceAccounts of its
  own namespaces, names matching the stack's `tenantAccess.bindable*` patterns), never `system:`
  users or groups (`system:authenticated` would give every account the role); and any change to
  the RoleBindings this tool manages (`tenant-owners`, `tenant-developers`, `tenant-viewers`).

Platform operators are exempt from the RoleBinding rules: whoever may update this policy (the
deployment's own identity, cluster admins), kube-system controllers, and anyone while the
namespace is being deleted. The other rules hold for everybody in the tenant's namespaces.

Design: the stack's settings (PriorityClasses, guard rails, RuntimeClasses) are CEL literals of the
one policy; what differs per tenant is read from `params.spec` (its TenantGrant), and the messages
still name what is allowed. Inlined per tenant, the controller manager type-checked 1,000 copies
(tenant_grant.py says what that cost); onboarding a tenant still adds objects without changing
anyone else's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal

from .cel import TENANT, as_dyn, cel_list, cel_string, joined, names_or_none, said
from ..fleet.facts import FleetFacts, TenantView
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from .meta import (
    TENANT_GRANT_API,
    TENANT_GRANT_KIND,
    KAI_GPU_SHARING_ANNOTATIONS,
    KAI_SHARED_GPU_CONFIGMAP_ANNOTATION,
    KAI_SHARED_GPU_PREFIX_SUFFIX,
    TENANT_LABEL,
    KubeObject,
    kube_object,
    object_meta,
    owned_labels,
    param_binding,
    platform_labels,
)
from .grant_fields import TENANT_NAME, GrantField, strings
from .kai_sharing_policy import binder_username
from .placement_policy import _is_gpu_resource
from .quota import priority_cap
from .rbac import ROLES, role_binding_name

API_VERSION = "admissionregistration.k8s.io/v1"
NAME_PREFIX = "gpu-tenancy-guard"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
GPU_ENV_NO_DEVICES = ("none", "void")   # NVIDIA container toolkit: no GPU (KAI's deviceaccess plugin sets void)


@dataclass(frozen=True)
class GuardedVariable:
    """An environment variable a tenant's pods may not set themselves, and when it is refused:
    `always`, `without-gpu` (in a pod without a GPU request), or `hamicore` (on stacks whose KAI
    GPU shares HAMi-core bounds, `kaiFractions.memoryBound: hamicore`)."""

    name: str
    refused: Literal["always", "without-gpu", "hamicore"]
    per_device: bool = False   # `<name>_<device index>` too, which HAMi-core reads before `<name>`


GUARDED_VARIABLES = (
    # The NVIDIA container toolkit's: with its defaults they expose GPUs no quota counted.
    GuardedVariable("NVIDIA_VISIBLE_DEVICES", "always"),
    GuardedVariable("NVIDIA_DRIVER_CAPABILITIES", "without-gpu"),
    # HAMi-core's (libvgpu.so, Project-HAMi/HAMi-core: src/multiprocess/multiprocess_memory_limit.c,
    # src/libvgpu.c), read from the container's environment when the library starts; each one lifts or
    # moves the bound on a KAI share, so the opt-out annotation's refusal (kai_sharing_policy.py) holds for them.
    GuardedVariable("CUDA_DEVICE_MEMORY_LIMIT", "hamicore", per_device=True),   # the memory bound KAI's binder sets
    GuardedVariable("CUDA_DEVICE_SM_LIMIT", "hamicore", per_device=True),       # the compute bound
    GuardedVariable("GPU_CORE_UTILIZATION_POLICY", "hamicore"),      # DISABLE: no compute bound
    GuardedVariable("CUDA_DEVICE_MEMORY_SHARED_CACHE", "hamicore"),  # where the container's processes add up their memory
    GuardedVariable("ACTIVE_OOM_KILLER", "hamicore"),                # false: a process over the bound is not stopped
    GuardedVariable("CUDA_TASK_PRIORITY", "hamicore"),               # the share's priority among the GPU's shares
    GuardedVariable("CUDA_REDIRECT", "hamicore"),                    # another library for CUDA's calls instead of libvgpu.so
)


def guarded_variables(platform: Platform, *refused: str) -> list[GuardedVariable]:
    """The variables refused on this stack (those refused in one of the ways `refused`, if given):
    HAMi-core's only where it bounds KAI shares.

    >>> [v.name for v in guarded_variables(prod.platform)]
    ['NVIDIA_VISIBLE_DEVICES', 'NVIDIA_DRIVER_CAPABILITIES']
    >>> [v.name for v in guarded_variables(staging.platform, "hamicore")][:2]
    ['CUDA_DEVICE_MEMORY_LIMIT', 'CUDA_DEVICE_SM_LIMIT']
    """
    hamicore = platform.kai_memory_bound == "hamicore"
    return [v for v in GUARDED_VARIABLES
            if (hamicore or v.refused != "hamicore") and (not refused or v.refused in refused)]


def _names(variables: list[GuardedVariable]) -> list[str]:
    return [v.name for v in variables]


def _shown(variables: list[GuardedVariable]) -> str:
    """The variables for a message: `A or B`, a per-device one as `NAME[_<n>]`."""
    return " or ".join(f"{v.name}[_<n>]" if v.per_device else v.name for v in variables)


def _named(name: str, variables: list[GuardedVariable]) -> str:
    """CEL: `name` is one of the variables (`<name>_<n>` of a per-device one included)."""
    families = [v.name for v in variables if v.per_device]
    exact = f"{name} in {cel_list(_names(variables))}"
    return f"({exact} || {cel_list(families)}.exists(n, {name}.startsWith(n + \"_\")))" if families else exact


def _begins(prefix: str, variables: list[GuardedVariable]) -> str:
    """CEL: an envFrom `prefix` that a key would complete to one of the variables."""
    families = [v.name for v in variables if v.per_device]
    begins = f"{cel_list(_names(variables))}.exists(n, n.startsWith({prefix}))"
    return f"({begins} || {cel_list(families)}.exists(n, {prefix}.startsWith(n + \"_\")))" if families else begins


def policy_name() -> str:
    """Name of the environment's guard policy.

    >>> policy_name()
    'gpu-tenancy-guard'
    """
    return NAME_PREFIX


def binding_name(tenant: str) -> str:
    """Name of the binding that applies the guard policy, with the tenant's TenantGrant, to its namespaces.

    >>> binding_name("eval")
    'gpu-tenancy-guard-eval'
    """
    return f"{NAME_PREFIX}-{tenant}"


def _host_ok(host: str, exact: str, domains: str) -> str:
    """CEL: `host` is one of the list `exact`, or a subdomain of one of the list `domains`."""
    return f'({host} in {exact} || {domains}.exists(d, {host}.endsWith("." + d)))'


def _unset_or_kept(value: str, old: str) -> str:
    """CEL: `value` is empty, or, on UPDATE, the one the object already had (objects admitted
    before the rule existed stay updatable)."""
    return f'({value} == "" || (request.operation == "UPDATE" && has({old}) && {old} == {value}))'


def _own_secret(value: str) -> str:
    """CEL: an annotation value `[namespace/]name` names a Secret of the request's own namespace."""
    return f'(!{value}.contains("/") || {value}.startsWith(request.namespace + "/"))'


# --- what differs per tenant: the TenantGrant fields the rules read --------------------------------


def hosts(entries: Iterable[str], domain: str | None = None) -> tuple[list[str], list[str]]:
    """(hostnames, domains whose subdomains are allowed) of host entries (`*.example.com`: the
    subdomains of example.com), plus `domain` and its subdomains.

    >>> hosts(["a.example.org", "*.b.example.org"], "t.apps.example.com")
    (['a.example.org', 't.apps.example.com'], ['b.example.org', 't.apps.example.com'])
    """
    exact, domains = set(), set()
    if domain:
        exact.add(domain)
        domains.add(domain)
    for entry in entries:
        if entry.startswith("*."):
            domains.add(entry[2:])
        else:
            exact.add(entry)
    return sorted(exact), sorted(domains)


def ingress_hosts(tenant: Tenant, view: TenantView) -> tuple[list[str], list[str]]:
    """(hostnames, domains whose subdomains) an Ingress of the tenant may serve.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com", ingressDomain="apps.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", network={"ingressHosts": ["a.example.org", "*.b.example.org"]})
    >>> ingress_hosts(t, env.view(t))
    (['a.apps.example.com', 'a.example.org'], ['a.apps.example.com', 'b.example.org'])
    """
    domain = view.platform.ingress_domain
    return hosts(tenant.network.ingress_hosts, f"{tenant.name}.{domain}" if domain else None)


def granted_priority_classes(tenant: Tenant, view: TenantView) -> dict[str, int]:
    """The stack's PriorityClasses the tenant may use (its cap there is not `pods: 0`), with their values.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
    >>> sorted(granted_priority_classes(t, env.view(t)))
    ['batch', 'interactive']
    """
    granted = {}
    for name, spec in view.platform.priority_classes.items():
        cap = priority_cap(tenant, name, spec)
        if cap is None or cap.pods != 0:
            granted[name] = spec.value
    return dict(sorted(granted.items()))


def members(tenant: Tenant) -> tuple[list[str], list[str]]:
    """(groups, users) of the tenant's three roles, sorted.

    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1",
    ...     access={"owners": {"groups": ["a-leads"]}, "viewers": {"users": ["bob@example.com"]}})
    >>> members(t)
    (['a-leads'], ['bob@example.com'])
    """
    access = tenant.access
    groups = sorted({g for role in ROLES for g in getattr(access, f"{role}s").groups})
    users = sorted({u for role in ROLES for u in getattr(access, f"{role}s").users})
    return groups, users


def _members(tenant: Tenant, view: TenantView) -> tuple[list[str], list[str]]:
    return members(tenant)


def _external_names(tenant: Tenant, view: TenantView) -> tuple[list[str], list[str]]:
    return hosts(tenant.network.external_names)


# The TenantGrant fields the rules below read (tenant_grant.py builds the CRD schema and the grant from them).
NAMESPACES = GrantField("namespaces", strings("The tenant's namespaces (ServiceAccounts of these may be bound in its RoleBindings)."),
                        lambda source: list(source.tenant.all_namespaces))
GROUPS = GrantField("groups", strings("Groups of the tenant's roles (owners, developers, viewers)."), lambda source: source.once(_members)[0])
USERS = GrantField("users", strings("Users of the tenant's roles."), lambda source: source.once(_members)[1])
INGRESS_HOSTS = GrantField("ingressHosts", strings("Hostnames an Ingress of the tenant may serve."),
                           lambda source: source.once(ingress_hosts)[0])
INGRESS_DOMAINS = GrantField("ingressDomains", strings("Domains whose subdomains an Ingress of the tenant may serve."),
                             lambda source: source.once(ingress_hosts)[1])
EXTERNAL_NAMES = GrantField("externalNames", strings("Hostnames an ExternalName Service of the tenant may point to."),
                            lambda source: source.once(_external_names)[0])
EXTERNAL_NAME_DOMAINS = GrantField(
    "externalNameDomains", strings("Domains whose subdomains an ExternalName Service of the tenant may point to."),
    lambda source: source.once(_external_names)[1])
PRIORITY_CLASSES = GrantField(
    "priorityClasses",
    {
        "type": "array",
        "description": "The stack's PriorityClasses the tenant may use, with their values.",
        "items": {
            "type": "object",
            "required": ["name", "value"],
            "properties": {"name": {"type": "string"}, "value": {"type": "integer", "format": "int32"}},
        },
    },
    lambda source: [{"name": name, "value": value} for name, value in source.once(granted_priority_classes).items()],
)
MAX_PRIORITY = GrantField(
    "maxPriority",
    {"type": "integer", "format": "int32",
     "description": "The highest value of its PriorityClasses (0 when none): the cap on its Kueue Workloads' priority."},
    lambda source: max([0, *source.once(granted_priority_classes).values()]),
)
GRANT_FIELDS: tuple[GrantField, ...] = (
    NAMESPACES, GROUPS, USERS, INGRESS_HOSTS, INGRESS_DOMAINS, EXTERNAL_NAMES, EXTERNAL_NAME_DOMAINS, PRIORITY_CLASSES, MAX_PRIORITY,
)


def _is(resource: str) -> str:
    return f'(request.resource.resource == {cel_string(resource)})'


def _request_variables(platform: Platform) -> list[dict[str, str]]:
    gpu = _is_gpu_resource("r", platform)
    containers = "(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
    return [
        {"name": "tenant", "expression": TENANT_NAME.cel},
        {
            "name": "operator",
            "expression": (
                'request.userInfo.username.startsWith("system:serviceaccount:kube-system:") || '
                'request.userInfo.username == "system:kube-controller-manager" || '
                "has(namespaceObject.metadata.deletionTimestamp) || "
                'authorizer.group("admissionregistration.k8s.io").resource("validatingadmissionpolicies")'
                f'.name({cel_string(policy_name())}).check("update").allowed()'
            ),
        },
        {
            "name": "containers",
            "expression": f'{_is("pods")} ? {containers} : []',  # pods are matched on CREATE only: object is set
        },
        {
            "name": "requestsGpu",
            "expression": (
                "variables.containers.exists(c, has(c.resources) && ("
                f"(has(c.resources.limits) && c.resources.limits.exists(r, {gpu})) || "
                f"(has(c.resources.requests) && c.resources.requests.exists(r, {gpu}))))"
            ),
        },
    ]


def _gpu_env_variables(platform: Platform) -> list[dict[str, str]]:
    always = _names(guarded_variables(platform, "always"))
    without_gpu = _names(guarded_variables(platform, "without-gpu"))
    every = guarded_variables(platform)
    return [
        {
            "name": "gpuEnv",
            "expression": (
                "variables.containers.map(c, has(c.env) ? c.env.filter(e, "
                + (f"(e.name in {cel_list(always)}{_not_void('e')}{_not_kai_share_ref('e')})" if platform.scheduler == "kai"
                   else f"e.name in {cel_list(always)}")
                + f" || (!variables.requestsGpu && e.name in {cel_list(without_gpu)}))"
                ".map(e, e.name) : []).filter(l, size(l) > 0)"
            ),
        },
        {
            # `envFrom` turns every key of a ConfigMap or Secret into a variable, after its prefix: a
            # prefix that begins a GPU variable's name would spell it from an innocent key.
            "name": "gpuEnvPrefixes",
            "expression": (
                "variables.containers.map(c, has(c.envFrom) ? c.envFrom.filter(f, has(f.prefix) && f.prefix != \"\" && "
                f"{_begins('f.prefix', every)}).map(f, f.prefix) : []).filter(l, size(l) > 0)"
            ),
        },
    ]


def _gpu_env_key_variables(platform: Platform) -> list[dict[str, str]]:
    every = guarded_variables(platform)
    hamicore = guarded_variables(platform, "hamicore")
    return [
        {
            # ... and a key named like one, with no prefix, is the variable itself. KAI's binder writes
            # NVIDIA_VISIBLE_DEVICES into the per-pod ConfigMaps of GPU shares (only it may: kai_sharing_policy.py).
            "name": "gpuEnvKeys",
            "expression": (
                f'!({_is("configmaps")} || {_is("secrets")}) ? [] : '
                f"(has(object.data) ? object.data.filter(k, {_named('k', every)}) : []) + "
                f'({_is("configmaps")} && has(object.binaryData) ? object.binaryData.filter(k, {_named("k", every)}) : [])'
            ),
        },
        *([{
            # HAMi-core's variables, except as KAI's webhook sets them: CUDA_DEVICE_MEMORY_LIMIT from the
            # share's own KAI ConfigMap, which only KAI's binder writes.
            "name": "hamiCoreEnv",
            "expression": (
                f"variables.containers.map(c, has(c.env) ? c.env.filter(e, {_named('e.name', hamicore)}{_not_kai_share_ref('e')})"
                ".map(e, e.name) : []).filter(l, size(l) > 0)"
            ),
        }] if hamicore else []),
    ]


def _object_variables(platform: Platform) -> list[dict[str, str]]:
    return [
        {
            "name": "projectedTokens",
            "expression": (
                f'{_is("pods")} && has(object.spec.volumes) ? object.spec.volumes'
                ".filter(v, has(v.projected) && has(v.projected.sources))"
                ".map(v, v.projected.sources.filter(s, has(s.serviceAccountToken)).map(s, s.serviceAccountToken)) : []"
            ),
        },
        {
            "name": "runtimeClasses",
            "expression": cel_list(platform.gpu_operator.runtime_classes),
        },
        {
            # Bytes of a ConfigMap's or Secret's data, keys included (keys are ASCII). A policy sees
            # byte fields (Secret data, ConfigMap binaryData) as their base64 text, so their size is
            # computed from it; ConfigMap data is text, counted in UTF-8 bytes (size() of a string
            # counts code points).
            "name": "dataBytes",
            "expression": (
                f'{_is("configmaps")} ? '
                "(has(object.data) ? object.data.map(k, size(k) + size(bytes(object.data[k]))).sum() : 0) + "
                f"(has(object.binaryData) ? object.binaryData.map(k, size(k) + {_decoded_size('object.binaryData[k]')}).sum() : 0) : "
                f'{_is("secrets")} && has(object.data) ? object.data.map(k, size(k) + {_decoded_size("object.data[k]")}).sum() : 0'
            ),
        },
    ]


def _variables(platform: Platform) -> list[dict[str, str]]:
    # In this order: a variable may read the ones before it.
    return [*_request_variables(platform), *_gpu_env_variables(platform), *_gpu_env_key_variables(platform), *_object_variables(platform)]


def _binder(platform) -> str:
    """CEL (`|| ...`), on KAI stacks: the request is KAI's binder's."""
    if platform.scheduler != "kai":
        return ""
    return f" || request.userInfo.username == {cel_string(binder_username(platform.queues.kai.binder_service_account))}"


def _not_void(env: str) -> str:
    """CEL (`&& ...`): not `void` or `none`, which KAI's webhook sets (`blockNvidiaVisibleDevices`) in a
    share's other containers: NVIDIA_VISIBLE_DEVICES with these values shows no GPU."""
    return f" && !(has({env}.value) && {env}.value in {cel_list(GPU_ENV_NO_DEVICES)})"


def _not_kai_share_ref(env: str) -> str:
    """CEL (`&& ...`): not a value KAI's webhook sets. Into a GPU share it injects the variable read
    from the pod's own KAI ConfigMap (named after its `runai/shared-gpu-configmap`), which only KAI's
    binder may write (kai_sharing_policy.py), in a pod with a KAI sharing annotation (so placed and
    queued)."""
    prefix = f"object.metadata.annotations[{cel_string(KAI_SHARED_GPU_CONFIGMAP_ANNOTATION)}]"
    return (
        f" && !(has({env}.valueFrom) && has({env}.valueFrom.configMapKeyRef) && {env}.valueFrom.configMapKeyRef.key == {env}.name && "
        f"has(object.metadata.annotations) && {cel_list(KAI_GPU_SHARING_ANNOTATIONS)}.exists(k, k in object.metadata.annotations) && "
        f"{cel_string(KAI_SHARED_GPU_CONFIGMAP_ANNOTATION)} in object.metadata.annotations && "
        f"{prefix}.endsWith({cel_string(KAI_SHARED_GPU_PREFIX_SUFFIX)}) && "
        f"{env}.valueFrom.configMapKeyRef.name.startsWith({prefix} + \"-\"))"
    )


def _decoded_size(text: str) -> str:
    """CEL: the number of bytes a (padded) base64 string decodes to."""
    return f'(size({text}) / 4 * 3 - ({text}.endsWith("==") ? 2 : ({text}.endsWith("=") ? 1 : 0)))'



def _rule(expression: str, text: str, message_expression: str | None = None) -> dict[str, str]:
    """A validation whose message (`text`, TENANT for the tenant's name) is computed per request;
    the static `message`, shown only if that fails, says "the tenant"."""
    return {
        "expression": expression,
        "messageExpression": message_expression or said(text),
        "message": text.replace(TENANT, "the tenant"),
        "reason": "Forbidden",
    }


_SAID_TENANT = '" + variables.tenant + "'   # the tenant's name inside a CEL string literal of a messageExpression


def _priority_class_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    classes = sorted(platform.priority_classes)
    return [
        _rule(
            f'!{_is("pods")} || !has(object.spec.priorityClassName) || object.spec.priorityClassName in {cel_list(classes)}',
            f"pods of tenant {TENANT} may use only the platform's PriorityClasses ({names_or_none(classes)})",
            f'"PriorityClass \'" + object.spec.priorityClassName + "\' is not granted to tenant {name}: pods may use '
            f'only the platform\'s classes ({names_or_none(classes)}), each capped by a priority-<class> quota"',
        ),
    ]


def _gpu_env_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    every, hamicore = guarded_variables(platform), guarded_variables(platform, "hamicore")
    return [
        _rule(
            "size(variables.gpuEnv) == 0",
            f"NVIDIA_VISIBLE_DEVICES, or NVIDIA_DRIVER_CAPABILITIES without a GPU request, is refused in pods of tenant {TENANT}",
            f'"environment variable " + variables.gpuEnv[0][0] + " is refused in pods of tenant {name}: '
            'NVIDIA_VISIBLE_DEVICES is set by the device plugin for the GPUs a pod requests, and '
            'NVIDIA_DRIVER_CAPABILITIES needs a GPU request (nvidia.com resources); without one it exposes GPUs no quota counts"',
        ),
        *([_rule(
            "size(variables.hamiCoreEnv) == 0",
            f"HAMi-core's environment variables ({_shown(hamicore)}) are refused in pods of tenant {TENANT}",
            f'"environment variable " + variables.hamiCoreEnv[0][0] + " is refused in pods of tenant {name}: HAMi-core reads it, '
            'and the stack bounds KAI GPU shares by HAMi-core (kaiFractions.memoryBound: hamicore), which a pod may not lift or '
            'move; KAI sets the share\'s bound itself (CUDA_DEVICE_MEMORY_LIMIT from the pod\'s KAI ConfigMap)"',
        )] if hamicore else []),
        _rule(
            "size(variables.gpuEnvPrefixes) == 0",
            f"an envFrom prefix that begins {_shown(every)} is refused in pods of tenant {TENANT}",
            f'"envFrom prefix " + variables.gpuEnvPrefixes[0][0] + " is refused in pods of tenant {name}: it begins the name of '
            f'{_shown(every)}, which a ConfigMap or Secret key would then complete (choose a prefix that does not)"',
        ),
        _rule(
            f"size(variables.gpuEnvKeys) == 0 || variables.operator{_binder(platform)}",
            f"keys named {_shown(every)} are refused in ConfigMaps and Secrets of tenant {TENANT}",
            f'"key " + variables.gpuEnvKeys[0] + " is refused in ConfigMaps and Secrets of tenant {name}: through envFrom it '
            'becomes that environment variable, which only the device plugin (NVIDIA_VISIBLE_DEVICES) or a pod with a GPU '
            'request (NVIDIA_DRIVER_CAPABILITIES, set in its env) may set'
            + (", and HAMi-core's only KAI's binder (the stack bounds KAI GPU shares by HAMi-core)" if hamicore else "")
            + '; rename the key"',
        ),
    ]


def _token_and_runtime_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    tokens = platform.guard_rails.service_account_tokens
    return [
        _rule(
            "variables.projectedTokens.all(l, l.all(t, "
            f"(!has(t.expirationSeconds) || t.expirationSeconds <= {tokens.max_expiration_seconds}) && "
            f'(!has(t.audience) || t.audience == "" || t.audience in {cel_list(tokens.audiences)})))',
            f"ServiceAccount tokens projected into pods of tenant {TENANT} must expire within {tokens.max_expiration_seconds} "
            f"seconds and have no audience (the API server's) or one of: {names_or_none(tokens.audiences)} "
            "(guardRails.serviceAccountTokens): a pod may run as any ServiceAccount of its namespace, the CI account's too",
        ),
        _rule(
            f'!{_is("pods")} || variables.requestsGpu || !has(object.spec.runtimeClassName) || '
            "!(object.spec.runtimeClassName in variables.runtimeClasses)",
            f"a GPU RuntimeClass needs a GPU request in pods of tenant {TENANT}",
            f'"RuntimeClass \'" + object.spec.runtimeClassName + "\' exposes GPUs: pods of tenant {name} may use it '
            'only with a GPU request (nvidia.com resources)"',
        ),
    ]


def _service_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    granted_names = f'({EXTERNAL_NAMES.cel} + {EXTERNAL_NAME_DOMAINS.cel}.map(d, "*." + d))'
    return [
        _rule(
            f'!{_is("services")} || !has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0',
            f"Services of tenant {TENANT} may not set spec.externalIPs: they capture traffic meant for any address "
            "(CVE-2020-8554); use a LoadBalancer Service where granted",
        ),
        _rule(
            f'!{_is("services")} || !has(object.spec.loadBalancerIP) || '
            f'{_unset_or_kept("object.spec.loadBalancerIP", "oldObject.spec.loadBalancerIP")}',
            f"Services of tenant {TENANT} may not set spec.loadBalancerIP: it claims a shared load-balancer address "
            "another tenant or the platform may own; the load balancer allocates one",
        ),
        _rule(
            f'!{_is("services")} || !has(object.spec.type) || object.spec.type != "ExternalName" || '
            f'(has(object.spec.externalName) && {_host_ok("object.spec.externalName", EXTERNAL_NAMES.cel, EXTERNAL_NAME_DOMAINS.cel)})',
            f"ExternalName Services of tenant {TENANT} may point only to network.externalNames",
            f'"ExternalName \'" + (has(object.spec.externalName) ? object.spec.externalName : "") + "\' is not granted to tenant {name}; '
            f'granted: " + {joined(granted_names)} + '
            '" (network.externalNames; never IP addresses)"',
        ),
    ]


def _ingress_host_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    rule_hosts = '(has(object.spec.rules) ? object.spec.rules.map(r, has(r.host) ? r.host : "") : [])'
    tls_hosts = "(has(object.spec.tls) ? object.spec.tls.filter(t, has(t.hosts)).map(t, t.hosts) : [])"
    ingress_ok = lambda host: _host_ok(host, INGRESS_HOSTS.cel, INGRESS_DOMAINS.cel)  # noqa: E731
    ingress_rule = (
        f'"Ingress hosts of tenant {name} must be one of: " + {joined(INGRESS_HOSTS.cel)} + '
        f'", or a subdomain of: " + {joined(INGRESS_DOMAINS.cel)}'
    )
    return [
        _rule(
            f'!{_is("ingresses")} || {rule_hosts}.all(h, h != "" && {ingress_ok("h")})',
            f"Ingress hosts of tenant {TENANT} must be its own (network.ingressHosts, or a subdomain of <tenant>.<ingressDomain>)",
            f'"Ingress host \'" + {rule_hosts}.filter(h, !(h != "" && {ingress_ok("h")}))[0] + '
            f'"\' is not allowed (a rule without host catches every host); " + {ingress_rule}',
        ),
        _rule(
            f'!{_is("ingresses")} || {tls_hosts}.all(l, l.all(h, {ingress_ok("h")}))',
            f"a TLS host is not allowed; Ingress hosts of tenant {TENANT} must be its own",
            f'"a TLS host is not allowed; " + {ingress_rule}',
        ),
        _rule(
            f'!{_is("ingresses")} || !has(object.spec.defaultBackend)',
            f"Ingresses of tenant {TENANT} may not set spec.defaultBackend: it catches every host",
            f'"Ingresses of tenant {name} may not set spec.defaultBackend: it catches every host; " + {ingress_rule}',
        ),
    ]


def _ingress_annotation_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    annotations = platform.guard_rails.ingress_annotations
    allowed_annotations = sorted({*annotations.allowed, *annotations.secret_references})

    def not_allowed_annotation(key: str) -> str:
        # snippet keys have their own rule (and message); keys of no controller prefix are not the controller's
        return (f'(!{key}.contains("snippet") && {cel_list(annotations.controller_prefixes)}.exists(p, {key}.startsWith(p)) && '
                f"!({key} in {cel_list(allowed_annotations)}))")

    return [
        _rule(
            f'!{_is("ingresses")} || !has(object.metadata.annotations) || !object.metadata.annotations.exists(k, k.contains("snippet"))',
            f"snippet annotations are refused on Ingresses of tenant {TENANT}",
            '"annotation " + object.metadata.annotations.filter(k, k.contains("snippet"))[0] + '
            f'" is refused in tenant {name}: snippet annotations inject raw configuration into the shared ingress controller"',
        ),
        _rule(
            f'!{_is("ingresses")} || !has(object.metadata.annotations) || '
            f"object.metadata.annotations.all(k, !{not_allowed_annotation('k')})",
            f"ingress-controller annotations of tenant {TENANT} must be on the stack's allow-list (guardRails.ingressAnnotations)",
            f'"annotation " + object.metadata.annotations.filter(k, {not_allowed_annotation("k")})[0] + '
            f'" is not on the allow-list of ingress-controller annotations of tenant {name}: controller annotations that '
            'fetch, mirror or authenticate elsewhere (auth-url, mirror-target, ...) make the shared controller reach other '
            f'tenants\' addresses; allowed (guardRails.ingressAnnotations): {names_or_none(allowed_annotations)}"',
        ),
        _rule(
            f'!{_is("ingresses")} || !has(object.metadata.annotations) || '
            f"{cel_list(annotations.secret_references)}.all(k, !(k in object.metadata.annotations) || "
            f"{_own_secret('object.metadata.annotations[k]')})",
            f"Ingress annotations of tenant {TENANT} may name only Secrets of the Ingress's own namespace",
            f'"annotation " + {cel_list(annotations.secret_references)}.filter(k, k in object.metadata.annotations && '
            f'!{_own_secret("object.metadata.annotations[k]")})[0] + " names a Secret of another namespace: Ingresses of tenant {name} '
            'may name only Secrets of their own namespace (name, or " + request.namespace + "/name)"',
        ),
    ]


def _disruption_and_priority_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    rails = platform.guard_rails
    granted_classes = f'{PRIORITY_CLASSES.cel}.map(c, c.name + "=" + string(c.value))'
    return [
        _rule(
            f'!{_is("poddisruptionbudgets")} || (has(object.spec.maxUnavailable) ? '
            '!string(object.spec.maxUnavailable).matches("^0+%?$") : '
            f'({"true" if rails.pdb_min_available else "false"} && has(object.spec.minAvailable) && '
            '!string(object.spec.minAvailable).matches("^0*100%$")))',
            f"PodDisruptionBudgets of tenant {TENANT} must allow a disruption: set maxUnavailable to at least 1 (or a "
            "percentage above 0%); "
            + ("minAvailable below 100% is allowed by the stack, but blocks a drain whenever it reaches the replica count"
               if rails.pdb_min_available else
               "minAvailable is refused by the stack (guardRails.pdbMinAvailable): it blocks a node drain whenever it "
               "reaches the replica count"),
        ),
        _rule(
            f'!{_is("workloads")} || !has(object.spec.priority) || object.spec.priority <= {MAX_PRIORITY.cel}',
            f"Kueue Workloads of tenant {TENANT} may not have a priority above its PriorityClasses",
            f'"Kueue Workload priority " + string(object.spec.priority) + " is above what tenant {name} may use (" + '
            f'string({MAX_PRIORITY.cel}) + ", the highest of its PriorityClasses: " + '
            f'{joined(granted_classes)} + "): its Job names a '
            'PriorityClass it is not granted (e.g. system-node-critical) and would be admitted ahead of everyone"',
        ),
    ]


def _stored_data_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    rails = platform.guard_rails
    return [
        _rule(
            f"variables.dataBytes <= {rails.data_bytes_per_object}",
            f"data of one ConfigMap or Secret in tenant {TENANT} may hold at most {rails.data_bytes_per_object} bytes",
            f'"data of one " + request.kind.kind + " in tenant {name} may hold at most {rails.data_bytes_per_object} bytes '
            '(guardRails.dataBytesPerObject), so that its object counts bound what it stores in etcd; this one holds " + '
            'string(variables.dataBytes) + " (use a PersistentVolumeClaim or an object store for larger files)"',
        ),
        _rule(
            f'!{_is("secrets")} || !has(object.type) || object.type != {cel_string(SERVICE_ACCOUNT_TOKEN)}',
            f"Secrets of type {SERVICE_ACCOUNT_TOKEN} are refused in tenant {TENANT}: the token never expires and outlives "
            "its creator's membership; use short-lived tokens (TokenRequest, projected volumes)",
        ),
    ]


def _role_binding_rules(platform: Platform) -> list[dict[str, str]]:
    name = _SAID_TENANT
    managed = [role_binding_name(role) for role in ROLES]
    access = platform.tenant_access

    def pattern(value: str | None) -> str:
        return f" || s.name.matches({cel_string(value)})" if value else ""

    subject_ok = (
        f's.kind == "ServiceAccount" ? (has(s.namespace) && s.namespace in {NAMESPACES.cel}) : '
        f's.kind == "Group" ? (!s.name.startsWith("system:") && (s.name in {GROUPS.cel}{pattern(access.bindable_groups)})) : '
        f's.kind == "User" ? (!s.name.startsWith("system:") && (s.name in {USERS.cel}{pattern(access.bindable_users)})) : false'
    )
    bad_subject = f"object.subjects.filter(s, !({subject_ok}))[0]"
    return [
        _rule(
            f'!{_is("rolebindings")} || request.operation == "DELETE" || variables.operator || '
            f"!has(object.subjects) || object.subjects.all(s, {subject_ok})",
            f"RoleBindings in tenant {TENANT} may bind only the tenant's own groups, users and ServiceAccounts",
            f'"RoleBinding subject " + {bad_subject}.kind + " \'" + {bad_subject}.name + "\'" + '
            f'(has({bad_subject}.namespace) ? " in namespace " + {bad_subject}.namespace : "") + '
            f'" is not a member of tenant {name}: bind only its groups (" + {joined(GROUPS.cel)} + "), users (" + '
            f'{joined(USERS.cel)} + ") or ServiceAccounts of its namespaces (" + {joined(NAMESPACES.cel)} + '
            '"); never system: users or groups"',
        ),
        _rule(
            f'!{_is("rolebindings")} || variables.operator || '
            f'!((request.operation == "CREATE" ? object : oldObject).metadata.name in {cel_list(managed)})',
            f"RoleBindings {', '.join(managed)} of tenant {TENANT} are managed by the platform (tenant file access); "
            "change the tenant file instead, or create a RoleBinding with another name",
        ),
    ]


# The guard's validations, one builder per kind of object (in the policy's order).
_RULES: tuple[Callable[[Platform], list[dict[str, str]]], ...] = (
    _priority_class_rules, _gpu_env_rules, _token_and_runtime_rules, _service_rules, _ingress_host_rules,
    _ingress_annotation_rules, _disruption_and_priority_rules, _stored_data_rules, _role_binding_rules,
)


def _validations(platform: Platform) -> list[dict[str, str]]:
    return [rule for build in _RULES for rule in build(platform)]


def _dynamic(entries: list[dict[str, str]]) -> list[dict[str, str]]:
    """The same expressions with `object`/`oldObject` as dyn: the policy matches five kinds, and the
    server type-checks every expression against each of them, so a Service rule must not be checked
    against the Pod schema (it is guarded by request.resource at run time)."""
    return [{k: as_dyn(v) if k in ("expression", "messageExpression") else v for k, v in entry.items()} for entry in entries]


def guard_policy(facts: FleetFacts) -> KubeObject:
    """The environment's guard ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), in every
    tenant namespace through the tenant's binding, which gives it the tenant's TenantGrant as `params`.

    >>> policy = guard_policy(prod.facts)
    >>> policy["metadata"]["name"], policy["spec"]["paramKind"]
    ('gpu-tenancy-guard', {'apiVersion': 'gpu-tenancy.dev/v1alpha1', 'kind': 'TenantGrant'})
    """
    platform = facts.platform
    rules = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps", "secrets", "services"]},
        {"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["ingresses"]},
        {"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["workloads"]},
        {"apiGroups": ["policy"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["poddisruptionbudgets"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["rolebindings"]},
    ]
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
            "resourceRules": rules,
        },
        "paramKind": {"apiVersion": TENANT_GRANT_API, "kind": TENANT_GRANT_KIND},
        "variables": _dynamic(_variables(platform)),
        "validations": _dynamic(_validations(platform)),
    }
    return kube_object(
        API_VERSION,
        "ValidatingAdmissionPolicy",
        object_meta(policy_name(), labels=platform_labels(facts.environment_label)),
        spec=spec,
    )


def guard_binding(tenant: Tenant, view: TenantView) -> KubeObject:
    """The binding that applies the guard policy to the tenant's namespaces (Deny), with its TenantGrant;
    without that grant it denies every request it matches.

    >>> spec = guard_binding(tenant, view)["spec"]
    >>> spec["policyName"], spec["paramRef"], spec["matchResources"]
    ('gpu-tenancy-guard', {'name': 'eval', 'parameterNotFoundAction': 'Deny'}, {'namespaceSelector': {'matchLabels': {'gpu-tenancy.dev/tenant': 'eval'}}})
    """
    return param_binding(binding_name(tenant.name), policy_name(), tenant.name, owned_labels(tenant, view))


def guard_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The binding of one tenant, in every lifecycle: a decommissioned tenant's namespaces still exist
    until its file is removed, and the binding goes only after them (resources/tenant.py deletes a
    decommissioned tenant's namespaces first), so they are never without it.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant",
    ...     name="a", displayName="A", costCenter="cc-1")
    >>> [o["kind"] for o in guard_objects(t, env.view(t))]
    ['ValidatingAdmissionPolicyBinding']
    >>> retired = t.model_copy(update={"lifecycle": "decommissioned"})
    >>> [o["metadata"]["name"] for o in guard_objects(retired, env.view(retired))]
    ['gpu-tenancy-guard-a']
    """
    return [guard_binding(tenant, view)]
