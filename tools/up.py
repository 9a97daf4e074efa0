"""`make up [STACK=prod] [FROM=dir] [WORKERS=2]`: a real `pulumi up` of the example on a kept local control plane.

Starts etcd, kube-apiserver and kube-controller-manager on loopback (tools/control_plane.py),
registers the stack's GPU Nodes and installs the Kueue/KAI CRDs the way a cluster has them before
the first deployment, writes a kubeconfig whose context is the stack's `kubeContext`, and runs
`__main__.py` through the real engine (the Pulumi CLI and the Kubernetes provider built by
tools/build.sh; the Automation API serves the Python program) on a local file backend.
Then it prints where everything is and keeps the control plane running until Ctrl-C.

The cluster (its etcd data, CA and port), the Pulumi state and the project copy are kept in
`.cache/up/<stack>/` (git-ignored), so that the next change is tried on the same cluster:
`make up-preview` (`--preview`) previews the working tree's stack and tenant files against the
kept state, `make up` again applies them (reporting "no change" when there is none), either
using the control plane a waiting `make up` runs or starting the kept one for the command, and
`make down` (`--down`) removes it all.

A sharded environment (docs/sharding.md) is several Pulumi stacks: `STACK=<env>` deploys every
one of them along the deploy graph of `tenants stacks` (the environment's stack first, then the
shards, up to `--workers` at a time, each in its own process), `STACK=<env>.<shard>` the
environment's stack and that shard. A failed stack stops only the stacks that need it: every
other shard is still deployed, and the run fails at the end. `FROM=dir` takes the stack and
tenant files from `dir/stacks` and `dir/tenants` instead of the repository's (e.g.
`FROM=tests/fixtures/sharded STACK=lab`).

Nothing here touches a real cluster, and nothing outside `.cache/up` is written: the project is
copied into the run directory with every file its stack names (a local `vcluster.chart`), since
the file backend writes a secrets salt into the stack file.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from tools.reaping import children, reap_orphans

REPO = Path(__file__).resolve().parents[1]
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"  # see tests/e2e/pulumi_engine/conftest.py

from components.spec.problems import InvalidInput  # noqa: E402  (after the fork setting)
from components.spec.sharding import split_stack_name  # noqa: E402

RESULT_MARKER = "make up result: "   # the last line a stack's worker process prints (JSON)


@dataclass(frozen=True)
class StackRun:
    """How one stack's `pulumi up` went."""

    stack: str
    ok: bool
    summary: str            # the engine's change counts, or why it failed or did not run
    seconds: float = 0.0
    ran: bool = True        # False: not started, because a stack it needs failed
    steps: tuple[tuple[str, str, str], ...] = ()   # (op, name, type) of every resource it changes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="prod", help="an environment, or one shard stack <env>.<shard>")
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="directory whose stacks/ and tenants/ replace the repository's")
    parser.add_argument("--dir", type=Path, default=REPO / ".cache" / "up",
                        help="where clusters and states are kept (default: .cache/up/<stack>)")
    parser.add_argument("--workers", type=int, default=2, help="shard stacks deployed at the same time (default: 2)")
    parser.add_argument("--exit", action="store_true", help="stop the control plane after the up instead of waiting")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--preview", action="store_true", help="`pulumi preview` of the change on the kept cluster")
    mode.add_argument("--down", action="store_true", help="remove the kept cluster and state of --stack")
    parser.add_argument("--one-stack", metavar="STACK", help=argparse.SUPPRESS)  # a worker: see deploy_in_process
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    operation = "preview" if args.preview else "up"
    if args.one_stack:
        from tools.reaping import become_subreaper

        become_subreaper()   # the killed CLI's plugins become this worker's, for deploy_in_process to end
        return deploy_in_process(args.dir, args.one_stack, args.state, args.kubeconfig, operation)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    run = (args.dir / args.stack).resolve()
    if args.down:
        return down(run)
    from tools.engine import missing_pulumi_tools

    try:
        project, graph = prepare(args.source or REPO, args.stack, run, copy_parts=args.source is not None)
    except (InvalidInput, ValueError) as exc:
        print(f"make up: {exc}", file=sys.stderr)
        return 2
    missing = missing_pulumi_tools()
    if missing:
        print(f"make up: {', '.join(missing)} not built; run `tools/build.sh pulumi pulumi-resource-kubernetes`", file=sys.stderr)
        return 2
    from tools.reaping import become_subreaper

    if become_subreaper():
        _SUBREAPER.append(True)
    with kept_cluster(run, project, split_stack_name(args.stack)[0]) as cluster:
        deploy = subprocess_deploy(project, run / "state", cluster.kubeconfig, operation=operation)
        runs = deploy_stacks(graph, deploy, args.workers)
        print(run_report(runs, operation))
        print_where(run, project, cluster, args.stack, [s for s, _ in graph], [r.stack for r in runs if r.ran])
        code = 1 if any(not r.ok for r in runs) else 0
        if operation == "up" and cluster.holder and not args.exit:
            hold()
        return code


