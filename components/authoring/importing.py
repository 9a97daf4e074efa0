"""What every importer shares (`tenants import`): Kubernetes quota and LimitRange values as tenant
fields, the report of what could not be mapped, and the text of the written tenant files.

Importers are pure: they get plain dicts (live objects or the documents of files) and the stack's
`Platform`, and return tenant file data plus one `Unmapped` line per thing left out. Nothing is
guessed silently: what has no exact counterpart in the file format is reported, never widened; what
cannot be imported without guessing (a GPU quota of no known class, a malformed document) is
refused, located in its source (`Imported.refused`), and nothing is written.

Import is data, never text: what a source says (names, labels, annotations, subjects) reaches the
written file only as a value given to the YAML emitter, or inside a comment through `printable`,
which escapes every line break and control character, so a hostile name written on the source
cluster cannot add a key to the file or end a comment. `tenant_file_text` parses what it wrote back
and refuses to return text that does not read back as exactly the data it was given.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..fleet import gpu_capacity as cap
from ..fleet.isolation import mode_of
from ..fleet.tenant_claims import namespace_owner, reserved_namespaces, subject_refusal
from ..spec.base import API_VERSION, DNS_LABEL_PATTERN
from ..spec.problems import Problem, printable
from ..spec.quantity import Quantity
from ..spec.stack import Platform
from ..spec.yaml_source import SourceDocument, parse_yaml
from .import_gpu import placed_gpu_class

SCHEMA_LINE = "# yaml-language-server: $schema=../docs/schema/tenant.schema.json"
# The order a reader expects (as `tenants new` writes it); nested maps are sorted.
_TOP_LEVEL_ORDER = (
    "apiVersion", "kind", "name", "displayName", "description", "costCenter", "contacts", "lifecycle",
    "namespaces", "access", "quota", "namespaceQuotas", "limits", "network", "gpu", "podSecurity", "queue",
)
_COMPUTE = {"cpu": "cpu", "memory": "memory", "ephemeral-storage": "ephemeralStorage"}
_OBJECT_COUNTS = {
    "pods": "pods", "count/pods": "pods",
    "services": "services", "count/services": "services",
    "services.loadbalancers": "servicesLoadBalancers",
    "services.nodeports": "servicesNodePorts",
    "persistentvolumeclaims": "persistentVolumeClaims", "count/persistentvolumeclaims": "persistentVolumeClaims",
    "configmaps": "configMaps", "count/configmaps": "configMaps",
    "secrets": "secrets", "count/secrets": "secrets",
}
_STORAGE_CLASS_KEY = re.compile(r"^(?P<sc>[a-z0-9.-]+)\.storageclass\.storage\.k8s\.io/(?P<what>requests\.storage|persistentvolumeclaims)$")
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(?P<profile>[1-7]g\.[0-9]+gb(\+me)?)$")


@dataclass(frozen=True)
class Refusal:
    """Why a part of a source cannot be imported without guessing, at `path` inside its document."""

    path: tuple
    message: str

    def located(self, doc: SourceDocument) -> Problem:
        """The refusal as a problem of `doc`: `file:line:col: field: message` (the source's name without a file).

        >>> Refusal(("spec", "hard"), "no class").located(SourceDocument("ResourceQuota a/q", {}))
        Problem(file='ResourceQuota a/q', line=0, column=0, field='spec.hard', message='no class', severity='error', stack='')
        """
        return doc.problem(self.path, printable(self.message), field_name=printable(doc.field_name(self.path)))


@dataclass(frozen=True, order=True)
class Unmapped:
    """One thing an importer left out, and why: a line of the import report."""

    source: str      # e.g. "ResourceQuota team-a/compute" or "capsule Tenant solar"
    what: str        # the field or key, e.g. "hard.count/jobs.batch"
    why: str         # what it means for the adoption and what to do

    def __str__(self) -> str:
        return printable(f"{self.source}: {self.what}: {self.why}")


@dataclass
class Imported:
    """Tenant file data by tenant name, what each came from, what was left out, and what refuses
    the whole import (located problems: nothing is written while there is one)."""

    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    unmapped: list[Unmapped] = field(default_factory=list)
    refused: list[Problem] = field(default_factory=list)

    def merge(self, other: "Imported") -> "Imported":
        """Both imports together; a tenant named in both gets both contributions (lists joined)."""
        out = Imported(copy.deepcopy(self.tenants), {k: list(v) for k, v in self.sources.items()}, [*self.unmapped, *other.unmapped],
                       [*self.refused, *other.refused])
        for name, data in other.tenants.items():
            out.tenants[name] = merge_tenant_data(out.tenants.get(name, {}), data)
            out.sources.setdefault(name, []).extend(other.sources.get(name, []))
        return out

    def unmapped_of(self, name: str) -> list[Unmapped]:
        """Report lines that concern the tenant `name` (they say so in their source)."""
        sources = tuple(self.sources.get(name, []))
        return sorted(u for u in self.unmapped if u.source.startswith(sources))


def merge_tenant_data(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` over `base`: maps merged key by key, lists joined without repeats, scalars replaced.

    >>> merge_tenant_data({"access": {"owners": {"users": ["a"]}}}, {"access": {"owners": {"users": ["b", "a"]}}})
    {'access': {'owners': {'users': ['a', 'b']}}}
    """
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_tenant_data(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = [*out[key], *(v for v in value if v not in out[key])]
        else:
            out[key] = copy.deepcopy(value)
    return out


def tenant_skeleton(name: str, *, display_name: str | None = None, cost_center: str = "unassigned",
                    description: str = "") -> dict[str, Any]:
    """The fields every tenant file needs, for an importer to fill in.

    >>> tenant_skeleton("team-a")["displayName"]
    'Team A'
    """
    data: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Tenant",
        "name": name,
        "displayName": display_name or name.replace("-", " ").title(),
        "costCenter": cost_center,
    }
    if description:
        data["description"] = description
    return data


def tenant_name_problem(name: str, platform: Platform) -> str | None:
    """Why `name` (a namespace or a source object's name) cannot be a tenant name in the stack of
    `platform`, or None: a namespace the platform owns (fleet/tenant_claims.py, the table validate
    refuses too) or no tenant name at all.

    >>> tenant_name_problem("kube-system", prod.platform)
    "'kube-system' is reserved for Kubernetes itself and the cluster DNS (clusterDns.namespace)"
    >>> tenant_name_problem("kueue-system", prod.platform)
    "'kueue-system' is reserved for Kueue (queues.kueue.namespace)"
    >>> tenant_name_problem("kueue-system\\n", prod.platform)[:31]
    "'kueue-system\\n' is not a tenant"
    """
    reserved = reserved_namespace_problem(name, platform)
    if reserved is not None:
        return reserved
    # fullmatch: re.match's `$` also matches before a final newline, which the spec's patterns
    # (rust-regex) refuse, so 'kueue-system\n' would pass here and reach validate.
    if not re.fullmatch(DNS_LABEL_PATTERN, name) or len(name) > 40:
        return f"'{name}' is not a tenant name (a DNS label of at most 40 characters); rename it or import it by hand"
    return None


def reserved_namespace_problem(namespace: str, platform: Platform) -> str | None:
    """Why a tenant file of the stack of `platform` may not hold `namespace` (one the platform owns:
    fleet/tenant_claims.py, the table validate refuses too), or None.

    >>> reserved_namespace_problem("gpu-operator", prod.platform)
    "'gpu-operator' is reserved for the NVIDIA GPU Operator (gpuOperator.namespace)"
    """
    owner = namespace_owner(namespace, reserved_namespaces(platform))
    return None if owner is None else f"'{namespace}' is reserved for {owner}"


def subject_note(platform: Platform, kind: str, name: str, namespaces: list[str], ref: str, where: str) -> Unmapped | None:
    """The report line for a user or group (`kind` "User" or "Group") a tenant role may not name
    (fleet/tenant_claims.py, as validate refuses it), or None when it maps.

    >>> str(subject_note(prod.platform, "Group", "system:authenticated", ["team-a"], "RoleBinding team-a/x", "subjects[0]"))[:84]
    'RoleBinding team-a/x: subjects[0]: group system:authenticated is every authenticated'
    """
    why = subject_refusal(platform, f"{kind.lower()}s", name, namespaces)
    if why is None:
        return None
    return Unmapped(ref, where, f"{kind.lower()} {why}; a tenant role may not name it: not imported")


def _is_amount(value: str) -> bool:
    """Whether `value` is a non-negative Kubernetes quantity."""
    try:
        return Quantity.parse(value).value >= 0
    except ValueError:
        return False


def _count(value: Any) -> int | None:
    """A whole number written as a quantity ("4", "1k"), or None."""
    try:
        number = Quantity.parse(str(value)).value
    except ValueError:
        return None
    return int(number) if number.denominator == 1 and number >= 0 else None


def quota_fields(hard: dict[str, Any], platform: Platform, source: str, *, gpu_class_of: dict[str, str] | None = None,
                 node_selector: dict[str, Any] | None = None, at: tuple = ("hard",)
                 ) -> tuple[dict[str, Any], list[Unmapped], list[Refusal]]:
    """The `quota` fields (and `gpu.classes`) of one ResourceQuota's `hard` map (found at path `at`
    of its document), what was left out, and what refuses the import.

    GPU keys name a resource, not a class: `import_gpu.placed_gpu_class` picks the class (the one
    `gpu_class_of[resource]` names, the one the source's `node_selector` pins pods to, the stack's
    only class with that resource); a GPU quota it cannot place is refused, never guessed nor
    dropped. MIG keys map to `quota.mig` by profile.

    >>> from components.spec.stack import Platform
    >>> p = Platform(labelDomain="gpu.example.com", gpuClasses={"h100": {
    ...     "model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}})
    >>> quota_fields({"requests.cpu": "8", "requests.nvidia.com/gpu": "4"}, p, "ResourceQuota a/q")[0]
    {'quota': {'cpu': {'requests': '8'}, 'gpu': {'h100': 4}}, 'gpu': {'classes': ['h100']}}
    """
    r = _QuotaReading(platform, source, at, gpu_class_of or {}, node_selector)
    for key in sorted(hard):
        value = str(hard[key])
        if not any(read(r, key, value) for read in _QUOTA_KEY_READERS):
            r.skip(key, "no field of the tenant file sets this quota key; it is not imported (the hand-made quota keeps "
                        "enforcing it until you delete that quota)")
    quota, unmapped = r.quota, r.unmapped
    for name in ("cpu", "memory", "ephemeralStorage"):
        pair = quota.get(name, {})
        if "requests" in pair and "limits" in pair and Quantity.parse(pair["limits"]) < Quantity.parse(pair["requests"]):
            unmapped.append(Unmapped(source, f"hard.limits.{name}", f"{pair['limits']} is below the requests ({pair['requests']}): the tenant file "
                                     "needs limits of at least the requests; limits not imported (the stack's LimitRange defaults apply)"))
            del pair["limits"]
    out: dict[str, Any] = {"quota": quota} if quota else {}
    if r.classes:
        out["gpu"] = {"classes": sorted(set(r.classes))}
    return out, unmapped, r.refusals


@dataclass
class _QuotaReading:
    """One ResourceQuota's `hard` map being read: where it is, and what it has given so far."""

    platform: Platform
    source: str
    at: tuple
    gpu_class_of: dict[str, str]
    node_selector: dict[str, Any] | None
    quota: dict[str, Any] = field(default_factory=dict)
    classes: list[str] = field(default_factory=list)
    unmapped: list[Unmapped] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def skip(self, key: str, why: str) -> None:
        self.unmapped.append(Unmapped(self.source, f"hard.{key}", why))

    def refuse(self, key: str, why: str) -> None:
        self.refusals.append(Refusal((*self.at, key), why))


def _split_key(key: str) -> tuple[str, str]:
    """(requests or limits, the resource) of a quota key; a bare resource is a request."""
    prefix, _, resource = key.partition(".") if key.startswith(("requests.", "limits.")) else ("requests", "", key)
    return prefix, resource


def _bad_amount(r: _QuotaReading, key: str, value: str) -> bool:
    _, resource = _split_key(key)
    if (resource in _COMPUTE or key == "requests.storage" or _STORAGE_CLASS_KEY.fullmatch(key)) and not _is_amount(value):
        r.refuse(key, f"'{value}' is not a Kubernetes quantity (e.g. 8, 500m, 64Gi)")
        return True
    return False


def _compute(r: _QuotaReading, key: str, value: str) -> bool:
    prefix, resource = _split_key(key)
    if resource not in _COMPUTE:
        return False
    r.quota.setdefault(_COMPUTE[resource], {})["limits" if prefix == "limits" else "requests"] = value
    return True


def _object_count(r: _QuotaReading, key: str, value: str) -> bool:
    if key not in _OBJECT_COUNTS:
        return False
    number = _count(value)
    if number is None:
        r.skip(key, f"'{value}' is not a whole number")
    else:
        r.quota.setdefault("objects", {})[_OBJECT_COUNTS[key]] = number
    return True


def _storage(r: _QuotaReading, key: str, value: str) -> bool:
    if key == "requests.storage":
        r.quota.setdefault("storage", {})["requests"] = value
        return True
    storage_class = _STORAGE_CLASS_KEY.fullmatch(key)
    if not storage_class:
        return False
    entry = r.quota.setdefault("storage", {}).setdefault("storageClasses", {}).setdefault(storage_class["sc"], {})
    if storage_class["what"] == "requests.storage":
        entry["requests"] = value
    elif _count(value) is None:
        r.refuse(key, f"'{value}' is not a whole number of claims")
    else:
        entry["persistentVolumeClaims"] = _count(value)
    return True


def _mig(r: _QuotaReading, key: str, value: str) -> bool:
    mig_profile = _MIG_RESOURCE.fullmatch(key.removeprefix("requests.").removeprefix("limits."))
    if not mig_profile:
        return False
    if key.startswith("limits."):
        r.skip(key, "extended resources have no limits quota; the requests key is what counts")
    elif _count(value) is None:
        r.refuse(key, f"'{value}' is not a whole number of MIG slices")
    else:
        r.quota.setdefault("mig", {})[mig_profile["profile"]] = _count(value)
        r.classes.extend(n for n, c in r.platform.gpu_classes.items() if mode_of(c).partitions_gpus)
    return True


def _gpus(r: _QuotaReading, key: str, value: str) -> bool:
    resource = key.removeprefix("requests.").removeprefix("limits.")
    if not (resource in (cap.GPU, cap.GPU_SHARED) or resource in r.gpu_class_of):
        return False
    if not key.startswith("requests."):
        r.skip(key, f"only requests.{resource} is enforced for an extended resource; "
                    f"imported nothing from it (the tenant file writes requests.{resource})")
        return True
    count = _count(value)
    if count is None:
        r.refuse(key, f"'{value}' is not a whole number of GPUs")
        return True
    placed, why = placed_gpu_class(r.platform, resource, gpu_class_of=r.gpu_class_of, node_selector=r.node_selector)
    if placed is None:
        r.refuse(key, f"{value} GPUs of {resource} cannot be placed on a GPU class: {why}")
        return True
    r.quota.setdefault("gpu", {})[placed] = r.quota.get("gpu", {}).get(placed, 0) + count
    r.classes.append(placed)
    return True


# The readers of a quota key, in the order they are tried: the first that knows the key takes it.
_QUOTA_KEY_READERS = (_bad_amount, _compute, _object_count, _storage, _mig, _gpus)


def tighter_quota(first: dict[str, Any], second: dict[str, Any], source: str) -> tuple[dict[str, Any], list[Unmapped]]:
    """Two quotas of one namespace both apply: keep, per key, the lower value (what admission enforces).

    >>> tighter_quota({"quota": {"objects": {"pods": 10}}}, {"quota": {"objects": {"pods": 5}}}, "ns a")[0]
    {'quota': {'objects': {'pods': 5}}}
    """
    notes: list[Unmapped] = []

    def walk(a: Any, b: Any, path: str) -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            return {k: walk(a[k], b[k], f"{path}.{k}") if k in a and k in b else copy.deepcopy(a.get(k, b.get(k)))
                    for k in sorted({*a, *b})}
        if isinstance(a, list) and isinstance(b, list):
            return sorted(set(a) | set(b))
        if a == b:
            return a
        lower = min(a, b, key=lambda v: Quantity.parse(str(v)))
        notes.append(Unmapped(source, path.lstrip("."), f"two quotas set it ({a} and {b}); imported the lower, {lower}, which is what admission enforces"))
        return lower

    return walk(first, second, ""), notes


_LIMIT_KINDS = {"defaultRequest": "defaultRequest", "default": "default", "max": "max", "min": "min"}


def limit_range_fields(limits: list[dict[str, Any]], source: str) -> tuple[dict[str, Any], list[Unmapped]]:
    """The `limits` field of a LimitRange's `spec.limits` (its Container entry).

    >>> limit_range_fields([{"type": "Container", "default": {"cpu": "1"}}], "LimitRange a/l")[0]
    {'limits': {'default': {'cpu': '1'}}}
    """
    out: dict[str, Any] = {}
    unmapped: list[Unmapped] = []
    for index, item in enumerate(limits or []):
        kind = item.get("type", "Container")
        if kind != "Container":
            unmapped.append(Unmapped(source, f"spec.limits[{index}]", f"type {kind}: the tenant file sets per-container values only; not imported"))
            continue
        for key, value in sorted(item.items()):
            if key == "type":
                continue
            if key not in _LIMIT_KINDS:
                unmapped.append(Unmapped(source, f"spec.limits[{index}].{key}", "no field of the tenant file sets it; not imported"))
                continue
            for resource, amount in sorted((value or {}).items()):
                if resource not in _COMPUTE:
                    unmapped.append(Unmapped(source, f"spec.limits[{index}].{key}.{resource}", "only cpu, memory and ephemeral-storage are set per container; not imported"))
                    continue
                out.setdefault(_LIMIT_KINDS[key], {})[_COMPUTE[resource]] = str(amount)
    return ({"limits": out} if out else {}), unmapped


def _sorted_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_deep(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_deep(v) for v in value]
    return value


def _ordered(data: dict[str, Any]) -> dict[str, Any]:
    known = [k for k in _TOP_LEVEL_ORDER if k in data]
    rest = sorted(k for k in data if k not in _TOP_LEVEL_ORDER)
    return {k: _sorted_deep(data[k]) for k in [*known, *rest]}


class _Dumper(yaml.SafeDumper):
    """The safe dumper, writing every string with a character that is not printable (a line break,
    NEL, the Unicode line and paragraph separators, a control character) double-quoted, where each
    is an escape: PyYAML writes them raw in other styles with `allow_unicode`, and a NEL or separator
    at either end of a single-quoted string is then read back as a space (measured: '\\x85access'
    came back as ' access')."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = '"' if not text.isprintable() else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_text)


def tenant_file_text(data: dict[str, Any], *, sources: list[str] = (), unmapped: list[Unmapped] = ()) -> str:
    """The text of an imported tenant file: the schema line, where it came from, what was left out, the data.

    Deterministic: the same data gives the same bytes (fixed top-level order, nested maps sorted).
    Every value goes through the YAML emitter and every comment through `printable`; the text is
    parsed back as `tenants validate` reads it, and a text that does not read back as exactly
    `data` (an extra key, a changed value) raises `ValueError` instead of being returned.

    >>> tenant_file_text(tenant_skeleton("team-a")).splitlines()[0]
    '# yaml-language-server: $schema=../docs/schema/tenant.schema.json'
    >>> text = tenant_file_text({**tenant_skeleton("team-a"), "displayName": "A\\nquota: {gpu: {h100: 64}}"},
    ...                         sources=["Namespace team-a\\nnetwork: {}"])
    >>> yaml.safe_load(text)["displayName"], "network" in yaml.safe_load(text)
    ('A\\nquota: {gpu: {h100: 64}}', False)
    """
    lines = [SCHEMA_LINE, "# Imported by `tenants import`; review it before the first `pulumi up` (docs/importing.md)."]
    for source in sorted(set(sources)):
        lines.append(f"# from: {printable(source)}")
    if unmapped:
        lines.append("# not imported (the import report says why; hand-made objects stay on the cluster, unmanaged):")
        lines.extend(f"#   {item}" for item in sorted(set(unmapped)))
    ordered = _ordered(data)
    body = yaml.dump(ordered, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)
    text = "\n".join(lines) + "\n" + body
    if any(line.splitlines() != [line] for line in lines) or parse_yaml(text, "imported tenant file").data != ordered:
        raise ValueError(f"the tenant file of {printable(data.get('name'))} does not read back as the imported data; not written")
    return text


def environment_with_imports(root, env: str, texts: dict[str, str]):
    """The environment of stack `env` with the imported files (`{tenant name: text}`) added to the
    project's other tenant files, validated as `tenants validate --stack env` would (a stack that lists
    its tenants as if it listed them too); raises `InvalidInput` with every problem.

    >>> text = tenant_file_text(tenant_skeleton("team-a"))
    >>> [t.name for t in environment_with_imports(root, "dev", {"team-a": text}).tenants]
    ['eval', 'inference', 'llm-finetune', 'team-a']
    """
    from ..load import environment_from_documents, load_platform, read_tenant_documents, stack_names
    from ..spec.stack import CONFIG_KEY
    from ..spec.yaml_source import SourceDocument, parse_yaml

    new_docs = [parse_yaml(text, f"tenants/{name}.yaml") for name, text in sorted(texts.items())]
    existing, _ = read_tenant_documents(root)
    others = [d for d in existing if d.file.rsplit("/", 1)[-1].rsplit(".", 1)[0] not in texts]
    _, doc = load_platform(root, env)
    data = copy.deepcopy(doc.data)
    listed = data["config"][CONFIG_KEY].get("tenants")
    if isinstance(listed, list):
        listed.extend(n for n in sorted(texts) if n not in listed)
    with_new = SourceDocument(doc.file, data, doc.positions, doc.origins)
    return environment_from_documents(env, with_new, [*others, *new_docs], [], known_envs=stack_names(root))


def check_against_stack(root, env: str, texts: dict[str, str]) -> list:
    """Errors the imported files cause in stack `env` (see `environment_with_imports`); empty when valid.

    >>> check_against_stack(root, "dev", {"team-a": tenant_file_text(tenant_skeleton("team-a"))})
    []
    >>> skeleton = tenant_skeleton("team-a")
    >>> [p.message for p in check_against_stack(root, "dev", {"team-a": tenant_file_text({**skeleton, "gpu": {"classes": ["h100"]}})})]
    ["unknown GPU class 'h100' (known: a100-mig, l4)"]
    """
    from ..spec.problems import InvalidInput, errors_only

    try:
        environment_with_imports(root, env, texts)
    except InvalidInput as err:
        return errors_only(err.problems)
    return []


def object_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name) of an object.

    >>> object_key({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": "team-a"}})
    ('v1', 'ResourceQuota', 'team-a', 'tenant-quota')
    """
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace") or "", meta.get("name", "")


