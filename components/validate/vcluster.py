"""Checks of a tenant's optional vCluster: its `vcluster.values` against the chart's schema and
against the one table (`VALUES`) of the keys a tenant may set, and the settings that keep the
tenant isolated, which the values may not override.

The chart's `values.schema.json` (JSON Schema draft 2020-12, shipped in `components/data/vcluster/`,
see its SOURCES.md) is the one Helm itself enforces at install time; checking it here turns a
failed deployment into a located error in the tenant's pull request. The overrides are checked on
their own: maps merge key by key and lists replace, so each key the tenant writes must be valid
where it is written. The table is an allow-list: a key it does not name is refused, because the
chart turns values into host RBAC for the vCluster's ServiceAccount (see the table's comment).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Literal

from ..spec.problems import Problem
from ..spec.hints import closest
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from ..spec.yaml_source import yaml_text
from .platform import platform_path

SCHEMA_CHART_VERSION = "0.36.1"
SCHEMA_RESOURCE = "vcluster/values.schema.json"

# Every key of the chart values a tenant's `vcluster.values` may reach, and what happens to it: the
# one table. A key's rule covers everything below it; the deepest listed key above a written
# value decides. Measured against the 0.36.1 chart's templates (clusterrole.yaml, role.yaml,
# _rbac.tpl, platform-rbac.yaml, manifests.yaml, statefulset.yaml): the chart binds a ClusterRole
# (`vc-vcluster-v-<namespace>`) and a Role in the tenant's namespace to the vCluster's
# ServiceAccount, and any member who may create pods in the namespace may run one as that
# ServiceAccount, so what the values grant it, the tenant holds.
#
# * `tenant`: the tenant may set it. What it makes the ServiceAccount do stays within what the
#   tenant's own roles already allow (writes in its namespace of the kinds tenant developers write,
#   cluster-wide reads of what gpu-tenancy:cluster-viewer reads) or changes nothing on the host.
#   A `check` refuses the values of such a key that would still reach beyond the namespace.
# * `platform`: generated from the spec to isolate the tenant (components/manifests/vcluster.py);
#   the tenant may not override it.
# * `refused`: widens the vCluster's host rights, and says how.
# Any other key is refused as not (yet) known to be safe: the list is an allow-list.
# The platform's own generated values turn off what would give the ServiceAccount cluster-wide
# writes or the kubelet API (PriorityClasses, proxyKubelets); what they still grant (reads of every
# pod and node, for the node sync) is in docs/queues-and-vclusters.md, and the vCluster guard
# (components/manifests/vcluster_guard.py) keeps tenant members from running as the ServiceAccount.

Check = Callable[[Any, Tenant], list[tuple[tuple, str]]]


@dataclass(frozen=True)
class ValuesRule:
    """What a tenant may do with one key of the vCluster chart values (and everything below it)."""

    who: Literal["tenant", "platform", "refused"]
    why: str
    check: Check | None = None


_CLUSTER_ROLE = "the vCluster's ClusterRole"
_NODES = "pins the vCluster's pods to the tenant's GPU pools and keeps host nodes read-only"
_DRA = "syncs DRA claims and the claimable DeviceClasses only for a tenant with a DeviceClass grant (quota.gpu of a class a deviceClasses entry meters)"
_POD_SIZE = "sizes pods of the tenant's namespace, which its ResourceQuota and LimitRange still bound"
_OWN_WRITE = "syncs {kind} into the tenant's namespace, which tenant developers may write themselves"
_CLASS_READ = "syncs {kind} in, which every tenant member may read already (gpu-tenancy:cluster-viewer)"
_CODE = "runs other code in the control-plane pod, which holds the vCluster's ServiceAccount token"
_VOLUMES = "adds volumes to the control-plane pod (a hostPath reaches the node's disks), next to the vCluster's ServiceAccount token"


def _cluster_read(kind: str) -> str:
    return f"adds cluster-wide reads of {kind} to {_CLUSTER_ROLE}, which the tenant's own roles may not read"


def _from_host_copy(kind: str) -> str:
    return (
        f"makes the chart grant the vCluster's ServiceAccount list and watch of {kind} in every namespace "
        f"(the rule it adds to {_CLUSTER_ROLE} names no namespace, whatever the mappings say), so it reads every "
        f"tenant's {kind}, even with a mapping from the tenant's own namespace; create the {kind} inside the vCluster instead"
    )


def _namespace_of(reference: str) -> str | None:
    """The namespace part of a chart `namespace/name` reference; None when it names no namespace."""
    return reference.split("/", 1)[0] if "/" in reference else None


def _foreign_mappings(kind: str) -> Check:
    """Located detail for a host-to-virtual mapping that reads another namespace than the vCluster's."""

    def check(value: Any, tenant: Tenant) -> list[tuple[tuple, str]]:
        mappings = value.get("mappings", {}).get("byName", {}) if isinstance(value, dict) and isinstance(value.get("mappings"), dict) else {}
        found = []
        for source in mappings if isinstance(mappings, dict) else ():
            namespace = _namespace_of(str(source))
            if namespace not in (None, "", tenant.name):
                found.append((("mappings", "byName", source), f"'{source}' copies {kind} of namespace '{namespace}', which is not the tenant's, into the vCluster; remove it"))
        return found

    return check


