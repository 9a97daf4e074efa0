"""How one tenant changes between two versions, in a reviewer's terms: quota deltas, who gains or
loses which role, which egress got wider, which GPU classes and namespaces come and go.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Iterable

from ..fleet import gpu_capacity as cap
from ..fleet.environment import Environment
from ..spec.quantity import Quantity, QuantityError
from ..spec.tenant import EgressRule, Port, Tenant

ROLES = ("owner", "developer", "viewer")


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def quota_values(tenant: Tenant, environment: Environment) -> dict[str, Any]:
    """The tenant's quota as flat keys: `gpu.<class>`, `mig.<profile>`, `cpu.requests`, `objects.pods`, ...

    A plain GPU count is attributed to the tenant's single allowed class, so `gpu: 40` and
    `gpu: {h100: 40}` read the same.

    >>> quota_values(prod.tenants[2].spec, prod)["gpu.h100"]
    40
    """
    dumped = tenant.quota.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"gpu", "mig"})
    values = {key: value for key, value in _flatten(dumped).items() if value != {}}
    if not tenant.quota.cross_namespace_affinity:  # the default (off) is no value; turning it on reads as a change
        values.pop("crossNamespaceAffinity", None)
    for name, count in cap.gpu_quota_by_class(tenant, environment.platform).items():
        values[f"gpu.{name}" if name else "gpu"] = count
    for profile, count in sorted(tenant.quota.mig.items()):
        values[f"mig.{profile}"] = count
    return dict(sorted(values.items()))


def quota_label(key: str) -> str:
    """How a flat quota key reads in a sentence.

    >>> quota_label("gpu.h100"), quota_label("mig.1g.10gb"), quota_label("cpu.requests")
    ('GPUs h100', 'MIG 1g.10gb', 'cpu.requests')
    """
    if key == "gpu":
        return "GPUs"
    if key.startswith("gpu."):
        return f"GPUs {key[4:]}"
    if key.startswith("mig."):
        return f"MIG {key[4:]}"
    return key


def _same_amount(left: Any, right: Any) -> bool:
    if left == right:
        return True
    try:
        return Quantity.parse(left) == Quantity.parse(right)
    except (QuantityError, TypeError):
        return False


def quota_changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Quota keys whose amount changed (`1Ti` and `1024Gi` are the same amount).

    >>> quota_changes({"gpu.h100": 40, "memory.requests": "1Ti"}, {"gpu.h100": 48, "memory.requests": "1024Gi"})
    [{'key': 'gpu.h100', 'label': 'GPUs h100', 'from': 40, 'to': 48}]
    """
    changes = []
    for key in sorted(set(before) | set(after)):
        left, right = before.get(key), after.get(key)
        if not _same_amount(left, right):
            changes.append({"key": key, "label": quota_label(key), "from": left, "to": right})
    return changes


def access_grants(tenant: Tenant) -> set[tuple[str, str]]:
    """(role, subject) pairs: `group:x`, `user:y`, `serviceaccount:<namespace>/<name>`.

    >>> sorted(access_grants(Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="c", access={"owners": {"groups": ["a-leads"]}})))
    [('owner', 'group:a-leads')]
    """
    grants = set()
    for role, subjects in (("owner", tenant.access.owners), ("developer", tenant.access.developers), ("viewer", tenant.access.viewers)):
        grants.update((role, f"group:{g}") for g in subjects.groups)
        grants.update((role, f"user:{u}") for u in subjects.users)
    for account in tenant.access.ci_service_accounts:
        grants.add((account.role, f"serviceaccount:{account.namespace or tenant.name}/{account.name}"))
    return grants


