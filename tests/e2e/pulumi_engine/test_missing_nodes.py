"""An inventory node that is not on the cluster, on the real engine (issue 40 item 4).

A node patch is a server-side apply, which creates a missing Node: before the read each patch now
depends on (`GpuPlatform.joined`), an inventory node not yet on the cluster became a phantom Node
with GPU labels and a tenant taint. Dev's inventory with its L4 node taken off the cluster: the
`up` fails naming the node and creates no Node; with `--continue-on-error` the rest of the stack,
the A100 node's patches included, is applied; once the node has joined, the next `up` patches it.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.load import load_environment
from components.manifests.gpu_nodes import pool_labels, pool_taints
from tools.applied_stack import register_nodes
from tools.engine import write_local_vcluster_chart

pytestmark = pytest.mark.pulumi

STACK = "dev"
MISSING, NEIGHBOUR = "dev-l4-01", "dev-a100-01"


def _node(core, name: str):
    try:
        return core.read_node(name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def _patched(node, labels: dict[str, str], taints: list[dict[str, str]]) -> bool:
    have = {(t.key, t.value, t.effect) for t in node.spec.taints or []}
    return labels.items() <= (node.metadata.labels or {}).items() and {(t["key"], t["value"], t["effect"]) for t in taints} <= have


@pytest.fixture(scope="module")
def missing(scenario_factory):
    s = scenario_factory(STACK)
    stack_file = s.project / "stacks" / "Pulumi.dev.yaml"   # dev's vClusters from a local chart (offline)
    stack_file.write_text(stack_file.read_text().replace(
        "    labelDomain: gpu.acme.dev\n", f"    labelDomain: gpu.acme.dev\n    vcluster:\n      chart: {write_local_vcluster_chart(s.project)}\n", 1))
    core = client.CoreV1Api(s.api)
    core.delete_node(MISSING)   # in the inventory, not (yet) on the cluster
    environment = load_environment(s.project, STACK)
    wanted = {node: (pool_labels(environment.facts, pool), pool_taints(environment.facts, pool))
              for pool, spec in environment.platform.node_pools.items() for node in spec.nodes}
    previewed = s.engine.failing("preview")
    err, steps, diags = s.engine.failing("up")
    after_refused = _node(core, MISSING)
    partial, partial_steps, partial_diags = s.engine.failing("up", continue_on_error=True)
    after_partial = {name: _node(core, name) for name in (MISSING, NEIGHBOUR)}
    register_nodes(s.cluster.cp, environment, only={MISSING})   # the node joins
    joined = s.engine.up()
    return {"scenario": s, "core": core, "wanted": wanted, "previewed": previewed, "refused": (err, steps, diags), "after_refused": after_refused,
            "partial": (partial, partial_steps, partial_diags), "after_partial": after_partial, "joined": joined}


def _text(err, diags) -> str:
    return str(err) + "\n".join(m for _, _, m in diags)


def test_the_preview_fails_naming_the_missing_node(missing):
    err, _, diags = missing["previewed"]
    assert f"resource '{MISSING}' does not exist" in _text(err, diags)


def test_the_up_fails_naming_the_missing_node_and_creates_no_node(missing):
    err, steps, diags = missing["refused"]
    assert f"resource '{MISSING}' does not exist" in _text(err, diags)
    assert missing["after_refused"] is None


def test_with_continue_on_error_the_neighbour_is_patched_and_the_missing_node_is_never_created(missing):
    err, steps, diags = missing["partial"]
    assert f"resource '{MISSING}' does not exist" in _text(err, diags)
    assert missing["after_partial"][MISSING] is None
    labels, taints = missing["wanted"][NEIGHBOUR]
    assert _patched(missing["after_partial"][NEIGHBOUR], labels, taints)


def test_after_the_node_joins_the_next_up_patches_it(missing):
    node = _node(missing["core"], MISSING)
    labels, taints = missing["wanted"][MISSING]
    assert _patched(node, labels, taints)
    assert {f"dev-platform-node-{MISSING}", f"dev-platform-node-{MISSING}-taints"} <= missing["joined"].names("create")
    # The reads are in the state as external resources: never created, updated or deleted by the engine.
    reads = [r for r in missing["scenario"].engine.export() if r["type"] == "kubernetes:core/v1:Node"]
    assert sorted(r["urn"].rsplit("::", 1)[-1] for r in reads) == [f"dev-platform-node-{n}-joined" for n in (NEIGHBOUR, MISSING)]
    assert all(r.get("external") for r in reads)
