"""`make up [STACK=prod] [FROM=dir]`: a real `pulumi up` of the example on a throw-away local control plane.

Starts etcd, kube-apiserver and kube-controller-manager on loopback (tools/control_plane.py),
registers the stack's GPU Nodes and installs the Kueue/KAI CRDs the way a cluster has them before
the first deployment, writes a kubeconfig whose context is the stack's `kubeContext`, and runs
`__main__.py` through the real engine (the Pulumi CLI and the Kubernetes provider built by
tools/build.sh; the Automation API serves the Python program) on a local file backend.
Then it prints where everything is and keeps the control plane running until Ctrl-C.

A sharded environment (docs/sharding.md) is several Pulumi stacks: `STACK=<env>` runs `up` of every
one of them in deploy order (the environment's stack, then each shard), `STACK=<env>.<shard>` the
environment's stack and that shard. `FROM=dir` takes the stack and tenant files from `dir/stacks`
and `dir/tenants` instead of the repository's (e.g. `FROM=tests/fixtures/sharded STACK=lab`).

Nothing here touches a real cluster, and nothing is written to the repository: the project is
copied into the run directory (the file backend writes a secrets salt into the stack file).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"  # see tests/e2e/pulumi_engine/conftest.py

from components.spec.problems import InvalidInput  # noqa: E402  (after the fork setting)
from components.spec.sharding import split_stack_name  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="prod", help="an environment, or one shard stack <env>.<shard>")
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="directory whose stacks/ and tenants/ replace the repository's")
    parser.add_argument("--dir", type=Path, default=REPO / "out" / "up", help="run directory (default: out/up/<stack>)")
    parser.add_argument("--exit", action="store_true", help="stop the control plane after the up instead of waiting")
    args = parser.parse_args()

    from tools.engine import (
        Engine,
        LocalCluster,
        copy_project,
        missing_pulumi_tools,
        pulumi_bin_dirs,
    )

    try:
        stacks = stacks_to_deploy(args.source or REPO, args.stack)
    except (InvalidInput, ValueError) as exc:
        print(f"make up: {exc}", file=sys.stderr)
        return 2
    missing = missing_pulumi_tools()
    if missing:
        print(f"make up: {', '.join(missing)} not built; run `tools/build.sh pulumi pulumi-resource-kubernetes`", file=sys.stderr)
        return 2
    run = (args.dir / args.stack).resolve()
    if run.exists():
        shutil.rmtree(run)
    project = copy_project(run / "project")
    if args.source is not None:
        for part in ("stacks", "tenants"):
            shutil.rmtree(project / part)
            shutil.copytree(args.source / part, project / part)
    environment = split_stack_name(args.stack)[0]
    print(f"make up: starting a local control plane for {environment} in {run} ...", flush=True)
    cluster = LocalCluster(run / "cluster", project, environment)
    try:
        cluster.start()
        engines = []
        for stack in stacks:
            engine = Engine(project, stack, run / "state", cluster.kubeconfig)
            start = time.monotonic()
            result = engine.up(on_output=lambda line: print(line, end="" if line.endswith("\n") else "\n", flush=True))
            print(f"\nmake up: `pulumi up` of {stack}: {result.summary} in {time.monotonic() - start:.1f}s\n")
            engines.append(engine)
        env = " ".join(f"{k}={engines[0].env[k]}" for k in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_HOME"))
        print(f"  kubeconfig   {cluster.kubeconfig}   (context {cluster.context})")
        print(f"               KUBECONFIG={cluster.kubeconfig} kubectl get namespaces")
        print(f"  state        {engines[0].state_dir / 'backend'}   (file backend, stacks {', '.join(stacks)})")
        for stack in stacks:
            print(f"               cd {project} && {env} {pulumi_bin_dirs()['pulumi'] / 'pulumi'} stack export --stack {stack}")
        print(f"  project copy {project}")
        print(f"  logs         {cluster.cp.log_dir}")
        if args.exit:
            return 0
        print(f"\nThe control plane runs until you stop it: Ctrl-C here (or `kill {os.getpid()}`).", flush=True)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        try:
            while not stop:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        cluster.stop()
        print("make up: control plane stopped (run directory kept; it is removed by the next `make up`).")


def stacks_to_deploy(root: Path, stack: str) -> list[str]:
    """The Pulumi stacks `make up STACK=stack` runs, in deploy order (raises `InvalidInput` for bad
    input and `ValueError` for a shard the environment does not have).

    >>> stacks_to_deploy(REPO, "prod")
    ['prod']
    """
    from components.load import load_environment
    from components.fleet.shard_stacks import stack_part, stack_parts

    environment = load_environment(root, split_stack_name(stack)[0])
    parts = [p.stack for p in stack_parts(environment)]
    if stack == environment.name:
        return parts
    return [environment.name, stack_part(environment, stack).stack]


if __name__ == "__main__":
    sys.exit(main())
