"""`tenants import --from FILE`: tenant files from other tools' objects: Capsule v1beta2 `Tenant`s,
Kubeflow `Profile`s, Kueue `ClusterQueue`s with their `LocalQueue`s.

Documents of several tools may be given together: contributions to one tenant name are merged
(a Kubeflow Profile and the Kueue LocalQueue in its namespace make one tenant). What has no exact
counterpart in the tenant file is reported (`Unmapped`), never guessed.
"""

from __future__ import annotations

from typing import Any

from ..spec.stack import Platform
from .import_cluster import ROLE_OF_CLUSTER_ROLE
from .importing import Imported, Unmapped, limit_range_fields, merge_tenant_data, quota_fields, subject_note, tenant_name_problem, tenant_skeleton

_CAPSULE_MAPPED = {"owners", "resourceQuotas", "limitRanges", "additionalRoleBindings", "namespaceOptions", "rules"}


def tenants_from_documents(docs: list[dict[str, Any]], platform: Platform, *, origin: str = "file",
                           gpu_class_of: dict[str, str] | None = None) -> Imported:
    """Tenant file data from the Capsule, Kubeflow and Kueue objects among `docs` (other kinds are reported).

    `gpu_class_of` maps a GPU resource or a Kueue ResourceFlavor name to a GPU class of the stack.

    >>> from components.spec.stack import Platform
    >>> profile = {"apiVersion": "kubeflow.org/v1", "kind": "Profile", "metadata": {"name": "ana"},
    ...            "spec": {"owner": {"kind": "User", "name": "ana@example.com"}}}
    >>> tenants_from_documents([profile], Platform(labelDomain="gpu.example.com")).tenants["ana"]["access"]
    {'owners': {'users': ['ana@example.com']}}
    """
    gpu_class_of = gpu_class_of or {}
    imported = Imported()
    cluster_queues = {d["metadata"]["name"]: d for d in docs if _is(d, "kueue.x-k8s.io", "ClusterQueue")}
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc:
            continue
        ref = f"{origin}: {doc.get('kind')} {_name(doc)}"
        if _is(doc, "capsule.clastix.io", "Tenant"):
            part = _capsule(doc, platform, ref, gpu_class_of)
        elif _is(doc, "kubeflow.org", "Profile"):
            part = _kubeflow(doc, platform, ref, gpu_class_of)
        elif _is(doc, "kueue.x-k8s.io", "LocalQueue"):
            part = _local_queue(doc, cluster_queues, platform, ref, gpu_class_of)
        elif _is(doc, "kueue.x-k8s.io", "ClusterQueue") or _is(doc, "kueue.x-k8s.io", "ResourceFlavor"):
            continue  # read through the LocalQueues that point at them
        else:
            imported.unmapped.append(Unmapped(ref, "kind", "not a Capsule Tenant, Kubeflow Profile or Kueue LocalQueue/ClusterQueue; not imported"))
            continue
        imported = imported.merge(part)
    return imported


def _is(doc: Any, group: str, kind: str) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == kind and str(doc.get("apiVersion", "")).startswith(group + "/")


