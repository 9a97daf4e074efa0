"""`tenants new`: write a commented, valid tenant file for a new team.

Every option is checked before anything is written (exit 1, nothing written): the file format,
and every stack of the project, as `tenants validate` will check the file. Problems name the
option that caused them. On success the next steps are printed, including the stacks that list
their tenants (the new one is deployed there only once added to the list).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ..spec.hints import closest
from ..spec.problems import InvalidInput, Problem
from .common import EXIT_OK, Stop, fail

PROG = "tenants new"

# Where a problem in the generated file comes from: field prefix -> option.
_OPTION_OF_FIELD = (
    ("name", "NAME"),
    ("displayName", "--display-name"),
    ("costCenter", "--cost-center"),
    ("contacts", "--email"),
    ("access.owners", "--owner-group"),
    ("access.developers", "--developer-group"),
    ("access.viewers", "--viewer-group"),
    ("gpu.classes", "--gpu-class"),
    ("quota.gpu", "--gpu"),
    ("quota.mig", "--mig"),
    ("quota.cpu", "--cpu"),
    ("quota.memory", "--memory"),
    ("gpu.dedicatedPools", "--dedicated-pool"),
    ("queue.admission", "--admission"),
    ("expires", "--expires"),
)
_LIMITS = re.compile(r"^limits\.(defaultRequest|default|max|min)\.(cpu|memory)")


def add_parser(sub) -> None:
    """The `tenants new` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> sub.choices["new"].parse_args(['team-a', '--owner-group', 'team-a-owners'])
    Namespace(name='team-a', owner_group=['team-a-owners'], developer_group=[], viewer_group=[], display_name=None, cost_center='unassigned', email=None, gpu_class=[], gpu=[], mig=[], cpu=None, memory=None, dedicated_pool=[], admission=None, expires=None, force=False, stdout=False)
    """
    new = sub.add_parser(
        "new",
        help="write a commented tenant file for a new team",
        description="Write tenants/NAME.yaml for a new team. Every option is checked first, against the "
        "file format and every stack (exit 1, nothing written); then the next steps are printed.",
    )
    new.add_argument("name", help="tenant name (DNS-1123 label); also its namespace")
    new.add_argument("--owner-group", action="append", required=True, metavar="GROUP", help="identity-provider group of the owners (repeatable)")
    new.add_argument("--developer-group", action="append", default=[], metavar="GROUP")
    new.add_argument("--viewer-group", action="append", default=[], metavar="GROUP")
    new.add_argument("--display-name", help="human-readable name (default: from NAME)")
    new.add_argument("--cost-center", default="unassigned", help="cost centre label value")
    new.add_argument("--email", help="contact email")
    new.add_argument("--gpu-class", action="append", default=[], metavar="CLASS", help="allowed GPU class of the stacks (repeatable)")
    new.add_argument("--gpu", action="append", default=[], metavar="CLASS=N",
                     help="GPU quota: whole GPUs of a class (repeatable; the class becomes allowed), or N alone with exactly one --gpu-class")
    new.add_argument("--mig", action="append", default=[], metavar="PROFILE=N", help="MIG slices quota, e.g. 1g.10gb=2 (repeatable)")
    new.add_argument("--cpu", metavar="REQUESTS[:LIMITS]", help="CPU quota, e.g. 8 or 8:16 (limits default to the requests)")
    new.add_argument("--memory", metavar="REQUESTS[:LIMITS]", help="memory quota, e.g. 32Gi or 32Gi:64Gi (limits default to the requests)")
    new.add_argument("--dedicated-pool", action="append", default=[], metavar="POOL",
                     help="a node pool of the stacks reserved for this team alone (repeatable)")
    new.add_argument("--admission", metavar="MODE", help="queue.admission: queued (the default: workloads wait in the queue) "
                     "or direct (online serving: pods skip the queue, GPUs are the quota)")
    new.add_argument("--expires", metavar="YYYY-MM-DD", help="the team's last active day (UTC); after it the tenant is suspended")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    new.add_argument("--stdout", action="store_true", help="print instead of writing tenants/NAME.yaml")


class _OptionError(Exception):
    pass


def _counts(option: str, values: list[str], example: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    errors = []
    for value in values:
        key, sep, number = value.partition("=")
        if not sep or not key or not re.fullmatch(r"[0-9]+", number.strip()):
            errors.append(f"{option} {value}: write {option} {example} (a name and a whole number)")
        elif key in counts:
            errors.append(f"{option} {value}: '{key}' is given twice")
        else:
            counts[key] = int(number)
    if errors:
        raise _OptionError("\n".join(f"{PROG}: {e}" for e in errors))
    return counts


def _parsed(errors: list[str], parse, *arguments):
    try:
        return parse(*arguments)
    except _OptionError as err:
        errors.append(str(err))
        return None


def _gpu(values: list[str]) -> int | dict[str, int] | None:
    if not values:
        return None
    if len(values) == 1 and re.fullmatch(r"[0-9]+", values[0].strip()):
        return int(values[0])
    return _counts("--gpu", values, "h100=4")


def _pair(option: str, value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    from ..spec.quantity import Quantity, QuantityError

    requests, _, limits = value.partition(":")
    limits = limits or requests
    for part in (requests, limits):
        try:
            Quantity.parse(part)
        except (QuantityError, ValueError) as err:
            raise _OptionError(f"{PROG}: {option} {value}: {err}") from None
    return requests, limits


def _option_of(problem: Problem) -> str | None:
    field = problem.field
    limits = _LIMITS.match(field)
    if limits:
        return f"--{limits.group(2)}"
    for prefix, option in _OPTION_OF_FIELD:
        if field == prefix or field.startswith((prefix + ".", prefix + "[")):
            return option
    return None


def _value_of(option: str, args: argparse.Namespace, field: str) -> str:
    value = {"NAME": args.name}.get(option) or getattr(args, option.lstrip("-").replace("-", "_"), None)
    if isinstance(value, list):
        index = re.search(r"\[([0-9]+)\]", field)  # e.g. access.owners.groups[1]: the second --owner-group
        if index and option.endswith("-group") and int(index.group(1)) < len(value):
            item = value[int(index.group(1))]
            return item if re.fullmatch(r"[^\s'\"]+", item) else json.dumps(item)
        return " ".join(value)
    return value or ""


def _say(problem: Problem, args: argparse.Namespace, stack: str | None = None) -> str:
    """A problem of the generated (unwritten) file in terms of the option that caused it."""
    option = _option_of(problem)
    if option == "--gpu-class" and not args.gpu_class:
        option = "--gpu"  # the class came from a --gpu quota
    where = f" (stack {stack})" if stack and not problem.stack else ""   # a problem of an override names its stack
    if problem.file != f"tenants/{args.name}.yaml":  # on a stack or another tenant: say where, as validate will
        return f"{PROG}: with {args.name} added, {problem}{where}"
    if option is None:
        return f"{PROG}: {problem.field or 'file'}: {problem.message}{where}"
    value = _value_of(option, args, problem.field)
    shown = f"{option} {value}".strip() if option != "NAME" else f"NAME '{value}'"
    return f"{PROG}: {shown}: {problem.field}: {problem.message}{where}"


def _class_problems(args, classes: list[str], fit) -> list[str]:
    """Each requested GPU class must exist in every stack that deploys every tenant, and in one stack at least."""
    out = []
    deploy_all = [s for s in fit.stacks if s.deploys_all]
    for name in classes:
        having = [s.stack for s in fit.stacks if name in s.gpu_classes]
        option = "--gpu-class" if name in args.gpu_class else "--gpu"
        if not having:
            known = fit.all_classes
            close = closest(name, known)
            hint = f"; did you mean '{close}'?" if close else ""
            listing = ", ".join(known) or "none"
            stacks = ", ".join(s.stack for s in fit.stacks) or "none"
            out.append(f"{PROG}: {option} {name}: unknown GPU class '{name}'{hint} (GPU classes of the stacks {stacks}: {listing})")
            continue
        missing = [s for s in deploy_all if name not in s.gpu_classes]
        if missing:
            where = ", ".join(f"{s.stack} ({s.file}: {', '.join(s.gpu_classes) or 'no classes'})" for s in missing)
            out.append(f"{PROG}: {option} {name}: GPU class '{name}' is not in stack(s) {where}, which deploy every tenant "
                       f"(tenants: all); it is only in {', '.join(having)}. Allow a class of every such stack, "
                       f"and '{name}' per environment in `environments:` after writing the file")
    return out


def run(args: argparse.Namespace) -> int:
    """Write (or with `--stdout` print) a commented tenant file that every stack accepts; exit 0, or 1 with the problems.

    >>> run(cli_args("new", "team-a", "--owner-group", "team-a-owners", "--stdout"))
    # yaml-language-server: $schema=../docs/schema/tenant.schema.json
    ...
    apiVersion: gpu-tenancy.dev/v1alpha2
    kind: Tenant
    name: team-a    ...
    0
    """
    from ..authoring.new_tenant import check_against_project

    try:
        text, gpu = _tenant_text(args)
        path = args.root / "tenants" / f"{args.name}.yaml"
        if not args.stdout and path.exists() and not args.force:
            raise fail(f"{PROG}: {path} exists; use --force to overwrite")
        fit = check_against_project(args.root, args.name, text)
        _check_fit(args, gpu, fit)
    except Stop as stop:
        return stop.code
    if args.stdout:
        sys.stdout.write(text)
        return EXIT_OK
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    for stack in fit.stacks:  # where a reviewer will look for it, and what `tenants diff` will preview
        print(f"{stack.stack}: {args.name} {stack.landing()}{'' if stack.deploys_all else ' once listed there'}")
    _next_steps(args, path, fit)
    return EXIT_OK


def _tenant_text(args: argparse.Namespace) -> tuple[str, int | dict[str, int] | None]:
    """(the tenant file's text, the --gpu quota); stops with every option and format problem at once."""
    from ..authoring.new_tenant import new_tenant_file

    # Every option is read, so that all that is wrong is said at once; a bad one counts as not given
    # while the file format checks the others.
    option_errors: list[str] = []
    gpu = _parsed(option_errors, _gpu, args.gpu)
    mig = _parsed(option_errors, _counts, "--mig", args.mig, "1g.10gb=2") if args.mig else None
    cpu = _parsed(option_errors, _pair, "--cpu", args.cpu)
    memory = _parsed(option_errors, _pair, "--memory", args.memory)
    try:
        text = new_tenant_file(
            args.name,
            owner_groups=args.owner_group,
            developer_groups=args.developer_group,
            viewer_groups=args.viewer_group,
            display_name=args.display_name,
            cost_center=args.cost_center,
            email=args.email,
            gpu_classes=args.gpu_class,
            gpu=gpu,
            mig=mig,
            cpu=cpu,
            memory=memory,
            dedicated_pools=args.dedicated_pool,
            admission=args.admission,
            expires=args.expires,
        )
    except InvalidInput as err:
        for message in [*option_errors, *(_say(problem, args) for problem in err.problems), *_class_messages(args, gpu)]:
            print(message, file=sys.stderr)
        raise fail(f"{PROG}: nothing written") from None
    if option_errors:
        raise fail("\n".join([*option_errors, *_class_messages(args, gpu), f"{PROG}: nothing written"]))
    return text, gpu


def _class_messages(args: argparse.Namespace, gpu: int | dict[str, int] | None) -> list[str]:
    """The GPU classes' problems while other options are wrong too, so that all is said at once
    (the stacks are asked with a stand-in file, as the real one cannot be built)."""
    from ..authoring.new_tenant import check_against_project, new_tenant_file

    classes = list(dict.fromkeys([*args.gpu_class, *(gpu if isinstance(gpu, dict) else {})]))
    if not classes:
        return []
    try:
        fit = check_against_project(args.root, args.name, new_tenant_file("tenant", owner_groups=["stand-in"]))
    except (InvalidInput, Stop):
        return []
    return _class_problems(args, classes, fit)


def _check_fit(args: argparse.Namespace, gpu: int | dict[str, int] | None, fit) -> None:
    """Stop, with what to fix, unless the file fits every stack (its GPU classes, and the stacks that deploy every tenant)."""
    messages = [f"{PROG}: cannot check against a stack that is invalid itself (fix it first): {p}" for p in fit.broken_stacks]
    classes = list(dict.fromkeys([*args.gpu_class, *(gpu if isinstance(gpu, dict) else {})]))
    if classes and not fit.stacks and not fit.broken_stacks:
        messages.append(f"{PROG}: --gpu-class {' '.join(classes)}: there are no stacks to check GPU classes against "
                        f"(no {args.root / 'stacks'}/Pulumi.<env>.yaml); run `tenants init` first")
    class_messages = _class_problems(args, classes, fit)
    messages.extend(class_messages)
    if not class_messages:  # the stacks' own messages would only repeat an unknown class
        for stack in fit.stacks:
            if stack.deploys_all:
                messages.extend(_say(p, args, stack.stack) for p in stack.problems)
    if messages:
        for message in dict.fromkeys(messages):
            print(message, file=sys.stderr)
        raise fail(f"{PROG}: nothing written")


def _next_steps(args, path: Path, fit) -> None:
    name = args.name
    root = "" if args.root == Path(".") else f"--root {args.root} "
    steps = [f"review {path}: quota, network and GPU access (reference: docs/file-format.md)"]
    listing = [s for s in fit.stacks if not s.deploys_all]
    deployed = [s for s in fit.stacks if s.deploys_all]
    if listing:
        lines = [f"add {name} to the tenants of the stacks that list them; it is deployed there only once listed:"]
        for stack in listing:
            lines.append(f"     {stack.file}:{stack.list_line}: {stack.list_text}")
            for problem in stack.problems:
                lines.append(f"       before adding it there, fix: {_say(problem, args, stack.stack).removeprefix(PROG + ': ')}")
        steps.append("\n".join(lines))
    if deployed:
        steps.append(f"it is deployed in {', '.join(s.stack for s in deployed)} (tenants: all) as soon as the change is merged")
    steps.append(f"check it: tenants {root}validate; preview: tenants {root}diff")
    steps.append("open a pull request; its comment shows what changes on the cluster")
    print("next steps:")
    for number, step in enumerate(steps, start=1):
        print(f"  {number}. {step}")
