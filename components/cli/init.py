"""`tenants init`: start a project from nothing: a minimal, valid stack for a described cluster.

The cluster is described by flags (`--gpu-class h100=H100-80GB`, `--pool h100-a=h100:8:gpu-01,gpu-02`)
or by a short inventory file (`--inventory cluster.yaml`, the fields of a stack's platform object).
Everything is checked before anything is written (exit 1, nothing written); the stack has no
tenants and validates without warnings.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..spec.hints import closest
from ..spec.problems import InvalidInput, Problem, errors_only
from .common import EXIT_INVALID, EXIT_OK, Stop, fail

PROG = "tenants init"
_PREFIX = "config.gpu-tenancy:platform."


def add_parser(sub) -> None:
    """The `tenants init` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> sub.choices["init"].parse_args(['--label-domain', 'gpu.example.com', '--gpu-class', 'l4=L4-24GB'])
    Namespace(stack='prod', label_domain='gpu.example.com', gpu_class=['l4=L4-24GB'], pool=[], inventory=None, list_models=False, force=False)
    """
    init = sub.add_parser(
        "init",
        help="write a minimal stack for a described cluster (no tenants)",
        description="Write stacks/Pulumi.ENV.yaml for a cluster described by flags or an inventory file, "
        "and an empty tenants/ directory. Checked before anything is written.",
        epilog="GPU models with known product labels and memory: see `tenants init --list-models`.",
    )
    init.add_argument("--stack", default="prod", metavar="ENV", help="environment (stack) name (default: prod)")
    init.add_argument("--label-domain", metavar="DOMAIN", help="prefix of the node labels and taints, e.g. gpu.example.com")
    init.add_argument("--gpu-class", action="append", default=[], metavar="NAME=MODEL",
                      help="a GPU class of whole, exclusive GPUs, e.g. h100=H100-80GB (repeatable)")
    init.add_argument("--pool", action="append", default=[], metavar="NAME=CLASS:GPUS_PER_NODE:NODE[,NODE...]",
                      help="a node pool of static nodes, e.g. h100-a=h100:8:gpu-01,gpu-02 (repeatable)")
    init.add_argument("--inventory", type=Path, metavar="FILE",
                      help="YAML with labelDomain, gpuClasses and nodePools as in a stack (product and memory optional for known models)")
    init.add_argument("--list-models", action="store_true", help="print the known GPU models and exit")
    init.add_argument("--force", action="store_true", help="overwrite an existing stack file")


class _OptionError(Exception):
    pass


def _parse_class(value: str) -> tuple[str, dict]:
    from ..authoring.new_stack import GPU_MODELS

    name, sep, model = value.partition("=")
    if not sep or not name or not model:
        raise _OptionError(f"--gpu-class {value}: write NAME=MODEL, e.g. --gpu-class h100=H100-80GB")
    if model not in GPU_MODELS:
        close = closest(model, GPU_MODELS, cutoff=0.5)
        hint = f"did you mean '{close}'? " if close else ""
        raise _OptionError(f"--gpu-class {value}: unknown GPU model '{model}'; {hint}known: {', '.join(sorted(GPU_MODELS))}; "
                           "describe other models (product label, memory) or shared GPUs in an --inventory file")
    return name, {"model": model}


def _parse_pool(value: str) -> tuple[str, dict]:
    match = re.fullmatch(r"(?P<name>[^=]+)=(?P<cls>[^:]+):(?P<gpus>[^:]+):(?P<nodes>.+)", value)
    if not match:
        raise _OptionError(f"--pool {value}: write NAME=CLASS:GPUS_PER_NODE:NODE[,NODE...], e.g. --pool h100-a=h100:8:gpu-01,gpu-02")
    if not match["gpus"].isdigit():
        raise _OptionError(f"--pool {value}: GPUs per node must be a whole number (got '{match['gpus']}')")
    nodes = [n.strip() for n in match["nodes"].split(",") if n.strip()]
    return match["name"], {"gpuClass": match["cls"], "gpusPerNode": int(match["gpus"]), "nodes": nodes}


def _from_flags(args) -> dict:
    platform: dict = {}
    if args.label_domain:
        platform["labelDomain"] = args.label_domain
    for option, parse, key in (("--gpu-class", _parse_class, "gpuClasses"), ("--pool", _parse_pool, "nodePools")):
        for value in getattr(args, option.lstrip("-").replace("-", "_")):
            name, spec = parse(value)
            if name in platform.get(key, {}):
                raise _OptionError(f"{option} {value}: '{name}' is given twice")
            platform.setdefault(key, {})[name] = spec
    return platform


def _flag_of(field: str, args) -> str:
    """The flag that set a field of the generated stack."""
    for key, option, values in (("gpuClasses.", "--gpu-class", args.gpu_class), ("nodePools.", "--pool", args.pool)):
        if field.startswith(key):
            name = field[len(key):].split(".", 1)[0].split("[", 1)[0]
            given = [v for v in values if v.split("=", 1)[0] == name]
            return f"{option} {given[0]}" if given else option
    if field.startswith("labelDomain"):
        return f"--label-domain {args.label_domain or ''}".strip()
    return "tenants init"


def _say(problem: Problem, args, inventory: str | None) -> str:
    field = problem.field.removeprefix(_PREFIX)
    if field == "labelDomain" and not (args.label_domain or inventory):
        return f"{PROG}: --label-domain is required (e.g. --label-domain gpu.example.com), or labelDomain in the --inventory file"
    severity = "warning: " if problem.severity == "warning" else ""
    if inventory and problem.file == inventory and problem.line:
        return f"{problem.file}:{problem.line}:{problem.column or 1}: {severity}{field}: {problem.message}"
    return f"{PROG}: {_flag_of(field, args)}: {severity}{field}: {problem.message}"


def run(args: argparse.Namespace) -> int:
    """Write `stacks/Pulumi.<stack>.yaml` from the flags (or print the known GPU models); exit 0, or 1 with the problem.

    >>> run(cli_args("--root", str(scratch), "init", "--stack", "lab", "--label-domain", "gpu.example.com",
    ...     "--gpu-class", "l4=L4", "--pool", "l4-shared=l4:4:gpu-01"))
    wrote .../stacks/Pulumi.lab.yaml: 1 GPU class(es), 1 node pool(s), no tenants
    ...
    0
    >>> sorted(p.name for p in (scratch / "stacks").iterdir()), (scratch / ".gitignore").exists()
    (['Pulumi.lab.yaml'], True)
    """
    from ..authoring import new_stack as inv
    from ..load import stack_file

    if args.list_models:
        for model, (product, memory) in sorted(inv.GPU_MODELS.items()):
            print(f"{model:15} {product:25} {memory}")
        return EXIT_OK
    try:
        platform, positions, display = _inventory(args)
        platform = inv.in_current_format(inv.fill_from_catalogue(platform))
        platform.setdefault("tenants", "all")
        path = stack_file(args.root, args.stack)
        _check(args, inv.stack_document(platform, display or f"stacks/{path.name}", positions), display)
        if path.exists() and not args.force:
            raise fail(f"{PROG}: {path} exists; use --force to overwrite, or --stack for another environment")
    except Stop as stop:
        return stop.code
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (inv.stack_text(args.stack, platform) if display is None
            else inv.stack_text_from_inventory(args.stack, platform, args.inventory.read_text(encoding="utf-8")))
    path.write_text(text, encoding="utf-8")
    (args.root / "tenants").mkdir(exist_ok=True)
    classes = platform.get("gpuClasses") or {}
    pools = platform.get("nodePools") or {}
    print(f"wrote {path}: {len(classes)} GPU class(es), {len(pools)} node pool(s), no tenants")
    ignored = ignore_render_output(args.root)
    if ignored:
        print(ignored)
    root = "" if args.root == Path(".") else f"--root {args.root} "
    example = next(iter(classes), None)
    gpu = f" --gpu {example}=1" if example else ""
    print("next steps:")
    print(f"  1. add a team: tenants {root}new TEAM --owner-group GROUP{gpu}")
    print(f"  2. check and render: tenants {root}validate; tenants {root}render --stack {args.stack} --out out/{args.stack}")
    return EXIT_OK


# `tenants render --out out/<stack>`'s directory: committed, `tenants stacks` would list its files as stacks.
RENDER_OUTPUT = "out/"


def ignore_render_output(root: Path) -> str | None:
    """Make the project's `.gitignore` ignore the render output; what was done, or None if it did already.

    >>> ignore_render_output(scratch), (scratch / ".gitignore").read_text().splitlines()[-1]
    ('wrote .../.gitignore: out/ (what tenants render writes) is not committed', 'out/')
    >>> ignore_render_output(scratch) is None
    True
    """
    path = root / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if {RENDER_OUTPUT, "/" + RENDER_OUTPUT} & {line.strip() for line in text.splitlines()}:
        return None
    lead = "" if not text or text.endswith("\n") else "\n"
    path.write_text(f"{text}{lead}# tenants render writes here\n{RENDER_OUTPUT}\n", encoding="utf-8")
    return f"{'added to' if text else 'wrote'} {path}: {RENDER_OUTPUT} (what tenants render writes) is not committed"


def _inventory(args: argparse.Namespace) -> tuple[dict, dict, str | None]:
    """(the stack's platform from the flags and the --inventory file, the file's positions, its name or None)."""
    from ..spec.base import DNS_LABEL_PATTERN
    from ..spec.yaml_source import parse_yaml, read_text

    if not re.fullmatch(DNS_LABEL_PATTERN, args.stack):
        raise fail(f"{PROG}: --stack {args.stack}: a stack name is a DNS label (lower-case letters, digits, '-')")
    try:
        platform = _from_flags(args)
    except _OptionError as err:
        raise fail(f"{PROG}: {err}") from None
    if args.inventory is None:
        return platform, {}, None
    display = str(args.inventory)
    try:
        doc = parse_yaml(read_text(args.inventory, display), display)
    except InvalidInput as err:
        for problem in err.problems:
            print(problem, file=sys.stderr)
        raise Stop(EXIT_INVALID) from None
    if not isinstance(doc.data, dict):
        raise fail(f"{display}: the inventory is a mapping: labelDomain, gpuClasses, nodePools")
    clash = sorted(set(doc.data) & set(platform))
    if clash:
        raise fail(f"{PROG}: {', '.join(clash)} given both by flags and in {display}; use one")
    return {**doc.data, **platform}, doc.positions, display


def _check(args: argparse.Namespace, stack_doc, display: str | None) -> None:
    """Print the stack's problems; stop when any is an error."""
    from ..authoring import new_stack as inv

    problems = inv.check_stack(args.stack, stack_doc)
    if problems:
        for problem in sorted(set(problems), key=lambda p: (p.file, p.line, p.column, p.field)):
            print(_say(problem, args, display), file=sys.stderr)
        if errors_only(problems):
            raise fail(f"{PROG}: nothing written")
