"""Sharding an environment across Pulumi stacks: stable assignment, pins, located errors."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from components.load import load_environment, load_program_environment, shard_stack_files, stack_names
from components.spec.problems import InvalidInput
from components.fleet.shard_stacks import stack_part, stack_parts, tenant_stack
from components.spec.sharding import (
    Sharding,
    assigned_shard,
    hashed_shard,
    shard_stack_name,
    split_stack_name,
)
from tests.project_edits import line_of, replace_once, validation_errors
from fractions import Fraction
from hypothesis import given, settings
from hypothesis import strategies as st
from components.fleet.shard_stacks import band, rebalance

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "sharded"
NAMES = [f"team-{i:04d}" for i in range(2000)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "project")
    return tmp_path / "project"


def test_stack_names_round_trip():
    assert split_stack_name(shard_stack_name("prod", "a")) == ("prod", "a")
    assert split_stack_name("prod") == ("prod", None)


def test_hash_ignores_the_order_of_shards():
    shards = ["a", "b", "c", "d"]
    assert [hashed_shard(n, shards) for n in NAMES] == [hashed_shard(n, list(reversed(shards))) for n in NAMES]


def test_hash_spreads_tenants_evenly():
    counts = Counter(hashed_shard(n, ["a", "b", "c", "d"]) for n in NAMES)
    assert set(counts) == {"a", "b", "c", "d"}
    assert all(400 <= c <= 600 for c in counts.values()), counts  # 500 each, +-20%


def test_adding_a_shard_moves_only_tenants_to_it():
    before = {n: hashed_shard(n, ["a", "b", "c"]) for n in NAMES}
    after = {n: hashed_shard(n, ["a", "b", "c", "d"]) for n in NAMES}
    moved = [n for n in NAMES if before[n] != after[n]]
    assert moved and all(after[n] == "d" for n in moved)
    assert len(moved) < len(NAMES) / 3  # about a quarter


def test_removing_a_shard_moves_only_its_tenants():
    before = {n: hashed_shard(n, ["a", "b", "c"]) for n in NAMES}
    after = {n: hashed_shard(n, ["a", "c"]) for n in NAMES}
    assert {n for n in NAMES if before[n] != after[n]} == {n for n in NAMES if before[n] == "b"}


def test_a_pin_wins_over_the_hash():
    sharding = Sharding(shards=["blue", "green"], assignments={"vision": "green"})
    assert hashed_shard("vision", sharding.shards) == "blue"  # so the pin below is what decides
    assert assigned_shard("vision", sharding) == "green"


def test_fixture_splits_platform_and_tenants():
    environment = load_environment(FIXTURE, "lab")
    parts = stack_parts(environment)
    assert [(p.stack, p.platform, p.tenants, p.pinned) for p in parts] == [
        ("lab", True, (), ()),
        ("lab.blue", False, ("audio", "speech"), ()),
        ("lab.green", False, ("robotics", "vision"), ("vision",)),
    ]
    assert tenant_stack(environment, "vision") == "lab.green"
    assert environment.warnings == []


def test_unsharded_environment_is_one_stack():
    environment = load_environment(REPO, "prod")
    assert [(p.stack, p.platform, p.tenants) for p in stack_parts(environment)] == [
        ("prod", True, ("eval", "inference", "llm-finetune"))
    ]
    assert tenant_stack(environment, "eval") == "prod"
    with pytest.raises(ValueError, match="prod is not sharded"):
        stack_part(environment, "prod.a")


def test_shard_stack_files_are_not_environments(project: Path):
    (project / "stacks" / "Pulumi.lab.blue.yaml").write_text("encryptionsalt: v1:abc\n")
    assert stack_names(project) == ["lab"]
    assert shard_stack_files(project) == ["lab.blue"]
    assert load_environment(project, "lab").warnings == []


def test_pin_to_an_unlisted_shard_is_a_located_error(project: Path):
    stack = project / "stacks" / "Pulumi.lab.yaml"
    replace_once(stack, "vision: green ", "vision: purple ")
    errors = validation_errors(project, "lab")
    assert len(errors) == 1
    # At the pin itself (#41: a stack model's error was located at the block above the field it names).
    assert errors[0].startswith(f"stacks/Pulumi.lab.yaml:{line_of(stack, 'vision: purple')}:9: config.gpu-tenancy:platform.sharding.assignments.vision: ")
    assert "assignments.vision names shard 'purple', which is not in `shards` (blue, green)" in errors[0]


def test_a_shard_listed_twice_is_an_error(project: Path):
    stack = project / "stacks" / "Pulumi.lab.yaml"
    replace_once(stack, "shards: [blue, green]", "shards: [blue, green, blue]")
    errors = validation_errors(project, "lab")
    assert any(f":{line_of(stack, 'shards:')}:" in e and "shard blue is listed twice" in e for e in errors), errors


def test_warnings_for_stray_pins_empty_shards_and_orphan_stack_files(project: Path):
    stack = project / "stacks" / "Pulumi.lab.yaml"
    replace_once(stack, "shards: [blue, green]", "shards: [blue, green, red]")
    replace_once(stack, "vision: green ", "vision: green\n        nobody: blue ")
    (project / "stacks" / "Pulumi.lab.gone.yaml").write_text("config: {}\n")
    warnings = [p.message for p in load_environment(project, "lab").warnings]
    assert any("pins tenant nobody, which has no tenant file" in w for w in warnings), warnings
    # Only the pinned vision hashes to red among [blue, green, red]: red stays empty.
    assert [hashed_shard(t, ["blue", "green", "red"]) for t in ("audio", "speech", "robotics")] == ["blue", "blue", "green"]
    assert any("shard red holds no tenant" in w for w in warnings), warnings
    assert any("stacks/Pulumi.lab.gone.yaml is the file of shard stack lab.gone" in w for w in warnings), warnings
    with pytest.raises(InvalidInput):
        load_environment(project, "lab", strict_warnings=True)


def test_program_of_a_shard_stack_loads_its_environment(project: Path):
    environment = load_program_environment(project, "lab.green", None)
    assert environment.name == "lab" and len(environment.tenants) == 4


def test_program_of_an_unknown_shard_fails_located(project: Path):
    with pytest.raises(InvalidInput) as caught:
        load_program_environment(project, "lab.red", None)
    [problem] = caught.value.problems
    assert problem.file == "stacks/Pulumi.lab.yaml"
    assert problem.line == line_of(project / "stacks" / "Pulumi.lab.yaml", "sharding:")
    assert "shard 'red' is not in lab's `sharding.shards` (blue, green)" in problem.message


def test_a_shard_stack_may_not_carry_its_own_inventory(project: Path):
    with pytest.raises(InvalidInput) as caught:
        load_program_environment(project, "lab.blue", {"labelDomain": "x.dev"})
    assert "shard stack lab.blue reads the inventory of lab" in str(caught.value)


def test_no_unpinned_tenant_hashes_into_a_reserved_shard():
    sharding = Sharding(shards=["a", "b", "saas"], assignments={"acme": "saas"}, reserved=["saas"])
    assert sum(hashed_shard(n, sharding.shards) == "saas" for n in NAMES) > 500  # unreserved, a third would go there
    assert {assigned_shard(n, sharding) for n in NAMES} == {"a", "b"}
    assert assigned_shard("acme", sharding) == "saas"
    # Reserving a shard moves only the tenants that hashed into it.
    plain = Sharding(shards=["a", "b", "saas"], assignments={"acme": "saas"})
    moved = {n for n in NAMES if assigned_shard(n, plain) != assigned_shard(n, sharding)}
    assert moved == {n for n in NAMES if assigned_shard(n, plain) == "saas"}


def test_the_30_tenant_fleet_keeps_its_reserved_shard_for_its_pins(tmp_path: Path):
    from tests.sharded_fleet import PINNED, RESERVED, write_sharded_fleet

    environment = load_environment(write_sharded_fleet(tmp_path), "bench")
    parts = {p.shard: p for p in stack_parts(environment)[1:]}
    assert parts[RESERVED].tenants == tuple(sorted(PINNED)) and parts[RESERVED].reserved
    assert sum(len(p.tenants) for p in parts.values()) == 30
    assert all(p.tenants and not p.reserved for shard, p in parts.items() if shard != RESERVED)
    assert environment.warnings == []


@pytest.mark.parametrize(("sharding", "expected"), [
    ("reserved: [blue]", "shard 'blue' is reserved for its pinned tenants, but `assignments` pins none to it"),
    ("reserved: [red]", "shard 'red' is reserved but not in `shards` (blue, green)"),
    ("reserved: [blue, green]\n      assignments: {vision: green, audio: blue}",
     "every shard is reserved (blue, green), so a tenant without a pin would have no shard"),
])
def test_reserved_shards_are_checked_at_the_reserved_line(project: Path, sharding: str, expected: str):
    stack = project / "stacks" / "Pulumi.lab.yaml"
    text = stack.read_text()
    if "assignments" in sharding:
        text = text.replace("      assignments:\n        vision: green        # pinned; the others go where their names hash\n", "")
    stack.write_text(text.replace("shards: [blue, green]\n", f"shards: [blue, green]\n      {sharding}\n"))
    errors = validation_errors(project, "lab")
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"stacks/Pulumi.lab.yaml:{line_of(stack, 'reserved:')}:"), errors
    assert "sharding.reserved" in errors[0] and expected in errors[0], errors[0]


# --- balanced shards (rebalance) ---
def _hashed(count: int, shards: list[str]) -> dict[str, str]:
    return {f"team-{i:05d}": hashed_shard(f"team-{i:05d}", shards) for i in range(count)}


def test_the_issues_uneven_shards_are_brought_within_twenty_percent():
    # #41: 7 / 19 / 11 at ~12 a shard.
    placed = {**{f"a{i:02d}": "a" for i in range(7)}, **{f"b{i:02d}": "b" for i in range(19)}, **{f"c{i:02d}": "c" for i in range(11)}}
    plan = rebalance(sorted(placed), placed, ["a", "b", "c"], set())
    assert (plan.low, plan.high) == (10, 14) and plan.target == Fraction(37, 3)
    assert all(10 <= size <= 14 for size in plan.after.values())
    # The fewest moves: b must lose 5 and a gain 3; every pin moves one tenant of b.
    assert len(plan.pins) == 5 and all(tenant.startswith("b") for tenant in plan.pins)


def test_pinned_tenants_stay_and_a_balanced_fleet_gets_no_pins():
    placed = {"p1": "a", "p2": "a", "p3": "a", "x": "b"}
    plan = rebalance(sorted(placed), placed, ["a", "b"], {"p1", "p2", "p3"})
    assert plan.pins == {} and plan.after == {"a": 3, "b": 1}   # only pinned tenants could move
    balanced = rebalance(["x", "y"], {"x": "a", "y": "b"}, ["a", "b"], set())
    assert balanced.balanced and balanced.pins == {}


@settings(max_examples=60, deadline=None)
@given(count=st.integers(min_value=1, max_value=400), shards=st.integers(min_value=1, max_value=12))
def test_hashed_fleets_end_in_the_band_with_the_fewest_moves(count, shards):
    names = [f"s{i}" for i in range(shards)]
    placed = _hashed(count, names)
    plan = rebalance(sorted(placed), placed, names, set())
    low, high = band(count, shards)
    assert all(low <= size <= high for size in plan.after.values())
    assert sum(plan.after.values()) == count
    # Each pin moves a tenant off a shard above the band (or at its top, to fill one below it): no more
    # moves than the tenants above the band plus those missing below it.
    above = sum(max(0, size - high) for size in plan.before.values())
    below = sum(max(0, low - size) for size in plan.before.values())
    assert len(plan.pins) <= max(above, below)
    assert all(placed[tenant] != shard for tenant, shard in plan.pins.items())
