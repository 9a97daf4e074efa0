"""Capacity of the example stacks, computed by hand here, and how tenant quotas map onto it."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from components.fleet import gpu_capacity as cap
from components.load import load_environment, load_platform
from components.spec.stack import GpuClass, Platform

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prod() -> Platform:
    return load_platform(REPO, "prod")[0]


@pytest.fixture(scope="module")
def dev() -> Platform:
    return load_platform(REPO, "dev")[0]


def test_prod_whole_gpu_capacity(prod):
    figures = cap.capacity(prod)
    # h100-train 5 nodes + h100-serve 3 nodes, 8 GPUs each
    assert figures.per_class["h100"] == (5 + 3) * 8 == 64
    # a100-shared: 2 nodes x 8
    assert figures.per_class["a100"] == 2 * 8 == 16
    # a100-mig: the eval-mix layout partitions all 8 GPUs of each node, none stay whole
    assert figures.per_class["a100-mig"] == 0


def test_prod_overcommit_raises_the_limit_not_the_capacity(prod):
    figures = cap.capacity(prod)
    assert figures.limit_for_class(prod, "a100") == Fraction(16) * Fraction(5, 4) == 20
    assert figures.limit_for_class(prod, "h100") == 64


def test_prod_mig_slices(prod):
    figures = cap.capacity(prod)
    # eval-mix: GPUs 0-3 hold 7x 1g.10gb, GPUs 4-7 hold 2x 3g.40gb; 2 nodes
    assert figures.per_mig_profile == {"1g.10gb": 2 * 4 * 7, "3g.40gb": 2 * 4 * 2}
    assert figures.per_mig_profile["1g.10gb"] == 56
    assert figures.per_mig_profile["3g.40gb"] == 16
    assert figures.mig_profile_classes == {"1g.10gb": ["a100-mig"], "3g.40gb": ["a100-mig"]}
    assert figures.limit_for_profile(prod, "3g.40gb") == 16


def test_dev_time_sliced_and_mig_capacity(dev):
    figures = cap.capacity(dev)
    # l4-shared: 1 static node + up to 1 autoscaled node, 2 GPUs each, 4 time-sliced replicas per GPU
    assert figures.per_class["l4"] == (1 + 1) * 2 * 4 == 16
    assert figures.limit_for_class(dev, "l4") == Fraction(16) * Fraction(3, 2) == 24
    # a100-mig: one node, all 8 GPUs as all-1g.10gb (7 per GPU)
    assert figures.per_mig_profile == {"1g.10gb": 1 * 8 * 7}
    assert figures.per_class["a100-mig"] == 0


def test_unused_profiles_have_no_capacity(dev):
    figures = cap.capacity(dev)
    assert figures.limit_for_profile(dev, "3g.40gb") == 0


def _platform(**overrides) -> Platform:
    return Platform.model_validate({
        "labelDomain": "gpu.example.com",
        "gpuClasses": {"a100": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig", **overrides}},
        "nodePools": {"pool": {"gpuClass": "a100", "gpusPerNode": 8, "nodes": ["n1", "n2", "n3"], "migLayout": "half"}},
        "migLayouts": {"half": [{"devices": [0, 1], "profiles": {"3g.40gb": 2}}, {"devices": [2, 3], "profiles": {"7g.80gb": 1}}]},
    })


def test_gpus_a_layout_does_not_cover_stay_whole():
    figures = cap.capacity(_platform())
    # 3 nodes; GPUs 0-1: 2x 3g.40gb, GPUs 2-3: 1x 7g.80gb, GPUs 4-7 whole
    assert figures.per_mig_profile == {"3g.40gb": 3 * 2 * 2, "7g.80gb": 3 * 2 * 1}
    assert figures.per_class["a100"] == 3 * 4


def test_single_strategy_counts_every_slice_as_a_gpu():
    figures = cap.capacity(_platform(mig={"strategy": "single"}))
    # single strategy: every MIG device is an nvidia.com/gpu; 3 nodes x (2x2 + 2x1 slices + 4 whole)
    assert figures.per_mig_profile == {}
    assert figures.per_class["a100"] == 3 * (2 * 2 + 2 * 1 + 4)


def test_time_sliced_class_resource():
    shared = GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="timeSlicing", time_slicing={"replicas": 4, "renameByDefault": True})
    plain = GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", sharing="timeSlicing", time_slicing={"replicas": 4})
    assert cap.class_resource(shared) == "nvidia.com/gpu.shared"
    assert cap.class_resource(plain) == "nvidia.com/gpu"


def test_quotas_of_the_prod_tenants():
    env = load_environment(REPO, "prod")
    by_name = {t.name: t.spec for t in env.tenants}
    platform = env.platform
    # a plain number applies to the one class the tenant may use (here through its dedicated pool)
    assert cap.allowed_classes(by_name["llm-finetune"], platform) == ["h100"]
    assert cap.gpu_quota_by_class(by_name["llm-finetune"], platform) == {"h100": 40}
    assert cap.gpu_quota_by_class(by_name["inference"], platform) == {"h100": 24}
    assert cap.allowed_classes(by_name["eval"], platform) == ["a100", "a100-mig"]
    assert cap.gpu_quota_by_class(by_name["eval"], platform) == {"a100": 20}
    # what ResourceQuota can enforce: the sum per extended resource, not per class
    assert cap.gpu_quota_by_resource(by_name["eval"], platform) == {
        "nvidia.com/gpu": 20,
        "nvidia.com/mig-1g.10gb": 48,
        "nvidia.com/mig-3g.40gb": 16,
    }


def test_quotas_of_two_classes_on_one_resource_add_up():
    env = load_environment(REPO, "prod")
    eval_spec = next(t.spec for t in env.tenants if t.name == "eval")
    both = eval_spec.model_copy(update={"quota": eval_spec.quota.model_copy(update={"gpu": {"a100": 4, "h100": 2}, "mig": {}})})
    assert cap.gpu_quota_by_resource(both, env.platform) == {"nvidia.com/gpu": 6}


def test_quotas_of_the_dev_tenants():
    env = load_environment(REPO, "dev")
    for loaded in env.tenants:
        quota = cap.gpu_quota_by_class(loaded.spec, env.platform)
        assert quota == {"l4": 2}, loaded.name
    eval_spec = next(t.spec for t in env.tenants if t.name == "eval")
    assert cap.gpu_quota_by_resource(eval_spec, env.platform) == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 40}


def test_ratio_text():
    assert cap.ratio_text(Fraction(5, 4)) == "1.25"
    assert cap.ratio_text(Fraction(20)) == "20"
