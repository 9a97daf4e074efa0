"""NVIDIA MIG geometry: which layouts a GPU model can actually hold.

Summing slices is necessary but not sufficient: a GPU instance must start at an offset aligned
to its memory size and its compute slices must fit in the GPU's 7 (A30: 4). So 4g + 3g fits on an
H100 while 4g + 4g does not, although both use 8 memory slices. We search placements exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping

import yaml


@dataclass(frozen=True)
class MigProfile:
    name: str
    max: int
    compute: int
    memory: int


@dataclass(frozen=True)
class GpuGeometry:
    model: str
    memory_slices: int
    profiles: Mapping[str, MigProfile]

    @property
    def compute_slices(self) -> int:
        return 7 if self.memory_slices == 8 else self.memory_slices


@lru_cache(maxsize=1)
def geometry() -> dict[str, GpuGeometry]:
    """The MIG geometry table shipped with the package, keyed by GPU model (e.g. `H100-80GB`)."""
    text = resources.files("components.data").joinpath("nvidia/mig-profiles.yaml").read_text("utf-8")
    raw = yaml.safe_load(text)["gpus"]
    return {
        model: GpuGeometry(
            model,
            spec["memory_slices"],
            {name: MigProfile(name, p["max"], p["compute"], p["memory"]) for name, p in spec["profiles"].items()},
        )
        for model, spec in raw.items()
    }


def resource_name(profile: str) -> str:
    """Extended resource of a MIG profile under the mixed strategy.

    >>> resource_name("1g.10gb+me")
    'nvidia.com/mig-1g.10gb.me'
    """
    return "nvidia.com/mig-" + profile.replace("+", ".")


def expand_named_layout(name: str, model: str) -> dict[str, int] | None:
    """`all-<profile>` means as many instances of that profile as one GPU holds.

    >>> expand_named_layout("all-1g.10gb", "H100-80GB")
    {'1g.10gb': 7}
    """
    match = re.fullmatch(r"all-(.+)", name)
    geo = geometry().get(model)
    if not match or geo is None or match[1] not in geo.profiles:
        return None
    return {match[1]: geo.profiles[match[1]].max}


def layout_problems(model: str, devices: Mapping[str, int]) -> list[str]:
    """Why one GPU of `model` cannot hold `devices` (profile -> count); empty when it can.

    >>> layout_problems("H100-80GB", {"4g.40gb": 2})[0]
    '4g.40gb: at most 1 per H100-80GB GPU (asked for 2)'
    """
    geo = geometry().get(model)
    if geo is None:
        return [f"GPU model '{model}' has no MIG support in our geometry table (known: {', '.join(sorted(geometry()))})"]
    problems = []
    for name, count in sorted(devices.items()):
        profile = geo.profiles.get(name)
        if profile is None:
            problems.append(f"profile {name} does not exist on {model} (valid: {', '.join(geo.profiles)})")
        elif count > profile.max:
            problems.append(f"{name}: at most {profile.max} per {model} GPU (asked for {count})")
    if problems:
        return problems
    compute = sum(geo.profiles[n].compute * c for n, c in devices.items())
    memory = sum(geo.profiles[n].memory * c for n, c in devices.items())
    if compute > geo.compute_slices:
        problems.append(f"needs {compute} compute slices; a {model} has {geo.compute_slices}")
    if memory > geo.memory_slices:
        problems.append(f"needs {memory} memory slices; a {model} has {geo.memory_slices}")
    if not problems and not _fits(geo, devices):
        mix = " + ".join(f"{c}x {n}" for n, c in sorted(devices.items()))
        problems.append(f"{mix} cannot be placed on one {model} although the slice sums fit (placement rules)")
    return problems


def placements(model: str, profile: str) -> list[int]:
    """The memory slices a GPU instance of `profile` may start at on one GPU of `model` (aligned to its
    size, its compute slices within the GPU's): where NVML, and so the DRA driver, can place it.

    >>> placements("A100-80GB", "3g.40gb"), placements("A100-80GB", "4g.40gb")
    ([0, 4], [0])
    """
    geo = geometry()[model]
    return _starts(geo, geo.profiles[profile])


def _starts(geo: GpuGeometry, profile: MigProfile) -> list[int]:
    return [
        start
        for start in range(0, geo.memory_slices, profile.memory)
        if start + profile.memory <= geo.memory_slices and start + profile.compute <= geo.compute_slices
    ]


def _fits(geo: GpuGeometry, devices: Mapping[str, int]) -> bool:
    # Largest instances first keeps the search tiny (at most 7 instances per GPU).
    instances = sorted(
        (geo.profiles[name] for name, count in devices.items() for _ in range(count)),
        key=lambda p: (-p.memory, -p.compute, p.name),
    )

    def place(index: int, memory_used: int, compute_used: int) -> bool:
        if index == len(instances):
            return True
        profile = instances[index]
        for start in _starts(geo, profile):
            memory_mask = ((1 << profile.memory) - 1) << start
            compute_mask = ((1 << profile.compute) - 1) << start
            if memory_used & memory_mask or compute_used & compute_mask:
                continue
            if place(index + 1, memory_used | memory_mask, compute_used | compute_mask):
                return True
        return False

    return place(0, 0, 0)
