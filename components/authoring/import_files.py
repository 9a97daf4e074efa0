"""`tenants import --from FILE`: tenant files from other tools' objects: Capsule v1beta2 `Tenant`s,
Kubeflow `Profile`s, Kueue `ClusterQueue`s with their `LocalQueue`s.

Documents of several tools may be given together: contributions to one tenant name are merged
(a Kubeflow Profile and the Kueue LocalQueue in its namespace make one tenant). What has no exact
counterpart in the tenant file is reported (`Unmapped`), never guessed; what cannot be imported
without guessing (a malformed field, a GPU quota of no known class, a Kueue ClusterQueue whose
namespace selector reads labels of a namespace that is not among the files) is refused
(`Imported.refused`, at the document's line), and then nothing is written.

Namespace documents (`kubectl get namespace NS -o yaml`) may be given along: their labels decide
which Kueue ClusterQueues select the namespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import TypeAdapter, ValidationError

from ..manifests.meta import CAPSULE_DESCRIPTION_ANNOTATION, NAMESPACE_NAME_LABEL
from ..spec.base import DNS_LABEL_PATTERN
from ..spec.quantity import Quantity, format_quantity
from ..spec.stack import Platform
from ..spec.tenant import ImageRegistry
from ..spec.yaml_source import SourceDocument
from .import_cluster import ROLE_OF_CLUSTER_ROLE
from .import_gpu import classes_of_node_selector, gpu_classes_of_resource, node_selector_of_namespace
from .import_shapes import shape_refusals
from .import_shares import namespace_shares
from .importing import (Imported, Refusal, Unmapped, limit_range_fields, merge_tenant_data, quota_fields, reserved_namespace_problem,
                        subject_note, tenant_name_problem, tenant_skeleton)

_CAPSULE_MAPPED = {"owners", "resourceQuotas", "limitRanges", "additionalRoleBindings", "namespaceOptions", "rules",
                   "containerRegistries", "nodeSelector"}
_REGISTRY = TypeAdapter(ImageRegistry)


def tenants_from_documents(docs: list[dict[str, Any] | SourceDocument], platform: Platform, *, origin: str = "file",
                           gpu_class_of: dict[str, str] | None = None) -> Imported:
    """Tenant file data from the Capsule, Kubeflow and Kueue objects among `docs` (other kinds are reported).

    `docs` are plain dicts (named `origin` in the report) or `SourceDocument`s of the files read, whose
    positions locate every refusal. `gpu_class_of` maps a GPU resource or a Kueue ResourceFlavor
    name to a GPU class of the stack.

    >>> from components.spec.stack import Platform
    >>> profile = {"apiVersion": "kubeflow.org/v1", "kind": "Profile", "metadata": {"name": "ana"},
    ...            "spec": {"owner": {"kind": "User", "name": "ana@example.com"}}}
    >>> tenants_from_documents([profile], Platform(labelDomain="gpu.example.com")).tenants["ana"]["access"]
    {'owners': {'users': ['ana@example.com']}}
    """
    gpu_class_of = gpu_class_of or {}
    sources = [d if isinstance(d, SourceDocument) else SourceDocument(origin, d) for d in docs]
    imported = Imported()
    readable = []
    for source in sources:
        group, kind = _group_kind(source.data)
        refusals = shape_refusals(source.data, group, kind)
        imported.refused.extend(r.located(source) for r in refusals)
        if not refusals:
            readable.append((source, group, kind))
    context = _Context(
        cluster_queues={s.data["metadata"]["name"]: s for s, g, k in readable if (g, k) == ("kueue.x-k8s.io", "ClusterQueue")},
        flavors={s.data["metadata"]["name"]: s.data for s, g, k in readable if (g, k) == ("kueue.x-k8s.io", "ResourceFlavor")},
        namespaces={s.data["metadata"]["name"]: s.data for s, g, k in readable if (g, k) == ("", "Namespace")},
        queue_namespaces=_queue_namespaces([s.data for s, g, k in readable if (g, k) == ("kueue.x-k8s.io", "LocalQueue")]),
    )
    for source, group, kind in readable:
        doc = source.data
        ref = f"{source.file}: {kind} {_name(doc)}"
        read = _READERS.get((group, kind))
        if read is None:
            imported.unmapped.append(Unmapped(ref, "kind", "not a Capsule Tenant, Kubeflow Profile or Kueue LocalQueue/ClusterQueue; not imported"))
            continue
        if read is _context_only:
            continue  # read through the documents that point at them
        part, refusals = read(source, platform, ref, gpu_class_of, context)
        imported = imported.merge(part)
        imported.refused.extend(refusals)
    return imported


class _Context:
    """The documents other documents point at: ClusterQueues, ResourceFlavors, Namespaces by name,
    and the namespaces whose LocalQueues point at each ClusterQueue."""

    def __init__(self, cluster_queues: dict[str, SourceDocument], flavors: dict[str, dict], namespaces: dict[str, dict],
                 queue_namespaces: dict[str, list[str]]) -> None:
        self.cluster_queues, self.flavors, self.namespaces = cluster_queues, flavors, namespaces
        self.queue_namespaces = queue_namespaces


def _queue_namespaces(local_queues: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, set[str]] = {}
    for queue in local_queues:
        out.setdefault(queue["spec"]["clusterQueue"], set()).add(queue["metadata"]["namespace"])
    return {name: sorted(namespaces) for name, namespaces in out.items()}


def _group_kind(doc: Any) -> tuple[str, str]:
    if not isinstance(doc, dict):
        return "", ""
    api_version = str(doc.get("apiVersion", ""))
    return (api_version.rpartition("/")[0] if "/" in api_version else ""), str(doc.get("kind", ""))


def _name(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def _located(source: SourceDocument, refusals: list[Refusal]) -> list:
    return [r.located(source) for r in refusals]


def _start(name: str, ref: str, platform: Platform, **skeleton: Any) -> tuple[Imported, dict[str, Any] | None]:
    out = Imported()
    problem = tenant_name_problem(name, platform)
    if problem:
        out.unmapped.append(Unmapped(ref, "metadata.name", f"not imported: {problem}"))
        return out, None
    return out, tenant_skeleton(name, **skeleton)


def _finish(out: Imported, name: str, data: dict[str, Any], ref: str, notes: list[Unmapped]) -> Imported:
    out.tenants[name] = data
    out.sources[name] = [ref]
    out.unmapped.extend(notes)
    return out


def _subjects(subjects: list[dict[str, Any]], ref: str, field: str, platform: Platform,
              namespaces: list[str]) -> tuple[dict[str, list[str]], list[Unmapped]]:
    out: dict[str, list[str]] = {}
    notes = []
    for index, subject in enumerate(subjects or []):
        kind, name = subject.get("kind"), subject.get("name")
        note = subject_note(platform, kind, name, namespaces, ref, f"{field}[{index}]") if kind in ("User", "Group") and name else None
        if note is not None:
            notes.append(note)
        elif kind in ("User", "Group") and name:
            out.setdefault(f"{kind.lower()}s", []).append(name)
        else:
            notes.append(Unmapped(ref, f"{field}[{index}]", f"{kind} {name}: only users and groups map to tenant roles; not imported"))
    return out, notes


def _bindings(access: dict[str, Any], bindings: list[dict[str, Any]], ref: str, field: str, notes: list[Unmapped],
              platform: Platform, namespaces: list[str]) -> dict[str, Any]:
    """Capsule bindings ({clusterRoleName, subjects}) to admin, edit or view, added to `access`; others go to `notes`."""
    for index, binding in enumerate(bindings):
        role = ROLE_OF_CLUSTER_ROLE.get(binding.get("clusterRoleName"))
        if role is None:
            notes.append(Unmapped(ref, f"{field}[{index}]", f"ClusterRole {binding.get('clusterRoleName')} is not admin, edit or view; not imported"))
            continue
        subjects, more = _subjects(binding.get("subjects") or [], ref, f"{field}[{index}].subjects", platform, namespaces)
        notes.extend(more)
        access = merge_tenant_data(access, {role: subjects})
    return access


def _capsule(source: SourceDocument, platform: Platform, ref: str, gpu_class_of, context: _Context) -> tuple[Imported, list]:
    doc = source.data
    name = doc["metadata"]["name"]
    annotations = doc["metadata"].get("annotations") or {}
    out, data = _start(name, ref, platform, description=annotations.get(CAPSULE_DESCRIPTION_ANNOTATION, ""))
    if data is None:
        return out, []
    spec = doc.get("spec") or {}
    got = _Gathered(data)
    node_selector = spec.get("nodeSelector") or {}

    def quota(hard: dict[str, Any], at: tuple, shown: str) -> None:
        part, more, refused = quota_fields(hard, platform, f"{ref} {shown}", gpu_class_of=gpu_class_of, node_selector=node_selector, at=at)
        got.data = merge_tenant_data(got.data, part)
        got.notes.extend(more)
        got.refusals.extend(refused)

    listed = _own_namespaces((doc.get("status") or {}).get("namespaces") or [], platform, ref, got.notes)
    namespaces = [ns for _, ns in listed if ns != name]
    _capsule_access(got, spec, ref, platform, [name, *namespaces], quota)
    scope = _capsule_quotas(got, spec, quota)
    _capsule_limit_ranges(got, spec, ref)
    _capsule_namespaces(got, listed, namespaces, scope, ref)
    _capsule_rest(got, spec, ref, platform, node_selector)
    return _finish(out, name, got.data, ref, got.notes), _located(source, got.refusals)


@dataclass
class _Gathered:
    """What the import of one Capsule Tenant has gathered so far, in the order it was found."""

    data: dict[str, Any]
    notes: list[Unmapped] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)


def _capsule_access(got: _Gathered, spec: dict[str, Any], ref: str, platform: Platform, names: list[str],
                    quota: Callable[[dict[str, Any], tuple, str], None]) -> None:
    """Owners, additional role bindings and the rules' bindings (and the rules' quotas, as they come)."""
    notes = got.notes
    owners, more = _subjects(spec.get("owners") or [], ref, "spec.owners", platform, names)
    notes.extend(more)
    access: dict[str, Any] = {"owners": owners} if owners else {}
    access = _bindings(access, spec.get("additionalRoleBindings") or [], ref, "spec.additionalRoleBindings", notes, platform, names)
    for index, rule in enumerate(spec.get("rules") or []):
        where = f"spec.rules[{index}]"
        if rule.get("namespaceSelector"):
            notes.append(Unmapped(ref, where, "applies to some namespaces of the tenant only; a tenant file applies to all: not imported"))
            continue
        access = _bindings(access, (rule.get("permissions") or {}).get("bindings") or [], ref, f"{where}.permissions.bindings", notes,
                           platform, names)
        for q, item in enumerate(rule.get("quota") or []):
            quota(item.get("hard") or {}, ("spec", "rules", index, "quota", q, "hard"), f"{where}.quota[{q}]")
        for key in sorted(set(rule) - {"permissions", "quota"}):
            notes.append(Unmapped(ref, f"{where}.{key}", "no field of the tenant file maps it exactly; not imported"))
    if access:
        got.data["access"] = access


def _capsule_quotas(got: _Gathered, spec: dict[str, Any], quota: Callable[[dict[str, Any], tuple, str], None]) -> str:
    """The Tenant's resource quotas; their scope (Tenant or Namespace)."""
    quotas = spec.get("resourceQuotas") or {}
    scope = quotas.get("scope", "Tenant")
    if scope not in ("Tenant", "Namespace"):
        got.refusals.append(Refusal(("spec", "resourceQuotas", "scope"), f"'{scope}' is no Capsule quota scope (Tenant or Namespace)"))
    for index, item in enumerate(quotas.get("items") or []):
        quota(item.get("hard") or {}, ("spec", "resourceQuotas", "items", index, "hard"), f"spec.resourceQuotas.items[{index}]")
    return scope


