"""The DRA queue fixtures on the real engine (issue #38): MIG through DRA with Kueue
(tests/fixtures/dra-mig-kueue) and KAI with a DRA-only class (tests/fixtures/dra-kai).

Each fleet is deployed by `pulumi up` on a control plane of its own: the API server then holds the
generated DeviceClasses (one per MIG profile of the layout; b200's and h100's) and vision's queue as
the render says it (its ClusterQueue's quota.mig per profile in the DeviceClass resources, its KAI
Queue's GPUs with the DRA-only grant), and a second `up` changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from components.load import load_environment
from components.manifests.build import environment_objects

pytestmark = pytest.mark.pulumi

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
QUEUES = {"dra-mig-kueue": ("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue"),
          "dra-kai": ("scheduling.run.ai", "v2", "queues", "Queue")}


@pytest.mark.parametrize("fixture", sorted(QUEUES))
def test_the_fixture_deploys_its_device_classes_and_queues_as_rendered(scenario_factory, fixture):
    s = scenario_factory("dra", fixture=FIXTURES / fixture)
    rendered = [o for objects in environment_objects(load_environment(s.project, "dra")).values() for o in objects]
    up = s.engine.up()
    assert up.changes, "the first up creates the fleet"
    custom = client.CustomObjectsApi(s.api)
    deployed = {d["metadata"]["name"] for d in custom.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses")["items"]}
    wanted = {o["metadata"]["name"] for o in rendered if o["kind"] == "DeviceClass"}
    assert wanted and wanted <= deployed, wanted - deployed
    group, version, plural, kind = QUEUES[fixture]
    (queue,) = [o for o in rendered if o["kind"] == kind and o["metadata"]["name"] == "vision"]
    live = custom.get_cluster_custom_object(group, version, plural, "vision")
    assert live["spec"]["resources" if kind == "Queue" else "resourceGroups"] == \
        queue["spec"]["resources" if kind == "Queue" else "resourceGroups"]
    assert s.engine.up().changes == {}
