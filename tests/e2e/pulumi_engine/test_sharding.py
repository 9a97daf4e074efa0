"""Sharding on the real engine (docs/sharding.md): prod split into shard stacks prod.a and prod.b
with `pulumi state move` (planned and made by `tenants moves --run`, as the deploy workflow does),
and tenants moved between shards, on one cluster for the module.

The tests run in file order and build on each other: split the unsharded stack, a one-tenant
edit, a move between shards by its pin, the move without `pulumi state move` (refused while
namespaces are protected, retain-then-adopt without), and a shard the environment does not list.
Each asserts on the engine's own results (steps, summaries, `stack export`) and on the cluster:
the tenants' namespaces, their data and their cluster-scoped objects keep their uids.

What a move is on the engine: the CLI parents a moved tenant to the destination's root (it moves
no parent it is not given); the Tenant's root aliases adopt it under the Fleet, so every resource
previews `same`. A shard's first preview also creates its Fleet component (state only).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from components.load import load_environment
from components.fleet.shard_stacks import stack_parts, tenant_stack
from components.review.moves.stack_changes import FLEET_TYPE, TENANT_TYPE
from tools.engine import (
    Engine,
    engine_changes,
    names_of,
    offline_changes,
    rendered_by_name,
)
from tests.project_edits import line_of, replace_once

pytestmark = pytest.mark.pulumi

ENV = "prod"
SHARDS = ("a", "b")
MOVER = "eval"                 # the tenant that moves between shards; it holds the data ConfigMap
DATA = {"checkpoint": "step-1200", "owner": "kept across every move"}


class ShardedProd:
    """The prod cluster and one engine per stack of the environment, on one shared backend."""

    def __init__(self, scenario: Any) -> None:
        self.s = scenario
        self.project: Path = scenario.project
        self.engines: dict[str, Engine] = {ENV: scenario.engine}

    def engine(self, stack: str) -> Engine:
        if stack not in self.engines:
            self.engines[stack] = Engine(self.project, stack, self.s.root / "state", self.s.cluster.kubeconfig)
        return self.engines[stack]

    @property
    def environment(self):
        return load_environment(self.project, ENV)

    @property
    def stacks(self) -> list[str]:
        return [p.stack for p in stack_parts(self.environment)]

    @property
    def stack_file(self) -> Path:
        return self.project / "stacks" / f"Pulumi.{ENV}.yaml"

    def set_sharding(self, assignments: dict[str, str]) -> None:
        """Write `sharding` into the copy's stack file (replacing any), with these pins."""
        pins = ", ".join(f"{t}: {s}" for t, s in sorted(assignments.items()))
        block = f"    sharding:\n      shards: [{', '.join(SHARDS)}]\n      assignments: {{{pins}}}\n"
        text = self.stack_file.read_text()
        text, n = re.subn(r"    sharding:\n(?:      .*\n)*", block, text)
        if not n:
            text = text.replace("    scheduler: kueue\n", "    scheduler: kueue\n" + block, 1)
        self.stack_file.write_text(text)
        assert self.environment.platform.sharding is not None

    def namespaces(self) -> dict[str, list[str]]:
        return {t.name: list(t.spec.all_namespaces) for t in self.environment.tenants}

    def uids(self) -> dict[str, str]:
        """Every tenant namespace's uid, and the data ConfigMap's (its identity is what must survive)."""
        core = client.CoreV1Api(self.s.api)
        out = {ns: core.read_namespace(ns).metadata.uid for nss in self.namespaces().values() for ns in nss}
        cm = core.read_namespaced_config_map("data", MOVER)
        assert cm.data == DATA, cm.data
        out["configmap/data"] = cm.metadata.uid
        return out

    def state_tenants(self) -> dict[str, list[str]]:
        return {stack: sorted(self.engine(stack).tenant_urns()) for stack in self.stacks}

    def members(self) -> dict[str, list[str]]:
        return {p.stack: sorted(p.tenants) for p in stack_parts(self.environment)}

    def tenants_moves(self, *flags: str) -> subprocess.CompletedProcess:
        """`tenants moves --stack prod ...` as the deploy workflow runs it: the CLI, with this
        backend's environment and the built `pulumi` on PATH, in the project directory."""
        env = {**os.environ, **self.engine(ENV).env}
        return subprocess.run([sys.executable, "-m", "components", "--root", str(self.project), "moves", "--stack", ENV, *flags],
                              cwd=self.project, env=env, capture_output=True, text=True, check=False)

    def move_to_assigned_stacks(self) -> dict[str, list[str]]:
        """`tenants moves --stack prod --run` (what deploy-environment.yml runs before any `up`),
        planned from the stacks' state; afterwards the plan is empty. Returns {dest: [tenants]}."""
        plan = self.tenants_moves("--format", "json")
        assert plan.returncode == 0, plan.stderr
        moves = json.loads(plan.stdout)
        done = self.tenants_moves("--run")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [m["command"] for m in moves], done.stdout
        for move in moves:
            assert f"moved {move['tenant']} from {move['from']} to {move['to']}" in done.stderr, done.stderr
        again = self.tenants_moves("--format", "json")
        assert again.returncode == 0 and json.loads(again.stdout) == [], (again.stdout, again.stderr)
        assert "nothing to move" in again.stderr
        moved: dict[str, list[str]] = {}
        for move in moves:
            moved.setdefault(move["to"], []).append(move["tenant"])
        return moved

    def previews(self) -> dict[str, Any]:
        return {stack: self.engine(stack).preview() for stack in self.stacks}


