"""The CI workflows and pre-commit hooks: linted by real tools, and checked to do what the docs say.

Linters: check-jsonschema's GitHub-workflow schema (offline, from the test extras) and actionlint,
built from its pinned Go module into .cache/go/bin on first use (15-60 s the first time on a
machine, ~5 s after a clean checkout thanks to Go's own caches; set ACTIONLINT to a binary to skip
the build). Each linter is also shown a broken workflow, so a linter that accepts anything fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.load import stack_names

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
BIN = Path(sys.executable).parent
ACTIONLINT_MODULE = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"

BROKEN_FOR_SCHEMA = """\
name: broken
on: [push]
jobs:
  build:
    steps:
      - run: echo "no runs-on, and steps must be a list of mappings"
      - just-a-string
"""
# Valid against the schema, wrong on inspection: an unknown `needs` and an undefined context.
BROKEN_FOR_ACTIONLINT = """\
name: broken
on: [push]
jobs:
  build:
    runs-on: ubuntu-latest
    needs: no-such-job
    steps:
      - run: echo "${{ github.no_such_property_anywhere }}"
"""


def workflow(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as a boolean
    return data


def steps(job: dict) -> list[dict]:
    return job["steps"]


def run_lines(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in steps(job))


def uses(job: dict, action: str) -> list[dict]:
    return [step for step in steps(job) if step.get("uses", "").startswith(action)]


def check_jsonschema(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "check-jsonschema"), *map(str, args)], capture_output=True, text=True)


# --- linters ------------------------------------------------------------------------------------------


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml"))


def test_there_are_workflows_to_lint():
    assert {"deploy.yml", "pr-preview.yml"} <= {p.name for p in workflow_files()}


@pytest.mark.parametrize("schema", ["vendor.github-workflows", "custom.github-workflows-require-timeout"])
def test_workflows_pass_the_schema(schema):
    done = check_jsonschema("--builtin-schema", schema, *workflow_files())

    assert done.returncode == 0, done.stdout + done.stderr


def test_schema_linter_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN_FOR_SCHEMA)

    done = check_jsonschema("--builtin-schema", "vendor.github-workflows", broken)

    assert done.returncode == 1
    assert "broken.yml" in done.stdout + done.stderr


@pytest.fixture(scope="session")
def actionlint() -> str:
    """Path of an actionlint binary: $ACTIONLINT, else built once from the pinned module with Go."""
    if os.environ.get("ACTIONLINT"):
        return os.environ["ACTIONLINT"]
    cache = Path(os.environ.get("GPU_TENANCY_CACHE_DIR", REPO / ".cache")) / "go"
    binary = cache / "bin" / "actionlint"
    if binary.exists():
        return str(binary)
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    assert go, "actionlint needs Go to build (or set ACTIONLINT=/path/to/actionlint)"
    # The user's own module and build caches, not the repo's: they outlive clean checkouts, so a
    # rebuild after one takes seconds (the first build on a machine takes ~15-60 s).
    env = {**os.environ, "GOBIN": str(cache / "bin"), "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-trimpath"}
    done = subprocess.run([go, "install", ACTIONLINT_MODULE], env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"building actionlint failed:\n{done.stderr}"
    return str(binary)


@pytest.mark.go
def test_workflows_pass_actionlint(actionlint):
    done = subprocess.run([actionlint, "-no-color", *map(str, workflow_files())], capture_output=True, text=True, cwd=REPO)

    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.go
def test_actionlint_rejects_a_broken_workflow(actionlint, tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN_FOR_ACTIONLINT)
    assert check_jsonschema("--builtin-schema", "vendor.github-workflows", broken).returncode == 0

    done = subprocess.run([actionlint, "-no-color", str(broken)], capture_output=True, text=True)

    assert done.returncode == 1
    assert "no-such-job" in done.stdout and "no_such_property_anywhere" in done.stdout


# --- what the workflows do ---------------------------------------------------------------------------


def test_pr_preview_validates_tests_and_comments_the_offline_diff():
    data = workflow("pr-preview.yml")
    check = data["jobs"]["check"]

    assert "pull_request" in data["on"]
    checkout = uses(check, "actions/checkout@")[0]
    assert checkout["with"]["fetch-depth"] == 0
    assert uses(check, "actions/setup-python@")
    commands = run_lines(check)
    assert "make .venv/.installed" in commands  # the Makefile's install: pip install -e '.[test]'
    assert commands.index("tenants validate") < commands.index("make test") < commands.index("tenants diff")
    assert 'tenants diff --base "origin/$BASE_REF" --format markdown > diff.md' in commands
    diff_step = next(s for s in steps(check) if "tenants diff" in s.get("run", ""))
    assert diff_step["env"]["BASE_REF"] == "${{ github.base_ref }}"
    comment = uses(check, "marocchino/sticky-pull-request-comment@")[0]
    assert comment["with"]["path"] == "diff.md"
    assert check["permissions"]["pull-requests"] == "write"
    # invalid files: the located errors become the comment (the step runs even after the failure)
    validate_step = next(s for s in steps(check) if "tenants validate" in s.get("run", ""))
    assert "> diff.md" in validate_step["run"] and "exit 1" in validate_step["run"]
    assert comment["if"].startswith("always()") and "hashFiles('diff.md')" in comment["if"]


def test_pr_preview_previews_only_the_touched_stacks():
    data = workflow("pr-preview.yml")
    preview = data["jobs"]["preview"]
    check = data["jobs"]["check"]

    stacks_step = next(s for s in steps(check) if s.get("id") == "stacks")
    assert 'tenants diff --base "origin/$BASE_REF" --format stacks' in stacks_step["run"]
    assert check["outputs"]["stacks"] == "${{ steps.stacks.outputs.stacks }}"
    assert preview["needs"] == "check"
    assert "needs.check.outputs.stacks != '[]'" in preview["if"]  # nothing touched: no preview job at all
    assert preview["strategy"]["matrix"]["target"] == "${{ fromJSON(needs.check.outputs.stacks) }}"
    pulumi = uses(preview, "pulumi/actions@v6")[0]
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["comment-on-pr"] is True and pulumi["with"]["diff"] is True
    assert pulumi["with"]["stack-name"] == "${{ matrix.target.stack }}"
    assert pulumi["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    assert "matrix.target.environment" in str(preview["steps"])  # the environment's kubeconfig serves its shards


def test_deploy_runs_every_environment_in_order():
    data = workflow("deploy.yml")
    jobs = data["jobs"]

    assert data["on"]["push"]["branches"] == ["main"]
    assert data["concurrency"]["cancel-in-progress"] is False
    order = ["dev", "staging", "prod"]
    assert sorted(order) == sorted(stack_names(REPO)), "every stack needs a deploy job, in promotion order"
    previous = "check"
    for stack in order:
        job = jobs[f"up-{stack}"]
        assert job["needs"] == previous
        assert job["uses"] == "./.github/workflows/deploy-environment.yml"
        assert job["with"]["environment"] == stack and job["secrets"] == "inherit"
        previous = f"up-{stack}"
    assert "tenants validate" in run_lines(jobs["check"]) and "make test" in run_lines(jobs["check"])


def test_deploy_environment_moves_then_platform_then_shards():
    data = workflow("deploy-environment.yml")
    platform, shards = data["jobs"]["platform"], data["jobs"]["shards"]

    assert data["on"]["workflow_call"]["inputs"]["environment"]["required"] is True
    for job in (platform, shards):
        assert job["environment"] == "${{ inputs.environment }}"
        assert "secrets.KUBECONFIG" in str(job["steps"])
    commands = run_lines(platform)
    assert 'tenants stacks --stack "$ENVIRONMENT" --format json' in commands
    # State moves come before the first `pulumi up` of the environment.
    names = [s.get("name", "") + str(s.get("with", {}).get("command", "")) for s in steps(platform)]
    move = next(i for i, n in enumerate(names) if n.startswith("Move tenants"))
    up = next(i for i, s in enumerate(steps(platform)) if s.get("with", {}).get("command") == "up")
    assert move < up
    assert 'tenants moves --stack "$ENVIRONMENT" --run' in commands   # planned from the state, not a diff
    assert "before" not in data["on"]["workflow_call"]["inputs"]
    assert uses(platform, "pulumi/actions@v6")[-1]["with"]["stack-name"] == "${{ inputs.environment }}"
    assert shards["needs"] == "platform"
    assert shards["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.platform.outputs.shards) }}"
    assert shards["strategy"]["fail-fast"] is False
    shard_up = uses(shards, "pulumi/actions@v6")[0]["with"]
    assert shard_up["command"] == "up" and shard_up["stack-name"] == "${{ matrix.stack }}" and shard_up["upsert"] is True


def test_pre_commit_hooks_run_tenants_validate():
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    manifest = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())

    local = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert local["tenants-validate"]["entry"] == ".venv/bin/tenants validate"
    assert local["tenants-validate"]["pass_filenames"] is False
    offered = {hook["id"]: hook for hook in manifest}
    assert offered["tenants-validate"]["entry"] == "tenants validate"
    assert offered["tenants-validate"]["language"] == "python"
    for hook in (local["tenants-validate"], offered["tenants-validate"]):
        pattern = re.compile(hook["files"])
        assert pattern.search("tenants/llm-finetune.yaml") and pattern.search("stacks/Pulumi.prod.yaml")
        assert not pattern.search("docs/onboarding.md")



def test_deploy_environment_bounds_the_shard_workers_and_reports_a_failed_shard():
    data = workflow("deploy-environment.yml")
    shards, result = data["jobs"]["shards"], data["jobs"]["result"]

    assert data["on"]["workflow_call"]["inputs"]["shard-workers"]["default"] >= 1
    assert shards["strategy"]["max-parallel"] == "${{ inputs.shard-workers }}"
    assert ".needs == [$env]" in run_lines(data["jobs"]["platform"])  # the deploy graph of `tenants stacks`
    assert result["needs"] == ["platform", "shards"] and result["if"] == "always()"
    script = run_lines(result)
    assert '"$SHARDS" != success' in script and "exit 1" in script


def test_every_deploy_and_pr_preview_refreshes_so_drift_is_shown_and_repaired():
    """Without a refresh the engine compares the program with its own state only: a quota raised by
    hand, a deleted NetworkPolicy, a lowered Pod Security label stay (docs/when-things-fail.md)."""
    environment = workflow("deploy-environment.yml")["jobs"]
    runs = [*uses(environment["platform"], "pulumi/actions@v6"), *uses(environment["shards"], "pulumi/actions@v6"),
            *uses(workflow("pr-preview.yml")["jobs"]["preview"], "pulumi/actions@v6")]
    operations = [r["with"] for r in runs if r.get("with", {}).get("command") in ("up", "preview")]
    assert len(operations) == 3 and all(op.get("refresh") is True for op in operations), operations


def test_a_manual_deploy_can_first_recover_from_a_killed_one():
    deploy, environment = workflow("deploy.yml"), workflow("deploy-environment.yml")
    assert deploy["on"]["workflow_dispatch"]["inputs"]["recover"]["default"] is False
    assert all(deploy["jobs"][f"up-{env}"]["with"]["recover"] == "${{ inputs.recover == true }}" for env in ("dev", "staging", "prod"))
    assert environment["on"]["workflow_call"]["inputs"]["recover"]["default"] is False
    platform = steps(environment["jobs"]["platform"])
    recover = next(i for i, s in enumerate(platform) if s.get("name", "").startswith("Recover"))
    move = next(i for i, s in enumerate(platform) if s.get("name", "").startswith("Move tenants"))
    assert recover < move and platform[recover]["if"] == "inputs.recover"
    script = platform[recover]["run"]
    assert "pulumi cancel --yes" in script and "del(.deployment.pending_operations)" in script and "pulumi stack import" in script


def test_after_the_environments_up_each_node_taint_list_is_left_with_one_owner():
    """After a lost state the nodes' taint lists have two owners and a later pool change conflicts
    (docs/when-things-fail.md, "A lost state"); the platform job releases the lost state's."""
    platform = steps(workflow("deploy-environment.yml")["jobs"]["platform"])
    up = next(i for i, s in enumerate(platform) if s.get("with", {}).get("command") == "up")
    owners = next(i for i, s in enumerate(platform) if "tools.taint_owners" in s.get("run", ""))
    assert up < owners
    script = platform[owners]["run"]
    assert 'pulumi stack export --stack "$ENVIRONMENT" --file state.json' in script
    assert 'python -m tools.taint_owners --stack "$ENVIRONMENT" --kubeconfig "$HOME/.kube/config" state.json' in script