def _own_namespace(*fields: str, what: str) -> Check:
    """Every `namespace` written at `fields` (a list index is '*') must be the vCluster's own."""

    def check(value: Any, tenant: Tenant) -> list[tuple[tuple, str]]:
        found = []
        for path, written in _at(value, fields):
            if not isinstance(written, str):
                continue
            namespace = written if path[-1] == "namespace" else _namespace_of(written)
            shown = f"namespace '{namespace}'" if path[-1] == "namespace" else f"'{written}' names namespace '{namespace}', which"
            if namespace not in (None, "", tenant.name):
                found.append((path, f"{shown} is not the vCluster's ('{tenant.name}'): {what}; leave the namespace out or write '{tenant.name}'"))
        return found

    return check


def _at(value: Any, fields: tuple[str, ...], path: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, value) of every value at `fields` below `value`; '*' walks a list's items."""
    if not fields:
        return [(path, value)]
    head, rest = fields[0], fields[1:]
    if head == "*":
        return [hit for i, item in enumerate(value) for hit in _at(item, rest, path + (i,))] if isinstance(value, list) else []
    return _at(value[head], rest, path + (head,)) if isinstance(value, dict) and head in value else []


def _tenant(why: str, check: Check | None = None) -> ValuesRule:
    return ValuesRule("tenant", why, check)


def _platform(why: str) -> ValuesRule:
    return ValuesRule("platform", why)


def _refused(why: str, check: Check | None = None) -> ValuesRule:
    return ValuesRule("refused", why, check)


