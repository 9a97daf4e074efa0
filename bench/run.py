"""Benchmarks at N synthetic tenants, each phase against its floor, measured in the same run.

    .venv/bin/python -m bench.run [--sizes 10,100,1000] [--repeat 3] [--pulumi-sizes 10,100,1000]

Per N (tools/synthetic.py: N tenant files, a stack whose capacity grows with N) it prints:

- render: `tenants render` in-process (load, validate, build, write YAML) into a new directory,
  against the floor: reading the same YAML files with `yaml.CSafeLoader` and writing the same
  output bytes with `yaml.CSafeDumper` into a new directory, no logic (the floor's output is
  checked to be byte-identical);
- re-render: `tenants render` again over its earlier output (what CI or `make run` does the second
  time; unchanged files are linked, not written);
- Pulumi: the program's Fleet component under the mock runtime (tools/pulumi_mocks.py) against
  registering the same objects as bare pulumi_kubernetes resources (no components, no options);
- peak memory (ru_maxrss) of the render process and of the Fleet process;
- `tenants diff --base HEAD` for a one-tenant change in the N-tenant fleet (a git repository made
  for the purpose), and its ratio to render;
- build: building every object of the fleet (loaded beforehand) with `scheduler: kueue` and with
  `scheduler: kai` (the same tenants), and the ratio KAI / Kueue;
- validate: `tenants validate --stack bench` (load, validate, the fleet-wide checks, the objects'
  sizes), and its ratios to render and to the floor;
- stack selection: the same fleet split in shards of about `--shard-size` tenants (default 25, the
  size docs/sharding.md recommends), committed, then the same one-tenant change: `tenants diff
  --format stacks` (the stacks a pull request previews, offline) and `tenants stacks --format json`
  (every stack, in deploy order); the number of stacks, the largest shard, the stacks selected, and
  the selection's ratio to the unsharded diff of the same change (what sharding adds).

Each phase runs in its own process (so each peak-memory figure is that phase's), `--repeat` times
for render, floor, diff, validate and the stack selection (the best time counts; phases alternate so that load on the machine
hits both sides of a ratio alike), once for the Pulumi phases. Outputs are deleted only when the run
ends: on ext4 mounted with `discard` (our build machine) creating files soon after deleting a
thousand costs ~0.5 ms each, which would charge one phase for another's clean-up. Times are
wall-clock seconds of the work itself, imports excluded; the machine line gives the seconds of a
bare loop of 10 million additions, to compare hosts. Targets (N = 1000): render and re-render
< 2 s, render < 3x floor, Fleet < 1.3x bare,
peak memory < 500 MB, diff < 2 s, KAI build < 1.2x the Kueue build; (N = 10000) render <= 0.25x the
floor, diff <= 0.6x render, peak memory of every phase but the Pulumi ones under 2 GB. Exit code 0 whatever the figures: this measures, it does not gate.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (bench.pulumi_engine sets GRPC_ENABLE_FORK_SUPPORT=false here, and so in every phase started: the
# Pulumi phases, which load gRPC, do not fork; render, which forks, does not load gRPC.)
from bench.pulumi_engine import change_one_tenant, shard_names, sharded_stack_data
from tools.synthetic import STACK, dump, write_project

REPO = Path(__file__).resolve().parents[1]

TARGETS = {"render_ratio": 3.0, "render_seconds": 2.0, "pulumi_ratio": 1.3, "peak_mb": 500.0, "diff_seconds": 2.0,
           "kai_ratio": 1.2}
# At 10,000 tenants (issue 39 item 4): ratios, which carry from machine to machine, and memory.
TARGETS_10K = {"render_ratio": 0.25, "diff_ratio": 0.6, "peak_mb": 2048.0}
SHARD_SIZE = 25  # tenants per shard, about: docs/sharding.md's recommendation


# --- phases (each run in a child process: `run.py --phase NAME --root DIR`) ----------------------------


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _captured(func, *args):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        result = func(*args)
    return result, out.getvalue(), err.getvalue()


def _quiet(func, *args):
    result, _, err = _captured(func, *args)
    return result, err


def _timed_command(root: Path, *command: str) -> tuple[float, str]:
    """`tenants --root ROOT COMMAND...` in-process: its seconds and its standard output."""
    from components.cli import main

    started = time.perf_counter()
    code, out, err = _captured(main, ["--root", str(root), *command])
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"tenants {command[0]} failed ({code}): {err[-3000:]}")
    return seconds, out


def phase_render(root: Path, out: Path, repeat: int) -> dict:
    """Render into a new directory, then again over `out` (made by the first render of the run)."""
    from components.cli import main

    def render(target: Path) -> float:
        started = time.perf_counter()
        code, err = _quiet(main, ["--root", str(root), "render", "--stack", STACK, "--out", str(target)])
        if code != 0:
            raise SystemExit(f"render failed: {err}")
        return time.perf_counter() - started

    new, again = [], []
    for _ in range(repeat):
        new.append(render(Path(tempfile.mkdtemp(prefix="render-", dir=out.parent)) / "out"))
        if not out.exists():
            render(out)  # the earlier output that a re-render replaces (not timed)
        again.append(render(out))
    objects = sum(p.read_text().count("\n---\n") for p in out.glob("*.yaml"))  # each file starts with a comment
    return {"seconds": min(new), "again": min(again), "objects": objects}


def phase_floor(root: Path, out: Path, repeat: int) -> dict:
    """Read the inputs with the C loader and write the rendered bytes with the C dumper, no logic."""
    import yaml

    from components.output.render import HEADER

    inputs = sorted([*(root / "tenants").glob("*.yaml"), *(root / "stacks").glob("*.yaml")])
    expected = {p.name: p.read_text() for p in sorted(out.glob("*.yaml"))}
    documents = {name: list(yaml.load_all(text, Loader=yaml.CSafeLoader)) for name, text in expected.items()}
    options = dict(sort_keys=True, default_flow_style=False, explicit_start=True, width=120, allow_unicode=True)
    times = []
    for _ in range(repeat):
        target = Path(tempfile.mkdtemp(prefix="floor-", dir=out.parent)) / "out"
        started = time.perf_counter()
        for path in inputs:
            yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        target.mkdir()
        for name, docs in documents.items():
            (target / name).write_text(HEADER + yaml.dump_all(docs, Dumper=yaml.CSafeDumper, **options), encoding="utf-8")
        times.append(time.perf_counter() - started)
        written = {p.name: p.read_text() for p in sorted(target.glob("*.yaml"))}
        if written != expected:
            raise SystemExit("the floor did not write the same bytes as tenants render")
    return {"seconds": min(times)}


def bare_loop() -> float:
    """Seconds of 10 million additions in pure Python: how fast this host is right now."""
    started, total = time.perf_counter(), 0
    for number in range(10_000_000):
        total += number
    return time.perf_counter() - started


def _pulumi_run(body) -> tuple[float, int]:
    from tools.pulumi_mocks import run_body

    started = time.perf_counter()
    registrations, _ = run_body(STACK, {}, body)
    seconds = time.perf_counter() - started
    # Objects and providers; not the reads of inventory Nodes (GpuPlatform.joined) nor the engine-only
    # gate of the node taints (GpuPlatform._gate), which bare registers none of.
    return seconds, sum(1 for r in registrations
                        if not r.type.startswith(("gpu-tenancy:", "pulumi:index:Stash")) and not r.read)


def phase_fleet(root: Path) -> dict:
    from components.resources.fleet import Fleet
    from components.load import fewer_gc_passes_from_now, load_environment

    fewer_gc_passes_from_now()   # as the program (__main__.py) runs; bare gets the same
    environment = load_environment(root, STACK)
    seconds, resources = _pulumi_run(lambda: Fleet(environment.name, environment))
    return {"seconds": seconds, "resources": resources}


def phase_bare(root: Path) -> dict:
    import pulumi

    from components.manifests.build import environment_objects
    from components.manifests.meta import object_id
    from components.resources.kubernetes import register
    from components.load import fewer_gc_passes_from_now, load_environment

    fewer_gc_passes_from_now()
    environment = load_environment(root, STACK)
    objects = [obj for items in environment_objects(environment).values() for obj in items]

    def body() -> None:
        for obj in objects:
            register(object_id(obj).replace("/", "-").replace(":", "-"), obj, pulumi.ResourceOptions())

    seconds, resources = _pulumi_run(body)
    return {"seconds": seconds, "resources": resources}


def phase_diff(root: Path, repeat: int) -> dict:
    from components.cli import main

    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        code, err = _quiet(main, ["--root", str(root), "diff", "--base", "HEAD", "--stack", STACK, "--format", "json"])
        times.append(time.perf_counter() - started)
        if code != 0:
            raise SystemExit(f"diff failed ({code}): {err}")
    return {"seconds": min(times)}


def phase_build(root: Path, repeat: int) -> dict:
    """Build every object of the (already loaded) environment: the builders alone."""
    from components.manifests.build import environment_objects
    from components.load import fewer_gc_passes, load_environment

    times, cpu = [], []
    with fewer_gc_passes():   # as the CLI runs its commands
        for _ in range(repeat):
            environment = load_environment(root, STACK)   # fleet facts are made once per environment: count them
            started, started_cpu = time.perf_counter(), time.process_time()
            objects = environment_objects(environment)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
    # CPU seconds too: on a shared machine they vary less than wall-clock ones.
    return {"seconds": min(times), "cpu_seconds": min(cpu), "objects": sum(len(o) for o in objects.values())}


def phase_validate(root: Path, repeat: int) -> dict:
    """`tenants validate --stack bench`: what a pull request's first check runs."""
    times = [_timed_command(root, "validate", "--stack", STACK)[0] for _ in range(repeat)]
    return {"seconds": min(times)}


