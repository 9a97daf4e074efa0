"""Where a tenant's pods may run on GPUs, enforced at admission (a taint alone is not enforcement).

A taint keeps out pods that do not tolerate it, but any pod may declare any toleration, and a
GPU pod without a node selector lands on whatever node has a free device (ResourceQuota counts
`nvidia.com/gpu`, not which class it is). So every tenant gets a ValidatingAdmissionPolicy that
checks, on pod CREATE and on UPDATEs that change the spec, in the tenant's namespaces:

* `nodeSelector` and required node affinity (`In`) on `<domain>/gpu-class`, `<domain>/pool`,
  `<domain>/tenant` and `nvidia.com/gpu.product` name only classes and pools the tenant may use;
  `Exists` on the tenant label (any dedicated node) is refused;
* no toleration of another tenant's dedicated taint, nor of every value of the tenant taint key,
  nor the wildcard toleration (empty key, `Exists`) that tolerates every taint;
* only a pod requesting GPUs (below) may tolerate the shared GPU pools' taint `nvidia.com/gpu`
  (any value, operator or effect): a CPU-only pod there would hold the cpu and memory that the
  pools' GPU pods need, and strand their GPUs. A GPU pod is pinned to pools its tenant may use
  (below), so a tolerating pod reaches only shared pools of the classes its tenant is granted;
* a pod requesting GPUs (`nvidia.com/gpu`, `nvidia.com/gpu.shared`, `nvidia.com/mig-*`, a DRA extended
  resource `deviceclass.resource.kubernetes.io/*` or a DeviceClass's `extendedResourceName`), or using
  DRA `resourceClaims` (allocated on the node the pod lands on, claim_policy.py), pins
  itself to nodes the tenant may use: a pool it may use, its own tenant label, or a class (or
  product) all of whose pools it may use; a class that also has other tenants' dedicated pools
  does not pin, select the pool; on KAI stacks a pod asking KAI for a GPU share by annotation
  (`gpu-fraction`, `gpu-memory`, `gpu-fraction-num-devices`) is placed the same way, and never
  counts as pinned by its request;
* `spec.nodeName` is not set at creation (it bypasses the scheduler, and with it every rule);
* every pod, GPU or not, whose node selection names a pool, class, tenant or product label, a
  `kubernetes.io/hostname` or a node name (`matchFields` on `metadata.name`) must not be able to
  land on another tenant's dedicated nodes: the selection is evaluated against the labels and the
  static node names of every foreign dedicated pool, so `In` a foreign hostname, `NotIn` /
  `DoesNotExist` that leave a foreign pool, and the same added later to a pod held by
  `schedulingGates` (a spec change, checked like a creation) are refused. Pods that select only on
  other labels are kept off foreign dedicated nodes by their taint, which they cannot tolerate.

Design: one policy and one binding per tenant, with the tenant's allowed values inlined as CEL
list literals. No params objects to keep in sync, the messages can list what is allowed, and
onboarding a tenant adds objects without editing anyone else's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .cel import cel_list, cel_string, names_or_none
from .device_classes import IMPLICIT_EXTENDED_RESOURCE_PREFIX, dra_extended_resources
from ..fleet import gpu_capacity as cap
from ..fleet.facts import TenantView
from ..spec.stack import Platform
from ..spec.tenant import Tenant

from .meta import (
    deny_binding,
    GPU_PRODUCT_LABEL,
    GPU_TAINT_KEY,
    HOSTNAME_LABEL,
    KAI_GPU_SHARING_ANNOTATIONS,
    TENANT_LABEL,
    KubeObject,
    gpu_class_label,
    kube_object,
    object_meta,
    owned_labels,
    pool_label,
    tenant_label,
)

API_VERSION = "admissionregistration.k8s.io/v1"
NAME_PREFIX = "gpu-tenancy-placement"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class Placement:
    """What one tenant may target, as sorted lists (the literals inlined into the policy)."""

    tenant: str
    classes: list[str]
    pools: list[str]
    dedicated_pools: list[str]
    products: list[str]
    pinning_classes: list[str]
    pinning_products: list[str]


def placement(tenant: Tenant, view: TenantView) -> Placement:
    """The classes, pools and products a tenant may select, and which of them pin a pod to allowed nodes.

    A pool is allowed if it is dedicated to the tenant, or shared (dedicated to nobody) and of a
    class the tenant lists in `gpu.classes`. A class selector pins only if every pool of the class
    is allowed; otherwise it would also match another tenant's dedicated nodes.

    >>> placement(prod.tenants[1].spec, prod.view(prod.tenants[1].spec)).pools
    ['h100-serve']
    """
    platform = view.platform
    dedicated = view.dedicated_pools
    pools = list(view.reachable_pools)
    classes = [c for c in cap.allowed_classes(tenant, platform) if c in platform.gpu_classes]

    def pools_of(predicate) -> list[str]:
        return [name for name, pool in platform.node_pools.items() if predicate(pool)]

    pinning_classes = [c for c in classes if set(pools_of(lambda p, c=c: p.gpu_class == c)) <= set(pools)]
    products = sorted({platform.gpu_classes[c].product for c in classes})

    def product_of(pool) -> str | None:
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        return gpu_class.product if gpu_class else None

    pinning_products = [r for r in products if set(pools_of(lambda p, r=r: product_of(p) == r)) <= set(pools)]
    return Placement(tenant.name, classes, pools, dedicated, products, pinning_classes, pinning_products)


def policy_name(tenant: str) -> str:
    """Name of the tenant's placement policy and of its binding.

    >>> policy_name("eval")
    'gpu-tenancy-placement-eval'
    """
    return f"{NAME_PREFIX}-{tenant}"





def _selector_ok(key: str, allowed: str) -> str:
    return f"!({cel_string(key)} in variables.nodeSelector) || variables.nodeSelector[{cel_string(key)}] in {allowed}"


def _bad_in(key: str, allowed: str) -> str:
    return f'e.key == {cel_string(key)} && e.operator == "In" && e.values.exists(v, !(v in {allowed}))'


def _bad_terms_variable(name: str, key: str, allowed: str) -> dict[str, str]:
    """Required-affinity terms that name a disallowed value of `key` with operator In."""
    return {
        "name": name,
        "expression": f"variables.terms.filter(t, has(t.matchExpressions) && t.matchExpressions.exists(e, {_bad_in(key, allowed)}))",
    }


def _first_bad_value(key: str, allowed: str, terms_variable: str) -> str:
    """The first disallowed value, from nodeSelector or else from required affinity (message only)."""
    return (
        f"({cel_string(key)} in variables.nodeSelector && !(variables.nodeSelector[{cel_string(key)}] in {allowed}))"
        f" ? variables.nodeSelector[{cel_string(key)}]"
        f" : variables.{terms_variable}[0].matchExpressions.filter(e, {_bad_in(key, allowed)})[0]"
        f".values.filter(v, !(v in {allowed}))[0]"
    )


def _is_gpu_resource(name: str, platform: Platform) -> str:
    """CEL: `name` is a device-plugin GPU resource, or a DRA one (implicit, or a DeviceClass's extendedResourceName)."""
    names = [*GPU_RESOURCES, *(r for r in dra_extended_resources(platform) if r not in GPU_RESOURCES)]
    exact = " || ".join(f"{name} == {cel_string(r)}" for r in names)
    return (f"{exact} || {name}.startsWith({cel_string(MIG_RESOURCE_PREFIX)})"
            f" || {name}.startsWith({cel_string(IMPLICIT_EXTENDED_RESOURCE_PREFIX)})")


def requests_gpu(platform: Platform, pod: str = "object") -> str:
    """CEL: the pod `pod` (a Pod, or a pod template) asks for GPUs by any path: a device-plugin or
    DRA extended resource, a DRA claim, or (KAI stacks) a GPU-sharing annotation.

    >>> "resourceClaims" in requests_gpu(prod.platform, "object.spec.template")
    True
    """
    gpu = _is_gpu_resource("r", platform)
    sharing = _kai_sharing(platform, pod)
    spec = f"{pod}.spec"
    return (
        # A DRA claim is allocated on the node the pod lands on: a pod with claims is placed like a GPU pod.
        (f"{sharing} || " if sharing else "")
        + f"(has({spec}.resourceClaims) && size({spec}.resourceClaims) > 0) || "
        f"({spec}.containers + (has({spec}.initContainers) ? {spec}.initContainers : []))"
        ".exists(c, has(c.resources) && ("
        f"(has(c.resources.limits) && c.resources.limits.exists(r, {gpu})) || "
        f"(has(c.resources.requests) && c.resources.requests.exists(r, {gpu}))))"
    )


def _kai_sharing(platform: Platform, pod: str = "object") -> str | None:
    """CEL, on KAI stacks: the pod asks KAI for a GPU share by annotation (no resource request
    says so); elsewhere nothing reads those annotations, and there is no such condition (None)."""
    if platform.scheduler != "kai":
        return None
    # A template's metadata may be absent; a Pod's never is.
    metadata = "" if pod == "object" else f"has({pod}.metadata) && "
    return (f"({metadata}has({pod}.metadata.annotations) && {pod}.metadata.annotations.exists(k, k in "
            f"{cel_list(list(KAI_GPU_SHARING_ANNOTATIONS))}))")


def _targets(p: Placement, view: TenantView) -> list[tuple[str, str, list[str], str]]:
    """(variable prefix, node label, allowed values, what) for each label whose values are checked."""
    platform = view.platform
    return [
        ("class", gpu_class_label(platform), p.classes, "GPU class"),
        ("pool", pool_label(platform), p.pools, "node pool"),
        ("product", GPU_PRODUCT_LABEL, p.products, "GPU product"),
    ]


def _foreign_toleration(p: Placement, tenant_key: str) -> str:
    own = f'(!has(t.operator) || t.operator == "Equal") && has(t.value) && t.value == {cel_string(p.tenant)}'
    return f"has(t.key) && t.key == {cel_string(tenant_key)} && !({own})"


def _variables(p: Placement, view: TenantView) -> list[dict[str, str]]:
    required = "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    variables = [
        {"name": "nodeSelector", "expression": "has(object.spec.nodeSelector) ? object.spec.nodeSelector : {}"},
        {
            "name": "terms",
            "expression": (
                "has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && "
                f"has({required}) ? {required}.nodeSelectorTerms : []"
            ),
        },
        {"name": "tolerations", "expression": "has(object.spec.tolerations) ? object.spec.tolerations : []"},
        {
            "name": "foreignTolerations",
            "expression": f"variables.tolerations.filter(t, {_foreign_toleration(p, tenant_label(view.platform))})",
        },
        {
            "name": "gpuTaintTolerations",
            "expression": f"variables.tolerations.filter(t, has(t.key) && t.key == {cel_string(GPU_TAINT_KEY)})",
        },
        {"name": "requestsGpu", "expression": requests_gpu(view.platform)},
    ]
    for prefix, key, values, _ in _targets(p, view):
        variables.append(_bad_terms_variable(f"{prefix}TermsNotAllowed", key, cel_list(values)))
    variables.extend(_foreign_node_variables(p, view))
    variables.append({"name": "pinnedByRequest", "expression": _pinned_by_request(p, view)})  # issue 14
    return variables


