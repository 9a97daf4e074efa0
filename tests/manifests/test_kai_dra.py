"""KAI and DRA (issue #38 item 2): the tests/fixtures/dra-kai stack's queues count DRA-only grants, its
claim policy refuses what KAI would not count or schedule, and validate refuses DeviceClasses KAI
would not count. The real KAI Scheduler: tests/e2e/scheduling/test_kai_dra.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.manifests.claim_policy import claim_policy
from components.manifests.kai import department_queues, leaf_queue
from components.spec.problems import InvalidInput
from tests.manifests.cel_admission import ENGINES
from tests.manifests.cel_admission import admit as replay
from tests.project_edits import replace_once

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
B200 = "b200.gpu.dra.dev"
QUEUE_LABEL = "kai.scheduler/queue"


@pytest.fixture(scope="module")
def kai():
    return load_environment(FIXTURES / "dra-kai", "dra")


@pytest.fixture(scope="module")
def kueue():
    return load_environment(FIXTURES / "dra-kueue", "dra")


@pytest.fixture(params=ENGINES, ids=lambda e: e.name)
def engine(request):
    return request.param


def spec(environment, name):
    return next(t.spec for t in environment.tenants if t.name == name)


def claim(labels=None, request=None):
    request = request or {"name": "gpu", "exactly": {"deviceClassName": B200, "allocationMode": "ExactCount", "count": 1}}
    return {"metadata": {"name": "c", **({"labels": labels} if labels is not None else {})},
            "spec": {"devices": {"requests": [request]}}}


def test_a_queue_holds_the_dra_only_grant_beside_the_device_plugin_one(kai):
    vision = spec(kai, "vision")   # h100: 2 (nvidia.com/gpu, or claims of h100's class: one budget), b200: 1 (DRA only)
    assert leaf_queue(vision, kai.view(vision))["spec"]["resources"]["gpu"]["quota"] == 3
    departments = {q["metadata"]["name"]: q["spec"]["resources"]["gpu"]["quota"] for q in department_queues(kai.facts)}
    assert departments == {"dept-tenants": 8 + 3}


def test_on_kai_the_claim_policy_refuses_what_kai_would_not_count_or_schedule(engine, kai):
    vision = spec(kai, "vision")
    policy = claim_policy(vision, kai.view(vision))
    listed = {"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": B200, "allocationMode": "ExactCount", "count": 1}]}
    assert replay(engine, policy, claim({QUEUE_LABEL: "vision"}), resource="resourceclaims") == []
    cases = {
        "firstAvailable is refused on this KAI stack": claim({QUEUE_LABEL: "vision"}, listed),
        f"needs the label {QUEUE_LABEL}: vision": claim(),
        f"needs the label {QUEUE_LABEL}: vision on": claim({QUEUE_LABEL: "robotics"}),
    }
    for expected, obj in cases.items():
        messages = replay(engine, policy, obj, resource="resourceclaims")
        assert any(expected in m for m in messages), (expected, messages)
    # A template's claims are made per pod, which KAI does not ask to carry the label.
    template = {"metadata": {"name": "t"}, "spec": {"spec": claim()["spec"]}}
    assert replay(engine, policy, template, resource="resourceclaimtemplates") == []


def test_without_kai_neither_rule_exists(engine, kueue):
    vision = spec(kueue, "vision")
    policy = claim_policy(vision, kueue.view(vision))
    listed = {"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": B200, "allocationMode": "ExactCount", "count": 1}]}
    assert replay(engine, policy, claim(None, listed), resource="resourceclaims") == []


@pytest.mark.parametrize("edit, field, expected", [
    ("        selector: device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'\n",
     "deviceClasses.b200.gpu.dra.dev.extendedResourceName",
     "KAI counts no pod request of 'gpu.dra.dev/b200' as GPUs"),
    ("      b200.gpu.dra.dev:\n", "deviceClasses.b200.dra.dev",
     "KAI counts claims toward a queue's GPUs only for DeviceClasses whose name contains 'gpu'"),
], ids=["extended resource", "class name"])
def test_validate_refuses_device_classes_kai_would_not_count(tmp_path, edit, field, expected):
    root = tmp_path / "project"
    for part in ("stacks", "tenants"):
        (root / part).mkdir(parents=True)
        for f in (FIXTURES / "dra-kai" / part).iterdir():
            (root / part / f.name).write_text(f.read_text())
    stack = root / "stacks" / "Pulumi.dra.yaml"
    if "extendedResourceName" in field:
        replace_once(stack, edit, edit + "        extendedResourceName: gpu.dra.dev/b200\n")
    else:
        replace_once(stack, edit, "      b200.dra.dev:\n")
    with pytest.raises(InvalidInput) as refused:
        load_environment(root, "dra")
    text = str(refused.value)
    assert "stacks/Pulumi.dra.yaml:" in text and field in text and expected in text, text