def phase_stacks(root: Path, repeat: int) -> dict:
    """The offline stack selection of a sharded fleet with one tenant changed since HEAD: `tenants
    diff --format stacks` (what pr-preview.yml previews) and `tenants stacks --format json` (every
    stack in deploy order, what the deploy runs); the stacks selected, and of the listing the
    number of stacks and the smallest and largest shard."""
    select, listing = [], []
    for _ in range(repeat):
        seconds, selected = _timed_command(root, "diff", "--base", "HEAD", "--stack", STACK, "--format", "stacks")
        select.append(seconds)
        seconds, listed = _timed_command(root, "stacks", "--stack", STACK, "--format", "json")
        listing.append(seconds)
    stacks = json.loads(listed)
    shards = [len(s["tenants"]) for s in stacks if s["role"] == "shard"]
    return {"seconds": min(select), "list_seconds": min(listing), "selected": [s["stack"] for s in json.loads(selected)],
            "stacks": len(stacks), "largest_shard": max(shards), "smallest_shard": min(shards)}


def child(args: argparse.Namespace) -> None:
    root, out = Path(args.root), Path(args.out) if args.out else None
    if args.phase == "render":
        result = phase_render(root, out, args.repeat)
    elif args.phase == "floor":
        result = phase_floor(root, out, args.repeat)
    elif args.phase == "fleet":
        result = phase_fleet(root)
    elif args.phase == "bare":
        result = phase_bare(root)
    elif args.phase == "diff":
        result = phase_diff(root, args.repeat)
    elif args.phase == "build":
        result = phase_build(root, args.repeat)
    elif args.phase == "validate":
        result = phase_validate(root, args.repeat)
    elif args.phase == "stacks":
        result = phase_stacks(root, args.repeat)
    else:
        raise SystemExit(f"unknown phase {args.phase}")
    result["peak_mb"] = _peak_mb()
    print(json.dumps(result))