def _capsule_limit_ranges(got: _Gathered, spec: dict[str, Any], ref: str) -> None:
    for index, item in enumerate((spec.get("limitRanges") or {}).get("items") or []):
        part, more = limit_range_fields(item.get("limits") or [], f"{ref} spec.limitRanges.items[{index}]")
        if part and "limits" in got.data:
            got.notes.append(Unmapped(ref, f"spec.limitRanges.items[{index}]", "the tenant file has one LimitRange; the first was imported"))
            continue
        got.data = merge_tenant_data(got.data, part)
        got.notes.extend(more)


def _capsule_namespaces(got: _Gathered, listed: list[tuple[int, str]], namespaces: list[str], scope: str, ref: str) -> None:
    """The namespaces, and how a Tenant-wide quota is shared among them."""
    for index, namespace in listed:
        if not re.fullmatch(DNS_LABEL_PATTERN, namespace):
            got.refusals.append(Refusal(("status", "namespaces", index), f"'{namespace}' is not a namespace name (a DNS label)"))
    if namespaces:
        got.data["namespaces"] = sorted(set(namespaces))
    if not got.refusals:
        got.data, share_notes, reasons = namespace_shares(got.data, [ns for _, ns in listed], scope)
        got.notes.extend(Unmapped(ref, "spec.resourceQuotas", note) for note in share_notes)
        got.refusals.extend(Refusal(("spec", "resourceQuotas"), reason) for reason in reasons)


