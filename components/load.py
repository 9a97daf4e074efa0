"""Load a project (stack files and tenant files) into validated specs, or every problem at once.

>>> env = load_environment(root, "dev")
>>> [t.name for t in env.tenants]
['eval', 'inference', 'llm-finetune']
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import gc
import os
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .fleet.environment import Environment, LoadedTenant
from .fleet.shard_stacks import stack_tenants
from .spec.base import API_VERSION, DECIDE, OLDER_VERSIONS, V1ALPHA1
from .spec.field_errors import model_problems
from .spec.problems import InvalidInput, Problem, errors_only
from .spec.sharding import split_stack_name
from .spec.stack import CONFIG_KEY, Platform
from .spec.tenant import Tenant
from .spec.yaml_source import SourceDocument, parse_yaml, read_text
from .validate import vcluster
from .validate.environment import check_environment
from .validate.tenant import TenantCheck, check_tenant
from .validate.sharding import check_sharding

TENANT_SUFFIXES = (".yaml", ".yml")
# How long before `expires` validate starts to warn.
EXPIRY_NOTICE = timedelta(days=30)


def utc_today() -> date:
    """The date `expires` is compared with: today in UTC when the command (or `pulumi up`) runs, or
    the date in GPU_TENANCY_TODAY (YYYY-MM-DD), which makes a run repeatable.

    >>> isinstance(utc_today(), date)
    True
    """
    given = os.environ.get("GPU_TENANCY_TODAY")
    if given:
        try:
            return date.fromisoformat(given)
        except ValueError:
            raise InvalidInput([Problem("GPU_TENANCY_TODAY", 0, 0, "", f"'{given}' is not a date such as 2026-12-01")]) from None
    return datetime.now(timezone.utc).date()

# While `reading_each_file_once()` is active, a tenant file read again with the same bytes (under
# the same name) is neither parsed nor validated again: `tenants diff` loads a base and a head
# that share all but a few files.
_READ_BEFORE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("read_before", default=None)


@contextlib.contextmanager
def reading_each_file_once():
    """Within the block, identical tenant files are parsed and validated once; the loads share the
    specs (frozen: no load can change what another reads).

    >>> with reading_each_file_once():
    ...     base, head = load_environment(root, "prod"), load_environment(root, "prod")
    >>> base.tenants[0].spec is head.tenants[0].spec, base.facts is head.facts
    (True, False)
    """
    token = _READ_BEFORE.set({})
    try:
        yield
    finally:
        _READ_BEFORE.reset(token)


def stack_names(root: Path) -> list[str]:
    """Environments that have a `stacks/Pulumi.<env>.yaml` (not the shard stacks `<env>.<shard>`,
    whose files, if any, hold only Pulumi's own settings).

    >>> stack_names(root), stack_names(lab_root)
    (['dev', 'prod', 'staging'], ['lab'])
    """
    return [name for name in _stack_file_names(root) if split_stack_name(name)[1] is None]


def shard_stack_files(root: Path) -> list[str]:
    """Stack names of the `stacks/Pulumi.<env>.<shard>.yaml` files.

    >>> shard_stack_files(root)
    []
    """
    return [name for name in _stack_file_names(root) if split_stack_name(name)[1] is not None]


def _stack_file_names(root: Path) -> list[str]:
    stacks = root / "stacks"
    names = []
    for path in sorted(stacks.glob("Pulumi.*.y*ml")) if stacks.is_dir() else []:
        names.append(path.name[len("Pulumi."):].rsplit(".", 1)[0])
    return names


def stack_file(root: Path, env: str) -> Path:
    """The stack file of `env` (`.yaml` or `.yml`; the `.yaml` name when there is none yet).

    >>> stack_file(root, "prod").relative_to(root).as_posix(), stack_file(root, "lab").name
    ('stacks/Pulumi.prod.yaml', 'Pulumi.lab.yaml')
    """
    for suffix in TENANT_SUFFIXES:
        candidate = root / "stacks" / f"Pulumi.{env}{suffix}"
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return root / "stacks" / f"Pulumi.{env}.yaml"


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


# --- format versions: an older file gets one problem saying to migrate -----------------------------


def older_version_message(kind: str, version: str, file: str) -> str:
    """Why an older file is not read, and the command that rewrites it.

    >>> older_version_message("stack", V1ALPHA1, "stacks/Pulumi.dev.yaml")[:46]
    'gpu-tenancy.dev/v1alpha1 is an older format of'
    """
    return (
        f"{version} is an older format of {kind} files (the current one is {API_VERSION}); run "
        f"`tenants migrate {file}`: it rewrites the file and marks DECIDE what you must choose (docs/migrating.md)"
    )


def tenant_version_problems(doc: SourceDocument) -> list[Problem]:
    """The file's `apiVersion` is an older one: one problem saying to migrate (its fields are not
    checked against today's format, which would only repeat what migrate reports).

    >>> doc = SourceDocument("t.yaml", {"apiVersion": V1ALPHA1}, {("apiVersion",): (2, 13)})
    >>> str(tenant_version_problems(doc)[0])[:52]
    't.yaml:2:13: apiVersion: gpu-tenancy.dev/v1alpha1 is'
    """
    version = doc.data.get("apiVersion") if isinstance(doc.data, dict) else None
    if version in OLDER_VERSIONS:
        return [doc.problem(("apiVersion",), older_version_message("tenant", version, doc.file))]
    return []


def stack_version_problems(doc: SourceDocument, config_key: str) -> list[Problem]:
    """A stack file whose platform object names no `apiVersion` (or an older one) predates today's format.

    >>> doc = SourceDocument("s.yaml", {"config": {"p": {"labelDomain": "x"}}}, {("config", "p"): (3, 3)})
    >>> stack_version_problems(doc, "p")[0].field
    'config.p.apiVersion'
    """
    config = doc.data.get("config") if isinstance(doc.data, dict) else None
    platform = config.get(config_key) if isinstance(config, dict) else None
    if not isinstance(platform, dict):
        return []
    version = platform.get("apiVersion", V1ALPHA1)
    if version not in OLDER_VERSIONS:
        return []
    path = ("config", config_key, "apiVersion")
    return [doc.problem(path, older_version_message("stack", version, doc.file), field_name=".".join(path))]


def undecided_problems(doc: SourceDocument) -> list[Problem]:
    """Every `DECIDE` that `tenants migrate` left in the file, at its line.

    >>> doc = SourceDocument("t.yaml", {"a": [{"ports": "DECIDE"}]}, {("a", 0, "ports"): (4, 9)})
    >>> str(undecided_problems(doc)[0])[:38]
    't.yaml:4:9: a[0].ports: undecided: ten'
    """
    return [
        doc.problem(path, "undecided: tenants migrate left this choice to you (the comment above it says what "
                          "each answer means); replace DECIDE with your decision")
        for path in ([()] if doc.data == DECIDE else _decide_paths(doc.data, (), []))
    ]


def _decide_paths(value: Any, path: tuple, found: list[tuple]) -> list[tuple]:
    """`found` and the paths under `value` (a dict or list) that hold `DECIDE`, in document order;
    scalars are compared here rather than in a call each (a tenant file has ~150)."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return found
    for key, item in items:
        if isinstance(item, (dict, list)):
            _decide_paths(item, (*path, key), found)
        elif item == DECIDE:
            found.append((*path, key))
    return found


def parse_platform(doc: SourceDocument, env: str, *, versioned: bool = True) -> Platform:
    """Validate the `gpu-tenancy:platform` object of a parsed stack file (`versioned`: it must be in
    the current file format; plain data from the library is read as the current one).

    >>> parse_platform(prod.platform_doc, "prod").label_domain
    'gpu.acme.dev'
    """
    config = doc.data.get("config") if isinstance(doc.data, dict) else None
    if not isinstance(config, dict) or CONFIG_KEY not in config:
        raise InvalidInput([doc.problem(("config",), f"missing `config: {{{CONFIG_KEY}: ...}}` with the cluster inventory")])
    data = config[CONFIG_KEY]
    if versioned:
        # An older file is not checked field by field: `tenants migrate` says what it must change.
        outdated = stack_version_problems(doc, CONFIG_KEY) or undecided_problems(doc)
        if outdated:
            raise InvalidInput(outdated)
    try:
        platform = Platform.model_validate(data)
    except ValidationError as err:
        raise InvalidInput(model_problems(err, doc, data, Platform, ("config", CONFIG_KEY))) from None
    if platform.environment is None:
        platform.environment = env
    return platform


def load_platform(root: Path, env: str) -> tuple[Platform, SourceDocument]:
    """The validated platform of `stacks/Pulumi.<env>.yaml` and the parsed file (raises `InvalidInput`).

    >>> platform, doc = load_platform(root, "dev")
    >>> platform.label_domain, doc.file
    ('gpu.acme.dev', 'stacks/Pulumi.dev.yaml')
    """
    path = stack_file(root, env)
    display = _display(path, root)
    if not path.exists() and not path.is_symlink():  # a broken link is reported by read_text
        known = ", ".join(stack_names(root)) or "none"
        raise InvalidInput([Problem(display, 0, 0, "", f"no such stack '{env}' (known stacks: {known})")])
    doc = parse_yaml(read_text(path, display, root / "stacks"), display)
    return parse_platform(doc, env), doc


def tenant_paths(root: Path) -> list[Path]:
    """The tenant files under `tenants/` (`.yaml` or `.yml`), sorted.

    >>> [p.name for p in tenant_paths(root)]
    ['eval.yaml', 'inference.yaml', 'llm-finetune.yaml']
    """
    directory = root / "tenants"
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.endswith(TENANT_SUFFIXES) and not p.name.startswith("."))


