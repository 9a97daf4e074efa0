"""`make up` keeps its cluster and state (tools/up.py, `.cache/up/<stack>/`): the next change is
previewed (`make up-preview`) and applied (`make up` again) on the same cluster, whether a
`make up` still runs it or it was stopped, and `make down` removes it. Driven through the
commands' own process, as a user runs them."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.project_edits import replace_once
from tools.engine import LocalCluster, copy_project, offline_changes

pytestmark = pytest.mark.pulumi

REPO = Path(__file__).resolve().parents[3]
STACK = "prod"
HOLDING = "The control plane runs until you stop it"
STEP = re.compile(r"^make up-preview: prod:   (\S+) (\S+) (\S+)$", re.M)


class Kept:
    """`tools.up` on one kept run directory, with the stack and tenant files of `source`."""

    def __init__(self, source: Path, kept: Path) -> None:
        self.source, self.kept = source, kept
        self.seconds: dict[str, float] = {}

    def argv(self, *flags: str) -> list[str]:
        return [sys.executable, "-m", "tools.up", "--stack", STACK, "--from", str(self.source),
                "--dir", str(self.kept), *flags]

    def run(self, name: str, *flags: str) -> str:
        start = time.monotonic()
        done = subprocess.run(self.argv(*flags), capture_output=True, text=True, cwd=REPO)
        self.seconds[name] = time.monotonic() - start
        assert done.returncode == 0, (name, done.stdout[-4000:], done.stderr[-4000:])
        return done.stdout

    def hold(self, name: str) -> tuple[subprocess.Popen, str]:
        """`make up` left running (until SIGTERM, as Ctrl-C): the process and its output so far."""
        start = time.monotonic()
        proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(HOLDING):
                break
        self.seconds[name] = time.monotonic() - start
        assert proc.poll() is None, "".join(lines)[-4000:]
        return proc, "".join(lines)

    @staticmethod
    def stop(proc: subprocess.Popen) -> str:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, rest[-2000:]
        return rest

    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(config.new_client_from_config(str(self.kept / STACK / "cluster" / "kubeconfig")))


def preview_steps(out: str) -> dict[str, set[str]]:
    """The Kubernetes resources `make up-preview` lists, by operation."""
    steps: dict[str, set[str]] = {}
    for op, name, kind in STEP.findall(out):
        if kind.startswith("kubernetes:"):
            steps.setdefault(op, set()).add(name)
    return steps


def test_the_next_change_is_previewed_and_applied_on_the_kept_cluster(tmp_path, e2e_summary):
    source = copy_project(tmp_path / "source")
    kept = Kept(source, tmp_path / "kept")

    holder, first = kept.hold("first up")
    try:
        assert re.search(r"^make up: prod: create \d+", first, re.M), first[-2000:]
        assert "make up-preview` previews the working tree" in first
        eval_uid = kept.core().read_namespace("eval").metadata.uid

        base = tmp_path / "base"
        for part in ("stacks", "tenants"):
            shutil.copytree(source / part, base / part)
        replace_once(source / "tenants" / "eval.yaml", "      gpu: {a100: 20}", "      gpu: {a100: 16}")
        preview = kept.run("preview on the running cluster", "--preview")
    finally:
        stopped = kept.stop(holder)
    assert f"runs in {kept.kept / STACK}" in preview, preview[-2000:]   # it used the running one
    assert "control plane stopped; it and the stack state are kept" in stopped

    offline = offline_changes(base, source, STACK)
    steps = preview_steps(preview)
    assert set(steps) == {"update"}, steps
    assert steps["update"] == set(offline["update"]), steps["update"] ^ set(offline["update"])
    assert not offline["create"] and not offline["delete"]

    second = kept.run("second up, on the stopped cluster", "--exit")
    assert "starting the kept local control plane" in second
    assert f"make up: prod: update {len(steps['update'])} in" in second, second[-2000:]

    holder, third = kept.hold("third up")
    try:
        assert re.search(r"^make up: prod: no change in", third, re.M), third[-2000:]
        core = kept.core()
        assert core.read_namespace("eval").metadata.uid == eval_uid   # the same objects, from the kept etcd
        quota = core.read_namespaced_resource_quota("tenant-quota", "eval")
        assert quota.spec.hard["requests.nvidia.com/gpu"] == "16", quota.spec.hard
        refused = subprocess.run(kept.argv("--down"), capture_output=True, text=True, cwd=REPO)
        assert refused.returncode == 1 and "still runs this control plane" in refused.stderr, refused
    finally:
        kept.stop(holder)

    kept.run("down", "--down")
    assert not (kept.kept / STACK).exists()
    e2e_summary.append("make up kept: " + "; ".join(f"{name} {s:.1f}s" for name, s in kept.seconds.items()))


def test_a_kept_cluster_started_again_keeps_its_objects_and_gets_the_nodes_its_stack_gained(tmp_path):
    project = copy_project(tmp_path / "project")
    cluster = LocalCluster(tmp_path / "cluster", project, STACK).start()
    try:
        core = client.CoreV1Api(cluster.api_client)
        uid = core.read_node("gpu-h100-01").metadata.uid
        port = cluster.cp.port
    finally:
        cluster.stop()
    replace_once(project / "stacks" / "Pulumi.prod.yaml", "gpu-h100-05]", "gpu-h100-05, gpu-h100-09]")

    again = LocalCluster(tmp_path / "cluster", project, STACK).start()
    try:
        core = client.CoreV1Api(config.new_client_from_config(str(again.kubeconfig)))   # the kubeconfig it wrote
        assert again.resumed and again.cp.port == port
        assert core.read_node("gpu-h100-01").metadata.uid == uid
        assert core.read_node("gpu-h100-09").metadata.labels["kubernetes.io/hostname"] == "gpu-h100-09"
    finally:
        again.stop()
