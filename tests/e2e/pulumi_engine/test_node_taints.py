"""Node taints of the prod stack on the real engine (issue 22 item 4): every static GPU node gets its
taint from a taint patch of its own, shared MIG pools included, and upgrading a stack deployed by the
previous version (one patch per node carrying labels and, except on shared MIG pools, taints) never
leaves a node untainted.

The previous version's program is this one with the node patches of that version
(tests/node_patch_forms.py) in place of today's; every change of every Node during the upgrade's
`pulumi up` is read back from the API server's watch.
"""

from __future__ import annotations

from unittest import mock

import pytest
from kubernetes import client

from components.load import load_environment
from components.manifests.gpu_nodes import pool_taints
from tests.e2e.object_watch import ObjectWatch
from tests.node_patch_forms import tainted_before, with_single_patches
from tools.engine import Engine, program_for

pytestmark = pytest.mark.pulumi

STACK = "prod"
MIG_CONFIG = "nvidia.com/mig.config"


def _previous_version(project):
    """The program as the previous version registered it: one patch per static node."""
    program = program_for(project)

    def run() -> None:
        from components.resources import fleet

        current = fleet.platform_objects
        with mock.patch.object(fleet, "platform_objects", lambda env: with_single_patches(current(env), env.facts)):
            program()

    return run


NOT_READY = "node.kubernetes.io/not-ready"


def _taints(node) -> set[tuple]:
    """The node's taints but `not-ready`, which the API server puts on a registering node with no
    manager owning it: an unforced apply of the list drops it (docs/gpu-sharing.md), and the node
    lifecycle controller, which would add it back while a node is not ready, does not run here."""
    return {(t["key"], t.get("value"), t["effect"]) for t in (node.get("spec") or {}).get("taints") or [] if t["key"] != NOT_READY}


@pytest.fixture(scope="module")
def upgraded(scenario_factory):
    s = scenario_factory(STACK)
    environment = load_environment(s.project, STACK)
    previous = Engine(s.project, STACK, s.root / "state", s.cluster.kubeconfig, program=_previous_version(s.project))
    first = previous.up()
    core = client.CoreV1Api(s.api)
    serialize = s.api.sanitize_for_serialization
    nodes = core.list_node()
    before = {n.metadata.name: serialize(n) for n in nodes.items}
    watcher = ObjectWatch(core.list_node, resource_version=nodes.metadata.resource_version)
    watcher.start()
    try:
        upgrade = s.engine.up()
    finally:
        events = watcher.stop()
    after = {n.metadata.name: serialize(n) for n in core.list_node().items}
    return s, environment, first, before, upgrade, events, after


def _wanted(environment) -> dict[str, set[tuple]]:
    facts = environment.facts
    return {node: {(t["key"], t["value"], t["effect"]) for t in pool_taints(facts, name)}
            for name, pool in environment.platform.node_pools.items() for node in pool.nodes}


def test_the_previous_version_left_the_shared_mig_pool_untainted(upgraded):
    s, environment, first, before, *_ = upgraded
    assert set(first.changes) == {"create"}, first.changes
    wanted = _wanted(environment)
    for name, pool in environment.platform.node_pools.items():
        for node in pool.nodes:
            assert _taints(before[node]) == (wanted[node] if tainted_before(environment.facts, name) else set()), node
    assert not _taints(before["gpu-a100-03"]) and before["gpu-a100-03"]["metadata"]["labels"][MIG_CONFIG] == "eval-mix"


def test_the_upgrade_adds_a_taint_patch_per_node_and_updates_the_label_patches_in_place(upgraded, e2e_summary):
    s, environment, _, _, upgrade, _, _ = upgraded
    facts = environment.facts
    nodes = sorted(n for pool in environment.platform.node_pools.values() for n in pool.nodes)
    changed = sorted(n for name, pool in environment.platform.node_pools.items() if tainted_before(facts, name) for n in pool.nodes)
    kubernetes = lambda *ops: {s.name for s in upgrade.ops(*ops) if s.type.startswith("kubernetes:")}
    assert kubernetes("create") == {f"prod-platform-node-{n}-taints" for n in nodes}
    # The label patches keep their names: updated in place (no longer carrying taints, now forced);
    # a shared MIG pool's was label-only and forced already, so it does not change.
    assert kubernetes("update") == {f"prod-platform-node-{n}" for n in changed}
    assert not kubernetes("delete", "replace", "create-replacement", "delete-replaced")
    # The label patch of each node waits for its taint patch (GpuPlatform), in the state too.
    state = {r["urn"].rsplit("::", 1)[-1]: r for r in s.engine.export()}
    for node in nodes:
        assert state[f"prod-platform-node-{node}-taints"]["urn"] in state[f"prod-platform-node-{node}"].get("dependencies", []), node
    e2e_summary.append(f"node taints: upgrade from one patch per node created {len(nodes)} taint patches, "
                       f"updated {len(changed)} label patches in place")


def test_no_node_is_ever_untainted_during_the_upgrade(upgraded, e2e_summary):
    s, environment, _, before, _, events, _ = upgraded
    assert events, "the watch saw no change of any Node during the upgrade"
    seen: dict[str, int] = {}
    for kind, node in events:
        name = node["metadata"]["name"]
        seen[name] = seen.get(name, 0) + 1
        assert kind == "MODIFIED", (kind, name)
        assert _taints(before[name]) <= _taints(node), (name, node["metadata"]["resourceVersion"], node["spec"])
    tainted = {n for n, node in before.items() if _taints(node)}
    assert tainted and tainted <= set(seen), sorted(tainted - set(seen))   # each was changed, and kept its taint throughout
    e2e_summary.append(f"node taints: {len(events)} Node versions during the upgrade, none without its earlier taint "
                       f"({len(seen)} nodes changed)")


def test_after_the_upgrade_every_node_has_its_taint_and_the_operators_labels(upgraded):
    s, environment, _, before, _, _, after = upgraded
    wanted = _wanted(environment)
    for node, taints in wanted.items():
        live = after[node]
        assert _taints(live) == taints, node
        applied = {m["manager"]: m for m in live["metadata"]["managedFields"] if m["operation"] == "Apply"}
        taint_owners = {m for m, e in applied.items() if "f:taints" in e.get("fieldsV1", {}).get("f:spec", {})}
        # The provider's own manager of the taint patch; gpu-tenancy (the label patch) let go of them.
        assert len(taint_owners) == 1 and next(iter(taint_owners)).startswith("pulumi-kubernetes-"), (node, taint_owners)
        assert "f:spec" not in applied["gpu-tenancy"].get("fieldsV1", {}), node
        # The provider applies the patch's annotations to the Node: the label patch owns the field manager's.
        assert live["metadata"]["annotations"]["pulumi.com/patchFieldManager"] == "gpu-tenancy", node
        # Labels of the kubelet, the GPU Operator and GFD stay.
        for key in ("kubernetes.io/hostname", "nvidia.com/gpu.deploy.mig-manager", "nvidia.com/gpu.product"):
            assert live["metadata"]["labels"][key] == before[node]["metadata"]["labels"][key], (node, key)
    for node in ("gpu-a100-03", "gpu-a100-04"):   # the shared MIG pool: its layout forced, its taint new
        assert after[node]["metadata"]["labels"][MIG_CONFIG] == "eval-mix"
        assert ("nvidia.com/gpu", "present", "NoSchedule") in _taints(after[node])


def test_a_second_up_changes_nothing(upgraded):
    s, *_ = upgraded
    again = s.engine.up()
    assert again.changes == {}, again.ops("create", "update", "delete", "replace")