def _capsule_rest(got: _Gathered, spec: dict[str, Any], ref: str, platform: Platform, node_selector: dict[str, Any]) -> None:
    """Registries, and notes on what maps to nothing: the namespace count, a node selector of no GPU class, other fields."""
    notes = got.notes
    got.data = merge_tenant_data(got.data, _registries(spec.get("containerRegistries") or {}, ref, notes))
    quota_count = (spec.get("namespaceOptions") or {}).get("quota")
    if quota_count is not None:
        notes.append(Unmapped(ref, "spec.namespaceOptions.quota", f"at most {quota_count} namespaces, created by the owners: here the namespaces "
                              "are listed in the tenant file (namespaces) and created by the platform"))
    if node_selector and classes_of_node_selector(platform, node_selector) is None:
        notes.append(Unmapped(ref, "spec.nodeSelector", "names no GPU class, pool or product of the stack: the tenant's GPU classes and "
                              "pools decide where its pods run; not imported"))
    for key in sorted(set(spec) - _CAPSULE_MAPPED):
        notes.append(Unmapped(ref, f"spec.{key}", "no field of the tenant file maps it exactly; not imported (check docs/security.md for the control that covers it)"))


def _own_namespaces(listed: list[str], platform: Platform, ref: str, notes: list[Unmapped]) -> list[tuple[int, str]]:
    """The Capsule Tenant's namespaces (`status.namespaces`, with their index) a tenant file may hold.

    One the platform owns is left out with a report line, as `tenants validate` would refuse it
    (and as a namespace of the cluster is skipped): it gets no share of the quota, and its
    ServiceAccounts are not the tenant's own to bind.
    """
    kept = []
    for index, namespace in enumerate(listed):
        problem = reserved_namespace_problem(namespace, platform)
        if problem is None:
            kept.append((index, namespace))
        else:
            notes.append(Unmapped(ref, f"status.namespaces[{index}]", f"not imported: {problem}; the tenant file leaves it out "
                                  "(its Capsule owners keep it until the Tenant is removed) and shares the quota over the others"))
    return kept


