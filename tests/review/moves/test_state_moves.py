"""Moves planned from what the stacks' states hold (`pulumi stack export`), not from a git diff."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.load import load_environment
from components.review.moves.stack_changes import TENANT_TYPE, tenant_urn
from components.review.moves.state_moves import (StateExportError, deployed_tenants, pending_operations, planned_moves, stack_of_urn,
                                           stale_copies, without_pending, without_resource_tree)
from tests.project_edits import replace_once
from tests.state_exports import export

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "sharded"


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "lab")
    return tmp_path / "lab"


def _plan(root: Path, *exports: dict) -> list[dict]:
    deployed = dict(deployed_tenants(e) for e in exports)
    return planned_moves(load_environment(root, "lab"), deployed)


def test_states_that_match_the_assignment_need_no_move(lab):
    assert _plan(lab, export("lab", []), export("lab.blue", ["audio", "speech"]),
                 export("lab.green", ["robotics", "vision"])) == []


def test_an_unsharded_state_moves_every_tenant_to_its_shard(lab):
    moves = _plan(lab, export("lab", ["audio", "robotics", "speech", "vision"]))
    assert [(m["tenant"], m["from"], m["to"]) for m in moves] == [
        ("audio", "lab", "lab.blue"), ("robotics", "lab", "lab.green"),
        ("speech", "lab", "lab.blue"), ("vision", "lab", "lab.green")]
    assert moves[0]["command"] == (
        f"pulumi state move --source lab --dest lab.blue --yes '{tenant_urn('lab', 'proj', 'audio')}'")


def test_a_move_whose_deploy_never_ran_is_still_found(lab):
    # vision was re-pinned to blue two commits ago and that deploy failed: a diff against the last
    # push sees nothing, the state still has vision in green.
    replace_once(lab / "stacks" / "Pulumi.lab.yaml", "vision: green ", "vision: blue ")
    moves = _plan(lab, export("lab.blue", ["audio", "speech"]), export("lab.green", ["robotics", "vision"]))
    assert [(m["tenant"], m["from"], m["to"], m["decommissioned"]) for m in moves] == [
        ("vision", "lab.green", "lab.blue", False)]


def test_the_urn_is_the_one_in_the_state_not_a_rebuilt_one(lab):
    # After an earlier `pulumi state move` the CLI parents the tenant to the stack's root.
    rooted = "urn:pulumi:lab.blue::proj::gpu-tenancy:index:Tenant::vision"
    [move] = _plan(lab, export("lab.blue", {"audio": tenant_urn("lab.blue", "proj", "audio"), "vision": rooted}))
    assert (move["from"], move["to"], move["urn"]) == ("lab.blue", "lab.green", rooted)


def test_a_renamed_tenant_moves_by_its_old_name(lab):
    old = lab / "tenants" / "speech.yaml"
    (lab / "tenants" / "asr.yaml").write_text(old.read_text().replace("name: speech", "name: asr\npreviousNames: [speech]"))
    old.unlink()
    [move] = _plan(lab, export("lab.blue", ["audio", "speech"]), export("lab.green", ["robotics", "vision"]))
    assert (move["tenant"], move["from"], move["to"]) == ("asr", "lab.blue", "lab.green")
    assert move["urn"] == tenant_urn("lab.blue", "proj", "speech")


def test_a_tenant_whose_file_is_gone_is_not_moved(lab):
    (lab / "tenants" / "audio.yaml").unlink()
    assert _plan(lab, export("lab", ["audio"]), export("lab.blue", ["speech"])) == []


def test_a_decommissioned_tenant_says_so(lab):
    path = lab / "tenants" / "vision.yaml"
    path.write_text(path.read_text() + "lifecycle: decommissioned\ndecommission: {confirm: vision}\n")
    replace_once(lab / "stacks" / "Pulumi.lab.yaml", "vision: green ", "vision: blue ")
    [move] = _plan(lab, export("lab.green", ["vision"]))
    assert move["decommissioned"] is True


def test_a_tenant_in_two_states_is_refused(lab):
    with pytest.raises(StateExportError, match=r"tenant vision is in the state of several stacks \(lab.blue as vision, lab.green as vision\)"):
        _plan(lab, export("lab.blue", ["vision"]), export("lab.green", ["vision"]))


def test_another_environments_stack_is_refused(lab):
    with pytest.raises(StateExportError, match=r"stack\(s\) prod.a are not stacks of environment lab"):
        _plan(lab, export("prod.a", ["vision"]))


def test_an_empty_state_has_no_stack():
    assert deployed_tenants({"version": 3, "deployment": {"manifest": {}}}) == (None, {})


@pytest.mark.parametrize("document", [{}, [], {"deployment": "x"}, None])
def test_what_is_not_an_export_is_refused_with_how_to_write_one(document):
    with pytest.raises(StateExportError, match=r"f.json: not a `pulumi stack export` document .* `pulumi stack export --stack <stack> --file f.json"):
        deployed_tenants(document, "f.json")


def test_an_export_mixing_stacks_is_refused():
    document = export("lab.blue", ["audio"])
    document["deployment"]["resources"].append({"urn": tenant_urn("lab.green", "proj", "x"), "type": TENANT_TYPE})
    with pytest.raises(StateExportError, match="resources of several stacks"):
        deployed_tenants(document, "f.json")


def test_a_urn_names_its_stack():
    assert stack_of_urn(tenant_urn("lab.green", "p", "x")) == "lab.green"
    with pytest.raises(StateExportError, match="not a Pulumi URN"):
        stack_of_urn("lab.green::x")


# --- what a crash left in the exports: pending operations, a half-done move's stale copy ---
def test_pending_operations_are_listed_and_cleared_without_touching_the_resources():
    document = export("prod", ["eval"])
    document["deployment"]["pending_operations"] = [
        {"type": "creating", "resource": {"urn": "urn:pulumi:prod::proj::kubernetes:core/v1:Namespace::eval-namespace-eval"}},
        {"type": "updating", "resource": {"urn": "urn:pulumi:prod::proj::kubernetes:core/v1:ResourceQuota::q"}}]
    assert [op for op, _ in pending_operations(document)] == ["creating", "updating"]
    cleared = without_pending(document)
    assert pending_operations(cleared) == [] and cleared["deployment"]["resources"] == document["deployment"]["resources"]
    assert len(pending_operations(document)) == 2   # the input is not changed


def test_the_copy_outside_the_tenants_own_stack_is_stale():
    lab = load_environment(FIXTURE, "lab")   # vision is pinned to lab.green
    deployed = {"lab.blue": {"vision": tenant_urn("lab.blue", "proj", "vision"), "audio": "a"},
                "lab.green": {"vision": tenant_urn("lab.green", "proj", "vision")}}
    assert stale_copies(lab, deployed) == [
        {"tenant": "vision", "stale": "lab.blue", "kept": "lab.green", "urn": tenant_urn("lab.blue", "proj", "vision")}]
    assert stale_copies(lab, {"lab.green": deployed["lab.green"]}) == []


def test_two_copies_neither_in_the_tenants_stack_are_not_guessed_at():
    lab = load_environment(FIXTURE, "lab")
    assert stale_copies(lab, {"lab": {"vision": "u1"}, "lab.blue": {"vision": "u2"}}) == []


def test_a_stale_tenant_goes_with_everything_under_it_and_the_references_to_it():
    stack = "urn:pulumi:lab.blue::proj::pulumi:pulumi:Stack::proj-lab.blue"
    tenant = tenant_urn("lab.blue", "proj", "vision")
    namespace = "urn:pulumi:lab.blue::proj::kubernetes:core/v1:Namespace::vision-namespace-vision"
    quota = "urn:pulumi:lab.blue::proj::kubernetes:core/v1:ResourceQuota::vision-quota"
    other = "urn:pulumi:lab.blue::proj::kubernetes:core/v1:Namespace::audio-namespace-audio"
    document = {"version": 3, "deployment": {"resources": [
        {"urn": stack}, {"urn": tenant, "parent": stack}, {"urn": namespace, "parent": tenant},
        {"urn": quota, "parent": namespace, "deletedWith": namespace},
        {"urn": other, "parent": stack, "dependencies": [namespace], "propertyDependencies": {"metadata": [namespace]},
         "deletedWith": namespace}]}}
    cleaned, removed = without_resource_tree(document, tenant)
    assert removed == 3
    assert cleaned["deployment"]["resources"] == [
        {"urn": stack}, {"urn": other, "parent": stack, "dependencies": [], "propertyDependencies": {"metadata": []}}]
    assert len(document["deployment"]["resources"]) == 5
