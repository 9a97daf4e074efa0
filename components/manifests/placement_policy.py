"""Where a tenant's pods may run on GPUs, enforced at admission (a taint alone is not enforcement).

A taint keeps out pods that do not tolerate it, but any pod may declare any toleration, and a
GPU pod without a node selector lands on whatever node has a free device (ResourceQuota counts
`nvidia.com/gpu`, not which class it is). So a ValidatingAdmissionPolicy, bound to every tenant's
namespaces, checks on pod CREATE and on UPDATEs that change the spec:

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

Design: one policy for the environment; each tenant's binding applies it to the tenant's namespaces
with the tenant's TenantGrant (tenant_grant.py) as `params`, which holds every value above that
differs per tenant (its classes, pools and products, what pins, the foreign dedicated pools). The
messages still list what is allowed, and onboarding a tenant changes no one else's objects except,
for a tenant with dedicated pools, the other tenants' grants (their foreign pools).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .cel import TENANT, cel_list, cel_string, joined, said
from .device_classes import IMPLICIT_EXTENDED_RESOURCE_PREFIX, dra_extended_resources
from .grant_fields import TENANT_NAME, GrantField, GrantSource, strings
from ..fleet import gpu_capacity as cap
from ..fleet.facts import FleetFacts, TenantView
from ..spec.stack import Platform
from ..spec.tenant import Tenant

from .meta import (
    TENANT_GRANT_API,
    TENANT_GRANT_KIND,
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
    param_binding,
    platform_labels,
    pool_label,
    tenant_label,
)

API_VERSION = "admissionregistration.k8s.io/v1"
NAME_PREFIX = "gpu-tenancy-placement"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class Placement:
    """What one tenant may target, as sorted lists (the values of its TenantGrant the policy reads)."""

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
    classes = [c for c in view.allowed_classes if c in platform.gpu_classes]

    def pools_of(predicate) -> list[str]:
        return [name for name, pool in platform.node_pools.items() if predicate(pool)]

    pinning_classes = [c for c in classes if set(pools_of(lambda p, c=c: p.gpu_class == c)) <= set(pools)]
    # A class served by DRA alone may have no GFD product label (its nodes carry none): no product to select by.
    products = sorted({platform.gpu_classes[c].product for c in classes} - {None})

    def product_of(pool) -> str | None:
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        return gpu_class.product if gpu_class else None

    pinning_products = [r for r in products if set(pools_of(lambda p, r=r: product_of(p) == r)) <= set(pools)]
    return Placement(tenant.name, classes, pools, dedicated, products, pinning_classes, pinning_products)


def policy_name() -> str:
    """Name of the environment's placement policy.

    >>> policy_name()
    'gpu-tenancy-placement'
    """
    return NAME_PREFIX


def binding_name(tenant: str) -> str:
    """Name of the binding that applies the placement policy, with the tenant's TenantGrant, to its namespaces.

    >>> binding_name("eval")
    'gpu-tenancy-placement-eval'
    """
    return f"{NAME_PREFIX}-{tenant}"


def _placed(attribute: str) -> Callable[[GrantSource], Any]:
    return lambda source: getattr(source.once(placement), attribute)


# The TenantGrant fields the rules below read (tenant_grant.py builds the CRD schema and the grant from them).
GPU_CLASSES = GrantField("gpuClasses", strings("GPU classes the tenant's pods may select (placement policy)."), _placed("classes"))
POOLS = GrantField("pools", strings("Node pools the tenant's pods may select: its dedicated pools and the shared pools of its classes."),
                   _placed("pools"))
DEDICATED_POOLS = GrantField("dedicatedPools", strings("Node pools dedicated to the tenant."), _placed("dedicated_pools"))
GPU_PRODUCTS = GrantField("gpuProducts", strings("GPU products (nvidia.com/gpu.product) of its classes."), _placed("products"))
PINNING_CLASSES = GrantField(
    "pinningClasses", strings("Classes whose every pool the tenant may use: selecting one pins a GPU pod to allowed nodes."),
    _placed("pinning_classes"))
PINNING_PRODUCTS = GrantField("pinningProducts", strings("Products whose every pool the tenant may use."), _placed("pinning_products"))
PINNING_RESOURCES = GrantField(
    "pinningResources", strings("GPU resources only the tenant's pools offer: requesting only these pins a pod."),
    lambda source: pinning_resources(source.once(placement), source.view))
FOREIGN_POOLS = GrantField(
    "foreignPools",
    {
        "type": "array",
        "description": "Other tenants' dedicated pools, which no pod of the tenant may reach.",
        "items": {
            "type": "object",
            "required": ["labels", "nodes", "pool", "staticNodes", "tenant"],
            "properties": {
                "pool": {"type": "string"},
                "tenant": {"type": "string", "description": "The tenant the pool is dedicated to."},
                "labels": {"type": "object", "description": "The labels of the pool's nodes (class, pool, tenant, product).",
                           "additionalProperties": {"type": "string"}},
                "nodes": strings("The pool's static node names."),
                "staticNodes": {"type": "boolean", "description": "false for an autoscaled pool: any node name may be one of it."},
            },
        },
    },
    lambda source: foreign_pools(source.once(placement), source.view),
)
GRANT_FIELDS: tuple[GrantField, ...] = (
    GPU_CLASSES, POOLS, DEDICATED_POOLS, GPU_PRODUCTS, PINNING_CLASSES, PINNING_PRODUCTS, PINNING_RESOURCES, FOREIGN_POOLS,
)


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


def _targets(platform: Platform) -> list[tuple[str, str, str, str]]:
    """(variable prefix, node label, allowed values (CEL, from the grant), what) for each label whose values are checked."""
    return [
        ("class", gpu_class_label(platform), GPU_CLASSES.cel, "GPU class"),
        ("pool", pool_label(platform), POOLS.cel, "node pool"),
        ("product", GPU_PRODUCT_LABEL, GPU_PRODUCTS.cel, "GPU product"),
    ]


def _foreign_toleration(tenant_key: str) -> str:
    own = '(!has(t.operator) || t.operator == "Equal") && has(t.value) && t.value == variables.tenant'
    return f"has(t.key) && t.key == {cel_string(tenant_key)} && !({own})"


def _variables(platform: Platform) -> list[dict[str, str]]:
    required = "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    variables = [
        {"name": "tenant", "expression": TENANT_NAME.cel},
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
            "expression": f"variables.tolerations.filter(t, {_foreign_toleration(tenant_label(platform))})",
        },
        {
            "name": "gpuTaintTolerations",
            "expression": f"variables.tolerations.filter(t, has(t.key) && t.key == {cel_string(GPU_TAINT_KEY)})",
        },
        {"name": "requestsGpu", "expression": requests_gpu(platform)},
    ]
    for prefix, key, values, _ in _targets(platform):
        variables.append(_bad_terms_variable(f"{prefix}TermsNotAllowed", key, values))
    variables.extend(_foreign_node_variables(platform))
    variables.append({"name": "pinnedByRequest", "expression": _pinned_by_request(platform)})  # issue 14
    return variables


def foreign_pools(p: Placement, view: TenantView) -> list[dict[str, Any]]:
    """Other tenants' dedicated pools, for the tenant's TenantGrant: each pool's name, owner, node
    labels and static node names (`staticNodes` false: autoscaled, its node names unknown).

    >>> view = prod.view(prod.tenants[0].spec)
    >>> [(f["pool"], f["tenant"], len(f["nodes"]), f["staticNodes"]) for f in foreign_pools(placement(prod.tenants[0].spec, view), view)]
    [('h100-serve', 'inference', 3, True), ('h100-train', 'llm-finetune', 5, True)]
    """
    platform = view.platform
    pools = []
    for name, owner in view.pool_owners:
        if owner == p.tenant:
            continue
        pool = platform.node_pools[name]
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        labels = {gpu_class_label(platform): pool.gpu_class, pool_label(platform): name, tenant_label(platform): owner}
        if gpu_class is not None and gpu_class.product is not None:
            labels[GPU_PRODUCT_LABEL] = gpu_class.product
        pools.append({"labels": dict(sorted(labels.items())), "nodes": sorted(pool.nodes), "pool": name,
                      "staticNodes": pool.max_nodes is None, "tenant": owner})
    return pools


def _names_match(operator: str, values: str) -> str:
    """Whether an In/NotIn expression on node names can match a node of pool `p` (any node of an autoscaled pool)."""
    return (
        f'(!p.staticNodes || ({operator} == "In" ? {values}.exists(v, v in p.nodes) : '
        f'{operator} == "NotIn" ? p.nodes.exists(n, !(n in {values})) : {operator} != "DoesNotExist"))'
    )


def _foreign_node_variables(platform: Platform) -> list[dict[str, str]]:
    keys = cel_list([gpu_class_label(platform), pool_label(platform), tenant_label(platform), GPU_PRODUCT_LABEL, HOSTNAME_LABEL])
    host = cel_string(HOSTNAME_LABEL)
    values = "(has(e.values) ? e.values : [])"
    expression_matches = (
        f"e.key == {host} ? {_names_match('e.operator', values)} : "
        "!(e.key in p.labels) ? true : "
        f'e.operator == "In" ? p.labels[e.key] in {values} : '
        f'e.operator == "NotIn" ? !(p.labels[e.key] in {values}) : '
        'e.operator != "DoesNotExist"'
    )
    field_matches = f'f.key != "metadata.name" || {_names_match("f.operator", "(has(f.values) ? f.values : [])")}'
    term_matches = (
        f"(!has(t.matchExpressions) || t.matchExpressions.all(e, {expression_matches})) && "
        f"(!has(t.matchFields) || t.matchFields.all(f, {field_matches}))"
    )
    selector_matches = (
        f"variables.nodeSelector.all(k, k == {host} ? (!p.staticNodes || variables.nodeSelector[k] in p.nodes) : "
        "(!(k in p.labels) || p.labels[k] == variables.nodeSelector[k]))"
    )
    return [
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
                f"!variables.selectsNodes ? [] : {FOREIGN_POOLS.cel}.filter(p, "
                f"({selector_matches}) && (size(variables.terms) == 0 || variables.terms.exists(t, {term_matches})))"
            ),
        },
    ]


def _rule(expression: str, text: str, message_expression: str | None = None) -> dict[str, str]:
    """A validation whose message (`text`, TENANT for the tenant's name) is computed per request;
    the static `message`, shown only if that fails, says "the tenant"."""
    return {
        "expression": expression,
        "messageExpression": message_expression or said(text),
        "message": text.replace(TENANT, "the tenant"),
        "reason": "Forbidden",
    }


def _own_nodes(tenant_key: str) -> str:
    """CEL (a message): which dedicated nodes the tenant may select or tolerate."""
    return (
        f'(size({DEDICATED_POOLS.cel}) > 0 ? "tenant " + variables.tenant + " may only select or tolerate {tenant_key}=" + variables.tenant'
        ' : "tenant " + variables.tenant + " has no dedicated pools")'
    )


def _selection_rules(platform: Platform) -> list[dict[str, str]]:
    class_key, pool_key = gpu_class_label(platform), pool_label(platform)
    allowed = (
        f'"allowed classes: " + {joined(GPU_CLASSES.cel)} + "; pools: " + {joined(POOLS.cel)} + '
        f'"; dedicated pools: " + {joined(DEDICATED_POOLS.cel)}'
    )
    result = [
        _rule(
            'request.operation != "CREATE" || !has(object.spec.nodeName) || object.spec.nodeName == ""',
            f"pods of tenant {TENANT} may not set spec.nodeName: it bypasses the scheduler and every placement "
            f"rule; select nodes with nodeSelector {pool_key} or {class_key} instead",
        )
    ]
    for prefix, key, values, what in _targets(platform):
        terms = f"{prefix}TermsNotAllowed"
        result.append(_rule(
            f"({_selector_ok(key, values)}) && size(variables.{terms}) == 0",
            f"a {what} ({key}) that tenant {TENANT} may not use is selected",
            f'"{what} \'" + ({_first_bad_value(key, values, terms)}) + "\' is not allowed for tenant " + variables.tenant + '
            f'"; " + {allowed}',
        ))
    return result


def _dedicated_node_rules(platform: Platform) -> list[dict[str, str]]:
    tenant_key = tenant_label(platform)
    own, first_pool = _own_nodes(tenant_key), "variables.reachableForeignPools[0]"
    # NotIn and DoesNotExist only narrow; Exists would select every tenant's dedicated nodes.
    tenant_ops_ok = 'e.operator == "NotIn" || e.operator == "DoesNotExist" || (e.operator == "In" && e.values.all(v, v == variables.tenant))'
    return [
        _rule(
            f"(!({cel_string(tenant_key)} in variables.nodeSelector) || variables.nodeSelector[{cel_string(tenant_key)}] == variables.tenant) && "
            f"variables.terms.all(t, !has(t.matchExpressions) || t.matchExpressions.all(e, e.key != {cel_string(tenant_key)} || {tenant_ops_ok}))",
            f"nodes dedicated to another tenant are selected ({tenant_key})",
            f'"nodes dedicated to another tenant are selected ({tenant_key}); " + {own}',
        ),
        _rule(
            "size(variables.reachableForeignPools) == 0",
            "the node selection can reach nodes dedicated to another tenant",
            '"the node selection (nodeSelector, required node affinity or matchFields) can reach node pool \'" + '
            f'{first_pool}.pool + "\', dedicated to tenant " + {first_pool}.tenant + '
            f'"; dedicated nodes belong to their tenant for every pod; " + {own}',
        ),
    ]


def _toleration_rules(platform: Platform) -> list[dict[str, str]]:
    tenant_key = tenant_label(platform)
    own = _own_nodes(tenant_key)
    result = [
        {
            "expression": 'variables.tolerations.all(t, (has(t.key) && t.key != "") || !has(t.operator) || t.operator != "Exists")',
            "message": (
                "a toleration with operator Exists and no key tolerates every taint, including other tenants' "
                "dedicated nodes; tolerate specific taint keys"
            ),
            "reason": "Forbidden",
        }
    ]
    first = "variables.foreignTolerations[0]"
    result.append(_rule(
        "size(variables.foreignTolerations) == 0",
        f"a toleration of taint {tenant_key} lets pods onto nodes dedicated to another tenant",
        f'"the toleration of taint {tenant_key}" + '
        f'((has({first}.operator) && {first}.operator == "Exists") ? " (operator Exists: every tenant)" '
        f': "=" + (has({first}.value) ? {first}.value : "")) + '
        f'" would let pods onto nodes dedicated to another tenant; " + {own}',
    ))
    result.append(_rule(
        "variables.requestsGpu || size(variables.gpuTaintTolerations) == 0",
        f"only pods that request GPUs may tolerate taint {GPU_TAINT_KEY} (shared GPU pools): a pod without "
        "GPUs there would take the cpu and memory that GPU pods need and strand the pool's GPUs; remove the "
        f"toleration of {GPU_TAINT_KEY}, or request a GPU of a class tenant {TENANT} may use",
        said(f"only pods that request GPUs may tolerate taint {GPU_TAINT_KEY} (shared GPU pools): a pod without "
             "GPUs there would take the cpu and memory that GPU pods need and strand the pool's GPUs; remove the "
             f"toleration of {GPU_TAINT_KEY}, or request a GPU of a class tenant {TENANT} may use (")
        + f' + {joined(GPU_CLASSES.cel)} + ")"',
    ))
    return result


def _pinning_rules(platform: Platform) -> list[dict[str, str]]:
    class_key, pool_key, tenant_key = gpu_class_label(platform), pool_label(platform), tenant_label(platform)
    return [_rule(
        f"!variables.requestsGpu || {_pinned(class_key, pool_key, tenant_key)} || variables.pinnedByRequest",
        f"pods of tenant {TENANT} that request GPUs must select where they run, with nodeSelector or required "
        "node affinity (operator In) on a pool, class or tenant label it may use",
        _pin_message(class_key, pool_key, tenant_key) + " + " + _pin_by_request_hint(),
    )]


# The placement policy's validations, one builder per concern (in the policy's order).
_RULES: tuple[Callable[[Platform], list[dict[str, str]]], ...] = (
    _selection_rules, _dedicated_node_rules, _toleration_rules, _pinning_rules,
)


def _validations(platform: Platform) -> list[dict[str, str]]:
    return [rule for build in _RULES for rule in build(platform)]


def _pinned(class_key: str, pool_key: str, tenant_key: str) -> str:
    options = [(pool_key, POOLS.cel), (class_key, PINNING_CLASSES.cel), (GPU_PRODUCT_LABEL, PINNING_PRODUCTS.cel)]
    by_selector = [
        f"({cel_string(k)} in variables.nodeSelector && variables.nodeSelector[{cel_string(k)}] in {v})" for k, v in options
    ]
    # An option the grant leaves empty pins nothing (an In term always names a value).
    by_term = [f"(size({vals}) > 0 && e.key == {cel_string(k)} && e.values.all(v, v in {vals}))" for k, vals in options]
    dedicated = f"size({DEDICATED_POOLS.cel}) > 0"
    by_selector.append(f"({dedicated} && {cel_string(tenant_key)} in variables.nodeSelector && "
                       f"variables.nodeSelector[{cel_string(tenant_key)}] == variables.tenant)")
    by_term.append(f"({dedicated} && e.key == {cel_string(tenant_key)} && e.values.all(v, v == variables.tenant))")
    # Terms are ORed: the pod is pinned by affinity only if every term pins it.
    affinity = (
        "(size(variables.terms) > 0 && variables.terms.all(t, has(t.matchExpressions) && "
        f't.matchExpressions.exists(e, e.operator == "In" && ({" || ".join(by_term)}))))'
    )
    return "(" + " || ".join(by_selector + [affinity]) + ")"


def _pin_message(class_key: str, pool_key: str, tenant_key: str) -> str:
    """CEL: why a GPU pod that selects no node of its own is refused, and what it may select."""
    no_pool = said(
        f"tenant {TENANT} may not use GPUs in this environment (no usable pool: gpu.classes and "
        "gpu.dedicatedPools give none); remove the GPU resources and DRA resourceClaims from the pod"
    )
    choices = (
        f'"{pool_key} (one of " + {POOLS.cel}.join(", ") + ")" + '
        f'(size({PINNING_CLASSES.cel}) > 0 ? " or {class_key} (one of " + {PINNING_CLASSES.cel}.join(", ") + ")" : "") + '
        f'(size({DEDICATED_POOLS.cel}) > 0 ? " or {tenant_key}=" + variables.tenant : "")'
    )
    select = (
        '"pods of tenant " + variables.tenant + " that request GPUs must select where they run, with nodeSelector or required '
        f'node affinity (operator In) on " + {choices}'
    )
    return f"(size({POOLS.cel}) == 0 ? {no_pool} : {select})"


def placement_policy(facts: FleetFacts) -> KubeObject:
    """The environment's placement ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
    Kubernetes 1.30+), in every tenant namespace through the tenant's binding, which gives it the
    tenant's TenantGrant as `params`.

    >>> policy = placement_policy(prod.facts)
    >>> policy["metadata"]["name"], policy["spec"]["failurePolicy"], policy["spec"]["paramKind"]["kind"]
    ('gpu-tenancy-placement', 'Fail', 'TenantGrant')
    """
    platform = facts.platform
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}
            ],
        },
        # Updates that leave the spec alone (labels, finalizers) must pass even if the tenant's
        # allowances have shrunk since the pod was created, or its Job could never finish.
        "matchConditions": [
            {"name": "create-or-spec-change", "expression": 'request.operation != "UPDATE" || object.spec != oldObject.spec'}
        ],
        "paramKind": {"apiVersion": TENANT_GRANT_API, "kind": TENANT_GRANT_KIND},
        "variables": _variables(platform),
        "validations": _validations(platform),
    }
    return kube_object(
        API_VERSION,
        "ValidatingAdmissionPolicy",
        object_meta(policy_name(), labels=platform_labels(facts.environment_label)),
        spec=spec,
    )


def placement_binding(tenant: Tenant, view: TenantView) -> KubeObject:
    """The binding that applies the placement policy to the tenant's namespaces with its TenantGrant,
    denying (not just warning about) violations; without the grant it denies every pod.

    >>> spec = placement_binding(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))["spec"]
    >>> spec["policyName"], spec["paramRef"], spec["validationActions"]
    ('gpu-tenancy-placement', {'name': 'eval', 'parameterNotFoundAction': 'Deny'}, ['Deny'])
    """
    return param_binding(binding_name(tenant.name), policy_name(), tenant.name, owned_labels(tenant, view))


def placement_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The binding of one tenant, also while it is decommissioned: its pods may still run until its
    namespaces are deleted, and the program deletes the binding (and the TenantGrant) only after them.

    >>> [o["kind"] for o in placement_objects(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))]
    ['ValidatingAdmissionPolicyBinding']
    """
    return [placement_binding(tenant, view)]


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


