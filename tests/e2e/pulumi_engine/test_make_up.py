"""`make up` (tools/up.py) on the real engine: a sharded environment deployed with 2 workers where
one shard's `pulumi up` is refused by the cluster and the other stacks still deploy, and a stack
with vClusters from a local chart deployed offline by `tools/up.py` itself, whose printed commands
work on its copy."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tools import up
from tools.engine import LocalCluster, rendered_by_name, with_local_vcluster_chart

pytestmark = pytest.mark.pulumi

REPO = Path(__file__).resolve().parents[3]
SHARDED = REPO / "tests" / "fixtures" / "sharded"
REFUSED = "audio"   # a tenant of lab.blue: the cluster refuses quotas in its namespace


def refuse_quotas_in(cp, namespaces: list[str]) -> None:
    """An admission policy (as the platform team could install one) denying ResourceQuotas in
    `namespaces`; returns once the API server enforces it (checked in a probe namespace)."""
    probe = cp.create_namespace("refusal-probe")
    refused = [*namespaces, probe]
    cp.apply({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "e2e-refuse-quotas"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "operations": ["CREATE", "UPDATE"], "resources": ["resourcequotas"]}]},
                 "validations": [{"expression": f"!(request.namespace in {json.dumps(refused)})",
                                  "message": "e2e: this cluster refuses quotas here"}]},
    })
    cp.apply({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "e2e-refuse-quotas"},
        "spec": {"policyName": "e2e-refuse-quotas", "validationActions": ["Deny"]},
    })
    quota = {"metadata": {"name": "probe"}, "spec": {"hard": {"pods": "1"}}}
    core = client.CoreV1Api(cp.api_client)

    def enforced() -> bool:
        try:
            core.create_namespaced_resource_quota(probe, quota, dry_run="All")
        except ApiException as err:
            return "refuses quotas here" in err.body
        return False

    cp.wait_for(enforced, timeout=30, what="the quota refusal enforced")


def test_two_workers_deploy_every_shard_they_can_and_the_run_fails_at_the_end(tmp_path, e2e_summary):
    run = tmp_path / "run"
    project, graph = up.prepare(SHARDED, "lab", run)
    cluster = LocalCluster(run / "cluster", project, "lab").start()
    try:
        refuse_quotas_in(cluster.cp, [REFUSED])
        lines: list[str] = []
        spans: dict[str, tuple[float, float]] = {}
        deploy = up.subprocess_deploy(project, run / "state", cluster.kubeconfig, out=lines.append)

        def timed_deploy(stack: str):
            start = time.monotonic()
            result = deploy(stack)
            spans[stack] = (start, time.monotonic())
            return result

        runs = {r.stack: r for r in up.deploy_stacks(graph, timed_deploy, workers=2)}

        assert runs["lab"].ok and runs["lab.green"].ok, (runs, lines[-40:])
        assert not runs["lab.blue"].ok and runs["lab.blue"].ran
        assert "refuses quotas here" in "\n".join(line for line in lines if line.startswith("[lab.blue]"))
        # The shards ran side by side: both started before either finished (the platform stack first).
        assert spans["lab"][1] <= min(spans["lab.blue"][0], spans["lab.green"][0])
        assert max(spans["lab.blue"][0], spans["lab.green"][0]) < min(spans["lab.blue"][1], spans["lab.green"][1])
        assert up.run_report(list(runs.values())).splitlines()[-1].startswith("make up: FAILED: lab.blue")

        core = client.CoreV1Api(cluster.api_client)
        for namespace in ("robotics", "vision"):  # lab.green's tenants: deployed whole
            assert core.list_namespaced_resource_quota(namespace).items, namespace
        assert not core.list_namespaced_resource_quota(REFUSED).items
        e2e_summary.append("make up, 2 workers: " + "; ".join(
            f"{r.stack} {'ok' if r.ok else 'FAILED'} {spans[r.stack][1] - spans[r.stack][0]:.1f}s" for r in runs.values()))
    finally:
        cluster.stop()


def test_make_up_deploys_a_vcluster_stack_offline_and_prints_commands_that_work(tmp_path, e2e_summary):
    source = with_local_vcluster_chart(tmp_path / "source")

    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tools.up", "--stack", "dev", "--from", str(source),
                           "--dir", str(tmp_path / "run"), "--exit"], capture_output=True, text=True, cwd=REPO)
    seconds = time.monotonic() - start

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "make up: every stack deployed" in done.stdout
    assert re.search(r"^make up: dev: create \d+", done.stdout, re.M), done.stdout[-2000:]
    commands = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("cd ")]
    assert len(commands) == 2, commands  # stack ls, stack export of dev
    outputs = []
    for command in commands:
        ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
        assert ran.returncode == 0, (command, ran.stderr)
        outputs.append(ran.stdout)
    export = json.loads(outputs[1])
    releases = [r for r in export["deployment"]["resources"] if r["type"] == "kubernetes:helm.sh/v3:Release"]
    rendered = [n for n, o in rendered_by_name(source, "dev").items() if o["kind"] == "HelmRelease"]
    assert rendered and len(releases) == len(rendered), (releases, rendered)  # every vCluster of dev, installed
    e2e_summary.append(f"make up STACK=dev with a local vcluster chart: {len(releases)} releases, {seconds:.1f}s wall")
