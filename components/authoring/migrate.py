"""`tenants migrate`: rewrite tenant and stack files of an older format to the current one, in place.

The files are edited through a round-trip YAML tree (ruamel.yaml), so comments, key order, flow or
block style and quoting stay as written. What a version change allows to rewrite mechanically is
rewritten (the `apiVersion`); where the old file meant something the current format can only say
after a person decides (which ports a platform role may reach, now that a grant never opens every
port; the stack defaults that tightened), the file gets `DECIDE` at that place with a comment
saying what each answer means. Validation refuses a file that still holds a `DECIDE`, so nothing
is silently widened or narrowed; migrating a migrated file changes nothing and reports the same
choices.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ..spec.base import API_VERSION, DECIDE, OLDER_VERSIONS, V1ALPHA1
from ..spec.problems import InvalidInput
from ..spec.stack import CONFIG_KEY
from ..spec.yaml_source import dotted, parse_yaml

PLATFORM_PORTS_NOTE = (
    "tenants migrate ({old} -> {new}): a platform role named here reached every port of the tenant's pods;\n"
    "a grant now opens only the ports it names. For each DECIDE, write the ports the role must reach,\n"
    "e.g. ports: [{{port: 8080}}], or put back the plain role name to take the stack's platformPorts for it."
)
NODE_READ_NOTE = (
    "tenants migrate ({old} -> {new}): every tenant member could read Nodes (labels, taints, capacity and\n"
    "addresses of every node); the default is now false. true keeps that, false takes the new default."
)
GUARD_RAILS_NOTE = (
    "tenants migrate ({old} -> {new}): tenants without their own caps had no object-count or storage quota;\n"
    "now every namespace gets guard rails (e.g. 0 LoadBalancer Services, 0 node ports, 1Ti storage).\n"
    "Write {{objects: {{}}, storage: {{}}}} to keep no caps, or delete this line to take the new defaults."
)
PATCH_TAINTS_NOTE = (
    "tenants migrate ({old} -> {new}): this dedicated pool's nodes were not tainted; now they are by default,\n"
    "so only pods with the tenant's toleration land there. true takes that, false keeps the nodes untainted\n"
    "(placement stays enforced by the admission policy)."
)
POD_SECURITY_NOTE = (
    "tenants migrate ({old} -> {new}): Pod Security was pinned to v1.30 by default; the default is now latest\n"
    "(the cluster's own checks). v1.30 keeps what was admitted, latest takes the cluster's checks."
)


@dataclass(frozen=True, order=True)
class ChoicePoint:
    """A `DECIDE` in a migrated file, printed as `file:line: what to decide`."""

    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


@dataclass
class Migration:
    """One file: its text after migration, whether that differs, and the choices left to a person."""

    file: str
    text: str
    changed: bool
    from_version: str | None
    choices: list[ChoicePoint] = field(default_factory=list)


class UnreadableFile(ValueError):
    """The file is not YAML that migrate can rewrite (it is left as it is)."""


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line
    yaml.brace_single_entry_mapping_in_flow_sequence = True  # keep [{port: 443}] as written
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _load(text: str, file: str) -> Any:
    # The validating parser first: it refuses what ruamel would accept (duplicate keys, alias bombs,
    # custom tags, tabs), so migrate never rewrites a file that validate would not read.
    try:
        parse_yaml(text, file)
    except InvalidInput as err:
        raise UnreadableFile("; ".join(str(problem) for problem in err.problems)) from None
    try:
        return _yaml().load(text)
    except YAMLError as err:
        raise UnreadableFile(f"{file}: not readable as YAML ({str(err).splitlines()[0]}); fix it with `tenants validate` first") from None


def _dump(data: Any) -> str:
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue()


def _note(template: str, old: str) -> str:
    return template.format(old=old.rsplit("/", 1)[-1], new=API_VERSION.rsplit("/", 1)[-1])


def _comment_before(parent: CommentedMap, key: str, text: str, indent: int) -> None:
    parent.yaml_set_comment_before_after_key(key, before=text, indent=indent)


def _column(parent: CommentedMap, key: str) -> int:
    try:
        return parent.lc.key(key)[1]
    except (KeyError, TypeError, AttributeError):
        return 0


def migrate_tenant_text(text: str, file: str) -> Migration:
    """Migrate one tenant file's text; raise `UnreadableFile` if it is not YAML.

    >>> old = "apiVersion: gpu-tenancy.dev/v1alpha1\\nkind: Tenant\\nname: a\\nnetwork:\\n  ingressFrom:\\n    platform: [monitoring]\\n"
    >>> result = migrate_tenant_text(old, "tenants/a.yaml")
    >>> [str(c)[:50] for c in result.choices]
    ['tenants/a.yaml:9: network.ingressFrom.platform[0].']
    """
    data = _load(text, file)
    version = data.get("apiVersion") if isinstance(data, CommentedMap) else None
    if version not in OLDER_VERSIONS:
        return Migration(file, text, False, None, tenant_choices(text, file))
    data["apiVersion"] = API_VERSION
    for parent in _tenant_documents(data):
        _decide_platform_ports(parent, version)
    migrated = _dump(data)
    return Migration(file, migrated, migrated != text, version, tenant_choices(migrated, file))


def _tenant_documents(data: CommentedMap) -> Iterator[CommentedMap]:
    """The file itself and each `environments.<env>` override: both may grant platform ingress."""
    yield data
    environments = data.get("environments")
    if isinstance(environments, CommentedMap):
        yield from (override for override in environments.values() if isinstance(override, CommentedMap))


def _decide_platform_ports(document: CommentedMap, version: str) -> None:
    network = document.get("network")
    ingress = network.get("ingressFrom") if isinstance(network, CommentedMap) else None
    grants = ingress.get("platform") if isinstance(ingress, CommentedMap) else None
    if not isinstance(grants, CommentedSeq):
        return
    undecided = False
    for index, grant in enumerate(grants):
        if isinstance(grant, str):
            decided = CommentedMap([("role", grant), ("ports", DECIDE)])
            decided.fa.set_flow_style()
            grants[index] = decided
            undecided = True
        elif isinstance(grant, CommentedMap) and not grant.get("ports"):
            grant["ports"] = DECIDE
            undecided = True
    if undecided:
        _comment_before(ingress, "platform", _note(PLATFORM_PORTS_NOTE, version), _column(ingress, "platform"))


def migrate_stack_text(text: str, file: str, dedicated_pools: Iterable[str] = ()) -> Migration:
    """Migrate one stack file's text (`dedicated_pools`: the pools any tenant dedicates, whose
    taints changed); a file without `gpu-tenancy:platform` (a shard stack's) is left alone.

    >>> result = migrate_stack_text("config:\\n  gpu-tenancy:platform:\\n    labelDomain: x.dev\\n", "s.yaml")
    >>> result.text.splitlines()[2], len(result.choices)
    ('    apiVersion: gpu-tenancy.dev/v1alpha2', 3)
    """
    data = _load(text, file)
    config = data.get("config") if isinstance(data, CommentedMap) else None
    platform = config.get(CONFIG_KEY) if isinstance(config, CommentedMap) else None
    if not isinstance(platform, CommentedMap):
        return Migration(file, text, False, None, [])
    version = platform.get("apiVersion", V1ALPHA1)
    if version not in OLDER_VERSIONS:
        return Migration(file, text, False, None, stack_choices(text, file))
    indent = _column(platform, next(iter(platform), "")) if platform else 4
    if "apiVersion" in platform:
        platform["apiVersion"] = API_VERSION
    else:
        platform.insert(0, "apiVersion", API_VERSION)
    _decide_stack_defaults(platform, version, indent, set(dedicated_pools))
    migrated = _dump(data)
    return Migration(file, migrated, migrated != text, version, stack_choices(migrated, file))


def _decide_stack_defaults(platform: CommentedMap, version: str, indent: int, dedicated: set[str]) -> None:
    """A DECIDE for every default that tightened and that the file leaves unset."""
    _decide_setting(platform, "podSecurity", "version", _note(POD_SECURITY_NOTE, version), indent)
    _decide_setting(platform, "tenantAccess", "nodeRead", _note(NODE_READ_NOTE, version), indent)
    if "guardRails" not in platform:
        _append(platform, "guardRails", DECIDE, _note(GUARD_RAILS_NOTE, version), indent)
    pools = platform.get("nodePools")
    for name, pool in (pools.items() if isinstance(pools, CommentedMap) else ()):
        if name in dedicated and isinstance(pool, CommentedMap) and "patchTaints" not in pool:
            pool["patchTaints"] = DECIDE
            _comment_before(pool, "patchTaints", _note(PATCH_TAINTS_NOTE, version), indent + 4)


def _decide_setting(platform: CommentedMap, section: str, key: str, note: str, indent: int) -> None:
    """`section.key: DECIDE` where the stack leaves it unset (adding the section if it has none)."""
    settings = platform.get(section)
    if isinstance(settings, CommentedMap) and key not in settings:
        settings[key] = DECIDE
        _comment_before(settings, key, note, indent + 2)
    elif settings is None:
        _append(platform, section, CommentedMap([(key, DECIDE)]), note, indent)


def _append(parent: CommentedMap, key: str, value: Any, note: str, indent: int) -> None:
    if isinstance(value, CommentedMap):
        value.fa.set_flow_style()
    # After apiVersion: a choice reads best near the top of the inventory.
    parent.insert(1, key, value)
    _comment_before(parent, key, note, indent)


def tenant_choices(text: str, file: str) -> list[ChoicePoint]:
    """Every DECIDE of a tenant file, with what it asks.

    >>> text = "name: a\\nnetwork:\\n  allowEgress:\\n  - platform: {role: dns}\\n    ports: DECIDE\\n"
    >>> [(c.line, c.what[:44]) for c in tenant_choices(text, "tenants/a.yaml")]
    [(5, 'network.allowEgress[0].ports: replace DECIDE')]
    """
    return _choices(text, file, _tenant_question)


def stack_choices(text: str, file: str) -> list[ChoicePoint]:
    """Every DECIDE of a stack file, with what it asks.

    >>> text = "config:\\n  gpu-tenancy:platform:\\n    nodeRead: DECIDE\\n"
    >>> [(c.line, c.what[:60]) for c in stack_choices(text, "stacks/Pulumi.dev.yaml")]
    [(3, 'config.gpu-tenancy:platform.nodeRead: may tenant members rea')]
    """
    return _choices(text, file, _stack_question)


def _choices(text: str, file: str, question) -> list[ChoicePoint]:
    data = _load(text, file)
    return sorted(
        ChoicePoint(file, line, f"{dotted(path)}: {question(path, parent)}") for path, parent, line in _decide_places(data, ())
    )


def _decide_places(node: Any, path: tuple) -> Iterator[tuple[tuple, Any, int]]:
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            if value == DECIDE:
                yield (*path, key), node, node.lc.value(key)[0] + 1
            else:
                yield from _decide_places(value, (*path, key))
    elif isinstance(node, CommentedSeq):
        for index, value in enumerate(node):
            if value == DECIDE:
                yield (*path, index), node, node.lc.item(index)[0] + 1
            else:
                yield from _decide_places(value, (*path, index))


def _tenant_question(path: tuple, parent: Any) -> str:
    if path[-1] == "ports" and "platform" in path and isinstance(parent, CommentedMap):
        role = parent.get("role", "?")
        where = f" in environment {path[1]}" if path[0] == "environments" else ""
        return (f"which ports of the tenant's pods platform role '{role}' may reach{where} (before: every port); "
                f"write ports: [{{port: N}}, ...] or the plain role name for the stack's platformPorts")
    return "replace DECIDE (the comment above it says what each answer means)"


def _stack_question(path: tuple, parent: Any) -> str:
    key = path[-1]
    if key == "nodeRead":
        return "may tenant members read Nodes (before: yes; default now: false)? write true or false"
    if key == "guardRails":
        return ("guard-rail quotas for tenants without their own caps (before: none); write {objects: {}, storage: {}} "
                "to keep none, or delete the line for the new defaults")
    if key == "patchTaints":
        return (f"taint dedicated pool '{path[-2]}' (before: not tainted; default now: tainted)? write true or false")
    if key == "version" and "podSecurity" in path:
        return "Pod Security version (before: v1.30; default now: latest)? write v1.30 or latest"
    return "replace DECIDE (the comment above it says what each answer means)"


def dedicated_pools(tenant_texts: Iterable[tuple[str, str]]) -> set[str]:
    """Pools that any tenant file dedicates (`gpu.dedicatedPools`, in any environment too); files
    that are not YAML are skipped here (migrating them reports it).

    >>> sorted(dedicated_pools([("a.yaml", "gpu: {dedicatedPools: [train]}\\n")]))
    ['train']
    """
    pools: set[str] = set()
    for file, text in tenant_texts:
        try:
            data = _load(text, file)
        except UnreadableFile:
            continue
        if not isinstance(data, CommentedMap):
            continue
        for document in _tenant_documents(data):
            gpu = document.get("gpu")
            named = gpu.get("dedicatedPools") if isinstance(gpu, CommentedMap) else None
            pools.update(str(pool) for pool in (named or []) if isinstance(pool, str))
    return pools


_CURRENT_LINE = re.compile(r"^[ \t]*apiVersion:[ \t]*[\"']?" + re.escape(API_VERSION) + r"[\"']?[ \t]*(#.*)?$", re.MULTILINE)


def _surely_current(text: str, stack: bool) -> bool:
    """Text that names no older version (and, for a stack, names the current one on an `apiVersion`
    line, since a stack without one is v1alpha1) needs no relabelling: the round-trip parser, 30 ms
    a file, is skipped (`tenants diff` reads the whole base, 1,000 files at 1,000 tenants)."""
    if any(version in text for version in OLDER_VERSIONS):
        return False
    return not stack or _CURRENT_LINE.search(text) is not None


def read_as_current(text: str, file: str, stack: bool) -> str:
    """The file labelled with the current version and nothing else changed, for a side that is only
    compared, never deployed (the base of `tenants diff`); text that is not YAML is returned as it is.

    >>> read_as_current("apiVersion: gpu-tenancy.dev/v1alpha1\\nkind: Tenant\\n", "a.yaml", False)
    'apiVersion: gpu-tenancy.dev/v1alpha2\\nkind: Tenant\\n'
    """
    if _surely_current(text, stack):
        return text
    try:
        data = _load(text, file)
    except UnreadableFile:
        return text
    target = data
    if stack:
        config = data.get("config") if isinstance(data, CommentedMap) else None
        target = config.get(CONFIG_KEY) if isinstance(config, CommentedMap) else None
    if not isinstance(target, CommentedMap) or target.get("apiVersion", V1ALPHA1 if stack else None) not in OLDER_VERSIONS:
        return text
    if "apiVersion" in target:
        target["apiVersion"] = API_VERSION
    else:
        target.insert(0, "apiVersion", API_VERSION)
    return _dump(data)