def _foreign_pools(p: Placement, view: TenantView) -> tuple[list[dict[str, str]], dict[str, list[str]]]:
    """Other tenants' dedicated pools as CEL-friendly literals: one map of node labels per pool (plus
    `_pool`, `_tenant` and `_known`, which no label key can be), and the static node names per pool.

    Every value of a literal has one type, so the policy type-checks without heterogeneous maps.
    """
    platform = view.platform
    pools, nodes = [], {}
    for name, owner in view.pool_owners:
        if owner == p.tenant:
            continue
        pool = platform.node_pools[name]
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        entry = {gpu_class_label(platform): pool.gpu_class, pool_label(platform): name, tenant_label(platform): owner}
        if gpu_class is not None:
            entry[GPU_PRODUCT_LABEL] = gpu_class.product
        # Autoscaled pools: node names are unknown, so any hostname selection may reach them.
        entry.update({"_pool": name, "_tenant": owner, "_known": "true" if pool.max_nodes is None else "false"})
        pools.append(dict(sorted(entry.items())))
        nodes[name] = sorted(pool.nodes)
    return pools, nodes


def _names_match(operator: str, values: str) -> str:
    """Whether an In/NotIn expression on node names can match a node of pool `p`."""
    names = 'variables.foreignNodes[p["_pool"]]'
    return (
        f'(p["_known"] != "true" || ({operator} == "In" ? {values}.exists(v, v in {names}) : '
        f'{operator} == "NotIn" ? {names}.exists(n, !(n in {values})) : {operator} != "DoesNotExist"))'
    )


