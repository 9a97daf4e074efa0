"""`tenants import --context`: tenant files from what a live cluster holds (brownfield adoption).

Each selected namespace becomes a tenant of the same name (its own namespace, so the first
`pulumi up` adopts it instead of creating another). Its ResourceQuotas, LimitRange, RoleBindings
and NetworkPolicies are read as intent: quota keys, per-container defaults, who holds which role,
which traffic is allowed. Everything without an exact counterpart is reported (`Unmapped`), and the
hand-made objects stay on the cluster, unmanaged: nothing is deleted by importing.

The live read is the CLI's (components/cli/importing.py); this module only maps plain dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..fleet import gpu_capacity as cap
from ..manifests.meta import (DISPLAY_NAME_ANNOTATION, MANAGED_BY, NAMESPACE_NAME_LABEL, OPENSHIFT_DISPLAY_NAME_ANNOTATION,
                              POD_SECURITY_ENFORCE_LABEL)
from ..spec.stack import Platform
from ..spec.yaml_source import SourceDocument
from .import_gpu import node_selector_of_namespace
from .importing import Imported, Unmapped, limit_range_fields, merge_tenant_data, quota_fields, subject_note, tenant_name_problem, tenant_skeleton, tighter_quota

# Built-in ClusterRoles (and the roles this tool writes) -> the tenant role that holds at most as much.
ROLE_OF_CLUSTER_ROLE = {"admin": "owners", "edit": "developers", "view": "viewers"}
ROLE_OF_OWN_ROLE = {"tenant-owner": "owners", "tenant-developer": "developers", "tenant-viewer": "viewers"}
_CI_ROLE = {"owners": "owner", "developers": "developer", "viewers": "viewer"}
# Labels hand-made namespaces commonly carry for chargeback.
COST_CENTER_LABELS = ("cost-center", "costcenter", "cost_center", "costCenter")
DISPLAY_NAME_ANNOTATIONS = (OPENSHIFT_DISPLAY_NAME_ANNOTATION, DISPLAY_NAME_ANNOTATION)
_PSA_ORDER = ("privileged", "baseline", "restricted")


def _ref(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {where}{meta.get('name', '?')}"


def _is_ours(namespace: dict[str, Any]) -> bool:
    labels = namespace.get("metadata", {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in MANAGED_BY.items())


def tenants_from_cluster(
    namespaces: list[dict[str, Any]],
    objects: list[dict[str, Any]],
    platform: Platform,
    *,
    gpu_class_of: dict[str, str] | None = None,
) -> Imported:
    """Tenant file data for each namespace in `namespaces`, from the namespaced `objects` read with them
    (ResourceQuota, LimitRange, RoleBinding, NetworkPolicy; any other kind is counted as a workload
    that stays untouched). `gpu_class_of` maps a GPU resource to the class its quota means when the
    stack has several classes with that resource; else the namespace's node selector annotation
    names it, or the quota is refused (`Imported.refused`, located at the quota's key).

    >>> from components.spec.stack import Platform
    >>> p = Platform(labelDomain="gpu.example.com")
    >>> ns = {"kind": "Namespace", "metadata": {"name": "team-a"}}
    >>> tenants_from_cluster([ns], [], p).tenants["team-a"]["name"]
    'team-a'
    """
    imported = Imported()
    names = {ns["metadata"]["name"] for ns in namespaces}
    by_namespace: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_namespace.setdefault(obj.get("metadata", {}).get("namespace", ""), []).append(obj)
    platform_roles = {ns: role for role, listed in platform.platform_namespaces.items() for ns in listed}
    for namespace in sorted(namespaces, key=lambda n: n["metadata"]["name"]):
        name = namespace["metadata"]["name"]
        problem = tenant_name_problem(name, platform)
        if problem is None and _is_ours(namespace):
            problem = "it is already managed by gpu-tenancy"
        if problem:
            imported.unmapped.append(Unmapped(f"Namespace {name}", "namespace", f"not imported: {problem}"))
            continue
        reading = _Reading(namespace, name, platform, gpu_class_of, imported.refused)
        _import_namespace(imported, reading, by_namespace.get(name, []), names, platform_roles)
    return imported


@dataclass(frozen=True)
class _Reading:
    """One namespace being imported, and where the quotas it cannot place go."""

    namespace: dict[str, Any]
    name: str
    platform: Platform
    gpu_class_of: dict[str, str] | None
    refused: list

    @property
    def source(self) -> str:
        return f"Namespace {self.name}"


def _import_namespace(imported: Imported, reading: _Reading, objects: list[dict[str, Any]], names: set[str], platform_roles) -> None:
    name, source = reading.name, reading.source
    data, notes = _namespace_tenant(reading.namespace, reading.platform, platform_roles)
    sources = [source]
    workloads = 0
    policies = []
    for obj in sorted(objects, key=lambda o: (o.get("kind", ""), o["metadata"]["name"])):
        kind = obj.get("kind")
        read = _OBJECT_READERS.get(kind)
        if read is not None:
            data, more = read(data, obj, reading)
            sources.append(_ref(obj))
            notes.extend(more)
        elif kind == "NetworkPolicy":
            policies.append(obj)
        else:
            workloads += 1
    part, more, seen = _network(policies, name, names, platform_roles)
    data = merge_tenant_data(data, part)
    sources.extend(seen)
    notes.extend(more)
    if not policies:
        notes.append(Unmapped(source, "NetworkPolicy", "none today, so all traffic reaches its pods; the tenant's default deny "
                              "will allow only its own namespaces, DNS and what `network` lists: add what the workloads need before `pulumi up`"))
    if workloads:
        notes.append(Unmapped(source, "workloads", f"{workloads} other object(s) (workloads, services, ...) are not part of a tenant file; they stay as they are"))
    imported.tenants[name] = data
    imported.sources[name] = sources
    imported.unmapped.extend(notes)


def _read_quota(data: dict[str, Any], obj: dict[str, Any], reading: _Reading) -> tuple[dict[str, Any], list[Unmapped]]:
    part, more, refusals = _quota(obj, reading.platform, reading.gpu_class_of, node_selector_of_namespace(reading.namespace))
    reading.refused.extend(r.located(SourceDocument(_ref(obj), obj)) for r in refusals)
    if part and "quota" in data:
        data, tighter = tighter_quota(data, part, reading.source)
        more.extend(tighter)
    elif part:
        data = merge_tenant_data(data, part)
    return data, more


def _read_limit_range(data: dict[str, Any], obj: dict[str, Any], reading: _Reading) -> tuple[dict[str, Any], list[Unmapped]]:
    ref = _ref(obj)
    part, more = limit_range_fields(obj.get("spec", {}).get("limits", []), ref)
    if part and "limits" in data:
        more.append(Unmapped(ref, "spec", "a second LimitRange in the namespace; the tenant file has one, the first by name was imported"))
    elif part:
        data = merge_tenant_data(data, part)
    return data, more


def _read_role_binding(data: dict[str, Any], obj: dict[str, Any], reading: _Reading) -> tuple[dict[str, Any], list[Unmapped]]:
    part, more = _role_binding(obj, reading.name, reading.platform)
    return merge_tenant_data(data, part), more


# What each kind read from a namespace adds to its tenant file; NetworkPolicies are read all at once
# (`_network`), any other kind is a workload that stays as it is.
_OBJECT_READERS: dict[str, Callable[[dict[str, Any], dict[str, Any], _Reading], tuple[dict[str, Any], list[Unmapped]]]] = {
    "ResourceQuota": _read_quota,
    "LimitRange": _read_limit_range,
    "RoleBinding": _read_role_binding,
}


def _namespace_tenant(namespace: dict[str, Any], platform: Platform, platform_roles) -> tuple[dict[str, Any], list[Unmapped]]:
    meta = namespace["metadata"]
    name = meta["name"]
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    cost = next((labels[k] for k in COST_CENTER_LABELS if labels.get(k)), "unassigned")
    display = next((annotations[k] for k in DISPLAY_NAME_ANNOTATIONS if annotations.get(k)), None)
    data = tenant_skeleton(name, display_name=display, cost_center=cost)
    notes: list[Unmapped] = []
    level = labels.get(POD_SECURITY_ENFORCE_LABEL)
    stack_level = platform.pod_security.level if platform.pod_security else "baseline"
    if level in _PSA_ORDER and _PSA_ORDER.index(level) > _PSA_ORDER.index(stack_level):
        data["podSecurity"] = level
    elif level in _PSA_ORDER and level != stack_level:
        notes.append(Unmapped(f"Namespace {name}", f"labels.{POD_SECURITY_ENFORCE_LABEL}", f"'{level}' is looser than the stack's '{stack_level}'; "
                              f"the tenant gets '{stack_level}': check its pods pass it (kubectl label --dry-run=server ...)"))
    return data, notes


def _quota(obj: dict[str, Any], platform: Platform, gpu_class_of, node_selector: dict[str, str]) -> tuple[dict[str, Any], list[Unmapped], list]:
    spec = obj.get("spec") or {}
    ref = _ref(obj)
    selector = (spec.get("scopeSelector") or {}).get("matchExpressions") or []
    if spec.get("scopes") or selector:
        priority = [e for e in selector if e.get("scopeName") == "PriorityClass" and e.get("operator") == "In" and len(e.get("values") or []) == 1]
        if len(priority) == 1 and len(selector) == 1 and not spec.get("scopes"):
            return _priority_quota(priority[0]["values"][0], spec.get("hard") or {}, platform, ref)
        return {}, [Unmapped(ref, "spec.scopes", "a scoped quota (other than one PriorityClass) has no field in the tenant file; not imported")], []
    return quota_fields(spec.get("hard") or {}, platform, ref, gpu_class_of=gpu_class_of, node_selector=node_selector, at=("spec", "hard"))


# A PriorityClass cap counts GPUs of any class (`priorityClasses.<pc>.gpu`): no class to place.
_ANY_CLASS = {cap.GPU: "any", cap.GPU_SHARED: "any"}


def _priority_quota(priority_class: str, hard: dict[str, Any], platform: Platform, ref: str) -> tuple[dict[str, Any], list[Unmapped], list]:
    if priority_class not in platform.priority_classes:
        return {}, [Unmapped(ref, "spec.scopeSelector", f"PriorityClass '{priority_class}' is not one of the stack's ({', '.join(sorted(platform.priority_classes))}); not imported")], []
    fields, notes, refusals = quota_fields(hard, platform, ref, gpu_class_of=_ANY_CLASS, at=("spec", "hard"))
    quota = fields.get("quota", {})
    ceiling: dict[str, Any] = {}
    if "pods" in quota.get("objects", {}):
        ceiling["pods"] = quota["objects"]["pods"]
    for resource in ("cpu", "memory"):
        if "requests" in quota.get(resource, {}):
            ceiling[resource] = quota[resource]["requests"]
    if quota.get("gpu"):
        ceiling["gpu"] = sum(quota["gpu"].values())
    left = {k for k in quota if k not in ("objects", "cpu", "memory", "gpu")}
    if left:
        notes.append(Unmapped(ref, "spec.hard", f"{', '.join(sorted(left))} per PriorityClass have no field (priorityClasses caps pods, cpu, memory, gpu); not imported"))
    return ({"quota": {"priorityClasses": {priority_class: ceiling}}} if ceiling else {}), notes, refusals


def _role_binding(obj: dict[str, Any], namespace: str, platform: Platform) -> tuple[dict[str, Any], list[Unmapped]]:
    ref = _ref(obj)
    role_ref = obj.get("roleRef") or {}
    role = (ROLE_OF_CLUSTER_ROLE.get(role_ref.get("name")) if role_ref.get("kind") == "ClusterRole" else None) \
        or ROLE_OF_OWN_ROLE.get(role_ref.get("name"))
    if role is None:
        return {}, [Unmapped(ref, "roleRef", f"{role_ref.get('kind')} {role_ref.get('name')} is not admin, edit or view: no tenant role matches it; "
                             "the binding stays on the cluster, unmanaged (add a role bundle of the stack if the role is needed)")]
    subjects: dict[str, Any] = {}
    accounts: list[dict[str, Any]] = []
    notes: list[Unmapped] = []
    for index, subject in enumerate(obj.get("subjects") or []):
        kind, name = subject.get("kind"), subject.get("name", "")
        note = subject_note(platform, kind, name, [namespace], ref, f"subjects[{index}]") if kind in ("Group", "User") else None
        if note is not None:
            notes.append(note)
        elif kind in ("Group", "User"):
            subjects.setdefault(f"{kind.lower()}s", []).append(name)
        elif kind == "ServiceAccount" and subject.get("namespace", namespace) == namespace and name != "default":
            accounts.append({"name": name, "role": _CI_ROLE[role]})
        else:
            notes.append(Unmapped(ref, f"subjects[{index}]", f"{kind} {subject.get('namespace', '')}/{name}: only groups, users and ServiceAccounts "
                                  "of the namespace itself (not `default`) map to tenant roles; not imported"))
    access: dict[str, Any] = {role: subjects} if subjects else {}
    if accounts:
        access["ciServiceAccounts"] = accounts
    return ({"access": access} if access else {}), notes


def _peer_namespace(peer: dict[str, Any]) -> str | None:
    """The one namespace a `from`/`to` peer names by its metadata.name label, or None."""
    selector = peer.get("namespaceSelector")
    if selector is None or peer.get("podSelector") not in (None, {}):
        return None
    labels = selector.get("matchLabels") or {}
    if selector.get("matchExpressions") or list(labels) != [NAMESPACE_NAME_LABEL]:
        return None
    return labels[NAMESPACE_NAME_LABEL]


def _ports(rule: dict[str, Any]) -> list[dict[str, Any]] | None:
    ports = []
    for port in rule.get("ports") or []:
        if not isinstance(port.get("port"), int):
            return None  # named ports do not map: the file names numbers
        entry: dict[str, Any] = {"port": port["port"]}
        if port.get("endPort"):
            entry["endPort"] = port["endPort"]
        if port.get("protocol", "TCP") != "TCP":
            entry["protocol"] = port["protocol"]
        ports.append(entry)
    return ports


def _network(policies: list[dict[str, Any]], namespace: str, imported_names: set[str], platform_roles) -> tuple[dict[str, Any], list[Unmapped], list[str]]:
    """NetworkPolicy intent: what the tenant's `network` keeps allowing. Default deny, same namespace
    and DNS are what every tenant gets already; ipBlock egress and ingress from one named namespace
    (a platform service or another tenant) map; anything else is reported."""
    network: dict[str, Any] = {}
    notes: list[Unmapped] = []
    seen: list[str] = []
    for policy in sorted(policies, key=lambda p: p["metadata"]["name"]):
        ref = _ref(policy)
        spec = policy.get("spec") or {}
        whole_namespace = spec.get("podSelector") in (None, {})
        if not whole_namespace:
            notes.append(Unmapped(ref, "spec.podSelector", "selects some pods only; tenant policies apply to every pod of the namespace: not imported"))
            continue
        left_in = _ingress_intent(network, notes, ref, spec, namespace, imported_names, platform_roles)
        left_out = _egress_intent(network, notes, ref, spec)
        if not (left_in or left_out):
            seen.append(ref)
    return ({"network": network} if network else {}), notes, seen


def _ingress_intent(network: dict[str, Any], notes: list[Unmapped], ref: str, spec: dict[str, Any], namespace: str,
                    imported_names: set[str], platform_roles) -> bool:
    """Adds what the policy's ingress rules map to into `network`; whether a rule was left unmapped."""
    left = False
    for index, rule in enumerate(spec.get("ingress") or []):
        ports = _ports(rule)
        for peer in rule.get("from") or [{}]:
            if peer == {"podSelector": {}} or peer.get("podSelector") == {} and "namespaceSelector" not in peer:
                continue  # same namespace: always allowed
            other = _peer_namespace(peer)
            if other in platform_roles and ports is not None:
                grant = {"role": platform_roles[other], "ports": ports} if ports else platform_roles[other]
                network.setdefault("ingressFrom", {}).setdefault("platform", []).append(grant)
            elif other in imported_names and other != namespace:
                network.setdefault("ingressFrom", {}).setdefault("tenants", []).append(other)
                if ports:
                    network["ingressFrom"].setdefault("ports", []).extend(p for p in ports if p not in network["ingressFrom"].get("ports", []))
            else:
                left = True
                notes.append(Unmapped(ref, f"spec.ingress[{index}]", "a peer other than the namespace itself, one platform namespace or an imported "
                                      "namespace (by kubernetes.io/metadata.name), or named ports: not imported"))
    return left


def _egress_intent(network: dict[str, Any], notes: list[Unmapped], ref: str, spec: dict[str, Any]) -> bool:
    """Adds what the policy's egress rules map to into `network`; whether a rule was left unmapped."""
    left = False
    for index, rule in enumerate(spec.get("egress") or []):
        ports = _ports(rule)
        for peer in rule.get("to") or [{}]:
            block = peer.get("ipBlock")
            if block and ports is not None and len(peer) == 1:
                entry: dict[str, Any] = {"cidr": block["cidr"]}
                if block.get("except"):
                    entry["except"] = list(block["except"])
                if ports:
                    entry["ports"] = ports
                network.setdefault("egress", []).append(entry)
            elif _is_dns(peer, ports) or peer.get("podSelector") == {} and "namespaceSelector" not in peer:
                continue  # DNS and the namespace itself: always allowed
            else:
                left = True
                notes.append(Unmapped(ref, f"spec.egress[{index}]", "only ipBlock destinations (and DNS, the namespace itself) map to `network.egress`: not imported"))
    return left


def _is_dns(peer: dict[str, Any], ports: list[dict[str, Any]] | None) -> bool:
    return bool(ports) and {p["port"] for p in ports} == {53} and _peer_namespace({"namespaceSelector": peer.get("namespaceSelector")}) == "kube-system"
