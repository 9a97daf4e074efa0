"""`tenants diff`: what a change to tenants/ and stacks/ does, compared with a git ref (offline).

The base side is read from git objects into a temporary directory (`git ls-tree` + `git cat-file`):
tenants/, stacks/ and the local vCluster charts its stacks name; the user's checkout, index and stash are never touched. The head side is the working tree as it
is, uncommitted edits included. Invalid head input fails like `tenants validate` (exit 1); an
invalid base is diffed as far as it loads, with a note, because the PR may be the fix.

`tenants simulate` (`Simulate`, at the end) reads its base the same way and replays a trace on both
sides (docs/simulate.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path, PurePosixPath

import yaml

from ..review.diff import Side, compare_stack, report, to_json
from ..simulate.report import FORMATS as SIMULATION_FORMATS, compare as compare_replays
from ..simulate.period import period_trace, queries as period_queries
from ..simulate.synthetic import synthetic_trace
from ..simulate.trace import Trace, read_trace, trace_yaml
from ..review.diff_format import format_markdown, format_text
from ..review.queue_changes import simulations
from ..fleet.environment import Environment, LoadedTenant
from ..load import (
    for_environment,
    load_environment,
    load_platform,
    read_tenant_documents,
    reading_each_file_once,
    stack_names,
    utc_today,
    validate_tenant,
)
from ..spec.problems import InvalidInput, errors_only, sorted_problems
from ..fleet.shard_stacks import stack_parts
from ..spec.sharding import split_stack_name
from ..spec.stack import CONFIG_KEY
from ..validate.capacity import dedication_edit_problems, stack_edit_problems
from . import common
from .reports import PrometheusError, instant_query, moment

DEFAULT_UPSTREAM = "origin/main"
PROJECT_DIRS = ("tenants", "stacks")

EPILOG = """\
Base: --base REF (a branch, tag or commit); default: the merge base of HEAD and origin/main, or
HEAD when there is no origin/main (then only uncommitted changes show; a note says so on stderr).