VALUES: dict[tuple[str, ...], ValuesRule] = {
    # -- the tenant's: sizing, and syncing what the tenant may already write or read ------------
    ("controlPlane", "statefulSet", "resources"): _tenant(_POD_SIZE),
    ("controlPlane", "statefulSet", "probes"): _tenant("tunes the control-plane pod's health checks"),
    ("controlPlane", "statefulSet", "persistence", "volumeClaim"): _tenant("sizes the control plane's PersistentVolumeClaim, under the tenant's storage quota"),
    ("controlPlane", "coredns", "deployment", "resources"): _tenant(_POD_SIZE),
    ("controlPlane", "coredns", "deployment", "replicas"): _tenant(_POD_SIZE),
    **{("sync", "toHost", key, "enabled"): _tenant(_OWN_WRITE.format(kind=kind)) for key, kind in (
        ("configMaps", "ConfigMaps"), ("ingresses", "Ingresses"), ("persistentVolumeClaims", "PersistentVolumeClaims"),
        ("secrets", "Secrets"), ("serviceAccounts", "ServiceAccounts"), ("services", "Services"))},
    ("sync", "toHost", "configMaps", "all"): _tenant(_OWN_WRITE.format(kind="ConfigMaps")),
    ("sync", "toHost", "secrets", "all"): _tenant(_OWN_WRITE.format(kind="Secrets")),
    ("sync", "fromHost", "events", "enabled"): _tenant("shows the host events of the vCluster's own pods (read in its namespace)"),
    **{("sync", "fromHost", key, field): _tenant(_CLASS_READ.format(kind=kind)) for key, kind in (
        ("runtimeClasses", "RuntimeClasses"), ("storageClasses", "StorageClasses")) for field in ("enabled", "selector")},
    ("exportKubeConfig",): _tenant(
        "writes the vCluster's kubeconfig into a Secret of its own namespace",
        _own_namespace("secret", "namespace", what="the kubeconfig (admin of the vCluster) would go to another namespace")),
    ("exportKubeConfig", "additionalSecrets"): _tenant(
        "writes more copies of the kubeconfig into Secrets of its own namespace",
        _own_namespace("*", "namespace", what="the kubeconfig (admin of the vCluster) would go to another namespace")),
    ("networking", "replicateServices", "toHost"): _tenant(
        "replicates Services of the vCluster into its own namespace",
        _own_namespace("*", "to", what="the vCluster may write Services only in its own namespace")),
    ("logging",): _tenant("sets the control plane's log format"),
    # -- the platform's: generated from the spec to isolate the tenant ---------------------------
    ("sync", "fromHost", "nodes", "enabled"): _platform(_NODES),
    ("sync", "fromHost", "nodes", "selector"): _platform(_NODES),
    ("sync", "fromHost", "nodes", "syncBackChanges"): _platform(_NODES),
    ("sync", "fromHost", "priorityClasses"): _platform(
        "stays off: the chart's rule for it is every verb on PriorityClasses cluster-wide (a class above every tenant's preempts them); "
        "the vCluster's pods run at vcluster.priorityClassName or the host's default"),
    ("sync", "toHost", "pods", "enabled"): _platform("syncs the vCluster's pods into the tenant's namespace, where its quota and policies judge them"),
    ("sync", "toHost", "pods", "enforceTolerations"): _platform("tolerates exactly the tenant's dedicated-pool taint"),
    ("sync", "toHost", "pods", "priorityClassName"): _platform("is set from vcluster.priorityClassName"),
    ("sync", "toHost", "priorityClasses"): _platform("would let the vCluster create host PriorityClasses (cluster-wide preemption)"),
    ("sync", "toHost", "namespaces"): _platform("would let the vCluster create host namespaces"),
    ("sync", "toHost", "persistentVolumes"): _platform("would let the vCluster create host PersistentVolumes (hostPath reaches node disks)"),
    ("sync", "toHost", "storageClasses"): _platform("would let the vCluster create host StorageClasses"),
    ("sync", "toHost", "resourceClaims"): _platform(_DRA),
    ("sync", "toHost", "resourceClaimTemplates"): _platform(_DRA),
    ("sync", "fromHost", "deviceClasses"): _platform(_DRA),
    ("networking", "advanced", "proxyKubelets"): _platform(f"stays off: on, {_CLUSTER_ROLE} holds the kubelet API of every node (nodes/proxy, nodes/stats, nodes/metrics: exec into any pod)"),
    ("policies",): _platform("mirrors the tenant's quota, LimitRange, NetworkPolicy and Pod Security"),
    ("rbac",): _platform("bounds what the vCluster may do on the host"),
    # -- refused: each widens what the vCluster's ServiceAccount may do on the host --------------
    ("sync", "fromHost", "secrets"): _refused(_from_host_copy("Secrets"), _foreign_mappings("Secrets")),
    ("sync", "fromHost", "configMaps"): _refused(_from_host_copy("ConfigMaps"), _foreign_mappings("ConfigMaps")),
    ("sync", "fromHost", "customResources"): _refused(f"adds reads in every namespace of each resource it names, and of every CustomResourceDefinition, to {_CLUSTER_ROLE}"),
    ("sync", "fromHost", "gateways"): _refused(_cluster_read("Gateways and GatewayClasses")),
    ("sync", "fromHost", "gatewayClasses"): _refused(_cluster_read("GatewayClasses and CustomResourceDefinitions")),
    ("sync", "fromHost", "ingressClasses"): _refused(_cluster_read("IngressClasses")),
    ("sync", "fromHost", "csiNodes"): _refused(_cluster_read("CSINodes")),
    ("sync", "fromHost", "csiDrivers"): _refused(_cluster_read("CSIDrivers")),
    ("sync", "fromHost", "csiStorageCapacities"): _refused(_cluster_read("CSIStorageCapacities")),
    ("sync", "toHost", "customResources"): _refused(f"would let the vCluster write any resource kind it names in the tenant's namespace, beyond the tenant's roles, and adds reads of every CustomResourceDefinition to {_CLUSTER_ROLE}"),
    ("sync", "toHost", "gatewayApi"): _refused(f"would let the vCluster write Gateways and routes in the tenant's namespace (tenant roles may not) and adds reads of GatewayClasses and CustomResourceDefinitions to {_CLUSTER_ROLE}"),
    ("sync", "toHost", "networkPolicies"): _refused("would let the vCluster create, change and delete NetworkPolicies in the tenant's namespace, the platform's default-deny among them (tenant roles only read them)"),
    ("sync", "toHost", "podDisruptionBudgets"): _refused("would let the vCluster create PodDisruptionBudgets, one of which can block draining GPU nodes (tenant roles only read them)"),
    ("sync", "toHost", "pods", "hybridScheduling"): _refused(_cluster_read("StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities") + " and hands pods to other schedulers"),
    ("networking", "replicateServices", "fromHost"): _refused(f"adds get, list and watch of Services and Endpoints in every namespace to {_CLUSTER_ROLE}, whatever namespace it names"),
    ("controlPlane", "advanced"): _refused(
        "holds the ServiceAccount the chart binds the vCluster's host roles to (serviceAccount.name: `default` would hand them to "
        f"every pod of the namespace), the virtual scheduler (cluster-wide storage reads in {_CLUSTER_ROLE}), kube-vip "
        "(NET_ADMIN, NET_RAW) and the image registry of every synced pod"),
    ("controlPlane", "distro", "k8s", "scheduler"): _refused(f"runs a virtual scheduler, which adds cluster-wide reads of StorageClasses and CSI objects to {_CLUSTER_ROLE}"),
    ("controlPlane", "statefulSet", "security"): _refused("sets the control-plane pod's securityContext (privileged, capabilities, user), next to the vCluster's ServiceAccount token"),
    ("controlPlane", "statefulSet", "highAvailability"): _refused("makes the chart give the vCluster's Role every verb on Leases in the tenant's namespace (tenant roles have none); several replicas also need a backing store a tenant may not set"),
    ("controlPlane", "statefulSet", "scheduling"): _refused("places the control-plane pod: tolerations and node selectors reach other tenants' pools, a priorityClassName bypasses vcluster.priorityClassName"),
    **{("controlPlane", "statefulSet", key): _refused(_CODE) for key in ("image", "command", "args", "env", "workingDir", "initContainers", "sidecarContainers")},
    ("controlPlane", "statefulSet", "persistence", "volumeClaim", "enabled"): _refused(
        "decides whether the chart runs the control plane as a StatefulSet (with its claim) or a Deployment; the vCluster guard "
        "admits the pods of the vCluster's ServiceAccount only from the chart's StatefulSet, so without the claim the vCluster would not start"),
    **{("controlPlane", "statefulSet", "persistence", key): _refused(_VOLUMES) for key in ("addVolumes", "addVolumeMounts", "dataVolume", "binariesVolume")},
    ("experimental",): _refused("deploys any manifest into the host with the platform's deployment credentials (experimental.deploy.host.manifests) and changes how the syncer runs"),
    ("plugins",): _refused("runs extra containers with the vCluster's ServiceAccount and adds their own rules (plugins.*.rbac) to its Role and ClusterRole"),
    ("plugin",): _refused("runs extra containers with the vCluster's ServiceAccount and adds their own rules (plugin.*.rbac) to its Role and ClusterRole"),
    ("integrations",): _refused(
        f"makes kubeVirt, externalSecrets, certManager, istio and metricsServer each add host rules to the vCluster's Role or to {_CLUSTER_ROLE} "
        "(CustomResourceDefinitions, webhook configurations, ClusterSecretStores, ClusterIssuers, node metrics)"),
    ("pro",): _refused(f"adds reads of vCluster Platform objects, and of every pod and node, to {_CLUSTER_ROLE}"),
    ("platform",): _refused("makes the chart create a Role and RoleBinding in platform.apiKey.namespace that let the vCluster read a Secret of that namespace"),
    ("privateNodes",): _refused("lets nodes join the vCluster directly, outside the tenant's GPU pools and the host's placement policy"),
}
GUARDED: dict[tuple[str, ...], str] = {path: rule.why for path, rule in VALUES.items() if rule.who == "platform"}
GUARDED_PATHS: tuple[tuple[str, ...], ...] = tuple(GUARDED)


