"""examples/existing-program: another Pulumi program adds the fleet with its own provider, built
from a kubeconfig Output, and tenants from plain data (run under Pulumi's mock runtime)."""

from __future__ import annotations

import runpy

import pytest

from components import InvalidInput, environment_from_data, environment_objects
from components.manifests.meta import object_id
from components.resources.kubernetes import registered_metadata
from tools.pulumi_mocks import REPO, normalise, run_body

EXAMPLE = REPO / "examples" / "existing-program"
SECRET_SIGNATURE, SECRET_VALUE = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"
CONFIG = {"existing-program:kubeconfig": "apiVersion: v1\nkind: Config\n"}


@pytest.fixture(scope="module")
def example():
    namespace: dict = {}

    def body():
        namespace.update(runpy.run_path(str(EXAMPLE / "__main__.py"), run_name="__main__"))

    registrations, monitor = run_body("example", CONFIG, body, project="existing-program")
    return registrations, monitor, namespace


def test_the_example_registers_exactly_the_objects_of_its_data(example):
    registrations, _, namespace = example
    expected = environment_objects(environment_from_data("example", namespace["PLATFORM"], namespace["TENANTS"]))
    # The Pulumi shell adds one annotation: its stable server-side apply field manager.
    wanted = {object_id(o): normalise({**o, "metadata": registered_metadata(o)})
              for objects in expected.values() for o in objects}
    registered = {
        object_id(r.inputs): normalise(dict(r.inputs))
        for r in registrations
        if r.type.startswith("kubernetes:") and not r.type.startswith("pulumi:providers") and not r.read
    }
    assert sorted(registered) == sorted(wanted)
    assert registered == wanted


def test_every_kubernetes_resource_uses_the_provider_built_from_the_kubeconfig_output(example):
    registrations, _, _ = example
    providers = [r for r in registrations if r.type == "pulumi:providers:kubernetes"]
    assert [p.name for p in providers] == ["gpu-cluster"]
    kubeconfig = providers[0].inputs["kubeconfig"]
    # Pulumi's wire form of a secret: the kubeconfig stays secret all the way to the provider.
    assert kubeconfig == {SECRET_SIGNATURE: SECRET_VALUE, "value": CONFIG["existing-program:kubeconfig"]}
    resources = [r for r in registrations if r.type.startswith("kubernetes:")]   # the reads of its Nodes too
    assert resources and any(r.read for r in resources)
    for resource in resources:
        assert "pulumi:providers:kubernetes::gpu-cluster::" in resource.options.get("provider", ""), resource.name


def test_the_components_keep_their_type_tokens_and_parents(example):
    registrations, _, _ = example
    fleet = [r for r in registrations if r.type == "gpu-tenancy:index:Fleet"]
    assert [r.name for r in fleet] == ["shared-gpu"]
    tenants = sorted(r.name for r in registrations if r.type == "gpu-tenancy:index:Tenant")
    assert tenants == ["ranking", "search"]
    assert all(r.parent == fleet[0].urn for r in registrations if r.type == "gpu-tenancy:index:Tenant")


def test_invalid_data_raises_every_problem_named_after_its_key():
    platform = {"labelDomain": "gpu.example.org", "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi"}},
                "nodePools": {"p": {"gpuClass": "l4", "gpusPerNode": 4, "nodes": ["n1"]}}}
    tenant = {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "search", "displayName": "Search", "costCenter": "cc-1",
              "access": {"owners": {"groups": ["g"]}}, "quota": {"gpu": {"h100": 2}}, "gpu": {"classes": ["l4"]}}
    with pytest.raises(InvalidInput) as raised:
        environment_from_data("example", platform, {"search": tenant})
    text = str(raised.value)
    assert "data:tenants/search: quota.gpu.h100: unknown GPU class 'h100'" in text