Output: text (terminal), markdown (a PR comment: warnings, summary table, <details> per tenant),
json (formatVersion 1, documented in docs/diff.md), stacks (the Pulumi stacks a PR must preview, as
a JSON list of {environment, stack}: those the change touches, or every stack when files other than
tenants/, stacks/ and documentation changed, since code can change what Pulumi does without
changing a rendered object), simulate (the stacks whose quotas, pools, cohorts or queue settings
change, as a JSON list of {environment, changes}: what the PR's queue simulation replays; [] skips it).

Exit codes:
  0  the diff was printed (whether or not anything changed)
  1  the working tree has invalid tenant or stack files (located errors on stderr, no diff)
  2  usage or git error (unknown ref, not a git repository, no such stack)
"""


class UsageError(Exception):
    """Exit 2: a git command failed, a ref or stack does not exist; the message is for the user."""


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise UsageError("git is not installed (tenants diff reads the base from git)") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"git {' '.join(args[:2])} failed: {message[-1] if message else 'exit ' + str(done.returncode)}")
    return done.stdout


def _verify(root: Path, ref: str) -> str | None:
    try:
        return _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").decode().strip()
    except UsageError:
        return None


def resolve_base(root: Path, ref: str | None) -> dict[str, str]:
    """The base commit as `{ref, commit, how}`; the default is the merge base with origin/main.

    >>> resolve_base(git_project, "HEAD")["ref"]
    'HEAD'
    """
    try:
        _git(root, "rev-parse", "--git-dir")
    except UsageError:
        raise UsageError(f"{root} is not inside a git repository; tenants diff compares with a git ref") from None
    if ref is not None:
        if ref.startswith("-") or not ref.strip():
            raise UsageError(f"'{ref}' is not a git ref")
        commit = _verify(root, ref)
        if commit is None:
            raise UsageError(f"unknown git ref '{ref}' (fetch it first, e.g. git fetch origin main)")
        return {"ref": ref, "commit": commit, "how": "given with --base"}
    upstream = _verify(root, DEFAULT_UPSTREAM)
    if upstream is not None:
        commit = _git(root, "merge-base", "HEAD", upstream).decode().strip()
        return {"ref": DEFAULT_UPSTREAM, "commit": commit, "how": f"merge base of HEAD and {DEFAULT_UPSTREAM}"}
    head = _verify(root, "HEAD")
    if head is None:
        raise UsageError("the repository has no commits yet; pass --base REF")
    print(f"tenants diff: no {DEFAULT_UPSTREAM} in this repository; comparing with HEAD, so only uncommitted "
          f"changes show (pass --base REF to choose)", file=sys.stderr)
    return {"ref": "HEAD", "commit": head, "how": f"no {DEFAULT_UPSTREAM}; uncommitted changes only"}


def memory_scratch_dir(candidate: Path = Path("/dev/shm")) -> str | None:
    """Where to export the base side: a memory-backed directory when the system has one (None: the
    default temporary directory). The export lives for one command, and on a disk's metadata path
    creating 1,000 small tenant files took 1.1 s here against 15 ms on tmpfs.

    >>> memory_scratch_dir(scratch / "missing") is None
    True
    """
    return str(candidate) if candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK) else None


def export_tree(root: Path, commit: str, dest: Path) -> None:
    """Write the commit's tenants/ and stacks/ (of the project at `root`) under `dest`, checkout-free,
    and what its stacks read from elsewhere in the project (a local vCluster chart, `base_inputs`).

    >>> export_tree(git_project, "HEAD", scratch)
    >>> sorted(p.name for p in (scratch / "stacks").iterdir())
    ['Pulumi.dev.yaml', 'Pulumi.prod.yaml', 'Pulumi.staging.yaml']
    """
    _export_paths(root, commit, dest, PROJECT_DIRS)
    inputs = base_inputs(dest)
    if not inputs:
        return
    _export_paths(root, commit, dest, inputs)
    for relative in inputs:
        # Not in the commit (a chart CI fetches into an ignored directory): the working tree's copy
        # is the one the base was used with too.
        if not (dest / relative).exists() and (root / relative).exists():
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            os.symlink((root / relative).resolve(), dest / relative)


def base_inputs(project: Path) -> list[str]:
    """Project files the stacks under `project` read besides tenants/ and stacks/: each stack's
    local vCluster chart (`vcluster.chart`), as the stack writes it (relative, inside the project).

    >>> _ = (scratch / "stacks").mkdir()
    >>> _ = (scratch / "stacks" / "Pulumi.dev.yaml").write_text("config:\\n  gpu-tenancy:platform:\\n    vcluster: {chart: charts/vcluster}\\n")
    >>> base_inputs(scratch)
    ['charts/vcluster']
    """
    found = set()
    for path in sorted(project.glob("stacks/Pulumi.*.y*ml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            chart = data["config"][CONFIG_KEY]["vcluster"]["chart"]
        except (OSError, UnicodeError, yaml.YAMLError, KeyError, TypeError):
            continue   # validation says what is wrong with the stack; nothing more to export
        parts = PurePosixPath(chart).parts if isinstance(chart, str) else ()
        if parts and not PurePosixPath(chart).is_absolute() and ".." not in parts:
            found.add(PurePosixPath(*parts).as_posix())
    return sorted(found)


def _export_paths(root: Path, commit: str, dest: Path, parts) -> None:
    """Write the commit's files under `parts` (paths relative to the project at `root`) under `dest`."""
    prefix = _git(root, "rev-parse", "--show-prefix").decode().strip()
    paths = [f"{prefix}{part}" for part in parts]
    listing = _git(root, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths)
    entries = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        if kind != "blob":
            continue  # submodules hold no tenant files
        relative = PurePosixPath(raw_path.decode("utf-8", errors="surrogateescape")).relative_to(prefix or ".")
        if ".." in relative.parts:
            continue
        entries.append((mode, sha, relative))
    if not entries:
        return
    blobs = _git(root, "cat-file", "--batch", stdin="".join(f"{sha}\n" for _, sha, _ in entries).encode())
    offset = 0
    for mode, sha, relative in entries:
        header_end = blobs.index(b"\n", offset)
        size = int(blobs[offset:header_end].split()[2])
        content = blobs[header_end + 1:header_end + 1 + size]
        offset = header_end + 1 + size + 1
        target = dest.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            os.symlink(content.decode("utf-8", errors="surrogateescape"), target)
        else:
            target.write_bytes(content)


def read_base_as_current(base_root: Path) -> None:
    """Label the exported base's older files with the current format version (docs/migrating.md):
    the base is compared, never deployed, so its files are read as they were meant then.

    >>> (scratch / "tenants").mkdir()
    >>> _ = (scratch / "tenants" / "a.yaml").write_text("apiVersion: gpu-tenancy.dev/v1alpha1\\nkind: Tenant\\nname: a\\n")
    >>> read_base_as_current(scratch)
    >>> (scratch / "tenants" / "a.yaml").read_text().splitlines()[0]
    'apiVersion: gpu-tenancy.dev/v1alpha2'
    """
    from ..authoring.migrate import read_as_current

    for path in sorted(base_root.glob("tenants/*.y*ml")) + sorted(base_root.glob("stacks/Pulumi.*.y*ml")):
        if path.is_file() and not path.is_symlink():
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            relabelled = read_as_current(text, path.name, stack=path.parent.name == "stacks")
            if relabelled != text:
                path.write_text(relabelled, encoding="utf-8")


def load_lenient(root: Path, env: str, today: date | None = None) -> Side:
    """The base stack as far as it loads: invalid tenant files left out, cross-file checks skipped;
    `today` as for `load_environment`.

    >>> load_lenient(root, "prod").problems
    []
    >>> import shutil
    >>> (scratch / "stacks").mkdir(); _ = shutil.copy(root / "stacks" / "Pulumi.dev.yaml", scratch / "stacks")
    >>> (scratch / "tenants").mkdir(); _ = (scratch / "tenants" / "broken.yaml").write_text("kind: Tenant\\n")
    >>> load_lenient(scratch, "dev").problems
    ['the base is invalid (4 error(s)); diffed as far as it loads: tenants/broken.yaml:1:1: apiVersion: required field is missing; ...']
    """
    try:
        environment = load_environment(root, env, today=today)
        return Side(environment)
    except InvalidInput as err:
        problems = [str(p) for p in sorted_problems(errors_only(err.problems))]
    try:
        platform, platform_doc = load_platform(root, env)
    except InvalidInput:
        return Side(None, [f"the base stack file does not load, so every tenant shows as added ({len(problems)} error(s), first: {problems[0] if problems else '?'})"])
    docs, _ = read_tenant_documents(root)
    tenants = []
    for doc in docs:
        try:
            validate_tenant(doc, None)
            tenants.append(LoadedTenant(validate_tenant(doc, env), for_environment(doc, env)))
        except InvalidInput:
            continue
    ordered = sorted(tenants, key=lambda t: t.name)
    wanted = None if platform.tenants == "all" else set(platform.tenants)
    enabled = [t for t in ordered if wanted is None or t.name in wanted]
    disabled = [t.name for t in ordered if wanted is not None and t.name not in wanted]
    shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
    return Side(Environment(env, platform, platform_doc, enabled, disabled),
                [f"the base is invalid ({len(problems)} error(s)); diffed as far as it loads: {shown}"])


def over_promised_by_stack_edit(root: Path, base_root: Path, env: str) -> list:
    """Over-promises that the working tree's edit of the stack file causes for the base's tenants,
    located at the edited setting with "change it back" among the fixes (`stack_edit_problems`);
    none when the stack file does not load or the base's tenants fit its inventory.

    >>> over_promised_by_stack_edit(root, root, "prod")
    []
    """
    try:
        after, doc = load_platform(root, env)
    except InvalidInput:
        return []
    base = load_lenient(base_root, env).environment
    if base is None:
        return []
    return stack_edit_problems(base.platform, after, doc, [(t.name, t.spec) for t in base.tenants])


def over_promised_by_dedication(root: Path, base_root: Path, env: str) -> list:
    """Over-promises that a new `gpu.dedicatedPools` entry of the working tree causes for the
    tenants that shared the pool, located at that entry (`dedication_edit_problems`); none when
    either side's stack file does not load.

    >>> over_promised_by_dedication(root, root, "prod")
    []
    """
    base, head = load_lenient(base_root, env).environment, load_lenient(root, env).environment
    if base is None or head is None:
        return []
    return dedication_edit_problems(base, head)


def edited_files(root: Path, base_root: Path) -> list[str]:
    """Project files (as problems name them, e.g. `tenants/a.yaml`) added or changed since the base.

    >>> import shutil
    >>> _ = shutil.copytree(root / "tenants", scratch / "tenants")
    >>> _ = (scratch / "tenants" / "eval.yaml").write_text("# the base's version\\n")
    >>> edited_files(root, scratch)
    ['tenants/eval.yaml', 'stacks/Pulumi.dev.yaml', 'stacks/Pulumi.prod.yaml', 'stacks/Pulumi.staging.yaml']
    """
    edited = []
    for part in PROJECT_DIRS:
        for path in sorted((root / part).rglob("*")) if (root / part).is_dir() else []:
            relative = path.relative_to(root)
            before = base_root / relative
            if path.is_file() and (not before.is_file() or before.read_bytes() != path.read_bytes()):
                edited.append(relative.as_posix())
    return edited


def project_name(root: Path) -> str:
    """The Pulumi project's name (URNs of `pulumi state move` commands carry it); `gpu-tenancy`
    when Pulumi.yaml is missing or unreadable.

    >>> project_name(Path("/nonexistent"))
    'gpu-tenancy'
    """
    try:
        data = yaml.safe_load((root / "Pulumi.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return "gpu-tenancy"
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else "gpu-tenancy"


def diff_document(root: Path, base: dict[str, str], stacks: list[str] | None, base_root: Path) -> dict:
    """Compare the exported base under `base_root` with the working tree at `root`.

    Raises `InvalidInput` for an invalid working tree and `UsageError` (exit 2) for a stack on neither side.

    >>> base = resolve_base(git_project, "HEAD")
    >>> export_tree(git_project, base["commit"], scratch)
    >>> diff_document(git_project, base, None, scratch)["changed"]
    False
    """
    return _compare(root, base, stacks, base_root)[0]


def _compare(
    root: Path, base: dict[str, str], stacks: list[str] | None, base_root: Path
) -> tuple[dict, dict[str, Environment | None]]:
    """The diff document and the working tree's environments it loaded (None: not on the head side)."""
    with reading_each_file_once():   # the two sides share all but the changed files
        return _compare_sides(root, base, stacks, base_root)


def _compare_sides(
    root: Path, base: dict[str, str], stacks: list[str] | None, base_root: Path
) -> tuple[dict, dict[str, Environment | None]]:
    head_names, base_names = stack_names(root), stack_names(base_root)
    # One date for both sides and every stack: what the head suspends for `expires`, and the
    # expiry warnings (review/expiry.py), are judged by it.
    today = utc_today()
    names = sorted(set(head_names) | set(base_names))
    if stacks:
        unknown = [s for s in stacks if s not in names]
        if unknown:
            raise UsageError(f"no such stack {', '.join(unknown)} on either side (known: {', '.join(names) or 'none'})")
        names = [n for n in names if n in stacks]
    heads: dict[str, Environment | None] = {}
    problems = []
    for name in names:
        if name not in head_names:
            heads[name] = None
            continue
        try:
            heads[name] = load_environment(root, name, today=today)
        except InvalidInput as err:
            problems.extend(err.problems)
            if name in base_names:
                problems.extend(over_promised_by_stack_edit(root, base_root, name))
                problems.extend(over_promised_by_dedication(root, base_root, name))
    if errors_only(problems):
        raise InvalidInput(problems, first_files=edited_files(root, base_root))
    for environment in heads.values():
        if environment is not None:
            common.report(environment.warnings)
    results = []
    project = project_name(root)
    for name in names:
        base_side = load_lenient(base_root, name, today) if name in base_names else Side(None)
        results.append(compare_stack(name, base_side, Side(heads[name]), project=project))
    return report(results, base), heads


def add_parser(sub) -> None:
    """The `tenants diff` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> sub.choices["diff"].parse_args(['--base', 'main'])
    Namespace(base='main', stack=None, format='text', all_fields=False)
    """
    parser = sub.add_parser(
        "diff",
        help="what a change to tenants/ and stacks/ does, compared with a git ref (offline)",
        description="Compare tenants/ and stacks/ at a git ref with the working tree: tenants added and\n"
        "removed, quotas and capacity, access, network, nodes and MIG layouts, every generated object.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base", metavar="GIT_REF", help=f"git ref to compare with (default: merge base with {DEFAULT_UPSTREAM})")
    parser.add_argument("--stack", action="append", metavar="ENV", help="environment(s) to compare (default: every stack on either side)")
    parser.add_argument("--format", choices=["text", "markdown", "json", "stacks", "simulate"], default="text", help="output format (default: text)")
    parser.add_argument("--all-fields", action="store_true",
                        help="text: print every field change, also of placement policies and ClusterQueues (otherwise "
                        "summarised as allowed pools, flavors and quotas)")


def run(args: argparse.Namespace) -> int:
    """Print what the working tree changes against `--base`; exit 0, or 2 for a bad ref.

    >>> run(cli_args("--root", str(git_project), "diff", "--base", "HEAD", "--format", "json"))
    {
      "base": {
        "commit": "...",
        "how": "given with --base",
        "ref": "HEAD"
      },
      "changed": false,
    ...
    0
    """
    root = args.root.resolve()
    try:
        base = resolve_base(root, args.base)
        with tempfile.TemporaryDirectory(prefix="tenants-diff-", dir=memory_scratch_dir()) as scratch:
            base_root = Path(scratch)
            export_tree(root, base["commit"], base_root)
            read_base_as_current(base_root)
            document, heads = _compare(root, base, args.stack, base_root)
        if args.format == "stacks":
            code_changed = changed_outside_project_files(root, base["commit"])
            sys.stdout.write(json.dumps(preview_stacks(document, heads, code_changed)) + "\n")
            return common.EXIT_OK
    except UsageError as err:
        print(f"tenants diff: {err}", file=sys.stderr)
        return common.EXIT_USAGE
    if args.format == "text":
        sys.stdout.write(format_text(document, all_fields=args.all_fields))
        return common.EXIT_OK
    if args.format == "simulate":
        sys.stdout.write(json.dumps(simulations(document)) + "\n")
        return common.EXIT_OK
    formatter = {"markdown": format_markdown, "json": to_json}[args.format]
    sys.stdout.write(formatter(document))
    return common.EXIT_OK


DOCUMENTATION = ("docs/", ".md")


def changed_outside_project_files(root: Path, commit: str) -> list[str]:
    """Files changed since `commit` (committed, staged, unstaged or untracked) other than tenant and
    stack files and documentation: code, dependencies, the program, workflows.

    >>> _ = (git_project / "Pulumi.yaml").write_text("name: renamed\\n")
    >>> changed_outside_project_files(git_project, "HEAD")
    ['Pulumi.yaml']
    >>> _ = subprocess.run(["git", "-C", git_project, "checkout", "Pulumi.yaml"], check=True)
    """
    prefix = _git(root, "rev-parse", "--show-prefix").decode().strip()
    listed = _git(root, "diff", "--name-only", "-z", commit, "--", ":/").decode().split("\0")
    listed += _git(root, "ls-files", "--others", "--exclude-standard", "-z", "--full-name", ":/").decode().split("\0")
    project_dirs = tuple(f"{prefix}{part}/" for part in PROJECT_DIRS)
    return sorted({
        path for path in listed
        if path and not path.startswith(project_dirs)
        and not any(path.startswith(d) or path.endswith(d) for d in DOCUMENTATION)
    })


def preview_stacks(
    document: dict, heads: dict[str, Environment | None], code_changed: list[str]
) -> list[dict[str, str]]:
    """The Pulumi stacks a PR previews: every stack of the working tree's environments (`heads`)
    when code changed, else those the diff says the change touches; as `{environment, stack}` for
    a CI matrix.

    >>> preview_stacks({"touchedStacks": ["prod.a"]}, {}, [])
    [{'environment': 'prod', 'stack': 'prod.a'}]
    """
    if code_changed:
        stacks = [part.stack for env in heads.values() if env is not None for part in stack_parts(env)]
    else:
        stacks = list(document["touchedStacks"])
    return [{"environment": split_stack_name(stack)[0], "stack": stack} for stack in stacks]


# --------------------------------------------------------------------------
# tenants simulate
# --------------------------------------------------------------------------

SIMULATE_SPEED = 60.0
SIMULATE_EPILOG = """\
Trace: --trace FILE (.csv or .yaml; docs/simulate.md), --synthetic N [--seed S] (N jobs from the
tenants' quotas of the working tree, the same for the same seed), or --from-prometheus URL --since T
--until T (the Jobs the cluster ran then, from kube-state-metrics' series; Jobs still queued at T
are left out, those still running run until T, and stderr says how many). --save-trace FILE writes the trace replayed
(.yaml, the format --trace reads), so a period read once can be replayed again or edited.

Base: --base REF as for `tenants diff` (default: the merge base with origin/main, else HEAD).

Exit codes:
  0  the report was printed
  1  invalid tenant, stack or trace files (located errors on stderr)
  2  usage error, git error, Prometheus unreachable, or the runtime lane's binaries are not built here
"""


def read_period(url: str, environment: Environment, since, until) -> tuple[Trace, list[str]]:
    """The trace of the period from Prometheus at `url` (one instant query per series at `until`,
    `components.simulate.period`), and what it left out; PrometheusError when it cannot be asked.

    >>> from datetime import datetime, timezone
    >>> read_period("http://127.0.0.1:9", prod, datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc))
    Traceback (most recent call last):
    ...
    components.cli.reports.PrometheusError: cannot query Prometheus at http://127.0.0.1:9: ...
    """
    if until <= since:
        raise UsageError(f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})")
    span = (until - since).total_seconds()
    series = {metric: [(r["metric"], float(r["value"][1])) for r in instant_query(url, expr, until)]
              for metric, expr in period_queries(environment, span).items()}
    read = period_trace(series, environment, since.timestamp(), until.timestamp(), source=url)
    return read.trace, read.notes


class Simulate:
    """`tenants simulate`: replay a workload trace on the base's and on the working tree's queues,
    each on a throw-away control plane of the real components (kwok nodes, kube-scheduler, Kueue),
    and report how waits, GPU-hours, borrowing, preemptions and pool utilisation change
    (docs/simulate.md). Thin: the trace and the report are `components.simulate`; the replay starts
    binaries, so it is `tools/simulation.py`, run from a checkout with the runtime lane built."""

    @staticmethod
    def add_parser(sub) -> None:
        """The `tenants simulate` subcommand.

        >>> sub = argparse.ArgumentParser().add_subparsers()
        >>> Simulate.add_parser(sub)
        >>> sub.choices["simulate"].parse_args(["--stack", "prod", "--synthetic", "50"]).speed
        60.0
        """
        parser = sub.add_parser(
            "simulate", help="replay a workload trace on the base's and the change's queues (real scheduler and Kueue or KAI, kwok nodes)",
            description="Replay a trace of jobs on the stack at --base and at the working tree, each on a throw-away\n"
            "control plane (kwok nodes, kube-scheduler, Kueue or KAI), and compare waits, GPU-hours, borrowing and utilisation.",
            epilog=SIMULATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--stack", required=True, metavar="ENV", help="the environment to simulate")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--trace", type=Path, metavar="FILE", help="the jobs to replay (.csv or .yaml)")
        source.add_argument("--synthetic", type=int, metavar="N", help="replay N jobs generated from the tenants' quotas")
        source.add_argument("--from-prometheus", metavar="URL", help="replay the Jobs the cluster ran from --since to --until")
        parser.add_argument("--seed", type=int, default=1, help="seed of --synthetic (default: 1)")
        parser.add_argument("--since", type=moment, metavar="T", help="with --from-prometheus: start (a date or ISO 8601 time)")
        parser.add_argument("--until", type=moment, metavar="T", help="with --from-prometheus: end (a date or ISO 8601 time)")
        parser.add_argument("--save-trace", type=Path, metavar="FILE", help="also write the trace replayed to FILE (YAML)")
        parser.add_argument("--base", metavar="GIT_REF", help="git ref to compare with (default: merge base with origin/main)")
        parser.add_argument("--format", choices=sorted(SIMULATION_FORMATS), default="text", help="output format (default: text)")
        parser.add_argument("--speed", type=float, default=SIMULATE_SPEED, help=f"trace seconds per wall second (default: {SIMULATE_SPEED:g})")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        """Replay the trace on both sides and print the report.

        >>> Simulate.run(cli_args("simulate", "--stack", "prod", "--synthetic", "5", "--speed", "0"))
        2
        """
        if args.speed <= 0:
            print("tenants simulate: --speed must be > 0 (trace seconds per wall second)", file=sys.stderr)
            return common.EXIT_USAGE
        root = args.root.resolve()
        head = load_environment(root, args.stack)
        try:
            trace = Simulate.trace(args, head)
        except (UsageError, PrometheusError) as err:
            print(f"tenants simulate: {err}", file=sys.stderr)
            return common.EXIT_USAGE
        try:
            from tools import simulation
        except ImportError:
            print("tenants simulate: the replay (tools/simulation.py) runs from a checkout of gpu-tenancy", file=sys.stderr)
            return common.EXIT_USAGE
        reason = simulation.unavailable_reason(head.platform.scheduler)
        try:
            if reason:
                raise UsageError(reason)
            base = resolve_base(root, args.base)
            with tempfile.TemporaryDirectory(prefix="tenants-simulate-", dir=memory_scratch_dir()) as scratch:
                export_tree(root, base["commit"], Path(scratch))
                read_base_as_current(Path(scratch))
                say = lambda line: print(f"tenants simulate: {line}", file=sys.stderr)   # noqa: E731
                outcomes = [simulation.replay(args.stack, simulation.Side(label, side), trace, args.speed, say=say)
                            for label, side in (("base", Path(scratch)), ("change", root))]
        except UsageError as err:
            print(f"tenants simulate: {err}", file=sys.stderr)
            return common.EXIT_USAGE
        context = {"stack": args.stack, "scheduler": head.platform.scheduler, "base": base["ref"],
                   "trace": Simulate.trace_name(args), "jobs": len(trace.jobs), "speed": args.speed}
        document = compare_replays(*outcomes, simulation.tolerance(head.platform.scheduler, args.speed), context)
        sys.stdout.write(SIMULATION_FORMATS[args.format](document))
        return common.EXIT_OK

    @staticmethod
    def trace(args: argparse.Namespace, head: Environment) -> Trace:
        """The trace to replay, from the file, the generator or Prometheus; written to --save-trace too.

        >>> Simulate.trace(cli_args("simulate", "--stack", "prod", "--synthetic", "5", "--since", "2026-01-01"), prod)
        Traceback (most recent call last):
        ...
        components.cli.diff.UsageError: --since and --until go with --from-prometheus
        """
        period = (args.since, args.until)
        if args.from_prometheus is None and period != (None, None):
            raise UsageError("--since and --until go with --from-prometheus")
        if args.from_prometheus is not None and None in period:
            raise UsageError("--from-prometheus needs the period: --since T --until T (dates or ISO 8601 times)")
        if args.trace:
            trace = read_trace(args.trace, head)
        elif args.synthetic is not None:
            trace = synthetic_trace(head, args.synthetic, args.seed)
        else:
            trace, notes = read_period(args.from_prometheus, head, *period)
            for note in notes:
                print(f"tenants simulate: {args.from_prometheus}: {note}", file=sys.stderr)
            print(f"tenants simulate: {len(trace.jobs)} Job(s) read from {args.from_prometheus}", file=sys.stderr)
        if args.save_trace:
            args.save_trace.write_text(trace_yaml(trace, f"tenants simulate trace: {Simulate.trace_name(args)}"), encoding="utf-8")
        return trace

    @staticmethod
    def trace_name(args: argparse.Namespace) -> str:
        """What the report calls the trace.

        >>> Simulate.trace_name(cli_args("simulate", "--stack", "prod", "--synthetic", "5"))
        'synthetic 5 seed 1'
        """
        if args.from_prometheus:
            return f"{args.from_prometheus} from {args.since.isoformat()} to {args.until.isoformat()}"
        return str(args.trace or f"synthetic {args.synthetic} seed {args.seed}")