def access_changes(before: Tenant | None, after: Tenant | None) -> list[dict[str, str]]:
    """Who gains or loses which role, sorted by role then subject.

    >>> access_changes(None, Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="c", access={"viewers": {"users": ["jo"]}}))
    [{'role': 'viewer', 'subject': 'user:jo', 'change': 'granted'}]
    """
    old = access_grants(before) if before else set()
    new = access_grants(after) if after else set()
    changes = [{"role": r, "subject": s, "change": "granted"} for r, s in new - old]
    changes += [{"role": r, "subject": s, "change": "revoked"} for r, s in old - new]
    return sorted(changes, key=lambda c: (ROLES.index(c["role"]), c["subject"], c["change"]))


def _ports_text(ports: list[Port]) -> str:
    if not ports:
        return "all ports"
    return ", ".join(f"{p.port}{'-' + str(p.end_port) if p.end_port else ''}/{p.protocol}" for p in ports)


def egress_text(rule: EgressRule) -> str:
    """One egress rule in a line.

    >>> egress_text(EgressRule(cidr="10.20.0.0/16", ports=[{"port": 443}]))
    '10.20.0.0/16 on 443/TCP'
    """
    text = f"{rule.cidr} on {_ports_text(rule.ports)}"
    if rule.except_:
        text += f" except {', '.join(rule.except_)}"
    return text


def _port_covered(port: Port, by: list[Port]) -> bool:
    end = port.end_port or port.port
    return any(b.protocol == port.protocol and b.port <= port.port and end <= (b.end_port or b.port) for b in by)


def _rule_covers(base: EgressRule, rule: EgressRule) -> bool:
    net, base_net = ipaddress.ip_network(rule.cidr), ipaddress.ip_network(base.cidr)
    if net.version != base_net.version or not net.subnet_of(base_net):
        return False
    if base.ports and (not rule.ports or not all(_port_covered(p, base.ports) for p in rule.ports)):
        return False
    excluded = [ipaddress.ip_network(e) for e in rule.except_]
    for hole in (ipaddress.ip_network(e) for e in base.except_):
        if hole.version == net.version and hole.overlaps(net) and not any(hole.version == x.version and hole.subnet_of(x) for x in excluded):
            return False
    return True


def _why_wider(rule: EgressRule, base_rules: list[EgressRule]) -> str:
    net = ipaddress.ip_network(rule.cidr)
    if net.prefixlen == 0:
        return "opens egress to every address (the whole internet)"
    same = [b for b in base_rules if b.cidr == rule.cidr]
    if same:
        if not rule.ports and all(b.ports for b in same):
            return f"ports removed: now every port to {rule.cidr} (was {'; '.join(_ports_text(b.ports) for b in same)})"
        if any(set(b.except_) - set(rule.except_) for b in same):
            return f"exceptions removed from {rule.cidr}"
        return f"more ports to {rule.cidr} (was {'; '.join(_ports_text(b.ports) for b in same)})"
    narrower = [b.cidr for b in base_rules if ipaddress.ip_network(b.cidr).version == net.version and ipaddress.ip_network(b.cidr).subnet_of(net)]
    if narrower:
        return f"broader CIDR {rule.cidr} replaces or adds to {', '.join(narrower)}"
    return f"new destination {rule.cidr}"


