"""The fault lane (issue 40): crashes and hand-made drift on the real engine, each followed by the
documented way back, with checkpoints on as production's backends write them.

Every operation goes through `make up`'s stack worker (`python -m tools.up --one-stack`, what
`make up` and `make up-preview` run per stack: `Engine.recover`, then `up --refresh` or `preview
--refresh`, then no process left behind), except the half-done state move, repaired by
`tenants moves --run` as the deploy workflow runs it. Each asserts that nothing was lost (the
tenants' namespaces keep their uids), that the stacks converged (a preview after the repair
changes nothing) and that the messages say what happened (docs/when-things-fail.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from components.load import load_environment
from components.review.moves.state_moves import pending_operations
from tests.project_edits import replace_once
from tools.engine import Engine, lock_holders
from tools.reaping import children
from tools.taint_owners import taint_owners, taint_patch_managers
from tools.up import RESULT_MARKER

pytestmark = pytest.mark.pulumi

REPO = Path(__file__).resolve().parents[3]
SHARDED = REPO / "tests" / "fixtures" / "sharded"
NODE = "gpu-h100-06"          # a node of prod's dedicated pool h100-serve (tenant taint `inference`)
POOL_LABEL = "gpu.acme.dev/pool"
PSA = "pod-security.kubernetes.io/enforce"


def worker(s, stack: str, *flags: str, kill_cli_after: int | None = None, state: Path | None = None) -> tuple[dict, str, dict]:
    """`make up`'s worker for one stack on the scenario's cluster and state (`state`, else the
    scenario's): (result, output, what was killed). With `kill_cli_after`, the `pulumi` CLI is
    SIGKILLed once that many resources are created (the provider's pid is kept to check it did
    not survive)."""
    command = [sys.executable, "-m", "tools.up", "--one-stack", stack, "--dir", str(s.project),
               "--state", str(state or s.root / "state"), "--kubeconfig", str(s.cluster.kubeconfig), *flags]
    lines, killed, created = [], {}, 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO) as proc:
        for line in proc.stdout:
            lines.append(line)
            created += " created (" in line
            if kill_cli_after is not None and not killed and created >= kill_cli_after:
                cli = [pid for pid, name in children(proc.pid) if name == "pulumi"]
                assert len(cli) == 1, children(proc.pid)
                killed = {"cli": cli[0], "plugins": children(cli[0])}
                os.kill(cli[0], signal.SIGKILL)
    output = "".join(lines)
    results = [json.loads(x[len(RESULT_MARKER):]) for x in lines if x.startswith(RESULT_MARKER)]
    assert len(results) == 1, output[-3000:]
    return results[0], output, killed


def namespace_uids(s, stack: str) -> dict[str, str]:
    core = client.CoreV1Api(s.api)
    return {ns: core.read_namespace(ns).metadata.uid
            for t in load_environment(s.project, stack).tenants for ns in t.spec.all_namespaces}


def changed_steps(result: dict) -> set[tuple[str, str]]:
    return {(op, name) for op, name, _ in result["steps"]}


@pytest.fixture(scope="module")
def prod(scenario_factory):
    return scenario_factory("prod")


def test_five_drifts_are_shown_by_up_preview_and_repaired_by_make_up(prod, timed):
    s = prod
    # Deployed in this process (the setup; the repair below is what goes through `make up`'s worker).
    assert set(timed("first up", s.engine.up).changes) == {"create"}
    uids = namespace_uids(s, "prod")
    core, net = client.CoreV1Api(s.api), client.NetworkingV1Api(s.api)
    quota = core.read_namespaced_resource_quota("tenant-quota", "eval")
    cpu = next(k for k in quota.spec.hard if "cpu" in k)
    declared = quota.spec.hard[cpu]
    # The five drifts of the issue, each made by hand as a person with kubectl would (an update,
    # not an apply: its manager takes the field over from ours).
    core.patch_namespaced_resource_quota("tenant-quota", "eval", {"spec": {"hard": {cpu: "9999"}}})
    net.delete_namespaced_network_policy("tenant-network", "eval")
    core.patch_namespace("eval", {"metadata": {"labels": {PSA: "privileged"}}})
    core.patch_node(NODE, {"spec": {"taints": None}, "metadata": {"labels": {POOL_LABEL: None}}})

    # Without a refresh the engine compares the program with its own state only: it sees nothing.
    assert s.engine.preview().changes == {}
    preview, output, _ = timed("make up-preview of the drift", lambda: worker(s, "prod", "--preview"))
    assert preview["ok"], output[-3000:]
    repairs = {("update", "eval-resourcequota-eval-tenant-quota"), ("create", "eval-networkpolicy-eval-tenant-network"),
               ("update", "eval-namespace-eval"), ("update", f"prod-platform-node-{NODE}"),
               ("update", f"prod-platform-node-{NODE}-taints")}
    assert changed_steps(preview) == repairs, preview
    assert "conflict" not in output

    up, output, _ = timed("make up repairing it", lambda: worker(s, "prod"))
    assert up["ok"] and changed_steps(up) == repairs, output[-3000:]
    assert core.read_namespaced_resource_quota("tenant-quota", "eval").spec.hard[cpu] == declared
    assert net.read_namespaced_network_policy("tenant-network", "eval").spec.pod_selector is not None
    assert core.read_namespace("eval").metadata.labels[PSA] == "baseline"
    node = core.read_node(NODE)
    assert node.metadata.labels[POOL_LABEL] == "h100-serve"
    assert [(t.key, t.value) for t in node.spec.taints] == [("gpu.acme.dev/tenant", "inference")]
    assert namespace_uids(s, "prod") == uids
    again, _, _ = worker(s, "prod", "--preview")
    assert again["ok"] and again["summary"] == "no change", again


def test_a_killed_up_is_recovered_by_the_next_make_up(scenario_factory, timed):
    s = scenario_factory("prod")
    result, output, killed = timed("make up killed mid-way", lambda: worker(s, "prod", kill_cli_after=40))
    assert not result["ok"] and killed, output[-3000:]
    # No plugin of the killed CLI outlives it: the worker ended the provider it left behind.
    plugins = dict(killed["plugins"])
    assert "pulumi-resource" in plugins.values(), killed
    assert all(not Path(f"/proc/{pid}").exists() for pid in plugins), killed
    assert re.search(r"ended \d+ process\(es\) the pulumi CLI left running: .*pulumi-resource", output), output[-2000:]

    # What the crash left, as production's backends keep it: the lock and the pending operations;
    # and, when the kill landed while the CLI rewrote the checkpoint (it does, now and then: a cold
    # CI run saw `failed to load checkpoint: EOF`), a checkpoint cut off, which nothing reads until
    # `make up` puts the backend's copy back (the cut-off test below makes that case on purpose).
    checkpoint = s.root / "state" / "backend" / ".pulumi" / "stacks" / "gpu-tenancy" / "prod.json"
    cut_off = not _reads_as_json(checkpoint)
    assert [h["pid"] for h in lock_holders(s.root / "state", "prod")] == [killed["cli"]]
    if not cut_off:
        engine = Engine(s.project, "prod", s.root / "state", s.cluster.kubeconfig, checkpoints=True)
        state = engine.stack.export_stack()
        pending = pending_operations({"deployment": state.deployment})
        assert pending and len(state.deployment["resources"]) > 40, pending
        error, _, _ = engine.failing("up")   # a plain `up` stops at the lock, changing nothing
        assert "currently locked" in str(error)

    again, output, _ = timed("make up after the kill", lambda: worker(s, "prod"))
    assert again["ok"], output[-3000:]
    assert f"the stack was locked by pulumi pid {killed['cli']}, which is gone: lock removed (pulumi cancel)" in output
    if cut_off:
        assert re.search(r"the checkpoint prod\.json was unreadable .*: restored from ", output), output[-3000:]
    else:
        assert f"{len(pending)} operation(s) the killed run left pending cleared" in output
    engine = Engine(s.project, "prod", s.root / "state", s.cluster.kubeconfig, checkpoints=True)
    assert engine.lock_holders() == []
    state = engine.stack.export_stack()
    assert pending_operations({"deployment": state.deployment}) == []
    uids = namespace_uids(s, "prod")   # every tenant namespace exists
    converged, output, _ = worker(s, "prod", "--preview")
    assert converged["ok"] and converged["summary"] == "no change", output[-2000:]
    assert "pending operations" not in output
    assert namespace_uids(s, "prod") == uids


def _reads_as_json(path: Path) -> bool:
    try:
        json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return True


def test_a_cut_off_checkpoint_is_put_back_by_the_next_make_up_or_refused_with_the_command(scenario_factory, timed):
    s = scenario_factory("prod")
    first, output, _ = timed("make up", lambda: worker(s, "prod"))
    assert first["ok"], output[-3000:]
    backend = s.root / "state" / "backend"
    engine = Engine(s.project, "prod", s.root / "state", s.cluster.kubeconfig, checkpoints=True)
    urns, uids = engine.urns(), namespace_uids(s, "prod")
    # The CLI killed while it rewrote the checkpoint: the file cut off half-way (made here, no timing luck).
    checkpoint = backend / ".pulumi" / "stacks" / "gpu-tenancy" / "prod.json"
    whole = checkpoint.read_bytes()
    checkpoint.write_bytes(whole[: len(whole) // 2])
    error, _, _ = engine.failing("preview")   # what every operation then says
    assert "failed to load checkpoint" in str(error), error

    again, output, _ = timed("make up after the cut", lambda: worker(s, "prod"))
    assert again["ok"], output[-3000:]
    assert re.search(r"make up: prod: the checkpoint prod\.json was unreadable \(not JSON, \d+ bytes: .*\): "
                     r"restored from \.pulumi/stacks/gpu-tenancy/prod\.json\.bak \(\d+ resources;", output), output[-3000:]
    assert (checkpoint.parent / "prod.json.unreadable").read_bytes() == whole[: len(whole) // 2]
    assert engine.urns() == urns and namespace_uids(s, "prod") == uids   # nothing lost
    converged, output, _ = worker(s, "prod", "--preview")
    assert converged["ok"] and converged["summary"] == "no change", output[-2000:]

    # The checkpoint and every copy the backend keeps of it unreadable: refused, with the command.
    copies = [p for kind in ("stacks", "backups", "history") for p in (backend / ".pulumi" / kind).rglob("*")
              if p.is_file() and p.name.startswith("prod") and ".history." not in p.name and not p.name.endswith(".unreadable")]
    assert {checkpoint, checkpoint.with_name("prod.json.bak")} < set(copies), copies
    for path in copies:
        path.write_bytes(b"")
    refused, output, _ = timed("make up with no readable copy", lambda: worker(s, "prod"))
    assert not refused["ok"], output[-3000:]
    assert f"`mv {checkpoint} {checkpoint}.unreadable`, then `make up` again" in refused["summary"], output[-3000:]
    assert checkpoint.read_bytes() == b"" and namespace_uids(s, "prod") == uids


def taint_list_owners(s, node: str) -> set[str]:
    """The managers that own the node's taint list by server-side apply."""
    entries = client.CoreV1Api(s.api).read_node(node).metadata.managed_fields
    return set(taint_owners(s.api.sanitize_for_serialization(e) for e in entries))


def test_after_a_lost_state_each_taint_list_has_one_owner_and_a_pool_change_applies(scenario_factory, timed):
    s = scenario_factory("prod")
    first, output, _ = timed("make up", lambda: worker(s, "prod"))
    assert first["ok"], output[-3000:]
    core = client.CoreV1Api(s.api)
    nodes = sorted(taint_patch_managers(Engine(s.project, "prod", s.root / "state", s.cluster.kubeconfig).export()))
    before = {node: taint_list_owners(s, node) for node in nodes}
    assert NODE in nodes and all(len(owners) == 1 for owners in before.values()), before
    uids = namespace_uids(s, "prod")

    # The state lost (a deleted stack, a backend restored from before the first up): a new, empty
    # backend. Its up creates every object again, adopting the live ones; the taint patches get new
    # managers, which share each list with the lost state's until the worker releases those.
    lost = s.root / "lost-state"
    again, output, _ = timed("make up on an empty state", lambda: worker(s, "prod", state=lost))
    assert again["ok"] and again["summary"].startswith("create "), output[-3000:]
    for node in nodes:
        assert f"make up: prod: node {node}: released the taint list's owner {next(iter(before[node]))} of a lost state" in output, output[-3000:]
    ours = taint_patch_managers(Engine(s.project, "prod", lost, s.cluster.kubeconfig).export())
    assert set(ours) == set(nodes) and not set(ours.values()) & set().union(*before.values())
    assert {node: taint_list_owners(s, node) for node in nodes} == {node: {ours[node]} for node in nodes}

    # A pool's taint changed afterwards: h100-serve no longer dedicated to inference, so shared.
    replace_once(s.tenant_file("inference"), "dedicatedPools: [h100-serve]", "classes: [h100]")
    changed, output, _ = timed("make up with h100-serve made shared", lambda: worker(s, "prod", state=lost))
    assert changed["ok"] and "conflict" not in output.lower(), output[-3000:]
    assert ("update", f"prod-platform-node-{NODE}-taints") in changed_steps(changed), changed
    assert [(t.key, t.value, t.effect) for t in core.read_node(NODE).spec.taints] == [("nvidia.com/gpu", "present", "NoSchedule")]
    assert taint_list_owners(s, NODE) == {ours[NODE]}
    assert namespace_uids(s, "prod") == uids
    # What the deploy workflow runs after its up says the same, from a `pulumi stack export`.
    export = s.root / "lost.json"
    export.write_text(json.dumps({"deployment": {"resources": Engine(s.project, "prod", lost, s.cluster.kubeconfig).export()}}))
    checked = subprocess.run([sys.executable, "-m", "tools.taint_owners", "--stack", "prod", "--kubeconfig", str(s.cluster.kubeconfig),
                              str(export), "--check"], cwd=s.project, env={**os.environ, "PYTHONPATH": str(REPO)},
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and checked.stdout.strip() == "every node's taint list has one owner of this stack", checked


def tenants_moves(s, engine: Engine, *flags: str) -> subprocess.CompletedProcess:
    """`tenants moves --stack lab ...` as the deploy workflow runs it, on this backend (this checkout's code)."""
    env = {**os.environ, **engine.env, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "components", "--root", str(s.project), "moves", "--stack", "lab", *flags],
                          cwd=s.project, env=env, capture_output=True, text=True, check=False)


def test_a_half_done_state_move_is_found_and_repaired_by_tenants_moves(scenario_factory, timed):
    # The sharded fixture's stack and tenant files in a project copy, on a cluster of its own.
    _half_done_move(scenario_factory("lab", fixture=SHARDED), timed)


def _half_done_move(s, timed) -> None:
    # The deployed environment (in this process: the moves, not the ups, are what is under test here).
    engines = {st: Engine(s.project, st, s.root / "state", s.cluster.kubeconfig, checkpoints=True)
               for st in ("lab", "lab.blue", "lab.green")}
    for engine in engines.values():
        assert set(engine.up().changes) == {"create"}
    uids = namespace_uids(s, "lab")
    assert "vision" in engines["lab.green"].tenant_urns()
    stack_file = s.project / "stacks" / "Pulumi.lab.yaml"
    stack_file.write_text(stack_file.read_text().replace("vision: green", "vision: blue", 1))
    # `pulumi state move` killed between its two writes: the destination holds the tenant, the
    # source still does (its state as it was before the move).
    before = engines["lab.green"].stack.export_stack()
    moved = tenants_moves(s, engines["lab.green"], "--run")
    assert moved.returncode == 0, moved.stderr
    engines["lab.green"].stack.import_stack(before)
    assert "vision" in engines["lab.blue"].tenant_urns() and "vision" in engines["lab.green"].tenant_urns()

    found = tenants_moves(s, engines["lab.green"])
    assert found.returncode == 1, (found.stdout, found.stderr)
    assert ("tenant vision is in the state of lab.blue and lab.green: a `pulumi state move` stopped half-way; "
            "the copy in lab.green is stale (the tenant's stack is lab.blue)") in found.stderr, found.stderr
    assert "tenants moves --stack lab --run" in found.stderr

    repaired = timed("tenants moves --run repairing it", lambda: tenants_moves(s, engines["lab.green"], "--run"))
    assert repaired.returncode == 0, repaired.stderr
    assert re.search(r"removed the stale copy of vision from lab\.green's state \(\d+ resources; the cluster keeps them\)",
                     repaired.stderr), repaired.stderr
    assert "vision" not in engines["lab.green"].tenant_urns() and "vision" in engines["lab.blue"].tenant_urns()
    clean = tenants_moves(s, engines["lab.green"])
    assert clean.returncode == 0 and "nothing to move" in clean.stderr, clean.stderr
    for stack, engine in engines.items():   # the repaired states and the program agree: nothing to change
        steps = [(x.op, x.name) for x in engine.preview().steps if x.op not in ("same", "read")]
        assert steps == [], (stack, steps)
    assert namespace_uids(s, "lab") == uids