def _differences(wanted: Any, live: Any, path: str) -> list[str]:
    if isinstance(wanted, dict) and isinstance(live, dict):
        return [d for key in sorted(wanted) for d in _differences(wanted[key], live.get(key), f"{path}.{key}" if path else key)]
    if wanted == live or (wanted is not None and live is not None and str(wanted) == str(live)):
        return []
    return [path]


def adoption_plan(generated: list[dict[str, Any]], live: dict[tuple, dict[str, Any] | None]) -> list[str]:
    """What the first deployment does to each generated object: existing ones whose fields differ
    first (they are updated: the fields named), then existing ones adopted as they are, then creates.
    `live` maps `object_key` to the live object, or None when there is none.

    >>> ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"team": "a"}}}
    >>> adoption_plan([ns], {object_key(ns): {"metadata": {"name": "a", "labels": {}}}})
    ['update Namespace a (exists; adopted, changing metadata.labels.team)']
    """
    updates, same, creates = [], [], []
    for obj in sorted(generated, key=object_key):
        _, kind, namespace, name = object_key(obj)
        shown = f"{kind} {namespace + '/' if namespace else ''}{name}"
        current = live.get(object_key(obj))
        if current is None:
            creates.append(f"create {shown}")
            continue
        wanted = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        wanted["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k in ("labels", "annotations")}
        changed = _differences(wanted, current, "")
        if changed:
            updates.append(f"update {shown} (exists; adopted, changing {', '.join(changed)})")
        else:
            same.append(f"adopt {shown} (exists, as generated)")
    return [*updates, *same, *creates]
