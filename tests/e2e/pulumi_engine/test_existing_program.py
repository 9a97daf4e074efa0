"""examples/existing-program on the real engine: another Pulumi program deploys the fleet through
a provider it builds from a kubeconfig Output (a secret config value here), with tenants from
plain data. The ambient KUBECONFIG points nowhere, so only that provider can reach the cluster."""

from __future__ import annotations

import ast
import runpy
import shutil

import pytest
from kubernetes import client

from components import environment_from_data, environment_objects
from tools.applied_stack import install_crds, register_nodes
from tools.engine import REPO_ROOT, Engine, LocalCluster

pytestmark = pytest.mark.pulumi

EXAMPLE = REPO_ROOT / "examples" / "existing-program"
SECRET_SIGNATURE = "4dabf18193072939515e22adb298388d"


def _example_data() -> tuple[dict, dict]:
    """PLATFORM and TENANTS as the example writes them (read, not run: running needs Pulumi)."""
    values = {}
    for node in ast.parse((EXAMPLE / "__main__.py").read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in ("PLATFORM", "TENANTS"):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return values["PLATFORM"], values["TENANTS"]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    root = tmp_path_factory.mktemp("existing-program")
    project = root / "project"
    shutil.copytree(EXAMPLE, project)
    platform, tenants = _example_data()
    environment = environment_from_data("example", platform, tenants)
    cluster = LocalCluster(root / "cluster", project, "example")
    cluster.cp.start()
    try:
        install_crds(cluster.cp)
        register_nodes(cluster.cp, environment)
        cluster.context = "example"
        kubeconfig = cluster.write_kubeconfig(root / "kubeconfig")
        engine = Engine(
            project, "example", root / "state", root / "nowhere" / "kubeconfig",
            project_name="existing-program",
            program=lambda: runpy.run_path(str(project / "__main__.py"), run_name="__main__"),
        )
        from pulumi import automation as auto

        engine.stack.set_config("kubeconfig", auto.ConfigValue(value=kubeconfig.read_text(), secret=True))
        yield engine, cluster, environment
    finally:
        cluster.stop()


def test_up_creates_the_fleet_through_the_programs_own_provider_and_a_second_up_changes_nothing(deployed):
    engine, cluster, environment = deployed
    first = engine.up()
    assert set(first.changes) == {"create"}, first.changes
    expected = [o for objects in environment_objects(environment).values() for o in objects]
    state = engine.export()
    kubernetes = [r for r in state if r["type"].startswith("kubernetes:")]
    # Besides the objects, one read per inventory Node (`external`: never created or deleted).
    assert len([r for r in kubernetes if not r.get("external")]) == len(expected)
    nodes = {node for pool in environment.platform.node_pools.values() for node in pool.nodes}
    assert nodes and sorted(r["id"] for r in kubernetes if r.get("external")) == sorted(nodes)
    # The program's Kubernetes provider, and the engine's builtin one of the node taints' gate
    # (GpuPlatform._gate, a `pulumi:index:Stash`: nothing on the cluster).
    assert {r["type"] for r in state if r["type"].startswith("pulumi:providers:")} == {"pulumi:providers:kubernetes",
                                                                                        "pulumi:providers:pulumi"}
    assert [r["type"] for r in state if "::pulumi:providers:pulumi::" in r.get("provider", "")] == ["pulumi:index:Stash"]
    assert all(r["provider"].split("::")[-2] == "gpu-cluster" for r in kubernetes)
    core = client.CoreV1Api(cluster.api_client)
    assert {"search", "ranking"} <= {ns.metadata.name for ns in core.list_namespace().items}
    quota = core.read_namespaced_resource_quota("tenant-quota", "search")
    assert quota.spec.hard["requests.nvidia.com/gpu"] == "4"

    second = engine.up()
    assert second.changes == {}, second.ops("create", "update", "delete", "replace")


def test_the_kubeconfig_reaches_the_provider_as_a_secret(deployed):
    engine, _, _ = deployed
    providers = [r for r in engine.export() if r["type"] == "pulumi:providers:kubernetes"]
    assert [r["urn"].rsplit("::", 1)[1] for r in providers] == ["gpu-cluster"]
    assert SECRET_SIGNATURE in providers[0]["inputs"]["kubeconfig"], "the provider input is a secret"
    # On disk the state holds it encrypted only (the export above decrypts for the reader).
    state_files = list((engine.state_dir / "backend").rglob("example.json"))
    assert state_files, "no checkpoint written"
    text = state_files[0].read_text()
    assert "ciphertext" in text
    assert "current-context: example" not in text and "client-key" not in text