@dataclass(frozen=True)
class KeptCluster:
    """The control plane a command works on: started by it (`holder`) or by a `make up` still running."""

    kubeconfig: Path
    context: str
    logs: Path
    holder: bool


HOLDER = "holder.pid"   # in the run directory: the `make up` process running its control plane


def running_holder(run: Path) -> Optional[int]:
    """The pid of the `tools.up` process that runs `run`'s control plane now, if any.

    >>> running_holder(Path("/nonexistent")) is None
    True
    """
    try:
        pid = int((run / HOLDER).read_text())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"\0tools.up\0" in command else None   # a pid reused by another program is no holder


@contextmanager
def kept_cluster(run: Path, project: Path, environment: str) -> Iterator[KeptCluster]:
    """The run's control plane: the running one of another `make up`, else its kept one started
    again (etcd data, CA, port), else a new one; stopped at the end if this process started it."""
    from tools.engine import LocalCluster

    holder = running_holder(run)
    if holder is not None:
        print(f"make up: using the control plane that `make up` (pid {holder}) runs in {run}", flush=True)
        yield KeptCluster(run / "cluster" / "kubeconfig", "(see the kubeconfig)", run / "cluster" / "control-plane" / "logs", False)
        return
    cluster = LocalCluster(run / "cluster", project, environment)
    kept = (run / "cluster" / "control-plane" / "etcd").is_dir()
    print(f"make up: {'starting the kept' if kept else 'starting a new'} local control plane for {environment} in {run} ...", flush=True)
    try:
        (run / HOLDER).write_text(f"{os.getpid()}\n")
        cluster.start()
        yield KeptCluster(cluster.kubeconfig, cluster.context, cluster.cp.log_dir, True)
    finally:
        cluster.stop()
        (run / HOLDER).unlink(missing_ok=True)
        print(f"make up: control plane stopped; it and the stack state are kept in {run} "
              f"(`make up` starts them again, `make down` removes them).")