def read_tenant_documents(root: Path) -> tuple[list[SourceDocument], list[Problem]]:
    """Parse every tenant file; files that cannot be parsed become problems.

    >>> docs, problems = read_tenant_documents(root)
    >>> [d.file for d in docs], problems
    (['tenants/eval.yaml', 'tenants/inference.yaml', 'tenants/llm-finetune.yaml'], [])
    """
    docs, problems = [], []
    read_before = _READ_BEFORE.get()
    for path in tenant_paths(root):
        display = _display(path, root)
        try:
            text = read_text(path, display, root / "tenants")
            if read_before is not None and (display, text) in read_before:
                docs.append(read_before[(display, text)])
                continue
            doc = parse_yaml(text, display)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        if read_before is not None:
            read_before[(display, text)] = doc
        docs.append(doc)
    return docs, problems


def _deep_merge(base: Any, override: Any) -> Any:
    """`override` over `base`: maps merge key by key, a `null` in the override removes the key, the
    rest (lists, scalars) replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = _deep_merge(base.get(key), value) if key in base else _without_nulls(value)
        return merged
    return _without_nulls(override)


def _without_nulls(value: Any) -> Any:
    """A copy of an override value that had nothing to merge into: `null` removes nothing there."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return copy.deepcopy(value)


def for_environment(doc: SourceDocument, env: str | None) -> SourceDocument:
    """The tenant document with `environments.<env>` merged over the base (maps merge, lists replace,
    `null` removes a key); its problems name the stack.

    >>> docs, _ = read_tenant_documents(root)
    >>> base, merged = docs[2].data["quota"]["gpu"], for_environment(docs[2], "dev").data["quota"]["gpu"]
    >>> base, merged
    (40, {'l4': 2})
    """
    data = doc.data
    if not isinstance(data, dict):
        return doc
    base = {k: v for k, v in data.items() if k != "environments"}
    envs = data.get("environments")
    override = envs.get(env) if isinstance(envs, dict) and env else None
    if not isinstance(override, dict):
        return SourceDocument(doc.file, base, doc.positions, dict(doc.origins))
    merged = _deep_merge(base, override)
    positions = dict(doc.positions)
    origins = dict(doc.origins)
    prefix = ("environments", env)
    for path, position in doc.positions.items():
        if path[:2] == prefix and len(path) > 2:
            positions[path[2:]] = position
            origins[path[2:]] = path
    return SourceDocument(doc.file, merged, positions, origins, stack=env)