# A Capsule allowedRegex that lists exact registries: ^name$ or ^(name|name)$, names written with \. only.
_EXACT_ALTERNATIVES = re.compile(r"^\^\(?(?P<names>(?:[a-z0-9-]|\\\.|:|/)+(?:\|(?:[a-z0-9-]|\\\.|:|/)+)*)\)?\$$")


def _registries(registries: dict[str, Any], ref: str, notes: list[Unmapped]) -> dict[str, Any]:
    """Capsule's `containerRegistries` as `images.registries`: exact entries only, never a widened pattern."""
    allowed: list[str] = []
    for index, entry in enumerate(registries.get("allowed") or []):
        try:
            allowed.append(_REGISTRY.validate_python(entry))
        except ValidationError:
            notes.append(Unmapped(ref, f"spec.containerRegistries.allowed[{index}]", f"'{entry}' is not a registry a tenant file can "
                                  "list (a lower-case host, optionally a port and a path); not imported"))
    pattern = registries.get("allowedRegex") or ""
    exact = _EXACT_ALTERNATIVES.fullmatch(pattern)
    balanced = pattern.count("(") == pattern.count(")") and pattern.count("(") <= 1
    if exact and balanced:
        names = [n.replace("\\.", ".") for n in exact["names"].split("|")]
        try:
            allowed.extend(_REGISTRY.validate_python(n) for n in names)
        except ValidationError:
            exact = None
    if pattern and not (exact and balanced):
        notes.append(Unmapped(ref, "spec.containerRegistries.allowedRegex", f"'{pattern}' matches registries a tenant file cannot list "
                              "one by one; not imported (a tenant file lists exact registries: add the ones the team uses to images.registries)"))
    return {"images": {"registries": sorted(set(allowed))}} if allowed else {}


