"""Checks of a tenant's optional vCluster: its `vcluster.values` against the chart's schema, and the
settings that keep the tenant isolated, which the values may not override.

The chart's `values.schema.json` (JSON Schema draft 2020-12, shipped in `components/data/vcluster/`,
see its SOURCES.md) is the one Helm itself enforces at install time; checking it here turns a
failed deployment into a located error in the tenant's pull request. The overrides are checked on
their own: maps merge key by key and lists replace, so each key the tenant writes must be valid
where it is written.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..fleet import gpu_capacity as cap
from ..spec.problems import Problem
from ..spec.hints import closest
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from ..spec.yaml_source import yaml_text
from .platform import platform_path

SCHEMA_CHART_VERSION = "0.36.1"
SCHEMA_RESOURCE = "vcluster/values.schema.json"

# Values the platform generates to isolate the tenant (see components/manifests/vcluster.py), with
# why; a tenant overriding any of them, or anything below them, could reach beyond its namespace.
_NODES = "pins the vCluster's pods to the tenant's GPU pools and keeps host nodes read-only"
_DRA = "syncs DRA claims and the claimable DeviceClasses only for a tenant with a DeviceClass grant (quota.gpu of a class a deviceClasses entry meters)"
GUARDED: dict[tuple[str, ...], str] = {
    ("sync", "fromHost", "nodes", "enabled"): _NODES,
    ("sync", "fromHost", "nodes", "selector"): _NODES,
    ("sync", "fromHost", "nodes", "syncBackChanges"): _NODES,
    ("sync", "fromHost", "priorityClasses"): "offers the tenant the platform's PriorityClasses (or none, with vcluster.priorityClassName)",
    ("sync", "toHost", "pods", "enforceTolerations"): "tolerates exactly the tenant's dedicated-pool taint",
    ("sync", "toHost", "pods", "priorityClassName"): "is set from vcluster.priorityClassName",
    ("sync", "toHost", "priorityClasses"): "would let the vCluster create host PriorityClasses (cluster-wide preemption)",
    ("sync", "toHost", "namespaces"): "would let the vCluster create host namespaces",
    ("sync", "toHost", "persistentVolumes"): "would let the vCluster create host PersistentVolumes (hostPath reaches node disks)",
    ("sync", "toHost", "storageClasses"): "would let the vCluster create host StorageClasses",
    ("sync", "toHost", "resourceClaims"): _DRA,
    ("sync", "toHost", "resourceClaimTemplates"): _DRA,
    ("sync", "fromHost", "deviceClasses"): _DRA,
    ("policies",): "mirrors the tenant's quota, LimitRange, NetworkPolicy and Pod Security",
    ("rbac",): "bounds what the vCluster may do on the host",
}
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


def _contains(values: Any, path: tuple[str, ...]) -> bool:
    for part in path:
        if not isinstance(values, dict) or part not in values:
            return False
        values = values[part]
    return True


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
    for guarded, why in GUARDED.items():
        if _contains(spec.values, guarded):
            add(("vcluster", "values", *guarded), f"set by the platform: it {why}; remove it (ask the platform team if you need a change)")
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
    dedicated = [pool for pool in tenant.gpu.dedicated_pools if pool in platform.node_pools]
    classes = [c for c in cap.allowed_classes(tenant, platform) if c in platform.gpu_classes]
    if dedicated and set(tenant.gpu.classes) - {platform.node_pools[p].gpu_class for p in dedicated}:
        add(("vcluster", "enabled"), f"the vCluster's pods are pinned to the tenant's dedicated pools ({', '.join(dedicated)}); its shared classes ({', '.join(sorted(set(tenant.gpu.classes)))}) are out of its reach", "warning")
    elif not dedicated and len(classes) > 1:
        add(("vcluster", "enabled"), f"one node-label set cannot select several GPU classes ({', '.join(classes)}): the vCluster syncs only the nodes its pods run on and does not pin them; the host placement policy still decides where they may go", "warning")
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
        if loaded.spec.lifecycle != "decommissioned":
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