def _step(job: dict, name_starts: str) -> dict:
    return next(s for s in steps(job) if s.get("name", "").startswith(name_starts))


def test_pr_preview_simulates_the_queues_only_when_the_change_may_move_them():
    data = workflow("pr-preview.yml")
    check, simulate = data["jobs"]["check"], data["jobs"]["simulate"]

    decide = next(s for s in steps(check) if s.get("id") == "simulations")
    assert 'tenants diff --base "origin/$BASE_REF" --format simulate' in decide["run"]   # queue_changes.simulations
    assert check["outputs"]["simulations"] == "${{ steps.simulations.outputs.simulations }}"
    assert simulate["needs"] == "check" and "head.repo.full_name == github.repository" in simulate["if"]
    assert simulate["permissions"]["pull-requests"] == "write"
    assert uses(simulate, "actions/checkout@")[0]["with"]["fetch-depth"] == 0   # the base is replayed from git
    skipped = _step(simulate, "Skipped")
    assert skipped["if"] == "needs.check.outputs.simulations == '[]'"
    for name in ("Build the runtime lane", "Simulate each stack"):
        assert _step(simulate, name)["if"] == "needs.check.outputs.simulations != '[]'"
    assert "tools/build.sh k8s runtime" in _step(simulate, "Build the runtime lane")["run"]
    comment = uses(simulate, "marocchino/sticky-pull-request-comment@")[0]
    assert comment["with"] == {"header": "tenants-simulate", "path": "simulate.md"}
    assert comment["if"].startswith("always()") and "hashFiles('simulate.md')" in comment["if"]