def network_changes(before: Tenant | None, after: Tenant | None) -> list[dict[str, Any]]:
    """Egress rules added (flagged `widened` when they allow traffic the base did not), removed, and
    ingress sources added or removed.

    >>> t = lambda cidr: Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="c", network={"egress": [{"cidr": cidr}]})
    >>> [c["change"] for c in network_changes(t("10.1.0.0/16"), t("10.0.0.0/8"))]
    ['widened', 'removed']
    """
    old_rules = list(before.network.egress) if before else []
    new_rules = list(after.network.egress) if after else []
    changes: list[dict[str, Any]] = []
    old_texts = {egress_text(r) for r in old_rules}
    new_texts = {egress_text(r) for r in new_rules}
    for rule in new_rules:
        text = egress_text(rule)
        if text in old_texts:
            continue
        widened = before is not None and not any(_rule_covers(b, rule) for b in old_rules)
        changes.append({
            "direction": "egress",
            "change": "widened" if widened else "added",
            "rule": text,
            "detail": _why_wider(rule, old_rules) if widened else ("" if before is None else "within what the base already allowed"),
        })
    for rule in old_rules:
        if egress_text(rule) not in new_texts:
            changes.append({"direction": "egress", "change": "removed", "rule": egress_text(rule), "detail": ""})
    old_in = before.network.ingress_from if before else None
    new_in = after.network.ingress_from if after else None
    def names(ingress, kind: str) -> set[str]:
        # Platform grants may carry their own ports: {role: ingress, ports: [...]}.
        items = getattr(ingress, kind) if ingress else []
        return {n if isinstance(n, str) else f"{n.role} on ports {_ports_text(n.ports)}" for n in items}

    for kind in ("tenants", "platform"):
        old_set, new_set = names(old_in, kind), names(new_in, kind)
        label = "tenant" if kind == "tenants" else "platform role"
        changes += [{"direction": "ingress", "change": "added", "rule": f"from {label} {n}", "detail": ""} for n in sorted(new_set - old_set)]
        changes += [{"direction": "ingress", "change": "removed", "rule": f"from {label} {n}", "detail": ""} for n in sorted(old_set - new_set)]
    if old_in and new_in and _ports_text(old_in.ports) != _ports_text(new_in.ports):
        widened = bool(old_in.ports) and not new_in.ports
        changes.append({
            "direction": "ingress",
            "change": "widened" if widened else "changed",
            "rule": f"ports for other tenants: {_ports_text(new_in.ports)}",
            "detail": f"was {_ports_text(old_in.ports)}",
        })
    return changes


def set_change(before: Iterable[str], after: Iterable[str]) -> dict[str, list[str]]:
    """Names added and removed.

    >>> set_change(["a", "b"], ["b", "c"])
    {'added': ['c'], 'removed': ['a']}
    """
    old, new = set(before), set(after)
    return {"added": sorted(new - old), "removed": sorted(old - new)}




def tenant_changes(
    before: Tenant | None,
    before_env: Environment | None,
    after: Tenant | None,
    after_env: Environment | None,
    objects: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """Everything that changes for one tenant (None when nothing does); `objects` are its object changes.

    `before` and `after` may carry different names (a rename through `previousNames`).

    >>> tenant_changes(tenant, prod, tenant, prod, []) is None
    True
    >>> tenant_changes(None, None, tenant, prod, [])["lifecycle"]
    {'from': None, 'to': 'active'}
    """
    quota = quota_changes(
        quota_values(before, before_env) if before else {}, quota_values(after, after_env) if after else {}
    )
    access = access_changes(before, after)
    network = network_changes(before, after)
    lifecycle = {"from": before.lifecycle if before else None, "to": after.lifecycle if after else None}
    namespaces = set_change(before.all_namespaces if before else [], after.all_namespaces if after else [])
    placement = {
        "classes": set_change(
            cap.allowed_classes(before, before_env.platform) if before else [],
            cap.allowed_classes(after, after_env.platform) if after else [],
        ),
        "dedicatedPools": set_change(
            before.gpu.dedicated_pools if before else [], after.gpu.dedicated_pools if after else []
        ),
    }
    change = "added" if before is None else "removed" if after is None else "changed"
    renamed = before is not None and after is not None and before.name != after.name
    moved = namespaces["added"] or namespaces["removed"] or placement["classes"]["added"] or placement["classes"]["removed"]
    if change == "changed" and not (renamed or quota or access or network or objects or moved
                                    or lifecycle["from"] != lifecycle["to"]):
        return None
    return {
        "tenant": (after or before).name,
        "change": change,
        "renamedFrom": before.name if renamed else None,
        "lifecycle": lifecycle,
        "namespaces": namespaces,
        "quota": quota,
        "access": access,
        "network": network,
        "placement": placement,
        "objects": objects,
    }