def validate_tenant(doc: SourceDocument, env: str | None = None) -> Tenant:
    """Validate one tenant document (for an environment, with its overrides merged).

    >>> docs, _ = read_tenant_documents(root)
    >>> validate_tenant(docs[0]).name, validate_tenant(docs[0], "dev").lifecycle
    ('eval', 'active')
    """
    return _validate_merged(doc, for_environment(doc, env))


def _has_override(doc: SourceDocument, env: str) -> bool:
    envs = doc.data.get("environments") if isinstance(doc.data, dict) else None
    return isinstance(envs, dict) and isinstance(envs.get(env), dict)


def _validate_merged(doc: SourceDocument, merged: SourceDocument, *, doc_checked: bool = False) -> Tenant:
    """`doc_checked`: `doc` has passed here before (its version and `DECIDE`s are known to be fine)."""
    data = merged.data
    if not isinstance(data, dict):
        raise InvalidInput([doc.problem((), "a tenant file must be a mapping of fields (apiVersion, kind, name, ...); `tenants new NAME` writes one to start from")])
    outdated = [] if doc_checked else tenant_version_problems(doc) or undecided_problems(doc)
    if outdated:
        raise InvalidInput(outdated)
    try:
        tenant = Tenant.model_validate({**data, "environments": doc.data.get("environments", {})})
    except ValidationError as err:
        raise InvalidInput(model_problems(err, merged, data, Tenant)) from None
    return tenant


