"""The diff document (from `components.diff`) as text for a terminal or Markdown for a PR comment.

Both put warnings first; Markdown adds a summary table and folds each tenant into a `<details>`
section, and drops field-level object diffs when the comment would exceed GitHub's size limit.
"""

from __future__ import annotations

import json
from typing import Any

from ..spec.yaml_source import yaml_text
from .documents import CapacityFigures, CapacityRow, DiffDocument, ObjectChange, StackDiff, TenantDetail

# GitHub rejects comments over 65536 characters; leave room for the sticky-comment header.
MARKDOWN_LIMIT = 60000
MAX_FIELDS_PER_OBJECT = 12


def value_text(value: Any) -> str:
    """A value as it reads in a change line, spelled as in YAML: `unset` for absent, `true`, flow
    style for structures.

    >>> value_text(None), value_text(40), value_text({"a": 1}), value_text(True), value_text(["h100", "l4"])
    ('unset', '40', '{a: 1}', 'true', '[h100, l4]')
    """
    if value is None:
        return "unset"
    if isinstance(value, dict):
        value = dict(sorted(value.items()))
    if isinstance(value, (dict, list, bool)):
        text = yaml_text(value)
        return text if len(text) <= 100 else text[:97] + "..."
    if isinstance(value, str) and "\n" in value:
        first = value.splitlines()[0]
        return json.dumps(first[:60] + " ...")
    return str(value)


def delta(before: Any, after: Any) -> str:
    """`40 → 48`, or just the value when one side is absent on purpose.

    >>> delta(40, 48)
    '40 → 48'
    """
    if before is None and isinstance(after, (dict, list)):
        return f"added {value_text(after)}"
    if after is None and isinstance(before, (dict, list)):
        return f"removed {value_text(before)}"
    return f"{value_text(before)} → {value_text(after)}"


def _object_name(obj: ObjectChange) -> str:
    return f"{obj['kind']} {obj['namespace'] + '/' if obj.get('namespace') else ''}{obj['name']}"


def _object_lines(objects: list[ObjectChange], with_fields: bool = True, all_fields: bool = False) -> list[str]:
    sign = {"added": "+", "removed": "-", "changed": "~"}
    lines = []
    for obj in objects:
        lines.append(f"{sign[obj['change']]} {_object_name(obj)}")
        fields = obj["fields"]
        if obj.get("summary") and not all_fields:
            # Inventory terms instead of the CEL or resource-group text (inventory_changes.py).
            lines += [f"    {line}" for line in obj["summary"]]
            lines.append(f"    ({len(fields)} field change(s) behind this: tenants diff --all-fields, or --format json)")
            continue
        if not with_fields:
            continue
        for field in fields[:MAX_FIELDS_PER_OBJECT]:
            lines.append(f"    {field['path']}: {delta(field['from'], field['to'])}")
        if len(fields) > MAX_FIELDS_PER_OBJECT:
            lines.append(f"    ... {len(fields) - MAX_FIELDS_PER_OBJECT} more field(s)")
    return lines


def tenant_headline(detail: TenantDetail) -> str:
    """What happened to a tenant, in a few words, for summaries.

    >>> tenant_headline({"change": "changed", "renamedFrom": None, "lifecycle": {"from": "active", "to": "active"},
    ...     "quota": [{"label": "GPUs h100", "from": 40, "to": 48}], "access": [], "network": [], "objects": []})
    'GPUs h100 40 → 48'
    """
    parts = [detail["change"]] if detail["change"] in ("added", "removed") else []
    if detail.get("renamedFrom"):
        parts.append(f"renamed from {detail['renamedFrom']}")
    if detail["change"] != "changed":
        return "; ".join(parts)
    if detail["lifecycle"]["from"] != detail["lifecycle"]["to"]:
        parts.append(f"{detail['lifecycle']['from']} → {detail['lifecycle']['to']}")
    parts += _own_changes(detail)
    summaries = [line for o in detail["objects"] for line in o.get("summary", [])]
    if not parts and summaries:
        parts.append(summaries[0] + (f" and {len(summaries) - 1} more" if len(summaries) > 1 else ""))
    if not parts and detail["objects"]:
        parts.append(f"{len(detail['objects'])} object(s) changed")
    return "; ".join(parts)


