"""`make up` (tools/up.py): which Pulumi stacks it deploys, decided before any control plane starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.spec.problems import InvalidInput
from tools import up as up_module

REPO = Path(__file__).resolve().parents[2]
SHARDED = REPO / "tests" / "fixtures" / "sharded"


@pytest.fixture(scope="module")
def up():
    return up_module


def test_an_unsharded_environment_is_one_stack(up):
    assert up.stacks_to_deploy(REPO, "prod") == ["prod"]


def test_a_sharded_environment_deploys_its_own_stack_then_every_shard(up):
    assert up.stacks_to_deploy(SHARDED, "lab") == ["lab", "lab.blue", "lab.green"]


def test_one_shard_comes_after_its_environments_stack(up):
    assert up.stacks_to_deploy(SHARDED, "lab.green") == ["lab", "lab.green"]


def test_an_unknown_shard_is_refused_with_the_fix(up):
    with pytest.raises(ValueError, match=r"shard 'red' is not in lab's `sharding.shards` \(blue, green\)"):
        up.stacks_to_deploy(SHARDED, "lab.red")


def test_an_unknown_environment_is_refused(up):
    with pytest.raises(InvalidInput, match="no such stack 'nope'"):
        up.stacks_to_deploy(REPO, "nope")
