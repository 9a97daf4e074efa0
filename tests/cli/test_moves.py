"""`tenants moves`: the state moves a deploy runs first, planned from `pulumi stack export` files."""

from __future__ import annotations

import json
from pathlib import Path

from components.review.stack_changes import tenant_urn
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