def _own_changes(detail: TenantDetail) -> list[str]:
    """The first quota changes, and how many access and network changes, of a changed tenant."""
    parts = [f"{q['label']} {delta(q['from'], q['to'])}" for q in detail["quota"][:3]]
    if len(detail["quota"]) > 3:
        parts.append(f"{len(detail['quota']) - 3} more quota change(s)")
    if detail["access"]:
        parts.append(f"{len(detail['access'])} access change(s)")
    if detail["network"]:
        parts.append(f"{len(detail['network'])} network change(s)")
    return parts


def _quota_lines(detail: TenantDetail) -> list[str]:
    if detail["change"] == "added":
        return [f"{q['label']}: {value_text(q['to'])}" for q in detail["quota"]]
    if detail["change"] == "removed":
        return []
    return [f"{q['label']}: {delta(q['from'], q['to'])}" for q in detail["quota"]]


def _access_lines(detail: TenantDetail) -> list[str]:
    verb = {"granted": "+", "revoked": "-"}
    return [f"{verb[a['change']]} {a['role']}: {a['subject']}" for a in detail["access"]]


def _network_lines(detail: TenantDetail) -> list[str]:
    lines = []
    for rule in detail["network"]:
        extra = f" ({rule['detail']})" if rule["detail"] else ""
        lines.append(f"{rule['direction']} {rule['change']}: {rule['rule']}{extra}")
    return lines


def _placement_lines(detail: TenantDetail) -> list[str]:
    if detail["change"] == "removed":
        return []
    lines = []
    for key, label in (("classes", "GPU classes"), ("dedicatedPools", "dedicated pools")):
        change = detail["placement"][key]
        lines += [f"+ {label}: {name}" for name in change["added"]]
        lines += [f"- {label}: {name}" for name in change["removed"]]
    if detail["change"] == "changed":
        lines += [f"+ namespace {n}" for n in detail["namespaces"]["added"]]
        lines += [f"- namespace {n}" for n in detail["namespaces"]["removed"]]
    return lines


def _inventory_only(detail: TenantDetail) -> bool:
    """A tenant changed by an inventory edit alone: nothing of its own changes, and each of its
    changed objects reads in inventory terms (`summary`)."""
    return (detail["change"] == "changed" and not detail.get("renamedFrom")
            and detail["lifecycle"]["from"] == detail["lifecycle"]["to"]
            and not (detail["quota"] or detail["access"] or detail["network"] or _placement_lines(detail))
            and bool(detail["objects"]) and all(o["change"] == "changed" and o.get("summary") for o in detail["objects"]))


def tenant_groups(details: list[TenantDetail]) -> list[list[TenantDetail]]:
    """The tenants of a stack in order, those that an inventory edit changes the same way joined
    into one group (at the place of the first), so that a pool added for 30 tenants reads once.

    >>> one = lambda t: {"tenant": t, "change": "changed", "renamedFrom": None, "lifecycle": {"from": "active", "to": "active"},
    ...     "quota": [], "access": [], "network": [], "placement": {"classes": {"added": [], "removed": []},
    ...     "dedicatedPools": {"added": [], "removed": []}}, "namespaces": {"added": [], "removed": []},
    ...     "objects": [{"kind": "ClusterQueue", "name": t, "change": "changed", "summary": ["flavors: + b"]}]}
    >>> [[d["tenant"] for d in group] for group in tenant_groups([one("x"), one("y")])]
    [['x', 'y']]
    """
    groups: list[list[TenantDetail]] = []
    by_change: dict[tuple, list[TenantDetail]] = {}
    for detail in details:
        if not _inventory_only(detail):
            groups.append([detail])
            continue
        key = tuple((o["kind"], tuple(o["summary"])) for o in detail["objects"])
        if key in by_change:
            by_change[key].append(detail)
        else:
            by_change[key] = [detail]
            groups.append(by_change[key])
    return groups


def _group_title(group: list[TenantDetail]) -> str:
    return f"tenants {', '.join(d['tenant'] for d in group)} ({len(group)})"


