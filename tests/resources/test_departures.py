"""The program says, in the preview, that a tenant leaving its stack is kept on the cluster."""

from __future__ import annotations

import logging

from components.manifests.registration import LIFECYCLES
from components.resources.departures import departure_messages
from tools.pulumi_mocks import REPO, run_program

PREVIOUS = {
    "eval": {"namespaces": ["eval"], "lifecycle": "active"},
    "gone": {"namespaces": ["gone", "gone-ci"], "lifecycle": "active"},
    "retired": {"namespaces": ["retired"], "lifecycle": "decommissioned"},
}


def test_a_removed_tenant_is_said_to_stay():
    [gone, retired] = departure_messages(PREVIOUS, {"eval": {}}, "prod")
    assert gone.startswith("tenant gone is no longer deployed by stack prod: its objects are listed as deletes, but nothing of it is deleted")
    assert "(gone, gone-ci)" in gone
    assert retired.startswith("tenant retired (decommissioned) is no longer deployed by stack prod: this update DELETES")


def test_nothing_to_say_on_a_first_deployment_or_without_departures():
    assert departure_messages(None, {"eval": {}}, "prod") == []
    assert departure_messages({"eval": {}}, {"eval": {}, "new": {}}, "prod") == []


def test_the_program_warns_with_its_last_outputs(caplog):
    with caplog.at_level(logging.WARNING):
        registrations, _ = run_program("dev", REPO, stack_outputs={"tenants": PREVIOUS})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.split(":")[0] for w in warnings if w.startswith("tenant ")] == [
        "tenant gone is no longer deployed by stack dev",
        "tenant retired (decommissioned) is no longer deployed by stack dev",
    ]
    [reference] = [r for r in registrations if r.type == "pulumi:pulumi:StackReference"]
    assert reference.name == "gpu-tenancy/dev"  # the mock runtime has no organization; the engine adds it


def test_a_renamed_tenant_gets_its_rename_message_instead_of_a_departure():
    renames = {"gone": "tenant gone is renamed to eval (previousNames): ..."}

    messages = departure_messages(PREVIOUS, {"eval": {}}, "prod", renames)

    assert messages[0] == renames["gone"]
    assert messages[1].startswith("tenant retired (decommissioned)")
    assert not [m for m in messages if "nothing of it is deleted" in m]


def test_the_program_warns_about_a_rename_in_the_words_of_tenants_diff(tmp_path, caplog):
    import shutil

    from components.load import load_environment
    from components.review.diff import Side, compare_stack
    from tests.project_edits import rename_llm_finetune

    base = tmp_path / "base"
    for part in ("stacks", "tenants"):
        shutil.copytree(REPO / part, base / part)
        shutil.copytree(REPO / part, tmp_path / part)
    shutil.copy(REPO / "__main__.py", tmp_path / "__main__.py")
    rename_llm_finetune(tmp_path)
    last = {name: {"namespaces": [name], "lifecycle": "active"} for name in ("eval", "inference", "llm-finetune")}

    with caplog.at_level(logging.WARNING):
        run_program("prod", tmp_path, stack_outputs={"tenants": last})

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.getMessage().startswith("tenant ")]
    document = compare_stack("prod", Side(load_environment(base, "prod")), Side(load_environment(tmp_path, "prod")))
    assert warnings == [w["message"] for w in document["warnings"] if w["kind"] == "tenant-renamed"]


def test_the_warning_says_what_the_registration_plan_does_for_every_lifecycle():
    """The words come from the same lifecycle table as the plan's retain rules, so a lifecycle that
    keeps its tenant on removal is never announced as deleted, and the reverse."""
    previous = {name: {"namespaces": [name], "lifecycle": name} for name in LIFECYCLES}
    messages = dict(zip(sorted(previous), departure_messages(previous, {}, "prod")))
    assert set(messages) == {"active", "suspended", "decommissioned"}
    for lifecycle, rule in LIFECYCLES.items():
        assert ("DELETES" in messages[lifecycle]) is (not rule.kept), lifecycle