@lru_cache(maxsize=1)
def values_schema() -> dict[str, Any]:
    """The vCluster chart's values schema (v0.36.1), loaded once.

    >>> values_schema()["$id"]
    'https://vcluster.com/schemas/config'
    """
    text = resources.files("components.data").joinpath(SCHEMA_RESOURCE).read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def values_validator():
    """A draft 2020-12 validator for chart values (jsonschema is imported only when needed)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(values_schema())


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return values_schema()["$defs"][ref[len("#/$defs/"):]]
    return schema


def _show(value: Any) -> str:
    """A value as the tenant wrote it: strings quoted, YAML decimals as numbers."""
    return yaml_text(value)


def schema_errors(values: dict[str, Any]) -> list[tuple[tuple, str]]:
    """(path in the values, message) for every way `values` break the chart's schema, in path order.

    >>> schema_errors({"sync": {"toHost": {"podz": {}}}})
    [(('sync', 'toHost', 'podz'), "unknown key 'podz'; did you mean 'pods'?")]
    """
    found: list[tuple[tuple, str]] = []
    for error in values_validator().iter_errors(values):
        path = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = set(_resolve(error.schema).get("properties", {}))
            for key in sorted(set(error.instance) - known):
                close = closest(key, known)
                hint = f"; did you mean '{close}'?" if close else f" (allowed here: {', '.join(sorted(known)) or 'none'})"
                found.append((path + (key,), f"unknown key '{key}'{hint}"))
        elif error.validator in ("oneOf", "anyOf"):
            kinds = [s.get("type") or s.get("enum") for s in error.validator_value]
            found.append((path, f"{_show(error.instance)} is not valid here (expected one of: {', '.join(k if isinstance(k, str) else yaml_text(k) for k in kinds)})"))
        elif error.validator == "enum":
            found.append((path, f"{_show(error.instance)} is not one of {yaml_text(error.validator_value)}"))
        elif error.validator == "type":
            expected = error.validator_value if isinstance(error.validator_value, str) else " or ".join(error.validator_value)
            found.append((path, f"{_show(error.instance)} is not of type '{expected}'"))
        else:
            found.append((path, error.message))
    return sorted(set(found), key=lambda item: ([str(p) for p in item[0]], item[1]))


def _leaves(values: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every value written, down to scalars, lists and nulls (an empty map changes nothing)."""
    if isinstance(values, dict):
        return [leaf for key, value in values.items() for leaf in _leaves(value, path + (key,))]
    return [path]