def _group_lines(group: list[TenantDetail]) -> list[str]:
    """The one inventory change of a group, each object once (named for the first tenant)."""
    lines = [f"the same inventory change for each, e.g. {group[0]['tenant']}:"]
    for obj in group[0]["objects"]:
        lines.append(f"~ {_object_name(obj)}")
        lines += [f"    {line}" for line in obj["summary"]]
    fields = sum(len(o["fields"]) for d in group for o in d["objects"])
    lines.append(f"({fields} field change(s) behind these: tenants diff --all-fields, or --format json)")
    return lines


def _objects_title(detail: TenantDetail) -> str:
    if detail["change"] != "removed":
        return "Objects"
    if detail["lifecycle"]["from"] == "decommissioned":
        return "Objects (deleted with the namespaces)"
    return "Objects (dropped from Pulumi, none deleted: the namespaces, everything in them and the cluster-wide objects stay)"


def _capacity_subject(row: CapacityRow) -> str:
    if row["kind"] == "draDevices":
        return f"DRA devices of {row['name']}"
    if row["kind"] == "kaiQueues":
        return "KAI queues (GPU, fractions included)"
    return f"GPU class {row['name']}" if row["kind"] == "gpuClass" else f"MIG {row['name']}"


def _side(row: CapacityFigures | None, key: str) -> str:
    return "—" if row is None or key not in row else value_text(row[key])


def _fractions_note(before: CapacityFigures | None, after: CapacityFigures | None) -> str:
    """How KAI fractions changed on a class or for the KAI queues ("" when they did not)."""
    for key in ("kaiFractions", "memoryBound"):
        left, right = (before or {}).get(key), (after or {}).get(key)
        if left != right:
            return f"; KAI fractions memory bound {left or 'not declared'} → {right or 'not declared'}"
    return ""


def tenant_shares(before: CapacityFigures | None, after: CapacityFigures | None) -> str:
    """Per-tenant quota changes behind a capacity row, e.g. `eval 20 → 16, vision 0 → 4`.

    >>> tenant_shares({"byTenant": {"eval": 20}}, {"byTenant": {"eval": 16, "vision": 4}})
    'eval 20 → 16, vision 0 → 4'
    """
    old = before["byTenant"] if before else {}
    new = after["byTenant"] if after else {}
    return ", ".join(
        f"{t} {old.get(t, 0)} → {new.get(t, 0)}" for t in sorted(set(old) | set(new)) if old.get(t, 0) != new.get(t, 0)
    )


def _pair(before: CapacityFigures | None, after: CapacityFigures | None, key: str) -> str:
    left, right = _side(before, key), _side(after, key)
    return left if left == right else f"{left} → {right}"


def _capacity_line(row: CapacityRow) -> str:
    before, after = row["from"], row["to"]
    shares = tenant_shares(before, after)
    if row["kind"] in ("draDevices", "kaiQueues"):
        # No capacity of their own: DRA devices come out of their GPU class's, KAI queues out of KAI's books.
        what = "devices granted" if row["kind"] == "draDevices" else "queue quotas"
        return (f"{_capacity_subject(row)}: {what} {_pair(before, after, 'requested')}"
                f"{' (' + shares + ')' if shares else ''}{_fractions_note(before, after)}")
    return (f"{_capacity_subject(row)}: quotas {_pair(before, after, 'requested')}{' (' + shares + ')' if shares else ''} "
            f"of limit {_pair(before, after, 'limit')} (capacity {_pair(before, after, 'capacity')} "
            f"x overcommit {_pair(before, after, 'overcommit')}) [{_pair(before, after, 'status')}]{_fractions_note(before, after)}")