def _run_step(script: str, tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{BIN}:{os.environ['PATH']}", **env})


def test_the_skipped_step_posts_the_one_line(tmp_path):
    from components.review.queue_changes import SKIPPED

    (tmp_path / "bin").mkdir()
    script = _step(workflow("pr-preview.yml")["jobs"]["simulate"], "Skipped")["run"]
    done = _run_step(script, tmp_path, {"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "simulate.md").read_text() == SKIPPED + "\n"


def test_the_simulate_step_runs_tenants_simulate_per_stack_in_markdown(tmp_path):
    simulate = workflow("pr-preview.yml")["jobs"]["simulate"]
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "tenants"
    fake.write_text('#!/bin/sh\necho "tenants $*"\n')
    fake.chmod(0o755)
    env = {k: str(v) for k, v in simulate["env"].items() if k != "SIMULATIONS"}
    env |= {"SIMULATIONS": '[{"environment": "prod", "changes": ["quotas"]}, {"environment": "dev", "changes": ["pools"]}]',
            "BASE_REF": "main", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    done = _run_step(_step(simulate, "Simulate each stack")["run"], tmp_path, env)
    assert done.returncode == 0, done.stderr
    lines = [line for line in (tmp_path / "simulate.md").read_text().splitlines() if line]
    assert lines == [f"tenants simulate --stack {stack} --synthetic {env['SIMULATED_JOBS']} --seed {env['SIMULATION_SEED']} "
                     "--base origin/main --format markdown" for stack in ("prod", "dev")]
    assert (tmp_path / "summary.md").read_text() == (tmp_path / "simulate.md").read_text()