def load_program_environment(root: Path, stack: str, platform_config: Any) -> Environment:
    """For the Pulumi program of `stack`: the environment, with the platform object as Pulumi read
    it from the stack's config.

    It is normally the same file the offline tools read; if it differs (set outside the file),
    Pulumi's value wins and errors are located in "pulumi config" instead of the file. A shard
    stack `<env>.<shard>` has no inventory of its own: it loads its environment's files, and its
    shard must be one the environment lists.

    >>> load_program_environment(lab_root, "lab.blue", None).name
    'lab'
    """
    env, shard = split_stack_name(stack)
    if shard is not None:
        if platform_config is not None:
            where = _display(stack_file(root, stack), root)
            raise InvalidInput([Problem(where, 0, 0, f"config.{CONFIG_KEY}", (
                f"shard stack {stack} reads the inventory of {env} (stacks/Pulumi.{env}.yaml); remove "
                f"`{CONFIG_KEY}` from its own config so that there is one inventory to edit"))])
        environment = load_environment(root, env)
        try:
            stack_tenants(environment, stack)
        except ValueError as err:
            raise InvalidInput([environment.platform_doc.problem(("config", CONFIG_KEY, "sharding"), str(err))]) from None
        return environment
    path = stack_file(root, env)
    doc = None
    if path.exists():
        try:
            doc = parse_yaml(read_text(path, _display(path, root), root / "stacks"), _display(path, root))
        except InvalidInput:
            doc = None
    if doc is None or not isinstance(doc.data, dict) or (doc.data.get("config") or {}).get(CONFIG_KEY) != platform_config:
        doc = SourceDocument(f"pulumi config of stack {env}", {"config": {CONFIG_KEY: platform_config}})
    return load_environment(root, env, platform_doc=doc)


@contextlib.contextmanager
def fewer_gc_passes(threshold: int = 50_000):
    """Run the cyclic garbage collector less often while many small, long-lived objects are made.

    Loading 10,000 tenant files or rendering 1,000 tenants creates millions of dicts, lists and
    models that all stay alive; at the default threshold (700 allocations) the collector rescans
    them over and over: 30% of loading and half of building at that size (docs/performance.md).
    Cycles are still collected, in larger batches.

    >>> import gc
    >>> with fewer_gc_passes(100_000):
    ...     gc.get_threshold()[0]
    100000
    >>> gc.get_threshold()[0] < 100_000  # restored afterwards
    True
    """
    before = gc.get_threshold()
    fewer_gc_passes_from_now(threshold)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def fewer_gc_passes_from_now(threshold: int = 50_000) -> None:
    """`fewer_gc_passes` for the rest of this process: for the Pulumi program, whose resources are
    registered after its code has returned, so that no `with` block can cover them.

    The SDK keeps every resource, output and future alive until the program ends; at the default
    threshold the collector rescans them over and over: half the program's CPU under the mock
    runtime at 300 tenants (docs/performance.md). Run inline by the Automation API, the caller's
    process keeps the setting too.

    >>> import gc
    >>> before = gc.get_threshold()
    >>> fewer_gc_passes_from_now(60_000); gc.get_threshold()[0] >= 60_000
    True
    >>> gc.set_threshold(*before)
    """
    current = gc.get_threshold()
    gc.set_threshold(max(threshold, current[0]), *current[1:])


def load_environment(
    root: Path, env: str, *, strict_warnings: bool = False, platform_doc: SourceDocument | None = None,
    today: date | None = None,
) -> Environment:
    """Load and cross-check everything the stack `env` deploys; raise `InvalidInput` with all problems.
    `today` (default `utc_today()`): tenants whose `expires` is before it are suspended.

    >>> environment = load_environment(root, "staging")
    >>> environment.name, [t.name for t in environment.tenants], environment.platform.scheduler
    ('staging', ['eval', 'inference', 'llm-finetune'], 'kai')
    """
    with fewer_gc_passes():
        return _load_environment(root, env, strict_warnings=strict_warnings, platform_doc=platform_doc, today=today)