def _kubeflow(source: SourceDocument, platform: Platform, ref: str, gpu_class_of, context: _Context) -> tuple[Imported, list]:
    doc = source.data
    name = doc["metadata"]["name"]
    out, data = _start(name, ref, platform)
    if data is None:
        return out, []
    spec = doc.get("spec") or {}
    notes: list[Unmapped] = []
    owner = spec.get("owner") or {}
    owners, more = _subjects([owner] if owner else [], ref, "spec.owner", platform, [name])
    notes.extend(more)
    if owners:
        data["access"] = {"owners": owners}
    node_selector = _node_selector_of(context.namespaces.get(name))
    part, more, refusals = quota_fields((spec.get("resourceQuotaSpec") or {}).get("hard") or {}, platform, f"{ref} spec.resourceQuotaSpec",
                                        gpu_class_of=gpu_class_of, node_selector=node_selector, at=("spec", "resourceQuotaSpec", "hard"))
    data = merge_tenant_data(data, part)
    notes.extend(more)
    for index, plugin in enumerate(spec.get("plugins") or []):
        notes.append(Unmapped(ref, f"spec.plugins[{index}]", f"{plugin.get('kind')}: cloud identity of the namespace's ServiceAccounts is not part of a tenant file; set it up outside"))
    return _finish(out, name, data, ref, notes), _located(source, refusals)


def _node_selector_of(namespace: dict[str, Any] | None) -> dict[str, str]:
    return node_selector_of_namespace(namespace) if namespace else {}


_OPERATORS = {
    "In": lambda labels, key, values: key in labels and labels[key] in values,
    "NotIn": lambda labels, key, values: key not in labels or labels[key] not in values,
    "Exists": lambda labels, key, values: key in labels,
    "DoesNotExist": lambda labels, key, values: key not in labels,
}


