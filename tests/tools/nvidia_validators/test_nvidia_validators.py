"""The NVIDIA tools' own parsers read every GPU sharing config gpu-tenancy writes, as it is meant.

The device plugin loads one entry of the device-plugin ConfigMap (time-slicing or MPS; the one
its node's `nvidia.com/device-plugin.config` label names) with `api/config/v1`; the MIG Manager checks the
layout its node's `nvidia.com/mig.config` label names with mig-parted's `api/spec/v1` before it
repartitions. `tools/nvidia-validators` runs exactly those parsers (tools/README.md). Configs come
from every example stack, every fixture project under tests/ with a `stacks/` folder (one of
them, `fixtures/stacks/Pulumi.sharing.yaml` here, holds the variants the examples leave out) and
the builder tests' synthetic environment. Each parser is also shown broken configs, built from a
rendered one, so a validator that accepts anything fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.manifests.example_tenants import synthetic_environment
from components.fleet.environment import Environment
from components.fleet.gpu_capacity import class_resource
from components.load import load_environment, stack_names
from components.manifests.build import platform_objects
from components.manifests.gpu_nodes import node_group_requirements
from components.manifests.meta import DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL
from components.manifests.mig_config import ALL_DISABLED, CONFIG_KEY

pytestmark = pytest.mark.go

REPO_ROOT = Path(__file__).resolve().parents[3]
NVIDIA_SAMPLES = REPO_ROOT / "tests" / "fixtures" / "gpu-operator"  # NVIDIA's own files, see SOURCES.md there
FIXTURE_PROJECTS = sorted({stack.parents[1] for stack in (REPO_ROOT / "tests").glob("**/stacks/Pulumi.*.yaml")})


def _environments() -> dict[str, Environment]:
    found = {}
    for root in (REPO_ROOT, *FIXTURE_PROJECTS):
        for name in stack_names(root):
            found[name if root == REPO_ROOT else f"{root.relative_to(REPO_ROOT / 'tests')}:{name}"] = load_environment(root, name)
    found["manifests:synthetic"] = synthetic_environment()[0]
    return found


ENVIRONMENTS = _environments()


def _config_map(environment: Environment, name: str) -> dict | None:
    namespace = environment.platform.gpu_operator.namespace
    for obj in platform_objects(environment):
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == name and obj["metadata"]["namespace"] == namespace:
            return obj
    return None


def device_plugin_config_map(environment: Environment) -> dict | None:
    return _config_map(environment, environment.platform.gpu_operator.device_plugin_config)


def mig_config_map(environment: Environment) -> dict | None:
    return _config_map(environment, environment.platform.gpu_operator.mig_config)


def node_label_values(environment: Environment, label: str) -> set[str]:
    """Values of `label` on the Nodes we patch and on the nodes autoscaled groups must create."""
    on_nodes = {o["metadata"].get("labels", {}).get(label) for o in platform_objects(environment) if o["kind"] == "Node"}
    on_groups = {group["labels"].get(label) for group in node_group_requirements(environment.facts).values()}
    return (on_nodes | on_groups) - {None}


def mount(config_map: dict, where: Path) -> Path:
    """The ConfigMap as the kubelet mounts it (one file per key), which is what both tools read."""
    folder = where / config_map["metadata"]["name"]
    folder.mkdir()
    for key, text in config_map["data"].items():
        (folder / key).write_text(text)
    return folder


DEVICE_PLUGIN_ENTRIES = [
    pytest.param(label, entry, id=f"{label}/{entry}")
    for label, environment in ENVIRONMENTS.items()
    for entry in (device_plugin_config_map(environment) or {"data": {}})["data"]
]
MIG_PARTED_CONFIGS = [label for label, environment in ENVIRONMENTS.items() if mig_config_map(environment)]


def test_the_configs_cover_every_setting_that_changes_what_is_written():
    shared = [ENVIRONMENTS[p.values[0]].platform.gpu_classes[p.values[1]] for p in DEVICE_PLUGIN_ENTRIES]
    time_slicing = [c.time_slicing for c in shared if c.time_slicing]
    assert {(t.rename_by_default, t.fail_requests_greater_than_one) for t in time_slicing} >= {(False, True), (True, False)}
    assert {c.mps.rename_by_default for c in shared if c.mps} == {False, True}
    layouts = [yaml.safe_load(mig_config_map(ENVIRONMENTS[label])["data"][CONFIG_KEY]) for label in MIG_PARTED_CONFIGS]
    groups = [group for layout in layouts for name, groups in layout["mig-configs"].items() if name != ALL_DISABLED for group in groups]
    assert {isinstance(g["devices"], list) for g in groups} == {True, False}
    assert any(not g["mig-enabled"] for g in groups) and any("+" in p for g in groups for p in g.get("mig-devices", {}))
    assert {"dev", "prod", "staging"} <= set(MIG_PARTED_CONFIGS) and any(p.values[0] == "dev" for p in DEVICE_PLUGIN_ENTRIES)


@pytest.mark.parametrize("environment_label, entry", DEVICE_PLUGIN_ENTRIES)
def test_the_device_plugin_runs_each_sharing_entry_as_the_stack_means_it(nvidia, tmp_path, environment_label, entry):
    environment = ENVIRONMENTS[environment_label]
    gpu_class = environment.platform.gpu_classes[entry]
    mounted = mount(device_plugin_config_map(environment), tmp_path)

    report = nvidia.accepts("device-plugin", mounted / entry)

    strategy, section = ("time-slicing", "timeSlicing") if gpu_class.time_slicing else ("mps", "mps")
    assert report["sharingStrategy"] == strategy
    assert report["config"]["flags"]["migStrategy"] == "none"  # the plugin refuses MPS with `mixed`
    shared = report["config"]["sharing"][section]
    [resource] = shared["resources"]
    assert (resource["replicas"], resource["devices"]) == (gpu_class.replication.replicas, "all")
    # The name the plugin advertises is the one the quota and the placement policy meter.
    assert resource.get("rename", resource["name"]) == class_resource(gpu_class)
    one_share_only = gpu_class.time_slicing.fail_requests_greater_than_one if gpu_class.time_slicing else True
    assert shared.get("failRequestsGreaterThanOne", False) is one_share_only


@pytest.mark.parametrize("environment_label", sorted({p.values[0] for p in DEVICE_PLUGIN_ENTRIES}))
def test_every_device_plugin_config_label_names_an_entry(environment_label):
    # The plugin's config-manager copies the mounted file named by the node's label; no file, no start.
    environment = ENVIRONMENTS[environment_label]
    labels = node_label_values(environment, DEVICE_PLUGIN_CONFIG_LABEL)
    shared = {name for name, c in environment.platform.gpu_classes.items() if c.replication}

    assert labels and labels <= set(device_plugin_config_map(environment)["data"]) == shared


@pytest.mark.parametrize("environment_label", MIG_PARTED_CONFIGS)
def test_mig_parted_reads_every_layout_as_written_and_finds_each_node_label(nvidia, tmp_path, environment_label):
    environment = ENVIRONMENTS[environment_label]
    config = mount(mig_config_map(environment), tmp_path) / CONFIG_KEY
    # The GPU Operator labels MIG-capable nodes without a label `all-disabled`.
    selected = sorted(node_label_values(environment, MIG_CONFIG_LABEL) | {ALL_DISABLED})

    report = nvidia.accepts("mig-parted", config, *selected)

    assert _without_nulls(report) == yaml.safe_load(config.read_text())


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


# ---- the validators refuse what the tools refuse or would not apply -----------------------------


def broken(config: Path, old: str, new: str) -> Path:
    """`config` with the first `old` replaced by `new` (which must be there: the render may change)."""
    text = config.read_text()
    assert old in text, text
    config.write_text(text.replace(old, new, 1))
    return config


DEVICE_PLUGIN_BREAKAGES = {
    "one replica": ("replicas: 4", "replicas: 1", "number of replicas must be >= 2"),
    "misspelt key": ("failRequestsGreaterThanOne:", "failRequestGreaterThanOne:",
                     "does not read sharing.timeSlicing.failRequestGreaterThanOne"),
    "rename the plugin ignores": ("      replicas: 4", "      rename: l4-share\n      replicas: 4", "ignores part of this config"),
    "devices the plugin ignores": ("      replicas: 4", "      devices: [0]\n      replicas: 4", "ignores part of this config"),
    "other version": ("version: v1", "version: v2", "unknown version: v2"),
    "unknown MIG strategy": ("migStrategy: none", "migStrategy: all", "unknown MIG strategy: all"),
}


@pytest.mark.parametrize("old, new, reason", DEVICE_PLUGIN_BREAKAGES.values(), ids=DEVICE_PLUGIN_BREAKAGES)
def test_the_device_plugin_parser_refuses_a_broken_entry(nvidia, tmp_path, old, new, reason):
    entry = broken(mount(device_plugin_config_map(ENVIRONMENTS["dev"]), tmp_path) / "l4", old, new)

    assert reason in nvidia.refusal("device-plugin", entry)


def test_the_device_plugin_parser_refuses_mps_with_the_mixed_mig_strategy(nvidia, tmp_path):
    entry = mount(device_plugin_config_map(ENVIRONMENTS["tools/nvidia_validators/fixtures:sharing"]), tmp_path) / "l4-mps"
    assert "  mps:\n" in broken(entry, "migStrategy: none", "migStrategy: mixed").read_text()

    assert "using --mig-strategy=mixed is not supported with MPS" in nvidia.refusal("device-plugin", entry)


MIG_PARTED_BREAKAGES = {
    "malformed profile": ("1g.10gb: 7", "1x.10gb: 7", "invalid format for '1x.10gb'"),
    "slices on a disabled group": ("    mig-enabled: false\n", "    mig-enabled: false\n    mig-devices: {1g.10gb: 7}\n",
                                   "MIG devices included when 'mig-enabled' is false"),
    "enabled without slices": ("    mig-devices:\n      1g.10gb: 7\n", "", "missing required field 'mig-devices'"),
    "misspelt key": ("    mig-devices:\n      1g.10gb", "    mig-device:\n      1g.10gb", "unexpected field: mig-device"),
    "other version": ("version: v1", "version: v2", "unknown version: v2"),
    "node label without a layout": ("  eval-mix:\n", "  eval-mixed:\n", "selected mig-config not present: eval-mix"),
}


@pytest.mark.parametrize("old, new, reason", MIG_PARTED_BREAKAGES.values(), ids=MIG_PARTED_BREAKAGES)
def test_mig_parted_refuses_a_broken_config(nvidia, tmp_path, old, new, reason):
    prod = ENVIRONMENTS["prod"]
    config = broken(mount(mig_config_map(prod), tmp_path) / CONFIG_KEY, old, new)

    assert reason in nvidia.refusal("mig-parted", config, *sorted(node_label_values(prod, MIG_CONFIG_LABEL)))


@pytest.mark.parametrize("sample", sorted(p.name for p in NVIDIA_SAMPLES.glob("*.yaml")))
def test_nvidias_own_samples_pass_so_the_strictness_is_upstreams(nvidia, tmp_path, sample):
    for config_map in yaml.safe_load_all((NVIDIA_SAMPLES / sample).read_text()):
        mounted = mount(config_map, tmp_path)
        for key, text in config_map["data"].items():
            if "mig-configs" in yaml.safe_load(text):
                assert nvidia.accepts("mig-parted", mounted / key)["mig-configs"]
            else:
                assert nvidia.accepts("device-plugin", mounted / key)["sharingStrategy"] == "time-slicing"