def _rule_of(path: tuple) -> tuple[tuple[str, ...], ValuesRule] | None:
    """The deepest table key at or above `path`, with its rule."""
    for cut in range(len(path), 0, -1):
        if path[:cut] in VALUES:
            return path[:cut], VALUES[path[:cut]]
    return None


@lru_cache(maxsize=1)
def _tenant_prefixes() -> frozenset[tuple[str, ...]]:
    """Every key on the way to a key the tenant may set (where its allowed keys live)."""
    return frozenset(path[:cut] for path, rule in VALUES.items() if rule.who == "tenant" for cut in range(len(path)))


def _not_listed(path: tuple) -> tuple[tuple, str]:
    """Where a value outside the table is refused (its first key no allowed key lives under) and why."""
    platform = sorted(".".join(p) for p, rule in VALUES.items() if rule.who == "platform" and p[:len(path)] == path)
    if platform:   # a section replaced whole (null, a list, a scalar) that holds keys the platform sets
        return path, f"replaces keys set by the platform ({', '.join(platform)}); remove it (ask the platform team if you need a change)"
    if path in _tenant_prefixes():   # a section replaced whole, with allowed keys below it
        return path, f"replaces a whole section of the chart values; set the allowed keys below it one by one ({', '.join(_allowed_below(path))})"
    where = next(path[:i] for i in range(1, len(path) + 1) if path[:i] not in _tenant_prefixes())
    parent = where[:-1]
    scope = f"under {'.'.join(parent)}" if parent else "at the top"
    return where, (
        "not on the list of vCluster values a tenant may set (a value outside it may widen what the vCluster's ServiceAccount "
        f"may do on the host); allowed {scope}: {', '.join(_allowed_below(parent))}; remove it, or ask the platform team to review it for the list"
    )