def selector_selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Whether a Kueue `namespaceSelector` (a label selector; null selects nothing, {} everything) selects `labels`.

    >>> selector_selects({"matchLabels": {"team": "vision"}}, {"team": "vision"}), selector_selects(None, {"team": "vision"})
    (True, False)
    """
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_OPERATORS[e["operator"]](labels, e["key"], e.get("values") or []) for e in selector.get("matchExpressions") or [])


def _selector_keys(selector: dict[str, Any]) -> set[str]:
    return {*(selector.get("matchLabels") or {}), *(e.get("key") for e in selector.get("matchExpressions") or [])}


def _selects(queue: SourceDocument, namespace: str, context: _Context) -> tuple[bool | None, list[Refusal]]:
    """Whether the ClusterQueue admits workloads of `namespace`: None with the refusal when that cannot be told."""
    spec = queue.data.get("spec") or {}
    selector = spec.get("namespaceSelector")
    at = ("spec", "namespaceSelector")
    for index, expression in enumerate((selector or {}).get("matchExpressions") or []):
        if expression.get("operator") not in _OPERATORS:
            return None, [Refusal((*at, "matchExpressions", index, "operator"), f"'{expression.get('operator')}' is no selector operator "
                                  f"({', '.join(_OPERATORS)})")]
    known = context.namespaces.get(namespace)
    if known is None and selector and _selector_keys(selector) - {NAMESPACE_NAME_LABEL}:
        return None, [Refusal(at, f"reads the labels {', '.join(sorted(_selector_keys(selector) - {NAMESPACE_NAME_LABEL}))} of namespace "
                              f"{namespace}, which is not among the files: give its Namespace too "
                              f"(kubectl get namespace {namespace} -o yaml), so that its quota goes only where Kueue admits it")]
    labels = {**(((known or {}).get("metadata") or {}).get("labels") or {}), NAMESPACE_NAME_LABEL: namespace}
    return selector_selects(selector, labels), []


def _flavor_class(flavor_name: str, resource: str, platform: Platform, gpu_class_of: dict[str, str], context: _Context) -> str | None:
    """The GPU class a Kueue ResourceFlavor means: named with --gpu-class, named like a class, or its nodeLabels."""
    if flavor_name in gpu_class_of:
        return gpu_class_of[flavor_name]
    if flavor_name in platform.gpu_classes:
        return flavor_name
    labels = ((context.flavors.get(flavor_name) or {}).get("spec") or {}).get("nodeLabels") or {}
    hinted = classes_of_node_selector(platform, labels)
    chosen = sorted((hinted or set()) & set(gpu_classes_of_resource(platform, resource)))
    return chosen[0] if len(chosen) == 1 else None


def _local_queue(source: SourceDocument, platform: Platform, ref: str, gpu_class_of, context: _Context) -> tuple[Imported, list]:
    doc = source.data
    name = doc["metadata"]["namespace"]
    out, data = _start(name, ref, platform)
    if data is None:
        return out, []
    queue_name = doc["spec"]["clusterQueue"]
    queue_doc = context.cluster_queues.get(queue_name)
    if queue_doc is None:
        return out, [Refusal(("spec", "clusterQueue"), f"ClusterQueue '{queue_name}' is not among the files; give its file too").located(source)]
    cq_ref = f"{queue_doc.file}: ClusterQueue {queue_name}"
    selected, refused = _selects(queue_doc, name, context)
    if refused:
        return out, _located(queue_doc, refused)
    spec = queue_doc.data.get("spec") or {}
    notes: list[Unmapped] = []
    refusals: list[Refusal] = []
    if not selected:
        out = _finish(out, name, data, ref, [Unmapped(cq_ref, "spec.namespaceSelector", f"does not select namespace {name}: Kueue "
                                                     f"admits no workload of LocalQueue {_name(doc)}, so the tenant gets none of this queue's quota")])
        out.sources[name].append(cq_ref)
        return out, []
    notes += _shared_queue_notes(queue_doc, queue_name, name, context, cq_ref)
    amounts = _queue_amounts(spec, platform, gpu_class_of, context, cq_ref, notes, refusals)
    quota = _queue_quota(amounts, refusals)
    if amounts.gpu:
        data["gpu"] = {"classes": sorted(amounts.gpu)}
    if quota:
        data["quota"] = quota
    queue_fields = _queue_fields(spec, amounts)
    if queue_fields:
        data["queue"] = queue_fields
    for key in sorted(set(spec) - {"resourceGroups", "cohort", "cohortName", "fairSharing", "namespaceSelector"}):
        notes.append(Unmapped(cq_ref, f"spec.{key}", "set by the stack's queue settings for every tenant; not imported"))
    out = _finish(out, name, data, ref, notes)
    out.sources[name].append(cq_ref)
    return out, _located(queue_doc, refusals)


def _shared_queue_notes(queue_doc: SourceDocument, queue_name: str, name: str, context: _Context, cq_ref: str) -> list[Unmapped]:
    """Whether other namespaces' LocalQueues (or every namespace) share the ClusterQueue's quota."""
    spec = queue_doc.data.get("spec") or {}
    sharing = [ns for ns in context.queue_namespaces.get(queue_name, []) if ns != name and _selects(queue_doc, ns, context)[0]]
    if sharing:
        return [Unmapped(cq_ref, "spec.resourceGroups", f"shared with the LocalQueues of {', '.join(sharing)}: Kueue caps their sum, "
                         "each tenant file gets the whole quota here; split it between the tenants by hand")]
    if spec.get("namespaceSelector") == {}:
        return [Unmapped(cq_ref, "spec.namespaceSelector", "matches every namespace: its quota is imported as this tenant's own; "
                         "split it if several namespaces share it")]
    return []


@dataclass
class _QueueAmounts:
    """A ClusterQueue's amounts as a tenant file writes them: GPUs, borrowing and lending per class; cpu and memory as found."""

    gpu: dict[str, int] = field(default_factory=dict)
    borrowing: dict[str, int] = field(default_factory=dict)
    lending: dict[str, int] = field(default_factory=dict)
    compute: dict[str, list] = field(default_factory=dict)

    def add_gpus(self, at: tuple, flavor_name: Any, resource: dict[str, Any], platform: Platform, gpu_class_of,
                 context: _Context) -> list[Refusal]:
        """Adds one flavor's GPU resource to its class; the refusals when its amounts or class cannot be read."""
        gpu_class = _flavor_class(flavor_name, resource.get("name"), platform, gpu_class_of, context)
        counts = {key: _whole(resource.get(key)) for key in ("nominalQuota", "borrowingLimit", "lendingLimit")}
        bad = [key for key, value in counts.items() if value is False]
        if bad:
            return [Refusal((*at, key), f"'{resource.get(key)}' is not a whole number of GPUs") for key in bad]
        if gpu_class is None:
            return [Refusal((*at, "name"), f"{resource.get('nominalQuota')} GPUs of ResourceFlavor '{flavor_name}' cannot be "
                            f"placed on a GPU class: the flavor is no class of the stack ({', '.join(sorted(platform.gpu_classes)) or 'none'}) "
                            f"and its nodeLabels name none; say which with --gpu-class {flavor_name}=CLASS")]
        self.gpu[gpu_class] = self.gpu.get(gpu_class, 0) + (counts["nominalQuota"] or 0)
        if counts["borrowingLimit"] is not None:
            self.borrowing[gpu_class] = counts["borrowingLimit"]
        if counts["lendingLimit"] is not None:
            self.lending[gpu_class] = counts["lendingLimit"]
        return []


