"""Benchmarks of the real Pulumi engine on a local control plane: `pulumi up` and `pulumi preview`
of the synthetic fleet at N tenants, unsharded and sharded, with the mock-runtime registration of
the same program measured in the same run.

    GPU_TENANCY_CACHE_DIR=~/.cache/gpu-tenancy .venv/bin/python -m bench.pulumi_engine \\
        [--sizes 10,100,300] [--shard-size 50] [--json out/bench/pulumi_engine.json]

Per N (tools/synthetic.py: N tenant files and a stack `bench` whose capacity grows with N), each
side on its own fresh control plane (tools/engine.py: LocalCluster with the
stack's Nodes registered, and Engine with PULUMI_SKIP_CHECKPOINTS as the lane sets it):

- unsharded (the stack `bench` holds everything): `up` from empty; `preview` with nothing changed;
  `preview` after a one-tenant change (team-<N/2>'s H100 quota 2 -> 1);
- sharded (`sharding: {shards: [s01, ...]}`, ceil(N / shard size) shards): `up` of the platform
  stack `bench`, then of every shard stack `bench.sNN`; then the same one-tenant change, previewed
  only in the stacks the offline diff (`tenants diff --format json`, its touchedStacks) names;
- mock: the program's Fleet under Pulumi's mock runtime (bench/run.py's fleet phase, a child
  process) on the unsharded project.

Every engine operation runs in a process of its own (`--phase engine`), so that each memory
figure is that operation's. The engine is several processes: that process (it runs the program
inline through the Automation API), the `pulumi` CLI and the Kubernetes provider. A thread samples
the RSS of the process tree from /proc every 0.25 s; the figure reported is the peak of the tree's
sum ("tree peak"). `ru_maxrss` of the process itself and of its children (the largest single
waited-for descendant) is recorded too. The control plane runs in the driver process's tree, not the
phase's, so it is not counted. Times are wall-clock seconds of the Automation API call (`up()` or
`preview()`: CLI start, program, engine, provider), not of the process start-up around it.

Targets (N = 300): a one-tenant change in the sharded fleet previews in under 60 s, and the stacks
it does not touch are not previewed at all. Exit code 0 whatever the figures: this measures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

# The Automation API runs gRPC in the phase processes, and the driver forks the control plane:
# see tests/e2e/pulumi_engine/conftest.py. Off before grpc can load.
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"

from tools.synthetic import STACK, dump, stack_data, tenant_name, write_project  # noqa: E402  (after the fork setting)

REPO = Path(__file__).resolve().parents[1]

TARGET_SECONDS = 60.0  # one-tenant change, sharded, N = 300
PROGRAM_FILES = ("Pulumi.yaml", "__main__.py")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# --- pure helpers ---------------------------------------------------------------------------------


def shard_names(count: int, shard_size: int) -> list[str]:
    """Shards for `count` tenants at about `shard_size` each (rendezvous hashing spreads them
    unevenly, so "about"); at least one.

    >>> shard_names(300, 50)
    ['s01', 's02', 's03', 's04', 's05', 's06']
    """
    if shard_size < 1:
        raise ValueError(f"shard size must be at least 1, not {shard_size}")
    return [f"s{i:02d}" for i in range(1, max(1, math.ceil(count / shard_size)) + 1)]


def sharded_stack_data(count: int, shards: list[str]) -> dict:
    """tools/synthetic.py's stack for `count` tenants, split across `shards`.

    >>> sharded_stack_data(10, ["s01"])["config"]["gpu-tenancy:platform"]["sharding"]
    {'shards': ['s01']}
    """
    data = stack_data(count)
    data["config"]["gpu-tenancy:platform"]["sharding"] = {"shards": list(shards)}
    return data


def changed_tenant(count: int) -> str:
    """The tenant whose GPU quota the one-tenant change lowers (the same one bench/run.py changes).

    >>> changed_tenant(300)
    'team-00150'
    """
    return tenant_name(count // 2)


def change_one_tenant(root: Path, count: int) -> str:
    """Lower one tenant's H100 quota from 2 to 1 in the project at `root`; returns the tenant.

    >>> change_one_tenant(project, 10)   # doctest: +SKIP
    'team-00005'
    """
    name = changed_tenant(count)
    path = root / "tenants" / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    before, after = "gpu: {h100: 2, l4: 1}", "gpu: {h100: 1, l4: 1}"
    if text.count(before) != 1:
        raise SystemExit(f"{path}: expected exactly one `{before}` to change")
    path.write_text(text.replace(before, after), encoding="utf-8")
    return name


def stacks_to_preview(document: dict) -> tuple[list[str], str]:
    """The Pulumi stacks a change touches, from a `tenants diff --format json` document (its
    `touchedStacks`, components/review/stack_changes.py), and where the answer came from.

    >>> stacks_to_preview({"touchedStacks": ["prod.b"]})
    (['prod.b'], 'tenants diff touchedStacks')
    """
    return list(document["touchedStacks"]), "tenants diff touchedStacks"


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    """numerator / denominator, or None when either is missing or the denominator is 0.

    >>> ratio(3.0, 2.0), ratio(None, 2.0), ratio(1.0, 0.0)
    (1.5, None, None)
    """
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _fmt(value: Optional[float], spec: str = ".1f", unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def _get(row: dict, *path: str) -> Any:
    for key in path:
        if not isinstance(row, dict) or key not in row:
            return None
        row = row[key]
    return row


def table(rows: list[dict]) -> str:
    """The results as two Markdown tables, by N: times (and ratios), then peak memory.

    >>> print(table([{"n": 10}]).splitlines()[2])
    | 10 | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a |
    """
    times = [
        "| N | resources | mock | up | preview, no change | one-tenant preview | preview / mock "
        "| up / preview | ms per resource (preview) | shards (tenants each) | sharded up, all stacks "
        "| sharded one-tenant preview (stacks previewed / not) | sharded / unsharded one-tenant |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    memory = [
        "| N | mock | up | preview, no change | one-tenant preview | sharded up (largest stack) "
        "| sharded one-tenant preview |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda row: row["n"]):
        resources = _get(r, "unsharded", "up", "resources")
        mock, up = _get(r, "mock", "seconds"), _get(r, "unsharded", "up", "seconds")
        preview, one = _get(r, "unsharded", "preview", "seconds"), _get(r, "unsharded", "preview_one", "seconds")
        sharded = r.get("sharded") or {}
        sizes = sharded.get("shard_sizes")
        shards = None if sizes is None else f"{len(sizes)} ({min(sizes)}-{max(sizes)})"
        sharded_one = sharded.get("preview_one_seconds")
        previewed = sharded.get("previewed")
        counts = None if previewed is None else f"{len(previewed)} / {sharded['not_previewed']}"
        per_resource = None if preview is None or not resources else preview / resources * 1000
        times.append(
            f"| {r['n']} | {_fmt(resources, 'd')} | {_fmt(mock, unit=' s')} | {_fmt(up, unit=' s')} "
            f"| {_fmt(preview, unit=' s')} | {_fmt(one, unit=' s')} | {_fmt(ratio(preview, mock), '.2f', 'x')} "
            f"| {_fmt(ratio(up, preview), '.2f', 'x')} | {_fmt(per_resource, '.1f')} | {shards or 'n/a'} "
            f"| {_fmt(sharded.get('up_seconds'), unit=' s')} "
            f"| {_fmt(sharded_one, unit=' s')}{'' if counts is None else f' ({counts})'} "
            f"| {_fmt(ratio(sharded_one, one), '.2f', 'x')} |"
        )
        largest_up = max((s["tree_peak_mb"] for s in sharded.get("up", [])), default=None)
        largest_one = max((s["tree_peak_mb"] for s in sharded.get("preview_one", [])), default=None)
        memory.append(
            f"| {r['n']} | {_fmt(_get(r, 'mock', 'peak_mb'), '.0f')} "
            f"| {_fmt(_get(r, 'unsharded', 'up', 'tree_peak_mb'), '.0f')} "
            f"| {_fmt(_get(r, 'unsharded', 'preview', 'tree_peak_mb'), '.0f')} "
            f"| {_fmt(_get(r, 'unsharded', 'preview_one', 'tree_peak_mb'), '.0f')} "
            f"| {_fmt(largest_up, '.0f')} | {_fmt(largest_one, '.0f')} |"
        )
    return "\n".join(times) + "\n\n" + "\n".join(memory)


def verdicts(rows: list[dict]) -> list[str]:
    """The measured targets, met or missed, for the largest N measured.

    >>> verdicts([])
    ['(no size measured)']
    """
    if not rows:
        return ["(no size measured)"]
    row = max(rows, key=lambda r: r["n"])
    sharded = row.get("sharded") or {}
    seconds = sharded.get("preview_one_seconds")
    checks = [
        (f"one-tenant change in the sharded {row['n']}-tenant fleet previews in under {TARGET_SECONDS:.0f} s "
         f"({_fmt(seconds, unit=' s')})", seconds is not None and seconds < TARGET_SECONDS),
        (f"untouched stacks not previewed ({sharded.get('not_previewed', 'n/a')} of "
         f"{len(sharded.get('stacks', []))} skipped)", bool(sharded.get("not_previewed"))),
    ]
    lines = [f"{'met   ' if ok else 'MISSED'} {name}" for name, ok in checks]
    return lines if row["n"] == 300 else [*lines, "(the targets are stated for N = 300)"]


# --- peak memory of a process tree -----------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, command name, RSS bytes) of every process we can read."""
    out: dict[int, tuple[int, str, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry.name}/statm", "rb") as f:
                rss = int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        out[int(entry.name)] = (ppid, name, rss)
    return out


def tree_rss(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (command name, RSS bytes) of `root` and all its descendants.

    >>> os.getpid() in tree_rss(os.getpid())
    True
    """
    procs = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            out[pid] = procs[pid][1:]
        todo.extend(children.get(pid, []))
    return out


class TreeSampler:
    """Samples the summed RSS of a process tree in a thread; `peak_mb` and `parts_mb` (the tree's
    processes by command name at the peak) once stopped.

    >>> with TreeSampler(os.getpid()) as sampler: pass
    >>> sampler.peak_mb > 0
    True
    """

    def __init__(self, root: int, interval: float = 0.25) -> None:
        self.root, self.interval = root, interval
        self.peak_mb = 0.0
        self.parts_mb: dict[str, float] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-rss", daemon=True)

    def _sample(self) -> None:
        tree = tree_rss(self.root)
        total = sum(rss for _, rss in tree.values()) / 2**20
        self.samples += 1
        if total > self.peak_mb:
            parts: dict[str, float] = {}
            for name, rss in tree.values():
                parts[name] = parts.get(name, 0.0) + rss / 2**20
            self.peak_mb, self.parts_mb = total, dict(sorted(parts.items()))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "TreeSampler":
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


# --- phases (each in a child process: `pulumi_engine.py --phase engine ...`) ----------------------


def phase_engine(project: Path, stack: str, state: Path, kubeconfig: Path, op: str) -> dict:
    """One `up` or `preview` of one stack, with its time, summary and peak memory."""
    with TreeSampler(os.getpid()) as sampler:
        from tools.engine import Engine

        started = time.perf_counter()
        engine = Engine(project, stack, state, kubeconfig)
        setup = time.perf_counter() - started
        started = time.perf_counter()
        outcome = engine.up() if op == "up" else engine.preview()
        seconds = time.perf_counter() - started
    kubernetes = [s for s in outcome.steps if s.type.startswith("kubernetes:")]
    changed = [f"{s.op} {s.type.rsplit(':', 1)[-1]} {s.name}" for s in outcome.steps if s.op not in ("same", "read")]
    return {
        "stack": stack,
        "op": op,
        "seconds": seconds,
        "setup_seconds": setup,
        "resources": sum(outcome.summary.values()),
        "kubernetes_resources": len(kubernetes),
        "tenant_components": sorted(s.name for s in outcome.steps if s.type == "gpu-tenancy:index:Tenant"),
        "summary": dict(sorted(outcome.summary.items())),
        "changes": dict(sorted(outcome.changes.items())),
        "changed_steps": sorted(changed) if len(changed) <= 50 else [],  # what a small change did
        "errors": [m for m in outcome.messages("error")][:5],
        "tree_peak_mb": sampler.peak_mb,
        "tree_parts_mb": sampler.parts_mb,
        "samples": sampler.samples,
        "self_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children_maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _child_json(command: list[str], what: str) -> dict:
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_engine(project: Path, stack: str, state: Path, kubeconfig: Path, op: str) -> dict:
    """`phase_engine` in a fresh process."""
    command = [sys.executable, "-m", "bench.pulumi_engine", "--phase", "engine", "--project", str(project),
               "--stack", stack, "--state", str(state), "--kubeconfig", str(kubeconfig), "--op", op]
    return _child_json(command, f"`pulumi {op}` of {stack}")


def run_mock(project: Path) -> dict:
    """bench/run.py's fleet phase (the Fleet under Pulumi's mocks) in a fresh process."""
    command = [sys.executable, "-m", "bench.run", "--phase", "fleet", "--root", str(project)]
    return _child_json(command, "the mock-runtime registration")


# --- the driver ------------------------------------------------------------------------------------


def make_project(root: Path, count: int, shards: Optional[list[str]] = None) -> Path:
    """The program (Pulumi.yaml, __main__.py) with the synthetic tenants and stack, sharded or not."""
    write_project(root, count)
    for part in PROGRAM_FILES:
        shutil.copy2(REPO / part, root / part)
    if shards is not None:
        (root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(dump(sharded_stack_data(count, shards)), encoding="utf-8")
    return root


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=root, check=True, capture_output=True,
    )


def offline_diff(root: Path) -> dict:
    """`tenants diff --base HEAD --stack bench --format json` of the project at `root`."""
    from components.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--root", str(root), "diff", "--base", "HEAD", "--stack", STACK, "--format", "json"])
    if code != 0:
        raise RuntimeError(f"tenants diff exited {code}: {err.getvalue()[-2000:]}")
    return json.loads(out.getvalue())


def _cluster(workdir: Path, project: Path):
    from tools.engine import LocalCluster

    return LocalCluster(workdir, project, STACK).start()


def measure_unsharded(base: Path, count: int, log: Callable[[str], None]) -> dict:
    project = make_project(base / "unsharded", count)
    cluster = _cluster(base / "cluster-unsharded", project)
    state, kubeconfig = base / "state-unsharded", cluster.kubeconfig
    out: dict = {}
    try:
        out["up"] = run_engine(project, STACK, state, kubeconfig, "up")
        log(f"  N={count}: up {out['up']['seconds']:.1f} s ({out['up']['resources']} resources, "
            f"{out['up']['tree_peak_mb']:.0f} MB)")
        out["preview"] = run_engine(project, STACK, state, kubeconfig, "preview")
        log(f"  N={count}: preview, no change {out['preview']['seconds']:.1f} s, changes {out['preview']['changes']}")
        out["changed_tenant"] = change_one_tenant(project, count)
        out["preview_one"] = run_engine(project, STACK, state, kubeconfig, "preview")
        log(f"  N={count}: one-tenant preview {out['preview_one']['seconds']:.1f} s, "
            f"changes {out['preview_one']['changes']}")
    finally:
        cluster.stop()
    return out


def preview_one_tenant(project: Path, count: int, state: Path, kubeconfig: Path) -> dict:
    """Commit the deployed project, change one tenant, and preview the stacks the offline diff names."""
    # The base of the offline diff is what was deployed, including what the file backend wrote
    # into the stack files (the secrets salt).
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "deployed")
    tenant = change_one_tenant(project, count)
    started = time.perf_counter()
    document = offline_diff(project)
    diff_seconds = time.perf_counter() - started
    previewed, source = stacks_to_preview(document)
    previews = [run_engine(project, stack, state, kubeconfig, "preview") for stack in previewed]
    return {"changed_tenant": tenant, "diff_seconds": diff_seconds, "previewed": previewed, "previewed_from": source,
            "preview_one": previews, "preview_one_seconds": sum(r["seconds"] for r in previews)}


def measure_sharded(base: Path, count: int, shard_size: int, log: Callable[[str], None]) -> dict:
    from components.load import load_environment
    from components.fleet.shard_stacks import stack_parts

    shards = shard_names(count, shard_size)
    project = make_project(base / "sharded", count, shards)
    environment = load_environment(project, STACK)
    parts = stack_parts(environment)
    out: dict = {"shard_size": shard_size, "stacks": [p.stack for p in parts],
                 "shard_tenants": {p.stack: list(p.tenants) for p in parts[1:]},
                 "shard_sizes": [len(p.tenants) for p in parts[1:]]}
    cluster = _cluster(base / "cluster-sharded", project)
    state, kubeconfig = base / "state-sharded", cluster.kubeconfig
    try:
        out["up"] = []
        for part in parts:  # deploy order: the platform stack, then the shards
            result = run_engine(project, part.stack, state, kubeconfig, "up")
            out["up"].append(result)
            log(f"  N={count}: up {part.stack} ({len(part.tenants)} tenants) {result['seconds']:.1f} s")
        out["up_seconds"] = sum(r["seconds"] for r in out["up"])
        out.update(preview_one_tenant(project, count, state, kubeconfig))
        out["not_previewed"] = len(parts) - len(out["previewed"])
        log(f"  N={count}: one-tenant preview of {', '.join(out['previewed'])} ({out['previewed_from']}) "
            f"{out['preview_one_seconds']:.1f} s; {out['not_previewed']} of {len(parts)} stacks not previewed")
    finally:
        cluster.stop()
    return out


def measure_touched_shard(base: Path, count: int, shard_size: int, log: Callable[[str], None]) -> dict:
    """A pull request's view of a large sharded fleet: deploy only the platform stack and the shard
    that holds the changed tenant (the others would be deployed too, but nothing they hold enters
    this shard's preview), then change one tenant and preview what the offline diff names.
    The fleet is the whole N: every stack's program reads all N tenant files."""
    from components.load import load_environment
    from components.fleet.shard_stacks import stack_parts

    shards = shard_names(count, shard_size)
    project = make_project(base / "touched", count, shards)
    parts = stack_parts(load_environment(project, STACK))
    tenant = changed_tenant(count)
    shard = next(p for p in parts[1:] if tenant in p.tenants)
    out: dict = {"shard_size": shard_size, "stacks": len(parts), "touched_stack": shard.stack,
                 "touched_tenants": len(shard.tenants), "shard_sizes": sorted(len(p.tenants) for p in parts[1:])}
    cluster = _cluster(base / "cluster-touched", project)
    state, kubeconfig = base / "state-touched", cluster.kubeconfig
    try:
        out["up"] = [run_engine(project, part.stack, state, kubeconfig, "up") for part in (parts[0], shard)]
        for part, result in zip((parts[0], shard), out["up"]):
            log(f"  N={count}: up {part.stack} ({len(part.tenants)} tenants) {result['seconds']:.1f} s")
        out.update(preview_one_tenant(project, count, state, kubeconfig))
        log(f"  N={count}: offline diff {out['diff_seconds']:.1f} s; one-tenant preview of {', '.join(out['previewed'])} "
            f"{out['preview_one_seconds']:.1f} s")
    finally:
        cluster.stop()
    return out


def measure(count: int, scratch: Path, shard_size: int, log: Callable[[str], None]) -> dict:
    """Everything for one N: mock, unsharded, sharded (each side on its own control plane)."""
    base = scratch / f"n{count}"
    row: dict = {"n": count}
    row["mock"] = run_mock(make_project(base / "mock", count))
    log(f"  N={count}: mock registration {row['mock']['seconds']:.1f} s ({row['mock']['resources']} resources)")
    row["unsharded"] = measure_unsharded(base, count, log)
    row["sharded"] = measure_sharded(base, count, shard_size, log)
    engine_objects = row["unsharded"]["up"]["kubernetes_resources"]
    row["same_objects_as_mock"] = engine_objects == row["mock"]["resources"]
    if not row["same_objects_as_mock"]:
        log(f"  N={count}: WARNING the engine registered {engine_objects} Kubernetes resources, the mock "
            f"{row['mock']['resources']}")
    return row


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,300", help="tenant counts (default 10,100,300)")
    parser.add_argument("--shard-size", type=int, default=50, help="tenants per shard, about (default 50)")
    parser.add_argument("--json", type=Path, default=REPO / "out" / "bench" / "pulumi_engine.json",
                        help="where to write the results (default out/bench/pulumi_engine.json)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (projects, state, logs)")
    parser.add_argument("--touched-shard-only", action="store_true",
                        help="per N, deploy only the platform stack and the changed tenant's shard, then the "
                             "one-tenant preview (the pull-request path at sizes where deploying every shard is too slow)")
    for hidden in ("--phase", "--project", "--stack", "--state", "--kubeconfig", "--op"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase == "engine":
        print(json.dumps(phase_engine(Path(args.project), args.stack, Path(args.state), Path(args.kubeconfig), args.op)))
        return 0

    from tools.engine import missing_pulumi_tools

    missing = missing_pulumi_tools()
    if missing:
        print(f"bench/pulumi_engine.py: {', '.join(missing)} not built; run `tools/build.sh etcd kube-apiserver "
              "kube-controller-manager pulumi pulumi-resource-kubernetes` (or `make bench-pulumi`)", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s]
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    load_before, started = os.getloadavg(), time.time()
    command = " ".join([Path(sys.executable).name, "-m", "bench.pulumi_engine", *(argv if argv is not None else sys.argv[1:])])
    results: dict = {"command": command, "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                                     "arch": platform.machine()},
                     "load_before": list(load_before), "shard_size": args.shard_size, "rows": []}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="gpu-tenancy-bench-pulumi-"))
    try:
        for count in sizes:
            if args.touched_shard_only:
                results["rows"].append({"n": count, "touched": measure_touched_shard(scratch / f"n{count}", count, args.shard_size, log)})
            else:
                results["rows"].append(measure(count, scratch, args.shard_size, log))
            args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")  # a later N may fail
    finally:
        if args.keep:
            log(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()
    results.update(load_after=list(load_after), seconds=time.time() - started)
    args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}; load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after; {results['seconds']:.0f} s in all")
    print(f"command: {command}")
    print(f"results: {args.json}")
    print()
    if args.touched_shard_only:
        for row in results["rows"]:
            t = row["touched"]
            peaks = ", ".join(f"{r['tree_peak_mb']:.0f}" for r in t["up"] + t["preview_one"]) if all(
                "tree_peak_mb" in r for r in t["up"] + t["preview_one"]) else "n/a"
            print(f"N={row['n']}: {t['stacks']} stacks, touched {t['touched_stack']} ({t['touched_tenants']} tenants, "
                  f"{t['preview_one'][0].get('kubernetes_resources', '?')} resources); up platform {t['up'][0]['seconds']:.1f} s, "
                  f"up shard {t['up'][1]['seconds']:.1f} s; offline diff {t['diff_seconds']:.1f} s; one-tenant preview "
                  f"{t['preview_one_seconds']:.1f} s (target 30 s); tree peaks MB (up platform, up shard, preview): {peaks}")
        return 0
    print(table(results["rows"]))
    print()
    print("\n".join(verdicts(results["rows"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