def hold() -> None:
    """Keep this process (and the control plane it runs) until Ctrl-C or SIGTERM."""
    print(f"\nThe control plane runs until you stop it: Ctrl-C here (or `kill {os.getpid()}`); meanwhile "
          "`make up-preview` and `make up` in another shell use it.", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop:
            time.sleep(1)
    except KeyboardInterrupt:
        pass


def print_where(run: Path, project: Path, cluster: KeptCluster, stack: str, stacks: Sequence[str], ran: Sequence[str]) -> None:
    print(f"  kubeconfig   {cluster.kubeconfig}   (context {cluster.context})")
    print(f"  state        {run / 'state' / 'backend'}   (file backend, stacks {', '.join(stacks)})")
    for command in state_commands(project, run / "state", ran):
        print(f"               {command}")
    option = "" if stack == "prod" else f" STACK={stack}"
    print(f"  next change  `make up-preview{option}` previews the working tree on this cluster, `make up{option}` "
          f"applies it, `make down{option}` removes the cluster and the state")
    print(f"  project copy {project}")
    print(f"  logs         {cluster.logs}")


def down(run: Path) -> int:
    """`make down`: remove a kept cluster and its state, unless a `make up` still runs it."""
    holder = running_holder(run)
    if holder is not None:
        print(f"make down: `make up` (pid {holder}) still runs this control plane: stop it first "
              f"(Ctrl-C there, or `kill {holder}`)", file=sys.stderr)
        return 1
    if not run.exists():
        print(f"make down: nothing kept in {run}")
        return 0
    shutil.rmtree(run)
    print(f"make down: removed {run} (the cluster's etcd data, the Pulumi state and the project copy)")
    return 0


def prepare(source: Path, stack: str, run: Path, *, copy_parts: bool = True) -> tuple[Path, list[tuple[str, tuple[str, ...]]]]:
    """Copy the project into `run/project` (stack and tenant files from `source`, and every file
    the stack names, such as a local vcluster chart), replacing the copy a previous run left but
    keeping the secrets salts the engine wrote into its stack files, and return the copy and its deploy graph:
    (stack, stacks it needs) in deploy order. Raises `InvalidInput` (located errors) or
    `ValueError` (an unknown shard) before anything is copied; the copy is checked again, so that
    what the engine will read is valid.

    >>> prepare(REPO, "prod", Path("/tmp/up/prod"))[1]   # doctest: +SKIP
    [('prod', ())]
    """
    from components.load import load_environment
    from tools.engine import copy_project

    graph = deploy_graph(source, stack)
    files = stack_files(load_environment(source, split_stack_name(stack)[0]))
    salts = stack_salts(run / "project" / "stacks")
    for part in ("stacks", "tenants"):   # a file deleted since the last run must not linger
        shutil.rmtree(run / "project" / part, ignore_errors=True)
    project = copy_project(run / "project")
    if copy_parts:
        for part in ("stacks", "tenants"):
            shutil.rmtree(project / part)
            shutil.copytree(source / part, project / part)
    restore_salts(project / "stacks", salts)
    for name in files:
        copy_into(source / name, project / name)
    load_environment(project, split_stack_name(stack)[0])
    return project, graph


def stack_salts(stacks: Path) -> dict[str, str]:
    """The `encryptionsalt:` line of each stack file in `stacks` (the file backend's passphrase
    secrets manager writes it at the first `pulumi up`; the state cannot be read without it).

    >>> stack_salts(Path("/nonexistent"))
    {}
    """
    salts = {}
    for path in sorted(stacks.glob("Pulumi.*.yaml")) if stacks.is_dir() else []:
        line = next((x for x in path.read_text().splitlines() if x.startswith("encryptionsalt:")), None)
        if line:
            salts[path.name] = line
    return salts


def restore_salts(stacks: Path, salts: dict[str, str]) -> None:
    """Put the salts of `stack_salts` back into the fresh copies of the stack files (a shard's
    file, which only the engine writes, is recreated)."""
    for name, line in salts.items():
        path = stacks / name
        text = path.read_text() if path.exists() else ""
        if "encryptionsalt:" not in text:
            path.write_text(f"{line}\n{text}")


def copy_into(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dest)


def stack_files(environment) -> list[str]:
    """Files (relative to the project root) that an environment's stack names and its program
    reads: a local vcluster chart, when one is set and a tenant has a vCluster.

    >>> stack_files(load_environment(REPO, "prod"))   # doctest: +SKIP
    []
    """
    chart = environment.platform.vcluster.chart
    if chart and any(t.spec.vcluster.enabled for t in environment.tenants):
        return [chart]
    return []


def deploy_graph(root: Path, stack: str) -> list[tuple[str, tuple[str, ...]]]:
    """The stacks `make up STACK=stack` deploys with the stacks each needs first (`tenants
    stacks`' graph), in deploy order; `InvalidInput` for bad input, `ValueError` for a shard the
    environment does not have.

    >>> deploy_graph(REPO, "prod")
    [('prod', ())]
    """
    from components.load import load_environment
    from components.fleet.shard_stacks import stack_part, stack_parts

    environment = load_environment(root, split_stack_name(stack)[0])
    parts = stack_parts(environment) if stack == environment.name else [
        stack_part(environment, environment.name), stack_part(environment, stack)]
    return [(p.stack, p.needs) for p in parts]


def stacks_to_deploy(root: Path, stack: str) -> list[str]:
    """The Pulumi stacks `make up STACK=stack` runs, in deploy order.

    >>> stacks_to_deploy(REPO, "prod")
    ['prod']
    """
    return [name for name, _ in deploy_graph(root, stack)]


def deploy_stacks(graph: Sequence[tuple[str, tuple[str, ...]]], deploy: Callable[[str], StackRun],
                  workers: int) -> list[StackRun]:
    """Deploy every stack of `graph` once all the stacks it needs succeeded, up to `workers` at a
    time; a stack whose need failed is not started. Returns one `StackRun` per stack, in graph order.

    >>> deploy_stacks([("lab", ()), ("lab.a", ("lab",))], lambda s: StackRun(s, True, "ok"), 2)[1].ok
    True
    """
    done: dict[str, StackRun] = {}
    known = {name for name, _ in graph}
    pending = [(name, tuple(n for n in needs if n in known)) for name, needs in graph]
    running: dict[Future, str] = {}

    def deployed_or_failing(name: str) -> StackRun:
        start = time.monotonic()
        try:
            return deploy(name)
        except Exception as err:  # one stack's crash must not take the others down
            return StackRun(name, False, f"{type(err).__name__}: {err}", time.monotonic() - start)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending or running:
            for name, needs in list(pending):
                failed = [n for n in needs if n in done and not done[n].ok]
                if failed:
                    done[name] = StackRun(name, False, f"not run: {', '.join(failed)} failed", ran=False)
                    pending.remove((name, needs))
                elif all(n in done for n in needs) and len(running) < workers:
                    running[pool.submit(deployed_or_failing, name)] = name
                    pending.remove((name, needs))
            if not running:
                continue
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done[running.pop(future)] = future.result()
    return [done[name] for name, _ in graph]


# operation: (the command's name, what it did to a stack, the verdict when every stack went through,
# whether it lists each resource: a preview is read for them, an up's engine output names them already)
REPORTS = {
    "up": ("make up", "deployed", "every stack deployed", False),
    "preview": ("make up-preview", "previewed", "every stack previewed (nothing applied: `make up` applies it)", True),
}


def run_report(runs: Sequence[StackRun], operation: str = "up") -> str:
    """One line per stack (and, for a preview, one per resource it would change), then the verdict.

    >>> print(run_report([StackRun("lab", True, "create 12", 3.1)]))
    make up: lab: create 12 in 3.1s
    make up: every stack deployed
    >>> print(run_report([StackRun("lab", True, "update 1", 2.0, steps=(("update", "eval-quota", "kubernetes:core/v1:ResourceQuota"),))], "preview"))
    make up-preview: lab: update 1 in 2.0s
    make up-preview: lab:   update eval-quota kubernetes:core/v1:ResourceQuota
    make up-preview: every stack previewed (nothing applied: `make up` applies it)
    """
    command, done, verdict, listed = REPORTS[operation]
    lines = []
    for r in runs:
        lines.append(f"{command}: {r.stack}: {r.summary}" + (f" in {r.seconds:.1f}s" if r.ran else ""))
        lines += [f"{command}: {r.stack}:   {op} {name} {kind}" for op, name, kind in r.steps if listed]
    failed = [r.stack for r in runs if not r.ok]
    if failed:
        lines.append(f"{command}: FAILED: {', '.join(failed)} (the other stacks are {done}; run `{command}` again after the fix)")
    else:
        lines.append(f"{command}: {verdict}")
    return "\n".join(lines)


def engine_env(state: Path) -> dict[str, str]:
    """What the Pulumi CLI needs to find `make up`'s state: the harness Engine's settings."""
    return {"PULUMI_BACKEND_URL": f"file://{state / 'backend'}", "PULUMI_CONFIG_PASSPHRASE": "",
            "PULUMI_HOME": str(state / "home"), "PULUMI_SKIP_UPDATE_CHECK": "true"}


def state_commands(project: Path, state: Path, stacks: Sequence[str]) -> list[str]:
    """Shell commands that read the run's state with the built CLI (they need no language host).

    >>> state_commands(Path("/p"), Path("/s"), ["lab"])[0].startswith("cd /p && PULUMI_BACKEND_URL=file:///s/backend")
    True
    """
    from tools.engine import pulumi_bin_dirs

    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in engine_env(state).items())
    cli = shlex.quote(str(pulumi_bin_dirs()["pulumi"] / "pulumi"))
    prefix = f"cd {shlex.quote(str(project))} && {env} {cli}"
    return [f"{prefix} stack ls", *(f"{prefix} stack export --stack {shlex.quote(s)}" for s in stacks)]


