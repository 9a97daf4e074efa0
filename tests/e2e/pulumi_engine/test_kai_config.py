"""KAI's `Config kai-config` on the real engine (staging, `kaiFractions: {memoryBound: hamicore}`):
the tool owns only its two fields of the object KAI's Helm chart applies, and dropping the setting
gives them back instead of deleting KAI's configuration (components/manifests/kai_config.py)."""

from __future__ import annotations

import pytest

from tests.project_edits import replace_once

pytestmark = pytest.mark.pulumi

STACK = "staging"
CONFIG = {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"}}
# What KAI's chart applies (post-install job, server-side apply as kai-config-deployer), in short.
HELM_FIELDS = {"global": {"schedulerName": "kai-scheduler"}, "binder": {"replicas": 1}}


def _spec(s) -> dict:
    return s.cluster.cp.get_object(CONFIG)["spec"]


def test_hamicore_is_patched_into_kais_config_and_removing_it_keeps_the_rest(scenario_factory):
    s = scenario_factory(STACK)
    s.cluster.cp.apply({**CONFIG, "spec": HELM_FIELDS}, field_manager="kai-config-deployer")

    s.engine.up()
    spec = _spec(s)
    assert spec["binder"] == {"replicas": 1, "plugins": {"hamicore": {"enabled": True}}}
    assert spec["admission"] == {"gpuSharing": True} and spec["global"] == HELM_FIELDS["global"]
    managers = {m["manager"] for m in s.cluster.cp.get_object(CONFIG)["metadata"]["managedFields"]}
    assert managers == {"kai-config-deployer", "gpu-tenancy"}

    replace_once(s.project / "stacks" / f"Pulumi.{STACK}.yaml", "        kaiFractions: {memoryBound: hamicore}\n", "")
    up = s.engine.up()
    assert {step.type for step in up.ops("delete")} == {"kubernetes:kai.scheduler/v1:ConfigPatch"}
    spec = _spec(s)   # still there: only our fields went
    assert spec == HELM_FIELDS, spec
    assert s.engine.up().changes == {}
