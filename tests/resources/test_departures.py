"""The program says, in the preview, that a tenant leaving its stack is kept on the cluster."""

from __future__ import annotations

import logging

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