def _foreign_node_variables(p: Placement, view: TenantView) -> list[dict[str, str]]:
    platform = view.platform
    keys = cel_list([gpu_class_label(platform), pool_label(platform), tenant_label(platform), GPU_PRODUCT_LABEL, HOSTNAME_LABEL])
    host = cel_string(HOSTNAME_LABEL)
    values = "(has(e.values) ? e.values : [])"
    expression_matches = (
        f"e.key == {host} ? {_names_match('e.operator', values)} : "
        "!(e.key in p) ? true : "
        f'e.operator == "In" ? p[e.key] in {values} : '
        f'e.operator == "NotIn" ? !(p[e.key] in {values}) : '
        'e.operator != "DoesNotExist"'
    )
    field_matches = f'f.key != "metadata.name" || {_names_match("f.operator", "(has(f.values) ? f.values : [])")}'
    term_matches = (
        f"(!has(t.matchExpressions) || t.matchExpressions.all(e, {expression_matches})) && "
        f"(!has(t.matchFields) || t.matchFields.all(f, {field_matches}))"
    )
    selector_matches = (
        f'variables.nodeSelector.all(k, k == {host} ? (p["_known"] != "true" || '
        'variables.nodeSelector[k] in variables.foreignNodes[p["_pool"]]) : '
        "(!(k in p) || p[k] == variables.nodeSelector[k]))"
    )
    pools, nodes = _foreign_pools(p, view)
    return [
        {"name": "foreignPools", "expression": json.dumps(pools) if pools else "[]"},
        {"name": "foreignNodes", "expression": json.dumps(nodes) if nodes else "{}"},
        {
            "name": "selectsNodes",
            "expression": (
                f"variables.nodeSelector.exists(k, k in {keys}) || variables.terms.exists(t, "
                f"(has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in {keys})) || "
                "(has(t.matchFields) && size(t.matchFields) > 0))"
            ),
        },
        {
            "name": "reachableForeignPools",
            "expression": (
                "!variables.selectsNodes ? [] : variables.foreignPools.filter(p, "
                f"({selector_matches}) && (size(variables.terms) == 0 || variables.terms.exists(t, {term_matches})))"
            ),
        },
    ]


