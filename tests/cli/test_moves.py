"""`tenants moves`: the state moves a deploy runs first, planned from `pulumi stack export` files."""

from __future__ import annotations

import json
from pathlib import Path

from components.review.moves.stack_changes import tenant_urn
from tests.cli.running import run
from tests.state_exports import export

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "sharded"


def write(path: Path, document) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def test_prints_one_command_per_move_and_says_why_on_stderr(capsys, tmp_path):
    unsharded = write(tmp_path / "lab.json", export("lab", ["vision"]))
    code, out, err = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", unsharded)
    assert code == 0
    assert out.splitlines() == [
        f"pulumi state move --source lab --dest lab.green --yes '{tenant_urn('lab', 'proj', 'vision')}'"]
    assert "tenant vision moves from stack lab to lab.green" in err


def test_json_lists_the_moves_for_the_workflow(capsys, tmp_path):
    files = [write(tmp_path / "a.json", export("lab.blue", ["audio", "vision"])),
             write(tmp_path / "b.json", {"version": 3, "deployment": {"manifest": {}}})]   # a created, empty stack
    code, out, _ = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", "--format", "json", *files)
    assert code == 0
    assert [(m["tenant"], m["from"], m["to"]) for m in json.loads(out)] == [("vision", "lab.blue", "lab.green")]


def test_nothing_to_move_says_so(capsys, tmp_path):
    blue = write(tmp_path / "blue.json", export("lab.blue", ["audio", "speech"]))
    code, out, err = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", blue)
    assert (code, out) == (0, "")
    assert "nothing to move" in err and "1 stack(s) read" in err


def test_a_file_that_is_not_json_is_located(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 3,\n  oops}')
    code, out, err = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", str(bad))
    assert code == 1 and out == ""
    assert f"{bad}:2: not JSON" in err


def test_two_exports_of_one_stack_are_refused(capsys, tmp_path):
    files = [write(tmp_path / n, export("lab.blue", ["audio"])) for n in ("x.json", "y.json")]
    code, out, err = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", *files)
    assert code == 1 and out == ""
    assert "a second export of stack lab.blue" in err


def test_a_missing_file_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", str(tmp_path / "nope.json"))
    assert code == 1 and "nope.json: cannot read it" in err


def test_without_files_or_a_pulumi_cli_it_says_what_to_do(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("PULUMI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))   # nothing there
    code, out, err = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", "--run")
    assert code == 1 and out == ""
    assert "the pulumi CLI is not on PATH (or set PULUMI to it); or pass `pulumi stack export` files" in err


def test_a_half_done_move_names_the_stale_copy_and_the_command_that_removes_it(capsys, tmp_path):
    blue = write(tmp_path / "blue.json", export("lab.blue", ["audio", "vision"]))
    green = write(tmp_path / "green.json", export("lab.green", ["vision"]))   # vision's own stack
    code, out, err = run(capsys, "--root", str(FIXTURE), "moves", "--stack", "lab", blue, green)
    assert (code, out) == (1, "")
    assert ("tenant vision is in the state of lab.blue and lab.green: a `pulumi state move` stopped half-way; "
            "the copy in lab.blue is stale (the tenant's stack is lab.green); "
            "`tenants moves --stack lab --run` removes it from lab.blue's state") in err


def test_rebalance_prints_one_assignments_line_that_balances_the_shards_and_moves_only_its_pins(capsys, tmp_path):
    # #41: hashing left the 30-tenant fleet's hashed shards at 9 / 14 / 5 for a target of 9.3.
    import yaml

    from components.load import load_environment
    from components.review.diff import Side, compare_stack, report
    from components.spec.stack import CONFIG_KEY
    from tests.sharded_fleet import write_sharded_fleet

    root = write_sharded_fleet(tmp_path / "fleet")
    base = load_environment(root, "bench")
    code, out, err = run(capsys, "--root", str(root), "moves", "--stack", "bench", "--rebalance")
    assert (code, err) == (0, "")
    head, plan_line, _ = out.splitlines()
    assert head.startswith("bench: shards a 9, b 14, c 5 tenants (target 9.33 ±20%: 8-11); 3 pin(s) move ")
    where, _, assignments = plan_line.partition(": sharding.assignments: ")
    stack_file = root / "stacks" / "Pulumi.bench.yaml"
    assert where.startswith("stacks/Pulumi.bench.yaml:")
    assert "assignments:" in stack_file.read_text().splitlines()[int(where.split(":")[1]) - 1]

    data = yaml.safe_load(stack_file.read_text())
    data["config"][CONFIG_KEY]["sharding"]["assignments"] = yaml.safe_load(assignments)
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))
    after = load_environment(root, "bench")

    code, out, _ = run(capsys, "--root", str(root), "moves", "--stack", "bench", "--rebalance")
    assert "every shard is within it, nothing to pin" in out
    code, out, _ = run(capsys, "--root", str(root), "stacks", "--stack", "bench")
    assert "outside ±20%" not in out
    moves = report([compare_stack("bench", Side(base), Side(after), project="proj")], {"ref": "main", "commit": "0" * 40})["shardMoves"]
    pinned = yaml.safe_load(assignments)
    assert sorted(m["tenant"] for m in moves) == sorted(t for t in pinned if t not in base.platform.sharding.assignments)
    assert all(m["to"] == f"bench.{pinned[m['tenant']]}" for m in moves)


def test_the_stacks_summary_points_at_rebalance_when_shards_are_uneven(capsys, tmp_path):
    from tests.sharded_fleet import write_sharded_fleet

    root = write_sharded_fleet(tmp_path / "fleet")
    code, out, _ = run(capsys, "--root", str(root), "stacks", "--stack", "bench")
    assert code == 0
    assert out.splitlines()[-1].endswith(
        "; outside ±20% of the target (8-11): `tenants moves --stack bench --rebalance` prints the few pins that bring them in")