@pytest.fixture(scope="module")
def prod(scenario_factory):
    s = scenario_factory(ENV)
    first = s.engine.up()
    assert set(first.changes) == {"create"}, first.changes
    # Data the tenant made itself, outside Pulumi: it lives only as long as its namespace.
    client.CoreV1Api(s.api).create_namespaced_config_map(
        MOVER, {"metadata": {"name": "data"}, "data": DATA})
    return ShardedProd(s)


def _kubernetes_steps(outcome) -> list[tuple[str, str]]:
    # Not `read`: the environment's stack reads every inventory Node on each run (GpuPlatform.joined).
    return sorted((s.op, s.name) for s in outcome.steps if s.op not in ("same", "read") and s.type.startswith("kubernetes:"))



def _assert_no_changes(outcomes: dict[str, Any], new_fleets: tuple[str, ...] = ()) -> None:
    """Nothing but `same` steps; on the stacks in `new_fleets`, which a first `pulumi state move`
    just filled, also the creation of their Fleet component (a state-only object: the CLI cannot
    move the source's Fleet, which still holds the rest)."""
    for stack, outcome in outcomes.items():
        other = [(s.op, s.type, s.name) for s in outcome.steps if s.op not in ("same", "read")]  # read: the program's own StackReference
        # A new shard stack also gets the default `pulumi` provider its StackReference (the program
        # reading its own last outputs, components/resources/departures.py) is read with.
        expected = [("create", "pulumi:providers:pulumi", "default"), ("create", FLEET_TYPE, ENV)] if stack in new_fleets else []
        assert other == expected, (stack, outcome.changes, other)
        assert outcome.changes == ({"create": 1} if expected else {}), (stack, outcome.summary)


def _touched_stacks(base: Path, head: Path) -> list[str]:
    """The Pulumi stacks `tenants diff` says a change touches, in deploy order."""
    from components.review.diff import Side, compare_stack, report

    before, after = load_environment(base, ENV), load_environment(head, ENV)
    return report([compare_stack(ENV, Side(before), Side(after))], {"ref": "base", "commit": "0" * 40})["touchedStacks"]


def _snapshot(prod: ShardedProd, dest: Path) -> Path:
    for part in ("stacks", "tenants"):
        shutil.copytree(prod.project / part, dest / part)
    return dest


def _tenant_objects(prod: ShardedProd, tenant: str) -> dict[str, dict]:
    return {n: o for n, o in rendered_by_name(prod.project, ENV).items() if n.startswith(f"{tenant}-")}


def _live_uids(prod: ShardedProd, objects: dict[str, dict]) -> dict[str, str]:
    return {n: prod.s.cluster.cp.get_object(o)["metadata"]["uid"] for n, o in objects.items()}