def _pinned_by_request(platform: Platform) -> str:
    """CEL: every GPU resource the pod's containers request (or limit) is a pinning resource of the grant."""
    resources = PINNING_RESOURCES.cel
    ok = f"!({_is_gpu_resource('r', platform)}) || r in {resources}"
    # The same container walk as the `requestsGpu` variable (the API server's type checker takes
    # the joined list as dyn; typed, it reports `resources.limits` of a container as undefined).
    # A DRA claim's devices can be on any node its DeviceClass reaches: a pod with claims is never pinned by its request.
    # A KAI GPU share can be on any node KAI finds a GPU on: an annotated pod is never pinned by its request.
    sharing = _kai_sharing(platform)
    return (
        f"size({resources}) > 0 && "
        + (f"!{sharing} && " if sharing else "")
        + "!(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0) && "
        "(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
        ".all(c, !has(c.resources) || ("
        f"(!has(c.resources.limits) || c.resources.limits.all(r, {ok})) && "
        f"(!has(c.resources.requests) || c.resources.requests.all(r, {ok}))))"
    )


def _pin_by_request_hint() -> str:
    """CEL: the hint that requesting only the tenant's pinning resources needs no selector ("" when there are none)."""
    resources = PINNING_RESOURCES.cel
    return (f'(size({resources}) > 0 ? "; pods requesting only " + {resources}.join(", ") + '
            '" need no selector (only the tenant\'s pools offer them)" : "")')