def _name(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


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


def _capsule(doc: dict[str, Any], platform: Platform, ref: str, gpu_class_of) -> Imported:
    name = doc["metadata"]["name"]
    annotations = doc["metadata"].get("annotations") or {}
    out, data = _start(name, ref, platform, description=annotations.get("info.projectcapsule.dev/description", ""))
    if data is None:
        return out
    spec = doc.get("spec") or {}
    notes: list[Unmapped] = []
    namespaces = [ns for ns in ((doc.get("status") or {}).get("namespaces") or []) if ns != name]
    owners, more = _subjects(spec.get("owners") or [], ref, "spec.owners", platform, [name, *namespaces])
    notes.extend(more)
    access: dict[str, Any] = {"owners": owners} if owners else {}
    access = _bindings(access, spec.get("additionalRoleBindings") or [], ref, "spec.additionalRoleBindings", notes, platform, [name, *namespaces])
    for index, rule in enumerate(spec.get("rules") or []):
        where = f"spec.rules[{index}]"
        if rule.get("namespaceSelector"):
            notes.append(Unmapped(ref, where, "applies to some namespaces of the tenant only; a tenant file applies to all: not imported"))
            continue
        access = _bindings(access, (rule.get("permissions") or {}).get("bindings") or [], ref, f"{where}.permissions.bindings", notes,
                           platform, [name, *namespaces])
        for q, item in enumerate(rule.get("quota") or []):
            part, more = quota_fields(item.get("hard") or {}, platform, f"{ref} {where}.quota[{q}]", gpu_class_of=gpu_class_of)
            data = merge_tenant_data(data, part)
            notes.extend(more)
        for key in sorted(set(rule) - {"permissions", "quota"}):
            notes.append(Unmapped(ref, f"{where}.{key}", "no field of the tenant file maps it exactly; not imported"))
    if access:
        data["access"] = access
    quotas = spec.get("resourceQuotas") or {}
    if quotas.get("scope", "Tenant") != "Tenant" and quotas.get("items"):
        notes.append(Unmapped(ref, "spec.resourceQuotas.scope", f"'{quotas['scope']}' gives each namespace the whole quota; the tenant file's "
                              "quota is tenant-wide (imported as such: set namespaceQuotas to split it)"))
    for index, item in enumerate(quotas.get("items") or []):
        part, more = quota_fields(item.get("hard") or {}, platform, f"{ref} spec.resourceQuotas.items[{index}]", gpu_class_of=gpu_class_of)
        data = merge_tenant_data(data, part)
        notes.extend(more)
    for index, item in enumerate((spec.get("limitRanges") or {}).get("items") or []):
        part, more = limit_range_fields(item.get("limits") or [], f"{ref} spec.limitRanges.items[{index}]")
        if part and "limits" in data:
            notes.append(Unmapped(ref, f"spec.limitRanges.items[{index}]", "the tenant file has one LimitRange; the first was imported"))
            continue
        data = merge_tenant_data(data, part)
        notes.extend(more)
    if namespaces:
        data["namespaces"] = sorted(namespaces)
    quota_count = (spec.get("namespaceOptions") or {}).get("quota")
    if quota_count is not None:
        notes.append(Unmapped(ref, "spec.namespaceOptions.quota", f"at most {quota_count} namespaces, created by the owners: here the namespaces "
                              "are listed in the tenant file (namespaces) and created by the platform"))
    for key in sorted(set(spec) - _CAPSULE_MAPPED):
        notes.append(Unmapped(ref, f"spec.{key}", "no field of the tenant file maps it exactly; not imported (check docs/security.md for the control that covers it)"))
    return _finish(out, name, data, ref, notes)


def _kubeflow(doc: dict[str, Any], platform: Platform, ref: str, gpu_class_of) -> Imported:
    name = doc["metadata"]["name"]
    out, data = _start(name, ref, platform)
    if data is None:
        return out
    spec = doc.get("spec") or {}
    notes: list[Unmapped] = []
    owner = spec.get("owner") or {}
    owners, more = _subjects([owner] if owner else [], ref, "spec.owner", platform, [name])
    notes.extend(more)
    if owners:
        data["access"] = {"owners": owners}
    part, more = quota_fields((spec.get("resourceQuotaSpec") or {}).get("hard") or {}, platform, f"{ref} spec.resourceQuotaSpec", gpu_class_of=gpu_class_of)
    data = merge_tenant_data(data, part)
    notes.extend(more)
    for index, plugin in enumerate(spec.get("plugins") or []):
        notes.append(Unmapped(ref, f"spec.plugins[{index}]", f"{plugin.get('kind')}: cloud identity of the namespace's ServiceAccounts is not part of a tenant file; set it up outside"))
    return _finish(out, name, data, ref, notes)


def _local_queue(doc: dict[str, Any], cluster_queues: dict[str, Any], platform: Platform, ref: str, gpu_class_of) -> Imported:
    name = doc["metadata"].get("namespace", "default")
    out, data = _start(name, ref, platform)
    if data is None:
        return out
    queue_name = (doc.get("spec") or {}).get("clusterQueue")
    queue = cluster_queues.get(queue_name)
    if queue is None:
        out.unmapped.append(Unmapped(ref, "spec.clusterQueue", f"ClusterQueue '{queue_name}' is not among the files; give its file too"))
        return out
    cq_ref = f"{ref.split(':')[0]}: ClusterQueue {queue_name}"
    spec = queue.get("spec") or {}
    notes: list[Unmapped] = []
    if spec.get("namespaceSelector") == {}:
        notes.append(Unmapped(cq_ref, "spec.namespaceSelector", "matches every namespace: its quota is imported as this tenant's own; "
                              "split it if several namespaces share it"))
    gpu: dict[str, int] = {}
    borrowing: dict[str, int] = {}
    lending: dict[str, int] = {}
    quota: dict[str, Any] = {}
    for g, group in enumerate(spec.get("resourceGroups") or []):
        for f, flavor in enumerate(group.get("flavors") or []):
            flavor_name = flavor.get("name")
            gpu_class = gpu_class_of.get(flavor_name, flavor_name if flavor_name in platform.gpu_classes else None)
            for r, resource in enumerate(flavor.get("resources") or []):
                where = f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}]"
                resource_name = resource.get("name")
                if resource_name in ("cpu", "memory"):
                    quota.setdefault(resource_name, {})["requests"] = str(resource.get("nominalQuota"))
                elif resource_name in ("nvidia.com/gpu", "nvidia.com/gpu.shared") and gpu_class:
                    gpu[gpu_class] = gpu.get(gpu_class, 0) + int(resource.get("nominalQuota", 0))
                    if resource.get("borrowingLimit") is not None:
                        borrowing[gpu_class] = int(resource["borrowingLimit"])
                    if resource.get("lendingLimit") is not None:
                        lending[gpu_class] = int(resource["lendingLimit"])
                elif resource_name in ("nvidia.com/gpu", "nvidia.com/gpu.shared"):
                    notes.append(Unmapped(cq_ref, where, f"ResourceFlavor '{flavor_name}' is no GPU class of the stack "
                                          f"({', '.join(sorted(platform.gpu_classes)) or 'none'}); say which with --gpu-class {flavor_name}=CLASS"))
                else:
                    notes.append(Unmapped(cq_ref, where, f"resource {resource_name}: only cpu, memory and GPUs are queue quotas here; not imported"))
    if gpu:
        quota["gpu"] = gpu
        data["gpu"] = {"classes": sorted(gpu)}
    if quota:
        data["quota"] = quota
    queue_fields: dict[str, Any] = {}
    if spec.get("cohortName") or spec.get("cohort"):
        queue_fields["cohort"] = spec.get("cohortName") or spec.get("cohort")
    weight = (spec.get("fairSharing") or {}).get("weight")
    if weight is not None and str(weight).isdigit():
        queue_fields["weight"] = int(weight)
    if borrowing:
        queue_fields["borrowingLimit"] = borrowing
    if lending:
        queue_fields["lendingLimit"] = lending
    if queue_fields:
        data["queue"] = queue_fields
    for key in sorted(set(spec) - {"resourceGroups", "cohort", "cohortName", "fairSharing", "namespaceSelector"}):
        notes.append(Unmapped(cq_ref, f"spec.{key}", "set by the stack's queue settings for every tenant; not imported"))
    out = _finish(out, name, data, ref, notes)
    out.sources[name].append(cq_ref)
    return out
