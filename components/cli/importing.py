"""`tenants import`: write tenant files for what already runs (brownfield adoption, docs/importing.md).

From a live cluster (`--context`/`--kubeconfig`, `--selector` or `--namespace`), read with the
`kubernetes` Python client (the `import` extra), or from Capsule, Kubeflow and Kueue files
(`--from`). Every written file is checked against the stack first (exit 1, nothing written); the
report of what could not be mapped goes to stderr (and `--report FILE`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from .common import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Stop, fail, report

PROG = "tenants import"
# Kinds read from each selected namespace; their mapping is authoring/import_cluster.py's.
_LIVE_KINDS = (
    ("ResourceQuota", "CoreV1Api", "list_namespaced_resource_quota"),
    ("LimitRange", "CoreV1Api", "list_namespaced_limit_range"),
    ("RoleBinding", "RbacAuthorizationV1Api", "list_namespaced_role_binding"),
    ("NetworkPolicy", "NetworkingV1Api", "list_namespaced_network_policy"),
    ("Pod", "CoreV1Api", "list_namespaced_pod"),
    ("Deployment", "AppsV1Api", "list_namespaced_deployment"),
)


def add_parser(sub) -> None:
    """The `tenants import` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> sub.choices["import"].parse_args(["--stack", "dev", "--from", "profiles.yaml"])
    Namespace(stack='dev', kubeconfig=None, context=None, selector=None, namespace=[], files=[PosixPath('profiles.yaml')], gpu_class=[], report=None, force=False, stdout=False)
    """
    parser = sub.add_parser(
        "import",
        help="write tenant files for namespaces that already exist, or from Capsule/Kubeflow/Kueue files",
        description="Write tenants/<name>.yaml for what already runs: each namespace of a live cluster, or each "
        "Capsule Tenant, Kubeflow Profile, Kueue LocalQueue (with its ClusterQueue) of --from files. The files "
        "are checked against --stack first (exit 1, nothing written); what could not be mapped is reported.",
    )
    parser.add_argument("--stack", required=True, metavar="ENV", help="the stack the tenants will be deployed by")
    live = parser.add_argument_group("from a live cluster")
    live.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    live.add_argument("--context", help="kubeconfig context (default: the stack's kubeContext, else the current one)")
    live.add_argument("--selector", "-l", help="label selector of the namespaces, e.g. team")
    live.add_argument("--namespace", "-n", action="append", default=[], metavar="NS", help="a namespace to import (repeatable)")
    parser.add_argument("--from", dest="files", action="append", type=Path, default=[], metavar="FILE",
                        help="Capsule, Kubeflow or Kueue YAML file (repeatable); instead of a cluster")
    parser.add_argument("--gpu-class", action="append", default=[], metavar="RESOURCE=CLASS",
                        help="the GPU class a quota's GPU resource (or a Kueue ResourceFlavor) means, when the stack has several")
    parser.add_argument("--report", type=Path, metavar="FILE", help="also write the report of what was not imported")
    parser.add_argument("--force", action="store_true", help="overwrite existing tenant files")
    parser.add_argument("--stdout", action="store_true", help="print the files instead of writing them")


def _classes(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, name = value.partition("=")
        if not sep or not key or not name:
            raise ValueError(f"--gpu-class {value}: write --gpu-class nvidia.com/gpu=h100 (a resource or flavor, '=', a class)")
        out[key] = name
    return out


def _kubernetes_client():
    try:  # an optional dependency: the `import` extra
        from kubernetes import client, config
    except ImportError:
        raise SystemExit(f"{PROG}: reading a live cluster needs the kubernetes Python client: pip install 'gpu-tenancy[import]' "
                         "(or import from files with --from)") from None
    return client, config


def read_cluster(kubeconfig: Path | None, context: str | None, selector: str | None, names: list[str]) -> tuple[list[dict], list[dict]]:
    """The selected namespaces and the objects of each that the importer maps, as plain dicts.

    >>> _ = (scratch / "kubeconfig").write_text("apiVersion: v1\\nkind: Config\\nclusters: []\\ncontexts: []\\nusers: []\\n")
    >>> read_cluster(scratch / "kubeconfig", "prod-admin", "team", [])  # a kubeconfig without the context: no cluster is asked
    Traceback (most recent call last):
    ...
    kubernetes.config.config_exception.ConfigException: Invalid kube-config file. Expected object with name prod-admin in .../kubeconfig/contexts list
    """
    client, config = _kubernetes_client()
    api = config.new_client_from_config(config_file=str(kubeconfig) if kubeconfig else None, context=context)
    plain = api.sanitize_for_serialization
    core = client.CoreV1Api(api)
    if names:
        namespaces = [plain(core.read_namespace(name)) for name in names]
    else:
        namespaces = [plain(ns) for ns in core.list_namespace(label_selector=selector or "").items]
    objects = []
    for namespace in namespaces:
        name = namespace["metadata"]["name"]
        for kind, api_class, method in _LIVE_KINDS:
            for item in getattr(getattr(client, api_class)(api), method)(name).items:
                obj = plain(item)
                obj["kind"] = kind
                objects.append(obj)
    for namespace in namespaces:
        namespace["kind"] = "Namespace"
    return namespaces, objects


def read_live(kubeconfig: Path | None, context: str | None, objects: list[dict]) -> dict[tuple, dict | None]:
    """The live object of each of `objects` (by `object_key`), None where there is none or its kind is not served.

    >>> _ = (scratch / "kubeconfig").write_text("apiVersion: v1\\nkind: Config\\nclusters: []\\ncontexts: []\\nusers: []\\n")
    >>> read_live(scratch / "kubeconfig", "prod-admin", [])  # a kubeconfig without the context: no cluster is asked
    Traceback (most recent call last):
    ...
    kubernetes.config.config_exception.ConfigException: Invalid kube-config file. Expected object with name prod-admin in .../kubeconfig/contexts list
    """
    from ..authoring.importing import object_key

    _, config = _kubernetes_client()
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

    dynamic = DynamicClient(config.new_client_from_config(config_file=str(kubeconfig) if kubeconfig else None, context=context))
    live: dict[tuple, dict | None] = {}
    for obj in objects:
        key = object_key(obj)
        try:
            resource = dynamic.resources.get(api_version=key[0], kind=key[1])
            live[key] = dynamic.get(resource, name=key[3], namespace=key[2] or None).to_dict()
        except (NotFoundError, ResourceNotFoundError):
            live[key] = None
    return live


def _from_cluster(read, kubeconfig, context, *rest):
    """`read(kubeconfig, context, ...)`, with the API server's refusal or absence said in one line."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException
    from urllib3.exceptions import HTTPError

    try:
        return read(kubeconfig, context, *rest)
    except ApiException as err:
        raise SystemExit(f"{PROG}: the API server answered {err.status} {err.reason} (context {context}): {(err.body or '')[:300]}") from None
    except (ConfigException, HTTPError, OSError) as err:
        raise SystemExit(f"{PROG}: cannot reach the cluster of context {context} "
                         f"(kubeconfig {kubeconfig or 'default'}): {err}") from None