def _validations(p: Placement, view: TenantView) -> list[dict[str, str]]:
    platform = view.platform
    class_key, pool_key, tenant_key = gpu_class_label(platform), pool_label(platform), tenant_label(platform)
    tenant = cel_string(p.tenant)
    allowed = f"allowed classes: {names_or_none(p.classes)}; pools: {names_or_none(p.pools)}; dedicated pools: {names_or_none(p.dedicated_pools)}"
    own = (
        f"tenant {p.tenant} may only select or tolerate {tenant_key}={p.tenant}"
        if p.dedicated_pools
        else f"tenant {p.tenant} has no dedicated pools"
    )
    result = [
        {
            "expression": 'request.operation != "CREATE" || !has(object.spec.nodeName) || object.spec.nodeName == ""',
            "message": (
                f"pods of tenant {p.tenant} may not set spec.nodeName: it bypasses the scheduler and every placement "
                f"rule; select nodes with nodeSelector {pool_key} or {class_key} instead"
            ),
            "reason": "Forbidden",
        }
    ]
    for prefix, key, values, what in _targets(p, view):
        literal, terms = cel_list(values), f"{prefix}TermsNotAllowed"
        result.append(
            {
                "expression": f"({_selector_ok(key, literal)}) && size(variables.{terms}) == 0",
                "messageExpression": (
                    f'"{what} \'" + ({_first_bad_value(key, literal, terms)}) + '
                    f'"\' is not allowed for tenant {p.tenant}; {allowed}"'
                ),
                "message": f"a {what} ({key}) that tenant {p.tenant} may not use is selected; {allowed}",
                "reason": "Forbidden",
            }
        )
    # NotIn and DoesNotExist only narrow; Exists would select every tenant's dedicated nodes.
    tenant_ops_ok = f'e.operator == "NotIn" || e.operator == "DoesNotExist" || (e.operator == "In" && e.values.all(v, v == {tenant}))'
    result.append(
        {
            "expression": (
                f"(!({cel_string(tenant_key)} in variables.nodeSelector) || variables.nodeSelector[{cel_string(tenant_key)}] == {tenant}) && "
                f"variables.terms.all(t, !has(t.matchExpressions) || t.matchExpressions.all(e, e.key != {cel_string(tenant_key)} || {tenant_ops_ok}))"
            ),
            "message": f"nodes dedicated to another tenant are selected ({tenant_key}); {own}",
            "reason": "Forbidden",
        }
    )
    first_pool = "variables.reachableForeignPools[0]"
    result.append(
        {
            "expression": "size(variables.reachableForeignPools) == 0",
            "messageExpression": (
                f'"the node selection (nodeSelector, required node affinity or matchFields) can reach node pool \'" + '
                f'{first_pool}["_pool"] + "\', dedicated to tenant " + {first_pool}["_tenant"] + '
                f'"; dedicated nodes belong to their tenant for every pod; {own}"'
            ),
            "message": f"the node selection can reach nodes dedicated to another tenant; {own}",
            "reason": "Forbidden",
        }
    )
    result.append(
        {
            "expression": 'variables.tolerations.all(t, (has(t.key) && t.key != "") || !has(t.operator) || t.operator != "Exists")',
            "message": (
                "a toleration with operator Exists and no key tolerates every taint, including other tenants' "
                "dedicated nodes; tolerate specific taint keys"
            ),
            "reason": "Forbidden",
        }
    )
    first = "variables.foreignTolerations[0]"
    result.append(
        {
            "expression": "size(variables.foreignTolerations) == 0",
            "messageExpression": (
                f'"the toleration of taint {tenant_key}" + '
                f'((has({first}.operator) && {first}.operator == "Exists") ? " (operator Exists: every tenant)" '
                f': "=" + (has({first}.value) ? {first}.value : "")) + '
                f'" would let pods onto nodes dedicated to another tenant; {own}"'
            ),
            "message": f"a toleration of taint {tenant_key} lets pods onto nodes dedicated to another tenant; {own}",
            "reason": "Forbidden",
        }
    )
    result.append(
        {
            "expression": "variables.requestsGpu || size(variables.gpuTaintTolerations) == 0",
            "message": (
                f"only pods that request GPUs may tolerate taint {GPU_TAINT_KEY} (shared GPU pools): a pod without "
                "GPUs there would take the cpu and memory that GPU pods need and strand the pool's GPUs; remove the "
                f"toleration of {GPU_TAINT_KEY}, or request a GPU of a class tenant {p.tenant} may use "
                f"({names_or_none(p.classes)})"
            ),
            "reason": "Forbidden",
        }
    )
    result.append(
        {
            "expression": f"!variables.requestsGpu || {_pinned(p, class_key, pool_key, tenant_key)} || variables.pinnedByRequest",
            "message": _pin_message(p, class_key, pool_key, tenant_key) + _pin_by_request_hint(p, view),
            "reason": "Forbidden",
        }
    )
    return result


