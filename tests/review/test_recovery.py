"""What a crash left in stack exports: pending operations, a half-done state move's stale copy."""

from __future__ import annotations

from pathlib import Path

from components.load import load_environment
from components.review.recovery import pending_operations, stale_copies, without_pending, without_resource_tree
from components.review.stack_changes import tenant_urn
from tests.state_exports import export

SHARDED = Path(__file__).resolve().parents[1] / "fixtures" / "sharded"


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
    lab = load_environment(SHARDED, "lab")   # vision is pinned to lab.green
    deployed = {"lab.blue": {"vision": tenant_urn("lab.blue", "proj", "vision"), "audio": "a"},
                "lab.green": {"vision": tenant_urn("lab.green", "proj", "vision")}}
    assert stale_copies(lab, deployed) == [
        {"tenant": "vision", "stale": "lab.blue", "kept": "lab.green", "urn": tenant_urn("lab.blue", "proj", "vision")}]
    assert stale_copies(lab, {"lab.green": deployed["lab.green"]}) == []


def test_two_copies_neither_in_the_tenants_stack_are_not_guessed_at():
    lab = load_environment(SHARDED, "lab")
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