def read_files(paths: list[Path]) -> list:
    """Every document of the `--from` files, with its positions; `InvalidInput` with every located problem.

    >>> _ = (scratch / "bad.yaml").write_text("kind: Tenant\\nspec: [\\n")
    >>> read_files([scratch / "bad.yaml"])
    Traceback (most recent call last):
    ...
    components.spec.problems.InvalidInput: .../bad.yaml:3:1: invalid YAML: while parsing a flow node did not find expected node content (close every ...)
    """
    from ..spec.problems import InvalidInput, Problem
    from ..spec.yaml_source import parse_yaml_documents

    docs, problems = [], []
    for path in paths:
        try:
            docs.extend(parse_yaml_documents(path.read_text(encoding="utf-8"), str(path)))
        except InvalidInput as err:
            problems.extend(err.problems)
        except (OSError, UnicodeDecodeError) as err:
            problems.append(Problem(str(path), 0, 0, "", f"cannot read the file: {err}"))
    if problems:
        raise InvalidInput(problems)
    return docs


def _refused(problems: list, lines: list[str] = ()) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    report(problems)
    print(f"{PROG}: the input cannot be imported without guessing (nothing written); the problems above name the "
          "source, the field and what to do", file=sys.stderr)
    return EXIT_INVALID


def run(args: argparse.Namespace) -> int:
    """Write (or with `--stdout` print) the tenant files of what already runs; exit 0, 1 when nothing imports or the files are invalid, 2 for usage.

    >>> profile = root / "tests" / "authoring" / "upstream" / "kubeflow-v1beta1-profile.yaml"
    >>> run(cli_args("import", "--stack", "dev", "--from", str(profile), "--stdout"))
    # yaml-language-server: $schema=../docs/schema/tenant.schema.json
    ...
    name: test-user-profile
    ...
      gpu:
        l4: 1
    ...
    0
    """
    from ..load import load_platform

    try:
        live, gpu_class_of = _checked_options(args)
        platform, _ = load_platform(args.root, args.stack)
        imported = _imported(args, platform, live, gpu_class_of)
        lines = [f"not imported: {item}" for item in sorted(set(imported.unmapped))]
        if imported.refused:  # nothing is written while any part cannot be imported without guessing
            return _refused(imported.refused, lines)
        texts = _texts(args, imported, lines)
        environment = _checked_environment(args, texts)
    except Stop as stop:
        return stop.code
    if live:  # what the first deployment does to what already runs: updates first
        lines = _adoption_lines(args, platform, environment, texts) + lines
    if args.report:
        args.report.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    for line in lines:
        print(line, file=sys.stderr)
    if args.stdout:
        sys.stdout.write("---\n".join(texts.values()))
        return EXIT_OK
    (args.root / "tenants").mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (args.root / "tenants" / f"{name}.yaml").write_text(text, encoding="utf-8")
        print(f"wrote tenants/{name}.yaml")
    print("next: review the files and the report above, then the first deployment adopts the namespaces "
          "(docs/importing.md: with PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true on providers from 4.29)")
    return EXIT_OK


