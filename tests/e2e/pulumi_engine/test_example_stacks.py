"""Every example stack on the real engine: `pulumi up` creates exactly the rendered objects, and a
second `up` changes nothing (no churn from defaults the server fills in, or from the provider)."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from tools.engine import kubernetes_resources, rendered_by_name, write_local_vcluster_chart
from tests.project_edits import replace_once

pytestmark = pytest.mark.pulumi


@pytest.mark.parametrize("stack", ["prod", "staging", "dev"])
def test_stack_up_creates_every_rendered_object_and_a_second_up_changes_nothing(
    stack, scenario_factory, timed, e2e_summary
):
    s = scenario_factory(stack)
    if stack == "dev":
        # Bug 5: dev's vClusters come from a local chart (offline), whose values schema is the real one.
        chart = write_local_vcluster_chart(s.project)
        replace_once(s.project / "stacks" / "Pulumi.dev.yaml", "    labelDomain: gpu.acme.dev\n",
                     f"    labelDomain: gpu.acme.dev\n    vcluster:\n      chart: {chart}\n")
    rendered = rendered_by_name(s.project, stack)

    first = timed("first up", s.engine.up)
    assert set(first.changes) == {"create"}, first.changes
    state = kubernetes_resources(s.engine.export())
    # One Kubernetes resource per rendered object (and per Helm release), named as the shell names them.
    assert set(state) == set(rendered), (sorted(set(rendered) - set(state)), sorted(set(state) - set(rendered)))

    missing = []
    for name, obj in rendered.items():
        if obj["kind"] == "HelmRelease":
            continue
        try:
            s.cluster.cp.get_object(obj)
        except ApiException as err:
            missing.append(f"{name}: {err.status}")
    assert not missing, missing

    if stack == "dev":
        releases = [n for n, o in rendered.items() if o["kind"] == "HelmRelease"]
        assert releases
        for name in releases:
            tenant = name.removesuffix("-vcluster")
            from kubernetes import client

            cm = client.CoreV1Api(s.api).read_namespaced_config_map("vcluster-values", tenant)
            assert "resourceQuota" in cm.data["values.yaml"], "the chart got our generated values"

    second = timed("second up", s.engine.up)
    assert second.changes == {}, second.ops("create", "update", "delete", "replace")
    assert second.summary.get("same") == first.summary["create"]
    e2e_summary.append(f"{stack}: up created {first.summary['create']} resources; re-up {second.summary}")
