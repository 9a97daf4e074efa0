"""MIG: the mig-parted ConfigMap, its capacity figures, and layouts the GPU cannot hold."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.project_edits import line_of, validation_errors
from components.load import load_environment
from components.manifests import mig_config
from components.fleet.gpu_capacity import capacity
from components.spec.stack import Platform

# Byte-for-byte copies of NVIDIA's files (see SOURCES.md next to them).
REFERENCE = Path(__file__).parents[1] / "fixtures" / "gpu-operator"  # upstream copies, see SOURCES.md there


def _config(environment) -> dict:
    config_map = mig_config.mig_config_map(environment.facts)
    return yaml.safe_load(config_map["data"]["config.yaml"])


def test_prod_config_map(prod):
    config_map = mig_config.mig_config_map(prod.facts)
    assert config_map["metadata"]["name"] == "gpu-tenancy-mig-config"
    assert config_map["metadata"]["namespace"] == "gpu-operator"
    assert list(config_map["data"]) == ["config.yaml"]
    assert _config(prod) == {
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            "eval-mix": [
                {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                {"devices": [4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
            ],
        },
    }


def test_dev_named_layout_is_expanded(dev):
    assert _config(dev)["mig-configs"]["all-1g.10gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    ]


def test_same_schema_as_nvidia_examples(prod):
    custom = yaml.safe_load(yaml.safe_load((REFERENCE / "custom-mig-config.yaml").read_text())["data"]["config.yaml"])
    default = yaml.safe_load(
        yaml.safe_load((REFERENCE / "default-mig-parted-config.configmap.yaml").read_text())["data"]["config.yaml"]
    )
    ours = _config(prod)
    assert set(ours) == set(custom) == {"version", "mig-configs"} and ours["version"] == custom["version"]
    # `all-disabled` must read exactly as NVIDIA's: the operator labels unconfigured nodes with it.
    assert ours["mig-configs"]["all-disabled"] == custom["mig-configs"]["all-disabled"] == default["mig-configs"]["all-disabled"]
    reference_keys = {key for groups in default["mig-configs"].values() for group in groups for key in group}
    reference_profiles = {
        name for groups in default["mig-configs"].values() for group in groups for name in group.get("mig-devices", {})
    }
    for groups in ours["mig-configs"].values():
        for group in groups:
            assert set(group) <= reference_keys
            assert set(group.get("mig-devices", {})) <= reference_profiles


def test_text_keeps_nvidia_layout(prod):
    text = mig_config.mig_config_map(prod.facts)["data"]["config.yaml"]
    assert text.startswith("version: v1\nmig-configs:\n  all-disabled:\n")
    assert "  - devices: [0, 1, 2, 3]\n" in text


def test_mig_capacity_matches_hand_computed_values(prod, dev):
    # prod: pool a100-mig = 2 nodes; GPUs 0-3 hold 7 x 1g.10gb, GPUs 4-7 hold 2 x 3g.40gb.
    prod_capacity = capacity(prod.platform)
    assert prod_capacity.per_mig_profile == {"1g.10gb": 2 * 4 * 7, "3g.40gb": 2 * 4 * 2} == {"1g.10gb": 56, "3g.40gb": 16}
    assert prod_capacity.per_class["a100-mig"] == 0  # every GPU is partitioned
    # dev: 1 node x 8 GPUs x all-1g.10gb (7 per GPU).
    assert capacity(dev.platform).per_mig_profile == {"1g.10gb": 56}


def _platform(layout: dict, strategy: str = "mixed", gpus: int = 8) -> Platform:
    return Platform.model_validate({
        "labelDomain": "gpu.example.com",
        "gpuClasses": {"m": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi",
                             "sharing": "mig", "mig": {"strategy": strategy}}},
        "nodePools": {"p": {"gpuClass": "m", "gpusPerNode": gpus, "nodes": ["n1", "n2"], "migLayout": "half"}},
        "migLayouts": {"half": layout},
    })


def test_gpus_left_out_of_a_layout_are_stated_whole():
    platform = _platform([{"devices": [0, 1, 2, 3], "profiles": {"3g.40gb": 2}}])
    assert mig_config.layout_groups(platform, "half") == [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [4, 5, 6, 7], "mig-enabled": False},
    ]
    result = capacity(platform)
    assert result.per_mig_profile == {"3g.40gb": 2 * 4 * 2}
    assert result.per_class["m"] == 2 * 4  # the whole GPUs still serve nvidia.com/gpu


def test_single_strategy_counts_slices_as_gpus():
    platform = _platform([{"devices": "all", "profiles": {"1g.10gb": 7}}], strategy="single")
    result = capacity(platform)
    assert result.per_mig_profile == {}
    assert result.per_class["m"] == 2 * 8 * 7


def test_exclusive_mig_capable_pools_are_pinned_to_all_disabled(prod):
    pools = prod.platform.node_pools
    assert mig_config.node_labels(prod.platform, pools["h100-train"]) == {"nvidia.com/mig.config": "all-disabled"}
    assert mig_config.node_labels(prod.platform, pools["a100-mig"]) == {"nvidia.com/mig.config": "eval-mix"}


def test_no_config_map_without_mig_capable_gpus():
    platform = Platform.model_validate({
        "labelDomain": "gpu.example.com",
        "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi"}},
        "nodePools": {"p": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]}},
    })
    assert not mig_config.uses_mig_manager(platform)


# ---- invalid layouts, through the loader on edited stack files --------------------------------


def _edit_prod(root: Path, *replacements: tuple[str, str]) -> str:
    path = root / "stacks" / "Pulumi.prod.yaml"
    text = path.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return text






H100_MIG = ("      a100-mig:\n        model: A100-80GB", "      a100-mig:\n        model: H100-80GB")


def test_two_4g_40gb_on_an_h100_is_rejected(project_copy):
    text = _edit_prod(project_copy, H100_MIG, ("profiles: {3g.40gb: 2}", "profiles: {4g.40gb: 2}"))
    line = line_of(text, "profiles: {4g.40gb: 2}")
    assert (
        f"stacks/Pulumi.prod.yaml:{line}:11: config.gpu-tenancy:platform.migLayouts.eval-mix[1].profiles: "
        "invalid for pool 'a100-mig' (H100-80GB): 4g.40gb: at most 1 per H100-80GB GPU (asked for 2)"
    ) in validation_errors(project_copy, "prod")


def test_4g_plus_3g_fits_but_two_4g_do_not_even_by_placement(project_copy):
    # 4g.40gb + 3g.40gb uses all 7 compute and 8 memory slices and fits; the geometry check must not
    # reject it (a pure slice-count check would accept 4g + 4g too, which does not fit).
    _edit_prod(project_copy, H100_MIG, ("profiles: {3g.40gb: 2}", "profiles: {4g.40gb: 1, 3g.40gb: 1}"))
    errors = validation_errors(project_copy, "prod")
    assert not any("migLayouts" in e for e in errors)


def test_profile_of_another_gpu_is_rejected(project_copy):
    text = _edit_prod(project_copy, H100_MIG, ("profiles: {1g.10gb: 7}", "profiles: {1g.5gb: 7}"))
    line = line_of(text, "profiles: {1g.5gb: 7}")
    errors = validation_errors(project_copy, "prod")
    assert any(
        e.startswith(f"stacks/Pulumi.prod.yaml:{line}:11: config.gpu-tenancy:platform.migLayouts.eval-mix[0].profiles: ")
        and "profile 1g.5gb does not exist on H100-80GB" in e
        for e in errors
    ), errors


def test_eight_1g_10gb_are_rejected(project_copy):
    text = _edit_prod(project_copy, ("profiles: {1g.10gb: 7}", "profiles: {1g.10gb: 8}"))
    line = line_of(text, "profiles: {1g.10gb: 8}")
    assert (
        f"stacks/Pulumi.prod.yaml:{line}:11: config.gpu-tenancy:platform.migLayouts.eval-mix[0].profiles: "
        "invalid for pool 'a100-mig' (A100-80GB): 1g.10gb: at most 7 per A100-80GB GPU (asked for 8)"
    ) in validation_errors(project_copy, "prod")


def test_unknown_named_layout_is_rejected(project_copy):
    path = project_copy / "stacks" / "Pulumi.dev.yaml"
    text = path.read_text().replace("migLayout: all-1g.10gb", "migLayout: all-1g.5gb")
    path.write_text(text)
    line = line_of(text, "migLayout: all-1g.5gb")
    errors = validation_errors(project_copy, "dev")
    assert any(
        e.startswith(f"stacks/Pulumi.dev.yaml:{line}:") and "unknown MIG layout 'all-1g.5gb'" in e for e in errors
    ), errors


def test_a_class_served_by_dra_alone_gets_no_mig_label_nor_config_map():
    """The GPU Operator's DRA stack runs no MIG Manager: nothing for one to act on (tests/fixtures/dra-operator)."""
    environment = load_environment(Path(__file__).resolve().parents[1] / "fixtures" / "dra-operator", "dra")
    platform = environment.platform
    assert all(mig_config.node_labels(platform, pool) == {} for pool in platform.node_pools.values())
    assert mig_config.mig_config_map(environment.facts) is None