def _load_environment(
    root: Path, env: str, *, strict_warnings: bool, platform_doc: SourceDocument | None, today: date | None
) -> Environment:
    problems: list[Problem] = []
    try:
        if platform_doc is None:
            platform_doc = load_platform(root, env)[1]
    except InvalidInput as err:
        problems.extend(err.problems)
    docs, read_problems = read_tenant_documents(root)
    problems.extend(read_problems)
    environment = environment_from_documents(
        env, platform_doc, docs, problems, known_envs=stack_names(root), strict_warnings=strict_warnings, today=today
    )
    chart_problems = vcluster.check_local_chart(environment, root)
    if chart_problems:
        raise InvalidInput(chart_problems)
    shard_problems = check_sharding(environment, shard_stack_files(root))
    if strict_warnings and shard_problems:
        raise InvalidInput(environment.warnings + shard_problems)
    return replace(environment, warnings=[*environment.warnings, *shard_problems]) if shard_problems else environment


def environment_from_data(
    env: str,
    platform: dict[str, Any],
    tenants: dict[str, dict[str, Any]],
    *,
    known_stacks: list[str] | None = None,
    strict_warnings: bool = False,
    today: date | None = None,
) -> Environment:
    """An environment from plain data instead of files: the platform dict (what a stack file holds
    under `config.gpu-tenancy:platform`) and one dict per tenant (what a tenant file holds), keyed
    by tenant name. Validated exactly like files; errors name `data:tenants/<key>` or
    `data:platform` with the field. `known_stacks`: the environments that `environments:`
    overrides may name (default: any).

    >>> team_a = {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "team-a",
    ...           "displayName": "Team A", "costCenter": "cc-1"}
    >>> environment = environment_from_data("dev", {"labelDomain": "gpu.example.com"}, {"team-a": team_a})
    >>> [t.name for t in environment.tenants]
    ['team-a']
    """
    platform_doc = SourceDocument(f"data:platform of stack {env}", {"config": {CONFIG_KEY: copy.deepcopy(platform)}})
    docs = [SourceDocument(f"data:tenants/{key}", copy.deepcopy(data)) for key, data in sorted(tenants.items())]
    if known_stacks is None:
        named = (data.get("environments") for data in tenants.values() if isinstance(data, dict))
        known_stacks = sorted({env, *(key for envs in named if isinstance(envs, dict) for key in envs)})
    with fewer_gc_passes():
        return environment_from_documents(
            env, platform_doc, docs, [], known_envs=list(known_stacks), strict_warnings=strict_warnings,
            versioned=False, today=today,
        )


def environment_from_documents(
    env: str,
    platform_doc: SourceDocument | None,
    docs: list[SourceDocument],
    problems: list[Problem],
    *,
    known_envs: list[str],
    strict_warnings: bool = False,
    versioned: bool = True,
    today: date | None = None,
) -> Environment:
    """Validate a platform document and tenant documents into one environment, or raise
    `InvalidInput` with every problem (those in `problems` too). `versioned`: the platform document
    is a stack file (or its Pulumi config) and must name the current format.

    >>> docs, problems = read_tenant_documents(root)
    >>> environment = environment_from_documents("dev", dev.platform_doc, docs, problems, known_envs=["prod", "staging", "dev"])
    >>> [t.name for t in environment.tenants]
    ['eval', 'inference', 'llm-finetune']
    """

    problems = list(problems)
    platform = None
    if platform_doc is not None:
        try:
            platform = parse_platform(platform_doc, env, versioned=versioned)
        except InvalidInput as err:
            problems.extend(err.problems)
    tenants: list[LoadedTenant] = []
    read_before = _READ_BEFORE.get()
    for doc in docs:
        validated = read_before.get(("validated", id(doc), env)) if read_before is not None else None
        if validated is not None and validated[0] is doc:
            _, spec, merged, doc_problems = validated
            if doc_problems:
                problems.extend(doc_problems)
            else:   # specs are frozen: every load may share them
                tenants.append(LoadedTenant(spec, merged))
            continue
        before = len(problems)
        loaded = _validate_document(doc, env, problems)
        if read_before is not None:
            spec, merged = (loaded.spec, loaded.doc) if loaded else (None, None)
            read_before[("validated", id(doc), env)] = (doc, spec, merged, problems[before:])
        if loaded is not None:
            tenants.append(loaded)
    if platform is None or errors_only(problems):
        raise InvalidInput(problems)
    as_of = today or utc_today()
    written = {loaded.name: loaded.spec.lifecycle for loaded in tenants}
    tenants = [_as_of(loaded, as_of, problems) for loaded in tenants]
    enabled, disabled = _enabled(platform, tenants)
    # The tenants `_as_of` suspended: `tenants diff` says so on every PR (review/expiry.py).
    expired = [loaded.name for loaded in enabled if loaded.spec.lifecycle != written[loaded.name]]
    environment = Environment(env, platform, platform_doc, enabled, disabled, as_of=as_of, expired=expired)
    problems.extend(check_environment(environment, all_tenants=tenants, known_envs=known_envs,
                                      tenant_check=_remembered_tenant_check(read_before, platform)))
    if errors_only(problems) or (strict_warnings and problems):
        raise InvalidInput(problems)
    # The same facts, validation's work kept: the builders read what the checks already worked out.
    return replace(environment, warnings=problems)