def _node_lines(stack: StackDiff) -> list[str]:
    lines = []
    for node in stack["nodes"]:
        if node["change"] != "changed":
            lines.append(f"{'+' if node['change'] == 'added' else '-'} node {node['node']} ({'now' if node['change'] == 'added' else 'no longer'} labelled by gpu-tenancy)")
            continue
        lines.append(f"~ node {node['node']}")
        lines += [f"    label {label['key']}: {delta(label['from'], label['to'])}" for label in node["labels"]]
        lines += [f"    + taint {t}" for t in node["taints"]["added"]]
        lines += [f"    - taint {t}" for t in node["taints"]["removed"]]
        if not node["labels"] and not node["taints"]["added"] and not node["taints"]["removed"]:
            # Its partial Nodes change, not what they set on it (taints moving to their own patch).
            patches = ", ".join(f"{p['id']} {p['change']}" for p in node.get("patches", []))
            lines.append(f"    same labels and taints; its patches: {patches}")
    for group in stack["nodeGroups"]:
        if group["requires"] is None:
            lines.append(f"- autoscaled pool {group['pool']} (removed): its node group no longer needs this tool's labels and taints")
            continue
        lines.append(f"~ autoscaled pool {group['pool']} ({group['change']}): its node group must set")
        lines += ["    " + line for line in node_group_lines(group["requires"])]
        lines += [f"    changed {f['path']}: {delta(f['from'], f['to'])}" for f in group["fields"]]
    return lines


def node_group_lines(requires: dict[str, Any]) -> list[str]:
    """What one autoscaled pool's node group must set on its nodes at creation, as lines to read
    (`manifests.gpu_nodes.node_group_requirements`: diff, validate and render print the same).

    >>> node_group_lines({"nodeSelector": {"pool": "l4"}, "maxNodes": 2, "minNodes": 0, "labels": {"a.dev/pool": "l4"},
    ...     "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]})
    ['labels: a.dev/pool=l4', 'taints: nvidia.com/gpu=present:NoSchedule', 'the group: nodes labelled pool=l4, 0 to 2 nodes']
    """
    labels = ", ".join(f"{k}={v}" for k, v in sorted(requires["labels"].items()))
    taints = ", ".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in requires["taints"]) or "none"
    selector = ", ".join(f"{k}={v}" for k, v in sorted(requires["nodeSelector"].items()))
    size = f"{requires.get('minNodes', 0)} to {requires['maxNodes']} nodes"
    lines = [f"labels: {labels}", f"taints: {taints}", f"the group: nodes labelled {selector}, {size}"]
    if "karpenterNodePool" in requires:
        lines.append("Karpenter NodePool: these labels and taints in spec.template (karpenterNodePool in _node-groups.yaml)")
    if "clusterAutoscalerTags" in requires:
        lines.append("cluster-autoscaler node-template tags of the group (to scale it from zero):")
        lines += [f"  {k}: {v}" for k, v in requires["clusterAutoscalerTags"].items()]
    return lines


def _stack_summary(stack: StackDiff) -> str:
    tenants = stack["tenants"]
    totals = stack["objectTotals"]
    return (f"tenants +{len(tenants['added'])} -{len(tenants['removed'])} ~{len(tenants['changed'])}; "
            f"objects +{totals['added']} ~{totals['changed']} -{totals['removed']}")


def _base_text(document: DiffDocument) -> str:
    base = document["base"]
    commit = (base.get("commit") or "")[:12]
    how = f", {base['how']}" if base.get("how") else ""
    return f"{base.get('ref', '?')} ({commit}{how})"


# --- text ----------------------------------------------------------------------------------------


def _text_block(title: str, lines: list[str], indent: str = "  ") -> list[str]:
    """A titled section of the text diff, its lines indented one step below the title; nothing when empty."""
    return [f"{indent}{title}:", *(f"{indent}  {line}" for line in lines)] if lines else []


def _tenant_text(group: list[TenantDetail], all_fields: bool) -> list[str]:
    detail = group[0]
    if len(group) > 1:
        return [f"  {_group_title(group)}: {tenant_headline(detail)}", *(f"    {line}" for line in _group_lines(group))]
    lines = [f"  tenant {detail['tenant']}: {tenant_headline(detail)}"]
    for title, section in (("quota", _quota_lines(detail)), ("access", _access_lines(detail)),
                           ("network", _network_lines(detail)), ("placement", _placement_lines(detail)),
                           (_objects_title(detail).lower(),
                            _object_lines(detail["objects"], detail["change"] == "changed", all_fields))):
        lines += _text_block(title, section, "    ")
    return lines