def _allowed_below(parent: tuple) -> list[str]:
    """The keys directly below `parent` on the way to a key the tenant may set."""
    return sorted({p[len(parent)] for p, rule in VALUES.items() if rule.who == "tenant" and p[:len(parent)] == parent and len(p) > len(parent)})


def values_problems(values: dict[str, Any], tenant: Tenant) -> list[tuple[tuple, str]]:
    """(path in the values, message) for every value a tenant may not set, by the `VALUES` table, in path order.

    >>> values_problems({"controlPlane": {"statefulSet": {"resources": {"requests": {"cpu": "1"}}}}}, tenant)
    []
    >>> [p for p, _ in values_problems({"sync": {"fromHost": {"secrets": {"enabled": True}}}, "telemetry": {"enabled": False}}, tenant)]
    [('sync', 'fromHost', 'secrets'), ('telemetry',)]
    """
    found: dict[tuple, str] = {}
    checked: set[tuple[str, ...]] = set()
    for leaf in _leaves(values):
        listed = _rule_of(leaf)
        if listed is None:
            where, message = _not_listed(leaf)
            found.setdefault(where, message)
            continue
        path, rule = listed
        if rule.who == "platform":
            found.setdefault(path, f"set by the platform: it {rule.why}; remove it (ask the platform team if you need a change)")
        elif rule.who == "refused":
            found.setdefault(path, f"refused: it {rule.why}; remove it")
        if rule.check is not None and path not in checked:
            checked.add(path)
            for below, message in rule.check(_at(values, path)[0][1], tenant):
                found.setdefault(path + below, message)
    return sorted(found.items(), key=lambda item: [str(p) for p in item[0]])


def check_tenant_vcluster(tenant: Tenant, doc, platform: Platform) -> list[Problem]:
    """Problems of one tenant's `vcluster` settings: unknown or invalid values, guarded keys, pinning.

    >>> check_tenant_vcluster(dev.tenants[2].spec, dev.tenants[2].doc, dev.platform)
    []
    >>> spec = dev.tenants[2].spec
    >>> gold = spec.model_copy(update={"vcluster": spec.vcluster.model_copy(update={"priority_class_name": "gold"})})
    >>> [p.message for p in check_tenant_vcluster(gold, dev.tenants[2].doc, dev.platform)]
    ["unknown PriorityClass 'gold' (known: batch, interactive, online-inference, training)"]
    """
    problems: list[Problem] = []
    spec = tenant.vcluster

    def add(path: tuple, message: str, severity: str = "error") -> None:
        problems.append(doc.problem(path, message, severity=severity))

    if not spec.enabled:
        if spec.values or spec.priority_class_name:
            add(("vcluster",), "vCluster settings have no effect while `enabled` is false", "warning")
        return problems
    for path, message in schema_errors(spec.values):
        add(("vcluster", "values", *path), f"rejected by the vCluster {SCHEMA_CHART_VERSION} chart schema: {message}")
    schema_paths = [path for path, _ in schema_errors(spec.values)]
    for path, message in values_problems(spec.values, tenant):
        # A key the chart does not know is reported once, by the schema, with its "did you mean".
        if not any(path[:len(known)] == known for known in schema_paths):
            add(("vcluster", "values", *path), message)
    name = spec.priority_class_name
    if name is not None:
        if name not in platform.priority_classes:
            close = closest(name, platform.priority_classes)
            hint = f"; did you mean '{close}'?" if close else f" (known: {', '.join(sorted(platform.priority_classes))})"
            add(("vcluster", "priorityClassName"), f"unknown PriorityClass '{name}'{hint}")
        else:
            grant = tenant.quota.priority_classes.get(name) or platform.priority_classes[name].default_tenant_cap
            if grant is not None and grant.pods == 0:
                add(("vcluster", "priorityClassName"), f"the tenant may run no pods at PriorityClass '{name}' (its quota caps them at 0), so every vCluster pod would be rejected; grant it under quota.priorityClasses or choose another class")
    # A tenant on shared pools only is not pinned at all (manifests.vcluster.node_selector): nothing to warn of.
    dedicated = [pool for pool in tenant.gpu.dedicated_pools if pool in platform.node_pools]
    if dedicated and set(tenant.gpu.classes) - {platform.node_pools[p].gpu_class for p in dedicated}:
        add(("vcluster", "enabled"), f"the vCluster's pods are pinned to the tenant's dedicated pools ({', '.join(dedicated)}); its shared classes ({', '.join(sorted(set(tenant.gpu.classes)))}) are out of its reach", "warning")
    return problems


