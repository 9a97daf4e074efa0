"""MIG geometry: which layouts a GPU can hold, checked by slice sums and by placement."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.fleet import mig
from components.fleet.mig import GpuGeometry, MigProfile

REFERENCE = Path(__file__).resolve().parents[2] / "components" / "data" / "nvidia" / "mig-profiles.yaml"
OPERATOR_CONFIG = Path(__file__).parents[1] / "fixtures" / "gpu-operator" / "default-mig-parted-config.configmap.yaml"  # see SOURCES.md there


@pytest.mark.parametrize(
    "model, devices",
    [
        ("H100-80GB", {"1g.10gb": 7}),
        ("H100-80GB", {"4g.40gb": 1, "3g.40gb": 1}),
        ("H100-80GB", {"3g.40gb": 2}),
        ("H100-80GB", {"2g.20gb": 3, "1g.10gb": 1}),
        ("H100-80GB", {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}),
        ("H100-80GB", {"1g.20gb": 4}),
        ("H100-80GB", {"7g.80gb": 1}),
        ("H100-80GB", {"1g.10gb+me": 1, "1g.10gb": 6}),
        ("A100-80GB", {"3g.40gb": 1, "1g.10gb": 4}),
        ("A100-40GB", {"1g.5gb": 7}),
        ("A100-40GB", {"1g.10gb": 4}),
        ("A30-24GB", {"1g.6gb": 4}),
        ("A30-24GB", {"2g.12gb": 2}),
        ("A30-24GB", {"2g.12gb": 1, "1g.6gb": 2}),
        ("A30-24GB", {"4g.24gb": 1}),
        ("H200-141GB", {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}),
    ],
)
def test_valid_layouts(model, devices):
    assert mig.layout_problems(model, devices) == []


@pytest.mark.parametrize(
    "model, devices, reason",
    [
        ("H100-80GB", {"4g.40gb": 2}, "4g.40gb: at most 1 per H100-80GB GPU (asked for 2)"),
        ("H100-80GB", {"4g.40gb": 1, "4g.40gb+x": 0}, "profile 4g.40gb+x does not exist on H100-80GB"),
        ("H100-80GB", {"3g.40gb": 2, "1g.10gb": 1}, "needs 9 memory slices; a H100-80GB has 8"),
        ("H100-80GB", {"1g.10gb": 8}, "1g.10gb: at most 7 per H100-80GB GPU (asked for 8)"),
        ("H100-80GB", {"1g.5gb": 7}, "profile 1g.5gb does not exist on H100-80GB"),
        ("H100-80GB", {"4g.40gb": 1, "2g.20gb": 2}, "needs 8 compute slices; a H100-80GB has 7"),
        ("H100-80GB", {"1g.10gb+me": 2}, "1g.10gb+me: at most 1 per H100-80GB GPU (asked for 2)"),
        ("A30-24GB", {"2g.12gb": 2, "1g.6gb": 1}, "needs 5 compute slices; a A30-24GB has 4"),
        ("A30-24GB", {"4g.24gb": 1, "1g.6gb": 1}, "4"),
        ("A30-24GB", {"1g.10gb": 1}, "profile 1g.10gb does not exist on A30-24GB"),
        ("L4", {"1g.10gb": 1}, "GPU model 'L4' has no MIG support in our geometry table"),
    ],
)
def test_invalid_layouts_say_why(model, devices, reason):
    problems = mig.layout_problems(model, devices)
    assert problems, f"{devices} should not fit on {model}"
    assert any(reason in p for p in problems), problems


def test_four_plus_four_does_not_fit_although_memory_would():
    # 4g + 4g uses exactly 8 memory slices, but a 4g instance needs 4 of the 7 compute slices.
    assert mig.layout_problems("H100-80GB", {"4g.40gb": 2})
    geo = mig.geometry()["H100-80GB"]
    assert not mig._fits(geo, {"4g.40gb": 2})
    assert mig._fits(geo, {"4g.40gb": 1, "3g.40gb": 1})


def test_three_three_one_does_not_fit():
    problems = mig.layout_problems("A100-80GB", {"3g.40gb": 2, "1g.10gb": 1})
    assert problems == ["needs 9 memory slices; a A100-80GB has 8"]
    assert not mig._fits(mig.geometry()["A100-80GB"], {"3g.40gb": 2, "1g.10gb": 1})


def test_placement_is_checked_when_the_sums_fit(monkeypatch):
    # A made-up GPU where two 3-slice instances (aligned at 0 and 3) leave slices 6 and 7, and
    # slice 7 has no compute slice of its own: the sums (8 memory, 6 compute) fit, placement does not.
    toy = GpuGeometry(
        "TOY", 8, {"2g.30gb": MigProfile("2g.30gb", 2, 2, 3), "1g.10gb": MigProfile("1g.10gb", 7, 1, 1)}
    )
    monkeypatch.setattr(mig, "geometry", lambda: {"TOY": toy})
    assert mig.layout_problems("TOY", {"2g.30gb": 2, "1g.10gb": 1}) == []
    assert mig.layout_problems("TOY", {"2g.30gb": 2, "1g.10gb": 2}) == [
        "2x 1g.10gb + 2x 2g.30gb cannot be placed on one TOY although the slice sums fit (placement rules)"
    ]


def test_a30_has_four_slices():
    geo = mig.geometry()["A30-24GB"]
    assert geo.memory_slices == 4 and geo.compute_slices == 4
    assert mig.geometry()["H100-80GB"].compute_slices == 7


@pytest.mark.parametrize(
    "name, model, expanded",
    [
        ("all-1g.10gb", "H100-80GB", {"1g.10gb": 7}),
        ("all-3g.40gb", "A100-80GB", {"3g.40gb": 2}),
        ("all-1g.10gb", "A100-40GB", {"1g.10gb": 4}),
        ("all-2g.12gb", "A30-24GB", {"2g.12gb": 2}),
        ("all-1g.5gb", "H100-80GB", None),
        ("eval-mix", "H100-80GB", None),
        ("all-1g.10gb", "L4", None),
    ],
)
def test_named_layouts(name, model, expanded):
    assert mig.expand_named_layout(name, model) == expanded


def test_resource_names_of_the_mixed_strategy():
    assert mig.resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert mig.resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"


def test_geometry_table_is_consistent():
    for model, geo in mig.geometry().items():
        for name, profile in geo.profiles.items():
            compute, memory = int(name[0]), profile.memory
            assert profile.compute == compute, (model, name)
            assert 1 <= memory <= geo.memory_slices, (model, name)
            # the `max` of a profile is how many fit when it is alone on the GPU
            assert mig.layout_problems(model, {name: profile.max}) == [], (model, name)
            assert mig.layout_problems(model, {name: profile.max + 1}), (model, name)


def _operator_layouts():
    """Every layout in the GPU Operator's default mig-parted config, with the models it applies to."""
    configmap = yaml.safe_load(OPERATOR_CONFIG.read_text())
    configs = yaml.safe_load(configmap["data"]["config.yaml"])["mig-configs"]
    by_pci = {
        pci.upper(): model
        for model, spec in yaml.safe_load(REFERENCE.read_text())["gpus"].items()
        for pci in spec["pci_device_ids"]
    }
    for name, groups in configs.items():
        for group in groups:
            devices = group.get("mig-devices") or {}
            if not devices:
                continue
            filters = group.get("device-filter")
            if filters:
                filters = [filters] if isinstance(filters, str) else filters
                models = {by_pci[f.upper()] for f in filters if f.upper() in by_pci}
            else:
                models = {m for m, geo in mig.geometry().items() if all(p in geo.profiles for p in devices)}
            for model in sorted(models):
                yield name, model, devices


def test_every_layout_nvidia_ships_is_valid_in_our_geometry():
    layouts = list(_operator_layouts())
    assert len(layouts) >= 40  # all-1g.10gb, all-balanced, ... for the models we know
    invalid = [(name, model, devices) for name, model, devices in layouts if mig.layout_problems(model, devices)]
    assert invalid == []