def _stack_text(stack: StackDiff, all_fields: bool) -> list[str]:
    lines = ["", f"stack {stack['name']}: {stack['change']}" + ("" if stack["change"] == "unchanged" else f" ({_stack_summary(stack)})")]
    lines += [f"  moves {m['tenant']}: {m['from']} → {m['to']} (run first: {m['command']})" for m in stack.get("shardMoves", [])]
    lines += _text_block("capacity (quotas of active tenants vs capacity x overcommit)",
                         [_capacity_line(r) for r in stack["capacity"] if r["changed"]])
    lines += _text_block("nodes", _node_lines(stack))
    lines += _text_block("MIG layouts", [f"{m['path']}: {delta(m['from'], m['to'])}" for m in stack["mig"]])
    lines += _text_block("platform objects", _object_lines(stack["platformObjects"]))
    lines += [f"  tenant {tenant}: not deployed in {stack['name']}" for tenant in stack["tenants"].get("notDeployed", [])]
    for group in ([[d] for d in stack["tenantDetails"]] if all_fields else tenant_groups(stack["tenantDetails"])):
        lines += _tenant_text(group, all_fields)
    return lines


def format_text(document: DiffDocument, all_fields: bool = False) -> str:
    """A plain-text diff for the terminal; `all_fields` prints the field changes also of objects
    summarised in inventory terms (placement policies, ClusterQueues).

    >>> format_text({"base": {"ref": "HEAD", "commit": "abc"}, "head": "working tree", "changed": False,
    ...     "warnings": [], "notes": [], "stacks": []})
    'no changes between HEAD (abc) and the working tree\\n'
    """
    warnings = [f"  ! {w['stack']}: {w['message']}" for w in document["warnings"]]
    notes = [f"note: {n}" for n in document["notes"]]
    if not document["changed"]:
        return "\n".join([f"no changes between {_base_text(document)} and the {document['head']}", *warnings, *notes]) + "\n"
    lines = [f"tenants diff: {_base_text(document)} → {document['head']}"]
    lines += ["", f"WARNINGS ({len(warnings)})", *warnings] if warnings else []
    lines += ["", *notes] if notes else []
    lines += ["", f"Pulumi stacks to preview: {', '.join(document.get('touchedStacks') or []) or 'none'}"]
    for stack in document["stacks"]:
        lines += _stack_text(stack, all_fields)
    return "\n".join(lines) + "\n"


# --- markdown ------------------------------------------------------------------------------------


def _md_list(items: list[str]) -> str:
    return ", ".join(f"`{i}`" for i in items) if items else "—"


def _changed_names(stack: StackDiff) -> list[str]:
    renamed = {r["to"]: r["from"] for r in stack["tenants"]["renamed"]}
    return [f"{name} (was {renamed[name]})" if name in renamed else name for name in stack["tenants"]["changed"]]