def test_splitting_an_unsharded_stack_with_state_move_changes_nothing(prod, e2e_summary):
    before = prod.uids()
    unsharded = prod.engine(ENV).tenant_urns()
    assert sorted(unsharded) == sorted(prod.namespaces()), unsharded
    # Each shard holds a tenant whatever the hash says: the pin keeps `a` from being empty.
    prod.set_sharding({"inference": "a"})
    assert all(prod.members()[f"{ENV}.{shard}"] for shard in SHARDS), prod.members()

    moved = prod.move_to_assigned_stacks()
    assert sorted(t for ts in moved.values() for t in ts) == sorted(unsharded), moved

    shards = tuple(moved)
    previews = prod.previews()
    _assert_no_changes(previews, new_fleets=shards)
    # The moved tenants are adopted where they are (the CLI parents them to the shard's root,
    # the program's aliases take them under the Fleet): each of their resources is `same`.
    for stack in shards:
        tenants = {s.name for s in previews[stack].steps if s.type == TENANT_TYPE and s.op == "same"}
        assert tenants == set(moved[stack]), (stack, tenants)
    assert prod.uids() == before
    # The platform stack holds no Tenant any more, each shard exactly its own.
    assert prod.state_tenants() == prod.members(), prod.state_tenants()
    assert prod.members()[ENV] == []

    ups = {stack: prod.engine(stack).up() for stack in prod.stacks}
    _assert_no_changes(ups, new_fleets=shards)
    assert prod.uids() == before
    for stack in shards:
        urns = prod.engine(stack).tenant_urns().values()
        assert all(f"{FLEET_TYPE}${TENANT_TYPE}::" in u for u in urns), urns
    _assert_no_changes(prod.previews())
    e2e_summary.append(
        "split prod: moved " + ", ".join(f"{' '.join(ts)} -> {d}" for d, ts in sorted(moved.items()))
        + "; previews " + ", ".join(f"{k} {v.summary}" for k, v in previews.items())
    )


def test_a_one_tenant_edit_previews_only_that_tenants_shard(prod, tmp_path, e2e_summary):
    path = prod.project / "tenants" / f"{MOVER}.yaml"
    saved = path.read_text()
    home = tenant_stack(prod.environment, MOVER)
    try:
        # A CPU limit is the tenant's own ResourceQuota only: one shard stack.
        base = _snapshot(prod, tmp_path / "cpu")
        replace_once(path, 'cpu: {requests: "96", limits: "192"}', 'cpu: {requests: "96", limits: "160"}')
        previews = prod.previews()
        touched = [stack for stack, p in previews.items() if _kubernetes_steps(p)]
        assert touched == [home] == _touched_stacks(base, prod.project), (touched, _touched_stacks(base, prod.project))
        offline = offline_changes(base, prod.project, ENV)
        engine = engine_changes(previews[home])
        assert engine["update"] == set(offline["update"]) and not engine["create"] and not engine["delete"], (engine, offline)
        e2e_summary.append(f"one-tenant edit (cpu): {home} {previews[home].changes}, others unchanged")

        # A GPU quota is the tenant's own as well: its ResourceQuota, ClusterQueue and the quota
        # series of its own PrometheusRule. One shard stack again, and the platform stack (whose
        # rule only sums the tenants' series) is untouched: the engine and `tenants diff` agree.
        path.write_text(saved)
        base = _snapshot(prod, tmp_path / "gpu")
        replace_once(path, "gpu: {a100: 20}", "gpu: {a100: 16}")
        previews = prod.previews()
        touched = [stack for stack, p in previews.items() if _kubernetes_steps(p)]
        assert touched == [home] == _touched_stacks(base, prod.project), touched
        kinds = {s.type.rsplit(":", 1)[-1] for s in previews[home].steps if s.op == "update"}
        assert kinds == {"ResourceQuota", "ClusterQueue", "PrometheusRule"}, kinds
        e2e_summary.append(f"one-tenant edit (gpu quota): {home} {previews[home].changes}, others unchanged")
    finally:
        path.write_text(saved)
    _assert_no_changes(prod.previews())


def test_moving_a_tenant_between_shards_by_its_pin_with_state_move(prod, e2e_summary):
    before = prod.uids()
    source = tenant_stack(prod.environment, MOVER)
    dest = next(f"{ENV}.{s}" for s in SHARDS if f"{ENV}.{s}" != source)
    prod.set_sharding({"inference": "a", MOVER: dest.rsplit(".", 1)[1]})
    assert tenant_stack(prod.environment, MOVER) == dest

    assert prod.move_to_assigned_stacks() == {dest: [MOVER]}
    previews = {stack: prod.engine(stack).preview() for stack in (source, dest)}
    _assert_no_changes(previews)
    ups = {stack: prod.engine(stack).up() for stack in (source, dest)}
    for stack, up in ups.items():
        assert up.changes == {}, (stack, up.changes)
    assert prod.state_tenants() == prod.members()
    assert prod.uids() == before
    e2e_summary.append(f"move {MOVER} {source} -> {dest}: previews and ups of both unchanged")