def _remembered_tenant_check(read_before: dict | None, platform: Platform) -> TenantCheck:
    """`check_tenant`; while `reading_each_file_once()` is active, with its problems remembered per
    (spec, document, inventory): a tenant's checks read only those three (specs, documents and
    problems are frozen), and the two sides of `tenants diff` share the specs and documents of every
    unchanged file (at 10,000 tenants, half the checks of a diff's second side).

    >>> with reading_each_file_once():
    ...     base, head = load_environment(root, "prod"), load_environment(root, "prod")
    >>> base.warnings == head.warnings
    True
    """
    if read_before is None:
        return check_tenant
    inventories = read_before.setdefault("inventories", [])   # equal inventories check alike
    inventory = next((i for i, seen in enumerate(inventories) if seen is platform or seen == platform), None)
    if inventory is None:
        inventories.append(platform)
        inventory = len(inventories) - 1

    def check(spec: Tenant, doc: SourceDocument, platform: Platform) -> list[Problem]:
        key = ("checked", id(spec), id(doc), inventory)
        found = read_before.get(key)
        if found is None or found[0] is not spec or found[1] is not doc:   # the ids of live objects only
            found = read_before[key] = (spec, doc, check_tenant(spec, doc, platform))
        return list(found[2])

    return check


def _validate_document(doc: SourceDocument, env: str, problems: list[Problem]) -> LoadedTenant | None:
    """The tenant of one document as it applies to `env`, or None (its problems added to `problems`)."""
    # The file as written must be valid in every environment; then with this one's overrides.
    # Without an override for `env` the two are the same document: validated once.
    base = for_environment(doc, None)
    try:
        spec = _validate_merged(doc, base)
    except InvalidInput as err:
        problems.extend(err.problems)
        return None
    if not _has_override(doc, env):
        return LoadedTenant(spec, base)
    merged = for_environment(doc, env)
    try:
        return LoadedTenant(_validate_merged(doc, merged, doc_checked=True), merged)
    except InvalidInput as err:
        problems.extend(err.problems)
        return None


def _as_of(loaded: LoadedTenant, today: date, problems: list[Problem]) -> LoadedTenant:
    """The tenant on `today`: suspended the day after it `expires` (an active one only: a decommission
    stays the explicit step it is), with a warning ahead of time and after."""
    expires = loaded.spec.expires
    if expires is None or loaded.spec.is_decommissioned:
        return loaded
    if today > expires:
        problems.append(loaded.doc.problem(("expires",), (
            f"expired on {expires}: suspended since {expires + timedelta(days=1)} (no new pods are admitted, nothing "
            f"is deleted); extend `expires`, or decommission it (docs/offboarding.md)"), severity="warning"))
        if loaded.spec.is_active:
            return LoadedTenant(loaded.spec.model_copy(update={"lifecycle": "suspended"}), loaded.doc)
    elif today + EXPIRY_NOTICE >= expires:
        problems.append(loaded.doc.problem(("expires",), (
            f"expires on {expires} ({(expires - today).days} day(s) from {today}): the stack suspends the tenant "
            f"after that date; extend `expires` if the team still needs it"), severity="warning"))
    return loaded


def _enabled(platform: Platform, tenants: list[LoadedTenant]) -> tuple[list[LoadedTenant], list[str]]:
    ordered = sorted(tenants, key=lambda t: t.name)
    if platform.tenants == "all":
        return ordered, []
    wanted = set(platform.tenants)
    return [t for t in ordered if t.name in wanted], [t.name for t in ordered if t.name not in wanted]