_PRINT_LOCK = threading.Lock()
_WORKERS: set[int] = set()   # pids of the live stack workers of this process
_SUBREAPER: list[bool] = []  # non-empty once main() made this process the subreaper of its workers' orphans


def subprocess_deploy(project: Path, state: Path, kubeconfig: Path,
                      out: Callable[[str], None] = print, operation: str = "up") -> Callable[[str], StackRun]:
    """`deploy` for `deploy_stacks`: each stack's `pulumi up` in its own process (the inline
    program runs in the process that calls the engine, one at a time), its output prefixed with
    the stack's name; `operation` "preview" previews instead.

    In `make up` (main: the subreaper of its workers' orphans) a worker killed before it could end
    the plugins its CLI started leaves them to this process, which ends them once the worker is
    gone, but never a process it had before the deploy began (the control plane).

    >>> deploy = subprocess_deploy(project, state, kubeconfig)   # doctest: +SKIP
    """
    started_before = {pid for pid, _ in children(os.getpid())}

    def deploy(stack: str) -> StackRun:
        command = [sys.executable, "-m", "tools.up", "--one-stack", stack, "--dir", str(project),
                   "--state", str(state), "--kubeconfig", str(kubeconfig), *(["--preview"] if operation == "preview" else [])]
        start = time.monotonic()
        result: Optional[dict] = None
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO) as proc:
            with _PRINT_LOCK:
                _WORKERS.add(proc.pid)
            for line in proc.stdout:
                if line.startswith(RESULT_MARKER):
                    result = json.loads(line[len(RESULT_MARKER):])
                    continue
                with _PRINT_LOCK:
                    out(f"[{stack}] {line.rstrip()}")
        with _PRINT_LOCK:   # a worker killed before it reaped its CLI's plugins leaves them to us (main)
            _WORKERS.discard(proc.pid)
            ended = reap_orphans(keep=_WORKERS | started_before) if _SUBREAPER else []
        if ended:
            out(f"[{stack}] make up: ended {len(ended)} process(es) the killed worker left running: "
                + ", ".join(f"{name} (pid {pid})" for pid, name in ended))
        seconds = time.monotonic() - start
        if result is None:
            return StackRun(stack, False, f"worker exited with {proc.returncode} before reporting", seconds)
        return StackRun(stack, result["ok"], result["summary"], seconds,
                        steps=tuple(tuple(step) for step in result.get("steps", ())))

    return deploy