def test_a_move_without_state_move_retains_then_adopts(prod, e2e_summary):
    source = tenant_stack(prod.environment, MOVER)
    dest = next(f"{ENV}.{s}" for s in SHARDS if f"{ENV}.{s}" != source)
    objects = _tenant_objects(prod, MOVER)
    kinds = {o["kind"] for o in objects.values() if not o["metadata"].get("namespace")}
    assert {"Namespace", "ClusterRoleBinding", "ValidatingAdmissionPolicyBinding"} <= kinds, kinds
    live = _live_uids(prod, objects)
    data = prod.uids()
    state_before = prod.engine(source).urns()

    # Protected namespaces (prod's default): the source shard refuses to let the tenant go, and
    # nothing is deleted from the cluster.
    prod.set_sharding({"inference": "a", MOVER: dest.rsplit(".", 1)[1]})
    err, steps, _ = prod.engine(source).failing("up")
    assert "protected" in str(err), str(err)[-2000:]
    assert _live_uids(prod, objects) == live and prod.uids() == data
    # The engine runs the deletes of what is `deleted_with` the Namespace (skipped on the cluster:
    # the Namespace is going) before it reaches the protected Namespace, so those leave the state;
    # the Tenant, its Namespaces and everything else stay.
    kept = prod.engine(source).urns()
    refused = {s.name for s in steps if s.op == "delete"}
    lost = names_of(state_before - kept)
    namespaces = {n for n, o in objects.items() if o["kind"] == "Namespace"}
    assert kept <= state_before and lost <= set(objects) - namespaces, lost
    assert namespaces <= refused and MOVER in prod.engine(source).tenant_urns()
    # Back to its old pin, the source takes those objects back as they are on the cluster.
    prod.set_sharding({"inference": "a", MOVER: source.rsplit(".", 1)[1]})
    back = prod.engine(source).up()
    assert _kubernetes_steps(back) == sorted(("create", n) for n in lost), _kubernetes_steps(back)
    assert prod.engine(source).urns() == state_before
    assert _live_uids(prod, objects) == live and prod.uids() == data

    # Without protection: the source drops the tenant from its state and keeps it on the cluster...
    replace_once(prod.stack_file, "    protectNamespaces: true\n", "    protectNamespaces: false\n")
    for stack in prod.stacks:
        assert not _kubernetes_steps(prod.engine(stack).up()), stack
    prod.set_sharding({"inference": "a", MOVER: dest.rsplit(".", 1)[1]})
    left = prod.engine(source).up()
    assert {n for op, n in _kubernetes_steps(left)} == set(objects) and {op for op, _ in _kubernetes_steps(left)} == {"delete"}
    assert MOVER not in prod.engine(source).tenant_urns()
    assert _live_uids(prod, objects) == live, "leaving a shard deleted or recreated objects"
    assert prod.uids() == data

    # ...and the destination adopts every object as it is (same uids), then has nothing left to do.
    adopted = prod.engine(dest).up()
    assert {n for op, n in _kubernetes_steps(adopted)} == set(objects), _kubernetes_steps(adopted)
    assert {op for op, _ in _kubernetes_steps(adopted)} == {"create"}
    assert _live_uids(prod, objects) == live, "adoption recreated objects"
    assert prod.uids() == data
    assert prod.engine(dest).up().changes == {}
    assert prod.state_tenants() == prod.members()
    e2e_summary.append(f"move {MOVER} {source} -> {dest} without state move: protected up refused "
                       f"({len(lost)} left the state, re-adopted); unprotected {len(objects)} objects retained, "
                       f"then adopted ({adopted.changes})")


def test_a_shard_the_environment_does_not_list_fails_before_registering_anything(prod):
    engine = prod.engine(f"{ENV}.zz")
    for operation in ("preview", "up"):
        err, steps, diags = engine.failing(operation)
        registered = [s for s in steps if s.type != "pulumi:pulumi:Stack"]
        assert not registered, [s.urn for s in registered]
        text = str(err) + "\n".join(m for _, _, m in diags)
        assert "invalid tenants or stack configuration" in text, text[-3000:]
        assert f"stacks/Pulumi.{ENV}.yaml:{line_of(prod.stack_file, '    sharding:')}:" in text, text[-3000:]
        assert f"shard 'zz' is not in {ENV}'s `sharding.shards` (a, b)" in text, text[-3000:]
    assert not [r for r in engine.export() if r["type"] != "pulumi:pulumi:Stack"]
