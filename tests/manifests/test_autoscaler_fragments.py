"""What an autoscaled pool's node group must carry, in the form its autoscaler takes
(`nodePools.<pool>.autoscaler`, gpu_nodes.AUTOSCALER_FRAGMENTS): Karpenter's NodePool template,
checked against Karpenter's own CRD (v1.14.1, tests/fixtures/karpenter), and the cluster-autoscaler's
node-template tags; printed by validate and diff, written by render, none for a pool that names no
autoscaler."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.load import load_environment
from components.manifests.gpu_nodes import AUTOSCALER_FRAGMENTS, node_group_requirements
from components.output.render import NODE_GROUPS, platform_extras
from components.review.diff_format import node_group_lines
from components.spec.problems import InvalidInput
from tests.manifests.cel_admission import ENGINES
from tests.manifests.kube_schemas import _strict
from tests.project_edits import replace_once

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "tests" / "fixtures" / "karpenter" / "karpenter.sh_nodepools.yaml"
POOL = "        maxNodes: 1\n"   # dev's autoscaled l4-shared


def dev_with(tmp_path: Path, autoscaler: str | None, selector: str | None = None):
    for part in ("stacks", "tenants"):
        (tmp_path / part).mkdir(parents=True, exist_ok=True)
        for f in (REPO / part).iterdir():
            (tmp_path / part / f.name).write_text(f.read_text())
    stack = tmp_path / "stacks" / "Pulumi.dev.yaml"
    if selector:
        replace_once(stack, "          cloud.google.com/gke-nodepool: l4-pool\n", f"          {selector}\n")
    if autoscaler:
        replace_once(stack, POOL, POOL + f"        autoscaler: {autoscaler}\n")
    return load_environment(tmp_path, "dev")


def nodepool_schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    return next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]


def test_a_pool_without_an_autoscaler_gets_no_fragment():
    requirements = node_group_requirements(load_environment(REPO, "dev").facts)["l4-shared"]
    assert not set(requirements) & {key for key, _ in AUTOSCALER_FRAGMENTS.values()}


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_the_karpenter_fragment_is_a_valid_nodepool_template(tmp_path, engine):
    environment = dev_with(tmp_path, "karpenter", selector="karpenter.sh/nodepool: l4-pool")
    requirements = node_group_requirements(environment.facts)["l4-shared"]
    fragment = requirements["karpenterNodePool"]
    template = fragment["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert labels == requirements["labels"]                    # the selector's karpenter.sh label is Karpenter's own
    assert template["spec"]["taints"] == requirements["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
    # What the NodePool must have beside it (the node class, the instance types), as a user writes it.
    nodepool = copy.deepcopy(fragment)
    nodepool["metadata"] = {"name": "l4-pool"}
    nodepool["spec"]["template"]["spec"].update(
        nodeClassRef={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6.12xlarge"]}])
    errors = [e.message for e in jsonschema.Draft202012Validator(_strict(nodepool_schema())).iter_errors(nodepool)]
    assert errors == []
    rules = nodepool_schema()["properties"]["spec"]["properties"]["template"]["properties"]["metadata"]["properties"]["labels"]["x-kubernetes-validations"]
    assert rules and all(engine.run(r["rule"], {"self": labels}) for r in rules)
    # The same check refuses what Karpenter refuses: it can fail.
    assert not all(engine.run(r["rule"], {"self": {**labels, "karpenter.sh/nodepool": "l4-pool"}}) for r in rules)


def test_the_cluster_autoscaler_tags_name_labels_taints_and_gpus(tmp_path):
    environment = dev_with(tmp_path, "cluster-autoscaler")
    requirements = node_group_requirements(environment.facts)["l4-shared"]
    tags = requirements["clusterAutoscalerTags"]
    prefix = "k8s.io/cluster-autoscaler/node-template"
    assert tags[f"{prefix}/label/cloud.google.com/gke-nodepool"] == "l4-pool"
    assert tags[f"{prefix}/label/gpu.acme.dev/pool"] == "l4-shared"
    assert tags[f"{prefix}/taint/nvidia.com/gpu"] == "present:NoSchedule"
    gpus = {k: v for k, v in tags.items() if k.startswith(f"{prefix}/resources/")}
    assert gpus and all(int(v) >= 2 for v in gpus.values())   # 2 L4s a node, times their shares
    lines = node_group_lines(requirements)
    assert "cluster-autoscaler node-template tags of the group (to scale it from zero):" in lines
    assert f"  {prefix}/taint/nvidia.com/gpu: present:NoSchedule" in lines
    assert "clusterAutoscalerTags" in yaml.safe_load(platform_extras(environment)[NODE_GROUPS])["l4-shared"]


def test_an_autoscaler_on_a_static_pool_is_refused_at_its_line(tmp_path):
    dev_with(tmp_path, None)
    stack = tmp_path / "stacks" / "Pulumi.dev.yaml"
    replace_once(stack, "        nodes: [dev-l4-01]\n", "        nodes: [dev-l4-01]\n        autoscaler: karpenter\n")
    replace_once(stack, POOL, "")
    replace_once(stack, "        nodeSelector:\n          cloud.google.com/gke-nodepool: l4-pool\n", "")
    with pytest.raises(InvalidInput) as refused:
        load_environment(tmp_path, "dev")
    assert "`autoscaler` names what grows an autoscaled group: it needs `maxNodes`" in str(refused.value)
