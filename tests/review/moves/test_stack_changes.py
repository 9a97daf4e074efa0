"""The Pulumi stacks a change touches (what a PR previews) and tenants moving between shard stacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.load import load_environment
from components.review.diff import Side, compare_stack, report
from components.review.diff_format import format_markdown, format_text
from components.spec.sharding import hashed_shard
from components.review.moves.stack_changes import tenant_urn
from tests.project_edits import replace_once

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "sharded"


@pytest.fixture
def sides(tmp_path: Path):
    base, head = tmp_path / "base", tmp_path / "head"
    shutil.copytree(FIXTURE, base)
    shutil.copytree(FIXTURE, head)
    return base, head


def _diff(base: Path, head: Path, env: str = "lab") -> dict:
    stack = compare_stack(env, Side(load_environment(base, env)), Side(load_environment(head, env)), project="proj")
    return report([stack], {"ref": "main", "commit": "0" * 40})


def test_nothing_changed_touches_no_stack(sides):
    document = _diff(*sides)
    assert document["touchedStacks"] == [] and document["shardMoves"] == []


def test_a_tenant_edit_touches_only_its_shard(sides):
    base, head = sides
    replace_once(head / "tenants" / "audio.yaml", "gpu: {l4: 1}", "gpu: {l4: 2}")
    document = _diff(base, head)
    assert document["touchedStacks"] == ["lab.blue"]
    assert document["stacks"][0]["pulumiStacks"] == ["lab.blue"]
    assert "Pulumi stacks to preview: lab.blue" in format_text(document)


def test_a_new_tenant_touches_its_shard(sides):
    base, head = sides
    text = (head / "tenants" / "robotics.yaml").read_text().replace("robotics", "drones")
    (head / "tenants" / "drones.yaml").write_text(text)
    document = _diff(base, head)
    assert document["stacks"][0]["tenants"]["added"] == ["drones"]
    assert len(document["touchedStacks"]) == 1 and document["touchedStacks"][0].startswith("lab.")


def test_a_node_added_touches_only_the_platform_stack(sides):
    base, head = sides
    replace_once(head / "stacks" / "Pulumi.lab.yaml", "nodes: [gpu-l4-01, gpu-l4-02]", "nodes: [gpu-l4-01, gpu-l4-02, gpu-l4-03]")
    document = _diff(base, head)
    assert document["touchedStacks"][0] == "lab"
    # More capacity may change nothing of a tenant: only the platform stack must be previewed then.
    assert set(document["touchedStacks"]) <= {"lab", "lab.blue", "lab.green"}


def test_a_new_pin_moves_the_tenant_with_a_state_move(sides):
    base, head = sides
    replace_once(head / "stacks" / "Pulumi.lab.yaml", "vision: green ", "vision: blue ")
    document = _diff(base, head)
    [move] = document["shardMoves"]
    urn = "urn:pulumi:lab.green::proj::gpu-tenancy:index:Fleet$gpu-tenancy:index:Tenant::vision"
    assert move == {
        "environment": "lab", "tenant": "vision", "from": "lab.green", "to": "lab.blue", "decommissioned": False,
        "urn": urn, "command": f"pulumi state move --source lab.green --dest lab.blue --yes '{urn}'",
    }
    assert document["touchedStacks"] == ["lab.blue", "lab.green"]
    assert document["changed"] is True
    [warning] = [w for w in document["warnings"] if w["kind"] == "shard-move"]
    assert "tenant vision moves from stack lab.green to lab.blue" in warning["message"]
    assert move["command"] in format_markdown(document)


def test_sharding_an_existing_stack_moves_every_tenant_out_of_it(sides):
    base, head = sides
    stack = base / "stacks" / "Pulumi.lab.yaml"
    text = stack.read_text()
    stack.write_text(text[: text.index("    sharding:")])
    document = _diff(base, head)
    moves = {m["tenant"]: (m["from"], m["to"]) for m in document["shardMoves"]}
    assert moves == {"audio": ("lab", "lab.blue"), "speech": ("lab", "lab.blue"),
                     "robotics": ("lab", "lab.green"), "vision": ("lab", "lab.green")}
    assert document["touchedStacks"] == ["lab", "lab.blue", "lab.green"]


def test_a_renamed_tenant_moves_under_its_old_urn(sides):
    base, head = sides
    old = head / "tenants" / "speech.yaml"
    text = old.read_text().replace("name: speech", "name: asr\npreviousNames: [speech]")
    old.unlink()
    (head / "tenants" / "asr.yaml").write_text(text)
    assert hashed_shard("asr", ["blue", "green"]) == "green"  # speech hashes to blue
    document = _diff(base, head)
    assert document["stacks"][0]["tenants"]["renamed"] == [{"from": "speech", "to": "asr"}]
    [move] = document["shardMoves"]
    # The state move carries the old URN; the destination adopts it through the rename's alias.
    assert (move["tenant"], move["from"], move["to"]) == ("asr", "lab.blue", "lab.green")
    assert move["urn"] == tenant_urn("lab.blue", "proj", "speech")
    assert document["touchedStacks"] == ["lab.blue", "lab.green"]


def test_unsharded_environment_touches_its_one_stack():
    environment = load_environment(REPO, "prod")
    stack = compare_stack("prod", Side(environment), Side(environment))
    assert stack["pulumiStacks"] == [] and stack["shardMoves"] == []


def test_unsharded_tenant_edit_touches_the_environment_stack(tmp_path):
    base, head = tmp_path / "base", tmp_path / "head"
    for side in (base, head):
        shutil.copytree(REPO / "tenants", side / "tenants")
        shutil.copytree(REPO / "stacks", side / "stacks")
    replace_once(head / "tenants" / "eval.yaml", "objects: {pods: 500, services: 10}", "objects: {pods: 400, services: 10}")
    document = _diff(base, head, "prod")
    assert document["touchedStacks"] == ["prod"]


@pytest.mark.parametrize(("tenant", "stack"), [("team-00005", "bench.b"), ("team-00017", "bench.saas")])
def test_one_quota_edit_on_the_30_tenant_fleet_touches_one_stack(tmp_path: Path, tenant: str, stack: str):
    from tests.sharded_fleet import write_sharded_fleet

    base, head = write_sharded_fleet(tmp_path / "base"), write_sharded_fleet(tmp_path / "head")
    replace_once(head / "tenants" / f"{tenant}.yaml", "gpu: {h100: 2, l4: 1}", "gpu: {h100: 3, l4: 1}")
    document = _diff(base, head, "bench")
    assert document["stacks"][0]["tenants"]["changed"] == [tenant]
    assert document["touchedStacks"] == [stack]  # team-00017 is pinned to the reserved shard
    assert document["warnings"] == []


def test_one_quota_edit_on_the_unsharded_example_touches_its_one_stack(tmp_path: Path):
    base, head = tmp_path / "base", tmp_path / "head"
    for side in (base, head):
        shutil.copytree(REPO / "tenants", side / "tenants")
        shutil.copytree(REPO / "stacks", side / "stacks")
    replace_once(head / "tenants" / "llm-finetune.yaml", "  gpu: 40\n", "  gpu: 32\n")
    document = _diff(base, head, "prod")
    assert document["touchedStacks"] == ["prod"]
    assert [w["kind"] for w in document["warnings"]] == ["quota-lowered"]
    assert all(w["tenant"] == "llm-finetune" for w in document["warnings"])


def test_removing_a_tenant_of_the_30_tenant_fleet_warns_about_it_alone(tmp_path: Path):
    from tests.sharded_fleet import write_sharded_fleet

    base, head = write_sharded_fleet(tmp_path / "base"), write_sharded_fleet(tmp_path / "head")
    (head / "tenants" / "team-00010.yaml").unlink()
    replace_once(head / "tenants" / "team-00009.yaml", "tenants: [team-00010]", "tenants: []")
    document = _diff(base, head, "bench")
    assert [(w["kind"], w["tenant"]) for w in document["warnings"]] == [("tenant-removed", "team-00010")]