UNCHANGED = {"same", "read", "refresh"}   # engine operations that change nothing (refresh: reading the cluster)


def change_summary(summary: dict[str, int]) -> str:
    """The engine's change counts without the unchanged resources.

    >>> change_summary({"same": 40, "update": 2}), change_summary({"same": 42})
    ('update 2', 'no change')
    """
    changes = {op: n for op, n in summary.items() if n and op not in UNCHANGED}
    return ", ".join(f"{op} {n}" for op, n in sorted(changes.items())) or "no change"


# The engine's closing error of every failed update: it says nothing the resources' errors do not.
_GENERIC_ERRORS = {"update failed", "preview failed"}
_MAX_ERRORS = 2


def failure_summary(text: str) -> str:
    r"""What a failed `up` says went wrong, for its summary line: the resources' `error:` lines of the
    engine's diagnostics (each after the resource it is about; the last two), else the last line that
    is not the CLI's empty `stderr:`. The text ends with the CLI's stderr, empty when the engine
    reported the errors on stdout, so its last line alone said only "stderr:".

    >>> failure_summary("Diagnostics:\n  kubernetes:core/v1:Node (dev-platform-node-n1-joined):\n"
    ...                 "    error: resource 'n1' does not exist\n\n  pulumi:pulumi:Stack (gpu-tenancy-dev):\n"
    ...                 "    error: update failed\n\nResources:\n    1 errored\n stderr: \n")
    "kubernetes:core/v1:Node (dev-platform-node-n1-joined): resource 'n1' does not exist"
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [f"{lines[i - 1]} {line[len('error:'):].strip()}" if i and lines[i - 1].endswith(":") else line
              for i, line in enumerate(lines) if line.startswith("error:")]
    errors = [e for e in errors if e.rsplit(": ", 1)[-1] not in _GENERIC_ERRORS] or errors
    if errors:
        return "; ".join(errors[-_MAX_ERRORS:])
    rest = [line for line in lines if line not in ("stderr:", "stdout:")]
    return rest[-1] if rest else ""


def deploy_in_process(project: Path, stack: str, state: Path, kubeconfig: Path, operation: str = "up") -> int:
    """The worker: `pulumi up --refresh` (or `preview --refresh`) of one stack of the copied project,
    with checkpoints on as production's backends write them; the last line is the result.

    First it undoes what a killed run left (`recover_checkpoint`: a cut-off checkpoint;
    `Engine.recover`: a stale lock, pending operations); the refresh reads the cluster, so drift made by hand is shown and
    repaired. Before and after an `up` each node's taint list is left with the one owner of the
    stack's state (tools/taint_owners.py: a lost state's manager released; a preview only says
    so). Afterwards no process the CLI started outlives it (tools/reaping.py: a killed CLI's
    provider is ended here).
    """
    from tools.engine import Engine, recover_checkpoint

    started_before = [pid for pid, _ in children(os.getpid())]   # none in a worker; kept when called in-process
    try:
        repaired = recover_checkpoint(state, stack)
        engine = Engine(project, stack, state, kubeconfig, checkpoints=True)
        for line in [*repaired, *engine.recover()]:
            print(f"make up: {stack}: {line}", flush=True)
        one_taint_owner(engine, kubeconfig, check=operation == "preview")
        run = engine.preview if operation == "preview" else engine.up
        outcome = run(refresh=True, on_output=lambda line: print(line, end="" if line.endswith("\n") else "\n", flush=True))
        if operation == "up":
            one_taint_owner(engine, kubeconfig)
        steps = [[s.op, s.name, s.type] for s in outcome.steps if s.op not in UNCHANGED]
        result = {"ok": True, "summary": change_summary(outcome.summary), "steps": steps}
    except Exception as err:  # the engine's error, whole: it says which resource failed and why
        print(str(err), flush=True)
        result = {"ok": False, "summary": f"failed: {failure_summary(str(err)) or type(err).__name__}"}
    ended = reap_orphans(keep=started_before)
    if ended:
        print(f"make up: {stack}: ended {len(ended)} process(es) the pulumi CLI left running: "
              + ", ".join(f"{name} (pid {pid})" for pid, name in ended), flush=True)
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


def one_taint_owner(engine, kubeconfig: Path, *, check: bool = False) -> None:
    """Release (`check`: only name) the owners of the stack's nodes' taint lists that a lost state
    left (tools/taint_owners.py), saying so on the worker's output. A stack without taint patches
    needs no cluster; a cluster that does not answer is said, and the operation goes on (its own
    errors say more)."""
    import urllib3
    from kubernetes import config
    from kubernetes.client.exceptions import ApiException

    from tools.taint_owners import release_orphaned_taint_owners, taint_patch_managers

    resources = engine.export()
    if not taint_patch_managers(resources):
        return
    try:
        lines = release_orphaned_taint_owners(config.new_client_from_config(str(kubeconfig)), resources, check=check)
    except (ApiException, urllib3.exceptions.HTTPError) as err:
        lines = [f"the owners of the nodes' taint lists were not checked: {err}"]
    for line in lines:
        print(f"make up: {engine.stack_name}: {line}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