def _checked_options(args: argparse.Namespace) -> tuple[bool, dict[str, str]]:
    """(whether to read a live cluster, the GPU class of each resource given by --gpu-class)."""
    live = bool(args.context or args.kubeconfig or args.selector or args.namespace)
    if live == bool(args.files):
        raise fail(f"{PROG}: give either a cluster (--context/--kubeconfig with --selector or --namespace) or --from FILE", EXIT_USAGE)
    try:
        return live, _classes(args.gpu_class)
    except ValueError as err:
        raise fail(f"{PROG}: {err}", EXIT_USAGE) from None


def _imported(args: argparse.Namespace, platform, live: bool, gpu_class_of: dict[str, str]):
    from ..authoring.import_cluster import tenants_from_cluster
    from ..authoring.import_files import tenants_from_documents
    from ..spec.problems import InvalidInput

    try:
        if live:
            namespaces, objects = _from_cluster(read_cluster, args.kubeconfig, args.context or platform.kube_context, args.selector, args.namespace)
            return tenants_from_cluster(namespaces, objects, platform, gpu_class_of=gpu_class_of)
        return tenants_from_documents(read_files(args.files), platform, gpu_class_of=gpu_class_of)
    except InvalidInput as err:
        raise Stop(_refused(err.problems)) from None


def _texts(args: argparse.Namespace, imported, lines: list[str]) -> dict[str, str]:
    """The text of each tenant file to write; none over an existing file without --force (or --stdout)."""
    from ..authoring.importing import tenant_file_text

    try:
        texts = {name: tenant_file_text(data, sources=imported.sources.get(name, []), unmapped=imported.unmapped_of(name))
                 for name, data in sorted(imported.tenants.items())}
    except ValueError as err:
        raise fail(f"{PROG}: {err}") from None
    if not texts:
        raise fail("\n".join(lines + [f"{PROG}: nothing to import"]))
    existing = [n for n in texts if (args.root / "tenants" / f"{n}.yaml").exists()]
    if existing and not (args.force or args.stdout):
        raise fail(f"{PROG}: tenants/{', '.join(existing)}.yaml exist; use --force to overwrite (nothing written)")
    return texts


def _checked_environment(args: argparse.Namespace, texts: dict[str, str]):
    """The stack's environment with the imported files, validated."""
    from ..authoring.importing import environment_with_imports
    from ..spec.problems import InvalidInput, errors_only, printable

    try:
        return environment_with_imports(args.root, args.stack, texts)
    except InvalidInput as err:
        report([replace(p, field=printable(p.field), message=printable(p.message)) for p in errors_only(err.problems)])
        raise fail(f"{PROG}: the imported files are not valid against stack {args.stack} (nothing written); "
                   "the problems above name the fields: import with --gpu-class, or fix the stack") from None


def _adoption_lines(args: argparse.Namespace, platform, environment, texts: dict[str, str]) -> list[str]:
    from ..authoring.importing import adoption_plan
    from ..manifests.build import environment_objects

    rendered = environment_objects(environment)
    generated = [obj for name in texts for obj in rendered.get(name, [])]
    context = args.context or platform.kube_context
    plan = adoption_plan(generated, _from_cluster(read_live, args.kubeconfig, context, generated))
    return [f"first deployment: {line}" for line in plan]