def _pinned(p: Placement, class_key: str, pool_key: str, tenant_key: str) -> str:
    options = [(pool_key, p.pools), (class_key, p.pinning_classes), (GPU_PRODUCT_LABEL, p.pinning_products)]
    by_selector = [
        f"({cel_string(k)} in variables.nodeSelector && variables.nodeSelector[{cel_string(k)}] in {cel_list(v)})" for k, v in options if v
    ]
    by_term = [f"(e.key == {cel_string(k)} && e.values.all(v, v in {cel_list(vals)}))" for k, vals in options if vals]
    if p.dedicated_pools:
        by_selector.append(f"({cel_string(tenant_key)} in variables.nodeSelector && variables.nodeSelector[{cel_string(tenant_key)}] == {cel_string(p.tenant)})")
        by_term.append(f"(e.key == {cel_string(tenant_key)} && e.values.all(v, v == {cel_string(p.tenant)}))")
    if not by_selector:
        return "false"
    # Terms are ORed: the pod is pinned by affinity only if every term pins it.
    affinity = (
        "(size(variables.terms) > 0 && variables.terms.all(t, has(t.matchExpressions) && "
        f't.matchExpressions.exists(e, e.operator == "In" && ({" || ".join(by_term)}))))'
    )
    return "(" + " || ".join(by_selector + [affinity]) + ")"


def _pin_message(p: Placement, class_key: str, pool_key: str, tenant_key: str) -> str:
    if not p.pools:
        return (
            f"tenant {p.tenant} may not use GPUs in this environment (no usable pool: gpu.classes and "
            f"gpu.dedicatedPools give none); remove the GPU resources and DRA resourceClaims from the pod"
        )
    choices = [f"{pool_key} (one of {', '.join(p.pools)})"]
    if p.pinning_classes:
        choices.append(f"{class_key} (one of {', '.join(p.pinning_classes)})")
    if p.dedicated_pools:
        choices.append(f"{tenant_key}={p.tenant}")
    return (
        f"pods of tenant {p.tenant} that request GPUs must select where they run, with nodeSelector or required "
        f"node affinity (operator In) on " + " or ".join(choices)
    )