def check_vcluster_platform(platform: Platform, doc) -> list[Problem]:
    """A chart version other than the one whose schema we ship is checked against the wrong schema.

    >>> check_vcluster_platform(dev.platform, dev.platform_doc)
    []
    """
    if platform.vcluster.chart_version != SCHEMA_CHART_VERSION:
        return [doc.problem(platform_path("vcluster", "chartVersion"), f"tenants' vCluster values are checked against the {SCHEMA_CHART_VERSION} chart schema; update components/data/vcluster/ for {platform.vcluster.chart_version}", severity="warning")]
    return []


def check_environment_vclusters(environment) -> list[Problem]:
    """Every vCluster check of one environment.

    >>> check_environment_vclusters(dev)
    []
    """
    problems: list[Problem] = []
    if any(t.spec.vcluster.enabled for t in environment.tenants):
        problems.extend(check_vcluster_platform(environment.platform, environment.platform_doc))
    for loaded in environment.tenants:
        if not loaded.spec.is_decommissioned:
            problems.extend(check_tenant_vcluster(loaded.spec, loaded.doc, environment.platform))
    return problems


def _chart_version(path: Path) -> str | None:
    """`version` of a chart directory's or packaged chart's Chart.yaml (None when unreadable)."""
    import tarfile

    import yaml

    try:
        if path.is_dir():
            text = (path / "Chart.yaml").read_text("utf-8")
        else:
            with tarfile.open(path) as archive:
                member = next(m for m in archive.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml"))
                text = archive.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
        version = (yaml.safe_load(text) or {}).get("version")
        return str(version) if version is not None else None
    except (OSError, StopIteration, tarfile.TarError, yaml.YAMLError, AttributeError):
        return None


def check_local_chart(environment, root: Path) -> list[Problem]:
    """`vcluster.chart`: the local chart must exist under the project and be `chartVersion`.

    Checked before anything is registered, so a wrong path is a located error, not a failed release.

    >>> check_local_chart(dev, root)
    []
    """
    platform: Platform = environment.platform
    chart = platform.vcluster.chart
    if chart is None or not any(t.spec.vcluster.enabled for t in environment.tenants):
        return []
    where = platform_path("vcluster", "chart")
    doc = environment.platform_doc
    path = root / chart
    if Path(chart).is_absolute() or ".." in Path(chart).parts:
        return [doc.problem(where, f"'{chart}' must be a path inside the project, relative to its root (it is part of every deployment's inputs)")]
    if not (path.is_dir() and (path / "Chart.yaml").is_file()) and not (path.is_file() and chart.endswith((".tgz", ".tar.gz"))):
        return [doc.problem(where, f"no chart at '{chart}': give a chart directory (with Chart.yaml) or a packaged .tgz, relative to the project root")]
    version = _chart_version(path)
    if version != platform.vcluster.chart_version:
        return [doc.problem(where, f"the chart at '{chart}' has version {version or 'unknown'}, but vcluster.chartVersion is {platform.vcluster.chart_version}")]
    return []
