"""`tenants stacks` and the shard assignment `tenants validate` shows."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.cli.running import run
from tests.project_edits import replace_once

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "sharded"


def test_stacks_lists_platform_then_shards(capsys):
    code, out, _ = run(capsys, "--root", str(FIXTURE), "stacks")
    assert code == 0
    assert out.splitlines() == [
        "lab: platform objects (tenants are in the shard stacks)",
        "lab.blue: tenants audio, speech",
        "lab.green: tenants robotics, vision (pinned)",
        "deploy: lab first, then lab.blue, lab.green (shards in any order, concurrently)",
        "shards: 2-2 tenants each (median 2); largest lab.blue (2 tenants), whose previews take longest",
    ]


def test_stacks_names_the_largest_shard_of_an_uneven_spread():
    from components.cli.stacks import sizes_line
    from components.fleet.shard_stacks import StackPart

    parts = [StackPart("p", None, True, ())] + [
        StackPart(f"p.{name}", name, False, tuple(f"t{name}{i}" for i in range(size)), (), ("p",))
        for name, size in (("a", 3), ("b", 7), ("c", 5), ("d", 7))
    ]
    # the largest wins, the first by name among equals; a reserved or empty shard still counts
    assert sizes_line(parts) == ("shards: 3-7 tenants each (median 5); largest p.b (7 tenants), whose previews take longest; "
                                 "outside ±20% of the target (5-6): `tenants moves --stack p --rebalance` prints the few pins "
                                 "that bring them in")
    parts.append(StackPart("p.e", "e", False, (), (), ("p",)))
    assert sizes_line(parts).startswith("shards: 0-7 tenants each (median 5); largest p.b")


def test_stacks_json_is_the_deploy_matrix(capsys):
    code, out, _ = run(capsys, "--root", str(FIXTURE), "stacks", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["stack"], r["role"], r["tenants"]) for r in rows] == [
        ("lab", "environment", []),
        ("lab.blue", "shard", ["audio", "speech"]),
        ("lab.green", "shard", ["robotics", "vision"]),
    ]
    assert rows[2]["pinned"] == ["vision"]
    assert [r["needs"] for r in rows] == [[], ["lab"], ["lab"]]  # the deploy graph: platform, then shards


def test_unsharded_examples_are_one_stack_each(capsys):
    code, out, _ = run(capsys, "--root", str(REPO), "stacks", "--format", "json")
    assert code == 0
    assert [(r["stack"], r["role"], len(r["tenants"])) for r in json.loads(out)] == [
        ("dev", "environment", 3), ("prod", "environment", 3), ("staging", "environment", 3)]


def test_validate_shows_the_assignment(capsys):
    code, out, _ = run(capsys, "--root", str(FIXTURE), "validate")
    assert code == 0
    assert "  lab.green: tenants robotics, vision (pinned)" in out.splitlines()


def test_validate_and_stacks_show_a_reserved_shard_with_its_pins_only(capsys, tmp_path):
    from tests.sharded_fleet import PINNED, RESERVED, write_sharded_fleet

    root = write_sharded_fleet(tmp_path)
    code, out, _ = run(capsys, "--root", str(root), "validate")
    assert code == 0
    pins = ", ".join(sorted(PINNED))
    assert f"  bench.{RESERVED} (reserved for its pinned tenants): tenants {pins}" in out.splitlines(), out
    code, out, _ = run(capsys, "--root", str(root), "stacks", "--format", "json")
    rows = {r["stack"]: r for r in json.loads(out)}
    assert rows[f"bench.{RESERVED}"]["reserved"] and rows[f"bench.{RESERVED}"]["tenants"] == sorted(PINNED)
    assert not rows["bench.a"]["reserved"]


def test_stacks_refuses_invalid_input(capsys, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    replace_once(project / "stacks" / "Pulumi.lab.yaml", "vision: green ", "vision: purple ")
    code, out, err = run(capsys, "--root", str(project), "stacks", "--format", "json")
    assert code == 1 and out == ""
    assert "stacks/Pulumi.lab.yaml:" in err and "names shard 'purple'" in err


def test_stacks_operator_writes_one_stack_resource_per_stack(capsys):
    code, out, _ = run(capsys, "--root", str(FIXTURE), "stacks", "--format", "operator",
                       "--repo", "https://git.example.com/gpu-tenancy.git", "--namespace", "pko")
    assert code == 0
    resources = list(yaml.safe_load_all(out))
    assert [(r["kind"], r["metadata"]["name"], r["metadata"]["namespace"]) for r in resources] == [
        ("Stack", "lab", "pko"), ("Stack", "lab.blue", "pko"), ("Stack", "lab.green", "pko")]
    assert resources[1]["spec"]["prerequisites"] == [{"name": "lab"}]
    assert resources[0]["spec"]["projectRepo"] == "https://git.example.com/gpu-tenancy.git"


def test_stacks_operator_takes_the_origin_remote_and_needs_one(capsys, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    subprocess.run(["git", "init", "-q", str(project)], check=True)

    code, out, err = run(capsys, "--root", str(project), "stacks", "--format", "operator")
    assert code == 2 and out == ""
    assert "--format operator needs the git URL the operator clones: give --repo URL" in err

    subprocess.run(["git", "-C", str(project), "remote", "add", "origin", "https://git.example.com/lab.git"], check=True)
    code, out, _ = run(capsys, "--root", str(project), "stacks", "--format", "operator", "--no-refresh")
    assert code == 0
    resources = list(yaml.safe_load_all(out))
    assert {r["spec"]["projectRepo"] for r in resources} == {"https://git.example.com/lab.git"}
    assert {r["spec"]["refresh"] for r in resources} == {False}