def _queue_amounts(spec: dict[str, Any], platform: Platform, gpu_class_of, context: _Context, cq_ref: str,
                   notes: list[Unmapped], refusals: list[Refusal]) -> _QueueAmounts:
    """The amounts of every flavor's resources; other resources are noted, unreadable GPU amounts refused."""
    amounts = _QueueAmounts()
    for g, group in enumerate(spec.get("resourceGroups") or []):
        for f, flavor in enumerate(group.get("flavors") or []):
            for r, resource in enumerate(flavor.get("resources") or []):
                at = ("spec", "resourceGroups", g, "flavors", f, "resources", r)
                resource_name = resource.get("name")
                if resource_name in ("cpu", "memory"):
                    amounts.compute.setdefault(resource_name, []).append((at, resource.get("nominalQuota")))
                elif resource_name in ("nvidia.com/gpu", "nvidia.com/gpu.shared"):
                    refusals += amounts.add_gpus(at, flavor.get("name"), resource, platform, gpu_class_of, context)
                else:
                    notes.append(Unmapped(cq_ref, f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}]",
                                          f"resource {resource_name}: only cpu, memory and GPUs are queue quotas here; not imported"))
    return amounts


def _queue_quota(amounts: _QueueAmounts, refusals: list[Refusal]) -> dict[str, Any]:
    """The tenant file's quota: cpu and memory summed over the flavors (refused when unreadable), GPUs per class."""
    quota: dict[str, Any] = {}
    for resource_name, found in sorted(amounts.compute.items()):
        total = _sum(found)
        if total is None:
            refusals.extend(Refusal((*at, "nominalQuota"), f"'{value}' is not a Kubernetes quantity (e.g. 8, 500m, 64Gi)")
                            for at, value in found)
            continue
        quota[resource_name] = {"requests": total}
    if amounts.gpu:
        quota["gpu"] = amounts.gpu
    return quota


def _queue_fields(spec: dict[str, Any], amounts: _QueueAmounts) -> dict[str, Any]:
    queue_fields: dict[str, Any] = {}
    if spec.get("cohortName") or spec.get("cohort"):
        queue_fields["cohort"] = spec.get("cohortName") or spec.get("cohort")
    weight = (spec.get("fairSharing") or {}).get("weight")
    if weight is not None and str(weight).isdigit():
        queue_fields["weight"] = int(weight)
    if amounts.borrowing:
        queue_fields["borrowingLimit"] = amounts.borrowing
    if amounts.lending:
        queue_fields["lendingLimit"] = amounts.lending
    return queue_fields


def _whole(value: Any) -> int | None | bool:
    """A whole number of GPUs (None when unset), False when `value` is not one."""
    if value is None:
        return None
    text = str(value)
    return int(text) if text.isdigit() else False


def _sum(amounts: list[tuple[tuple, Any]]) -> str | None:
    """The sum of the quantities (one resource over several flavors), or None when one is not a quantity."""
    try:
        return format_quantity(sum((Quantity.parse(str(v)).value for _, v in amounts), 0))
    except ValueError:
        return None


def _context_only(*_: Any) -> None:
    """The reader of kinds that are read through the documents pointing at them."""


_READERS = {
    ("capsule.clastix.io", "Tenant"): _capsule,
    ("kubeflow.org", "Profile"): _kubeflow,
    ("kueue.x-k8s.io", "LocalQueue"): _local_queue,
    ("kueue.x-k8s.io", "ClusterQueue"): _context_only,
    ("kueue.x-k8s.io", "ResourceFlavor"): _context_only,
    ("", "Namespace"): _context_only,
}