# --- the driver -------------------------------------------------------------------------------------


def run_phase(phase: str, root: Path, out: Path | None = None, repeat: int = 1) -> dict:
    command = [sys.executable, "-m", "bench.run", "--phase", phase, "--root", str(root), "--repeat", str(repeat)]
    if out is not None:
        command += ["--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"phase {phase} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=root, check=True, capture_output=True,
    )


def commit_then_change(root: Path, count: int) -> str:
    """Commit the project at `root` in a new git repository, then lower one tenant's GPU quota in
    the working tree (`change_one_tenant`, the change of every one-tenant figure); the tenant."""
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return change_one_tenant(root, count)


def sharded_fleet(root: Path, count: int, shard_size: int) -> Path:
    """The synthetic fleet of `count` tenants in shards of about `shard_size`, committed, with the
    one-tenant change in the working tree."""
    write_project(root, count)
    (root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(
        dump(sharded_stack_data(count, shard_names(count, shard_size))), encoding="utf-8")
    commit_then_change(root, count)
    return root


def measure(count: int, scratch: Path, repeat: int, pulumi: bool, log, shard_size: int = SHARD_SIZE) -> dict:
    root = write_project(scratch / f"n{count}", count)
    out = scratch / f"out{count}"
    row: dict = {"n": count}
    renders, floors = [], []
    for _ in range(repeat):  # alternate, so that machine load hits both sides alike
        renders.append(run_phase("render", root, out, 1))
        floors.append(run_phase("floor", root, out, 1))
    row["render"] = min(r["seconds"] for r in renders)
    row["rerender"] = min(r["again"] for r in renders)
    row["floor"] = min(f["seconds"] for f in floors)
    row["objects"] = renders[0]["objects"]
    row["render_mb"] = max(r["peak_mb"] for r in renders)
    log(f"  N={count}: render {row['render']:.2f} s, re-render {row['rerender']:.2f} s, floor {row['floor']:.2f} s")
    if pulumi:
        fleet, bare = run_phase("fleet", root), run_phase("bare", root)
        row["bare_mb"] = bare["peak_mb"]
        if fleet["resources"] != bare["resources"]:
            raise SystemExit(f"Fleet registered {fleet['resources']} resources, bare {bare['resources']}")
        row.update(fleet=fleet["seconds"], bare=bare["seconds"], fleet_mb=fleet["peak_mb"], resources=fleet["resources"])
        log(f"  N={count}: Fleet {row['fleet']:.1f} s, bare {row['bare']:.1f} s ({row['resources']} resources)")
    commit_then_change(root, count)
    diff = run_phase("diff", root, None, repeat)
    row.update(diff=diff["seconds"], diff_mb=diff["peak_mb"])
    log(f"  N={count}: diff {row['diff']:.2f} s")
    validate = run_phase("validate", root, None, repeat)
    row.update(validate=validate["seconds"], validate_mb=validate["peak_mb"])
    log(f"  N={count}: validate {row['validate']:.2f} s")
    stacks = run_phase("stacks", sharded_fleet(scratch / f"n{count}-sharded", count, shard_size), None, repeat)
    row.update(select=stacks["seconds"], select_mb=stacks["peak_mb"], shard_size=shard_size,
               **{key: stacks[key] for key in ("list_seconds", "selected", "stacks", "largest_shard", "smallest_shard")})
    log(f"  N={count}: shards of ~{shard_size}: {row['stacks']} stacks ({row['smallest_shard']}-{row['largest_shard']} "
        f"tenants a shard); selection {row['select']:.2f} s ({', '.join(row['selected'])}), listing {row['list_seconds']:.2f} s")
    kai_root = write_project(scratch / f"n{count}-kai", count, scheduler="kai")
    kueue_builds, kai_builds = [], []
    for _ in range(repeat):  # alternate, as for render and floor
        kueue_builds.append(run_phase("build", root, None, 1))
        kai_builds.append(run_phase("build", kai_root, None, 1))
    row["build_kueue"] = min(b["seconds"] for b in kueue_builds)
    row["build_kai"] = min(b["seconds"] for b in kai_builds)
    row["build_cpu_ratio"] = min(b["cpu_seconds"] for b in kai_builds) / min(b["cpu_seconds"] for b in kueue_builds)
    log(f"  N={count}: build Kueue {row['build_kueue']:.2f} s, KAI {row['build_kai']:.2f} s "
        f"(CPU KAI / Kueue {row['build_cpu_ratio']:.2f}x)")
    return row


def _selection_cell(row: dict) -> str:
    """The stack selection's seconds and what it selected, e.g. `0.40 s: bench.s02`."""
    if row.get("select") is None:
        return "n/a"
    return f"{row['select']:.2f} s: {', '.join(row['selected']) or 'none'}"


def table(rows: list[dict]) -> str:
    def fmt(value, spec=".2f", unit=""):
        return "n/a" if value is None else f"{value:{spec}}{unit}"

    lines = [
        "| N | objects | render | re-render | floor | render / floor | Fleet | bare | Fleet / bare | diff | diff / render "
        "| build Kueue | build KAI | KAI / Kueue (CPU) | validate | validate / render | stacks at ~S a shard (smallest-largest) "
        "| stack selection | selection / diff | peak MB: render, diff, validate, selection, Fleet, bare |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        fleet_ratio = r["fleet"] / r["bare"] if r.get("fleet") else None
        stacks = f"{r['stacks']} at ~{r['shard_size']} ({r['smallest_shard']}-{r['largest_shard']})" if r.get("stacks") else "n/a"
        lines.append(
            f"| {r['n']} | {r['objects']} | {fmt(r['render'], unit=' s')} | {fmt(r['rerender'], unit=' s')} | {fmt(r['floor'], unit=' s')} "
            f"| {fmt(r['render'] / r['floor'], unit='x')} | {fmt(r.get('fleet'), '.1f', ' s')} | {fmt(r.get('bare'), '.1f', ' s')} "
            f"| {fmt(fleet_ratio, unit='x')} | {fmt(r['diff'], unit=' s')} | {fmt(r['diff'] / r['render'], unit='x')} "
            f"| {fmt(r['build_kueue'], unit=' s')} | {fmt(r['build_kai'], unit=' s')} | {fmt(r['build_kai'] / r['build_kueue'], unit='x')} ({fmt(r['build_cpu_ratio'], unit='x')}) "
            f"| {fmt(r.get('validate'), unit=' s')} | {fmt(r['validate'] / r['render'] if r.get('validate') else None, unit='x')} "
            f"| {stacks} | {_selection_cell(r)} | {fmt(r['select'] / r['diff'] if r.get('select') else None, unit='x')} "
            f"| {r['render_mb']:.0f}, {r['diff_mb']:.0f}, {fmt(r.get('validate_mb'), '.0f')}, {fmt(r.get('select_mb'), '.0f')}, "
            f"{fmt(r.get('fleet_mb'), '.0f')}, {fmt(r.get('bare_mb'), '.0f')} |"
        )
    return "\n".join(lines)


def _verdicts_1000(row: dict) -> list[tuple[str, bool]]:
    checks = [
        ("render within 3x the floor", row["render"] / row["floor"] <= TARGETS["render_ratio"]),
        ("render under 2 s (into a new directory)", row["render"] < TARGETS["render_seconds"]),
        ("re-render under 2 s (over its earlier output)", row["rerender"] < TARGETS["render_seconds"]),
        ("diff under 2 s", row["diff"] < TARGETS["diff_seconds"]),
        ("KAI build within 1.2x the Kueue build", row["build_kai"] / row["build_kueue"] <= TARGETS["kai_ratio"]),
        ("peak memory of render and diff under 500 MB", max(row["render_mb"], row["diff_mb"]) < TARGETS["peak_mb"]),
    ]
    if row.get("fleet"):
        checks.append(("Fleet within 1.3x bare registration", row["fleet"] / row["bare"] <= TARGETS["pulumi_ratio"]))
        checks.append(("peak memory of the Pulumi program under 500 MB", row["fleet_mb"] < TARGETS["peak_mb"]))
    return checks


def _verdicts_10000(row: dict) -> list[tuple[str, bool]]:
    peaks = [row[key] for key in ("render_mb", "diff_mb", "validate_mb", "select_mb") if row.get(key) is not None]
    return [
        ("N = 10000: render within 0.25x the floor", row["render"] / row["floor"] <= TARGETS_10K["render_ratio"]),
        ("N = 10000: one-tenant diff within 0.6x render", row["diff"] / row["render"] <= TARGETS_10K["diff_ratio"]),
        ("N = 10000: peak memory of render, diff, validate and stack selection under 2 GB",
         max(peaks) < TARGETS_10K["peak_mb"]),
    ]


def verdicts(rows: list[dict]) -> list[str]:
    by_size = {r["n"]: r for r in rows}
    if 1000 not in by_size and 10000 not in by_size:
        return ["(targets are stated for N = 1000 and N = 10000, neither of which was measured)"]
    checks = [*(_verdicts_1000(by_size[1000]) if 1000 in by_size else []),
              *(_verdicts_10000(by_size[10000]) if 10000 in by_size else [])]
    return [f"{'met   ' if ok else 'MISSED'} {name}" for name, ok in checks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000", help="tenant counts (default 10,100,1000)")
    parser.add_argument("--pulumi-sizes", default=None, help="counts at which to run the Pulumi phases (default: --sizes)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of render, floor and diff; the best counts")
    parser.add_argument("--shard-size", type=int, default=SHARD_SIZE,
                        help=f"tenants per shard, about, of the stack selection's sharded fleet (default {SHARD_SIZE})")
    parser.add_argument("--json", type=Path, help="also write the rows (and the machine line) to this file")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        child(args)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    pulumi_sizes = set(sizes if args.pulumi_sizes is None else [int(s) for s in args.pulumi_sizes.split(",") if s])
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    load_before, loop_before = os.getloadavg(), bare_loop()
    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu-tenancy-bench-") as scratch:
        for count in sizes:
            rows.append(measure(count, Path(scratch), args.repeat, count in pulumi_sizes, log, args.shard_size))
    machine = (f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}; "
               f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; bare loop {loop_before:.2f} s "
               f"before, {bare_loop():.2f} s after; {time.time() - started:.0f} s in all")
    command = " ".join([Path(sys.executable).name, "-m", "bench.run", *sys.argv[1:]])
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "command": command, "rows": rows,
                                         "verdicts": verdicts(rows)}, indent=2, sort_keys=True) + "\n")
    print(machine)
    print(f"command: {command}")
    print()
    print(table(rows))
    print()
    print("\n".join(verdicts(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