def placement_policy(tenant: Tenant, view: TenantView) -> KubeObject:
    """The tenant's ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.30+).

    >>> placement_policy(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["spec"]["failurePolicy"]
    'Fail'
    """
    p = placement(tenant, view)
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant.name}},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}
            ],
        },
        # Updates that leave the spec alone (labels, finalizers) must pass even if the tenant's
        # allowances have shrunk since the pod was created, or its Job could never finish.
        "matchConditions": [
            {"name": "create-or-spec-change", "expression": 'request.operation != "UPDATE" || object.spec != oldObject.spec'}
        ],
        "variables": _variables(p, view),
        "validations": _validations(p, view),
    }
    return kube_object(
        API_VERSION,
        "ValidatingAdmissionPolicy",
        object_meta(policy_name(tenant.name), labels=owned_labels(tenant, view)),
        spec=spec,
    )


def placement_binding(tenant: Tenant, view: TenantView) -> KubeObject:
    """The binding that switches the tenant's policy on, denying (not just warning about) violations.

    >>> placement_binding(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["spec"]["validationActions"]
    ['Deny']
    """
    return deny_binding(policy_name(tenant.name), owned_labels(tenant, view))


def placement_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """Policy and binding of one tenant, also while it is decommissioned: its pods may still run
    until its namespaces are deleted, and the program deletes the policy only after them.

    >>> [o["kind"] for o in placement_objects(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))]
    ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']
    """
    return [placement_policy(tenant, view), placement_binding(tenant, view)]


# --- implicit pinning by the requested resource (issue 14) ---------------------------------------


def pinning_resources(p: Placement, view: TenantView) -> list[str]:
    """GPU resources that only the tenant's allowed pools advertise (e.g. a MIG profile or a
    time-slicing share offered nowhere else): a pod requesting only these can be scheduled only
    there, so its request pins it and it needs no selector of its own.

    >>> view = prod.view(prod.tenants[0].spec)
    >>> pinning_resources(placement(prod.tenants[0].spec, view), view)
    ['nvidia.com/mig-1g.10gb', 'nvidia.com/mig-3g.40gb']
    """
    platform = view.platform
    offered: dict[str, set[str]] = {}
    for name, pool in platform.node_pools.items():
        for resource in cap.node_gpu_resources(platform, pool):
            offered.setdefault(resource, set()).add(name)
    # A DeviceClass's extendedResourceName can also be served by DRA devices on any node its selector
    # matches, other tenants' pools included: asking for it pins nothing.
    mapped = set(dra_extended_resources(platform))
    return sorted(r for r, pools in offered.items() if pools <= set(p.pools) and r not in mapped)


def _pinned_by_request(p: Placement, view: TenantView) -> str:
    """CEL: every GPU resource the pod's containers request (or limit) is a pinning resource."""
    resources = pinning_resources(p, view)
    if not resources:
        return "false"
    ok = f"!({_is_gpu_resource('r', view.platform)}) || r in {cel_list(resources)}"
    # The same container walk as the `requestsGpu` variable (the API server's type checker takes
    # the joined list as dyn; typed, it reports `resources.limits` of a container as undefined).
    # A DRA claim's devices can be on any node its DeviceClass reaches: a pod with claims is never pinned by its request.
    # A KAI GPU share can be on any node KAI finds a GPU on: an annotated pod is never pinned by its request.
    sharing = _kai_sharing(view.platform)
    return (
        (f"!{sharing} && " if sharing else "")
        + "!(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0) && "
        "(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
        ".all(c, !has(c.resources) || ("
        f"(!has(c.resources.limits) || c.resources.limits.all(r, {ok})) && "
        f"(!has(c.resources.requests) || c.resources.requests.all(r, {ok}))))"
    )


def _pin_by_request_hint(p: Placement, view: TenantView) -> str:
    resources = pinning_resources(p, view)
    if not resources:
        return ""
    return f"; pods requesting only {', '.join(resources)} need no selector (only the tenant's pools offer them)"