def _md_capacity_table(rows: list[CapacityRow]) -> list[str]:
    lines = ["| | Capacity | Overcommit | Limit | Quotas before | Quotas after | Status | Tenants |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for row in rows:
        before, after = row["from"], row["to"]
        status = _pair(before, after, "status")
        if after and after.get("status") in ("over", "warning"):
            status = f"⚠️ **{status}**"
        tenants = (tenant_shares(before, after) or "—") + _fractions_note(before, after)
        lines.append(f"| {_capacity_subject(row)} | {_pair(before, after, 'capacity')} | {_pair(before, after, 'overcommit')} | "
                     f"{_pair(before, after, 'limit')} | {_side(before, 'requested')} | {_side(after, 'requested')} | {status} | "
                     f"{tenants} |")
    return lines


def _md_block(title: str, lines: list[str]) -> list[str]:
    if not lines:
        return []
    return [f"**{title}**", "", "```text", *lines, "```", ""]


def _md_summary(document: DiffDocument) -> list[str]:
    """The table of stacks, and the state moves the deploy workflow runs first."""
    out = ["| Stack | Change | Tenants added | Tenants removed | Tenants changed | Objects + / ~ / − | Pulumi stacks touched |",
           "|---|---|---|---|---|---|---|"]
    for stack in document["stacks"]:
        totals = stack["objectTotals"]
        out.append(f"| {stack['name']} | {stack['change']} | {_md_list(stack['tenants']['added'])} | "
                   f"{_md_list(stack['tenants']['removed'])} | {_md_list(_changed_names(stack))} | "
                   f"{totals['added']} / {totals['changed']} / {totals['removed']} | {_md_list(stack.get('pulumiStacks') or [])} |")
    out.append("")
    moves = document.get("shardMoves") or []
    if moves:
        out += ["**Tenants moving between Pulumi stacks** (the deploy workflow runs these before any `pulumi up`)", "", "```sh"]
        out += [m["command"] for m in moves] + ["```", ""]
    return out


def _md_tenant(group: list[TenantDetail], with_fields: bool) -> list[str]:
    detail = group[0]
    if len(group) > 1:
        return [f"<details><summary><b>{len(group)} tenants</b>: {tenant_headline(detail)}</summary>", "",
                ", ".join(f"`{d['tenant']}`" for d in group), "", *_md_block("Objects", _group_lines(group)), "</details>", ""]
    return [f"<details><summary><b>{detail['tenant']}</b>: {tenant_headline(detail)}</summary>", "",
            *_md_block("Quota", _quota_lines(detail)),
            *_md_block("Access", _access_lines(detail)),
            *_md_block("Network", _network_lines(detail)),
            *_md_block("GPU placement and namespaces", _placement_lines(detail)),
            *_md_block(_objects_title(detail), _object_lines(detail["objects"], with_fields and detail["change"] == "changed")),
            "</details>", ""]


def _md_stack(stack: StackDiff, with_fields: bool) -> list[str]:
    left_out = stack["tenants"].get("notDeployed", [])
    if stack["change"] == "unchanged" and not left_out:
        return []
    out = [f"### {stack['name']}", ""]
    out += [f"- `{tenant}`: **not deployed in {stack['name']}**" for tenant in left_out] + ([""] if left_out else [])
    capacity = [r for r in stack["capacity"] if r["changed"]]
    if capacity:
        out += ["**Capacity** (quotas of active tenants against capacity × overcommit)", "", *_md_capacity_table(capacity), ""]
    out += _md_block("Nodes", _node_lines(stack))
    out += _md_block("MIG layouts", [f"{m['path']}: {delta(m['from'], m['to'])}" for m in stack["mig"]])
    out += _md_block("Platform objects", _object_lines(stack["platformObjects"], with_fields))
    for group in tenant_groups(stack["tenantDetails"]):
        out += _md_tenant(group, with_fields)
    return out


def _markdown(document: DiffDocument, with_fields: bool) -> str:
    out: list[str] = ["## `tenants diff`", "", f"Base {_md_base(document)} → {document['head']}", ""]
    notes = [f"- note: {n}" for n in document["notes"]]
    if not document["changed"]:
        return "\n".join([*out, "**no changes** to tenants or stacks.", *_md_warnings(document), *notes]) + "\n"
    out += _md_warnings(document) + (notes + [""] if notes else []) + _md_summary(document)
    for stack in document["stacks"]:
        out += _md_stack(stack, with_fields)
    if not with_fields:
        out.append("_Field-level object changes are left out to fit a comment; run `tenants diff` locally for them._")
    return "\n".join(out).rstrip("\n") + "\n"


def _md_warnings(document: DiffDocument) -> list[str]:
    if not document["warnings"]:
        return []
    out = ["> [!WARNING]", f"> **{len(document['warnings'])} warning(s)**"]
    out += [f"> - **{w['stack']}**{' · `' + w['tenant'] + '`' if w['tenant'] else ''}: {w['message']}" for w in document["warnings"]]
    return out + [""]


def _md_base(document: DiffDocument) -> str:
    base = document["base"]
    how = f" ({base['how']})" if base.get("how") else ""
    return f"`{base.get('ref', '?')}` at `{(base.get('commit') or '')[:12]}`{how}"


def format_markdown(document: DiffDocument) -> str:
    """Markdown for a PR comment: warnings first, a summary table, one `<details>` per tenant.

    >>> "no changes" in format_markdown({"base": {"ref": "main", "commit": "abc"}, "head": "working tree",
    ...     "changed": False, "warnings": [], "notes": [], "stacks": []})
    True
    """
    text = _markdown(document, with_fields=True)
    return text if len(text) <= MARKDOWN_LIMIT else _markdown(document, with_fields=False)[:MARKDOWN_LIMIT]
