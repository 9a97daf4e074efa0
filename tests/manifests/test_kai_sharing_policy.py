"""KAI's per-pod GPU-sharing ConfigMaps stay KAI's binder's (kai_sharing_policy.py), replayed on two
CEL engines: the hostile tenant member is refused, the binder and ordinary ConfigMaps are not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.manifests import kai_sharing_policy as ks
from components.spec.stack import KaiFractions

from .cel_admission import ENGINES
from .cel_admission import admit as _admit

MEMBER = {"platformOperator": False}
BINDER = "system:serviceaccount:kai-scheduler:binder"
PREFIX = "notebook-x7k2p9q-shared-gpu"


@pytest.fixture(params=ENGINES, ids=lambda e: e.name)
def engine(request):
    return request.param


@pytest.fixture(scope="module")
def staging(environments):
    return environments["staging"]


@pytest.fixture(scope="module")
def policy(staging):
    return ks.kai_sharing_policy(staging.facts)[0]


def admit(engine, policy, obj, *, resource="configmaps", **kwargs):
    return _admit(engine, policy, obj, resource=resource, given=kwargs.pop("given", MEMBER), **kwargs)


def config_map(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"NVIDIA_VISIBLE_DEVICES": "all"}}


def pod(annotations=None):
    meta = {"name": "p", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "main", "image": "x"}]}}


KAI_NAMES = [f"{PREFIX}-0", f"{PREFIX}-0-evar", f"{PREFIX}-i1", f"{PREFIX}-12-evar", "a-shared-gpu-3"]


@pytest.mark.parametrize("name", KAI_NAMES)
def test_a_member_may_not_write_or_squat_a_kai_config_map(engine, policy, name):
    for operation, obj, old in (("CREATE", config_map(name), None), ("UPDATE", config_map(name), config_map(name)),
                                ("DELETE", None, config_map(name))):
        messages = admit(engine, policy, obj, operation=operation, old=old)
        assert messages == [
            f"ConfigMap {name} has the name of a KAI GPU-sharing ConfigMap (<pod>-<id>-shared-gpu-<n>): only KAI's binder "
            "(kai-scheduler/binder) may create, change or delete it, since it holds the GPU a share may use "
            "(NVIDIA_VISIBLE_DEVICES) and its memory limit; choose another name"
        ], operation


@pytest.mark.parametrize("name", KAI_NAMES)
def test_the_binder_the_garbage_collector_and_operators_may(engine, policy, name):
    for operation, obj, old in (("CREATE", config_map(name), None), ("DELETE", None, config_map(name))):
        assert admit(engine, policy, obj, operation=operation, old=old, user=BINDER) == []
        assert admit(engine, policy, obj, operation=operation, old=old,
                     user="system:serviceaccount:kube-system:generic-garbage-collector") == []
        assert admit(engine, policy, obj, operation=operation, old=old, given={"platformOperator": True}) == []


@pytest.mark.parametrize("name", ["settings", "shared-gpu-0", f"{PREFIX}", f"{PREFIX}-x", f"{PREFIX}-0-evar2"])
def test_ordinary_config_maps_stay_writable(engine, policy, name):
    assert admit(engine, policy, config_map(name)) == []
    assert admit(engine, policy, None, operation="DELETE", old=config_map(name)) == []


def test_a_pod_may_not_name_its_kai_config_maps_outside_the_protected_names(engine, policy):
    refused = admit(engine, policy, pod({ks.KAI_SHARED_GPU_CONFIGMAP_ANNOTATION: "settings"}), resource="pods")
    assert len(refused) == 1 and refused[0].startswith(
        "annotation runai/shared-gpu-configmap must end in -shared-gpu (got 'settings')")
    assert admit(engine, policy, pod({ks.KAI_SHARED_GPU_CONFIGMAP_ANNOTATION: PREFIX}), resource="pods") == []
    assert admit(engine, policy, pod(), resource="pods") == []


def test_a_pods_kai_config_map_annotation_is_fixed_at_creation(engine, policy):
    before = pod({ks.KAI_SHARED_GPU_CONFIGMAP_ANNOTATION: PREFIX})
    after = pod({ks.KAI_SHARED_GPU_CONFIGMAP_ANNOTATION: "victim-a1b2c3d-shared-gpu"})
    assert admit(engine, policy, after, resource="pods", operation="UPDATE", old=before) == [
        "annotation runai/shared-gpu-configmap of a pod cannot be added, changed or removed after it is created: "
        "it names the ConfigMaps KAI's binder writes the pod's GPU into"
    ]
    relabelled = pod({ks.KAI_SHARED_GPU_CONFIGMAP_ANNOTATION: PREFIX})
    relabelled["metadata"]["labels"] = {"team": "eval"}
    assert admit(engine, policy, relabelled, resource="pods", operation="UPDATE", old=before) == []


def test_with_hamicore_a_pod_may_not_opt_out_of_the_memory_bound(engine, policy, staging):
    opt_out = pod({ks.HAMI_OPT_OUT_ANNOTATION: "false"})
    assert admit(engine, policy, opt_out, resource="pods") == [
        "annotation kai-resource-isolator.io/inject is refused in tenant namespaces: the stack bounds KAI GPU shares "
        "by HAMi-core (kaiFractions.memoryBound: hamicore), and a pod may not opt out of the bound"
    ]
    assert admit(engine, policy, opt_out, resource="pods", operation="UPDATE", old=pod()) != []
    unbounded = staging.platform.model_copy(update={"gpu_classes": {
        name: c.model_copy(update={"kai_fractions": KaiFractions() if c.kai_fractions else None})
        for name, c in staging.platform.gpu_classes.items()}})
    without = ks.kai_sharing_policy(_facts(staging, unbounded))[0]
    assert admit(engine, without, opt_out, resource="pods") == []


def _facts(environment, platform):
    return replace(environment, platform=platform).facts


def test_the_binder_account_follows_the_stack(staging):
    kai = staging.platform.queues.kai.model_copy(update={"binder_service_account": "kai/binder-sa"})
    platform = staging.platform.model_copy(update={"queues": staging.platform.queues.model_copy(update={"kai": kai})})
    variables = {v["name"]: v["expression"] for v in ks.kai_sharing_policy(_facts(staging, platform))[0]["spec"]["variables"]}
    assert variables["binder"] == "request.userInfo.username == 'system:serviceaccount:kai:binder-sa'"
