"""Renaming a team as docs/renaming.md tells it, and the loud warning when a namespace's quota goes down."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from components.cli import main
from tests.cli.test_diff import commit_all, git
from tests.markdown_recipe import REPO, run_recipe
from tests.project_edits import replace_once


@pytest.fixture
def repo(project_copy: Path) -> Path:
    git(project_copy, "init", "-q", "-b", "main")
    commit_all(project_copy, "base")
    return project_copy


def rendered_quotas(root: Path, stack: str, out: Path) -> dict[str, dict]:
    """namespace -> spec.hard of its `tenant-quota`, as `tenants render` writes them."""
    assert main(["--root", str(root), "render", "--stack", stack, "--out", str(out)]) == 0
    quotas = {}
    for path in out.glob("*.yaml"):
        for obj in yaml.safe_load_all(path.read_text()):
            if isinstance(obj, dict) and obj.get("kind") == "ResourceQuota" and obj["metadata"]["name"] == "tenant-quota":
                quotas[obj["metadata"]["namespace"]] = obj["spec"]["hard"]
    return quotas


def test_the_rename_recipe_runs_as_written_and_keeps_the_running_namespace_budget(repo, tmp_path, capsys):
    before = rendered_quotas(repo, "dev", tmp_path / "before")

    outputs = run_recipe(REPO / "docs" / "renaming.md", repo)

    renamed_diff, moved_diff = [output for step, output in outputs if "tenants diff" in step.body]
    assert "dev: 3 tenant(s) ok" in renamed_diff
    assert "quota-lowered" not in renamed_diff and "goes DOWN" not in renamed_diff
    # Step 1 (committed): the old namespace keeps exactly the budget it had; the new one gets none.
    git(repo, "stash", "-q")
    renamed = rendered_quotas(repo, "dev", tmp_path / "renamed")
    git(repo, "stash", "pop", "-q")
    assert renamed["eval"] == before["eval"]
    assert renamed["evaluation"]["requests.cpu"] == "0" and renamed["evaluation"]["requests.nvidia.com/gpu"] == "0"
    # Step 2 (working tree): the old namespace keeps its slice and the new one the rest.
    moved = rendered_quotas(repo, "dev", tmp_path / "moved")
    assert (moved["eval"]["requests.cpu"], moved["evaluation"]["requests.cpu"]) == ("8", "8")
    assert moved["evaluation"]["requests.nvidia.com/gpu"] == before["eval"]["requests.nvidia.com/gpu"]
    assert "! dev: namespace eval: ResourceQuota goes DOWN (tenant-quota limits.cpu 32 → 16" in moved_diff


def test_a_namespace_quota_going_to_zero_is_the_first_warning_of_the_pr_comment(repo, capsys):
    # A reviewer drops the canary's slice: the namespace keeps running pods but may start none.
    path = repo / "tenants" / "inference.yaml"
    replace_once(path, """namespaceQuotas:          # the canary gets this part of the budget; the inference namespace keeps the rest
  inference-canary:
    cpu: {requests: "16", limits: "32"}
    memory: {requests: 64Gi, limits: 128Gi}
    gpu: 2
""", "")
    replace_once(path, """    namespaceQuotas:
      inference-canary:
        cpu: {requests: "4", limits: "8"}
        memory: {requests: 16Gi, limits: 32Gi}
        gpu: {l4: 1}
""", "")
    (repo / "tenants" / "eval.yaml").write_text((repo / "tenants" / "eval.yaml").read_text().replace("objects: {pods: 500", "objects: {pods: 600"))

    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev", "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out

    lines = markdown.splitlines()
    start = lines.index("> [!WARNING]")
    assert lines[start + 2] == (
        "> - **dev** · `inference`: namespace inference-canary: ResourceQuota goes DOWN TO ZERO (tenant-quota "
        "limits.cpu 8 → 0, limits.memory 32Gi → 0, pods 300 → 0, requests.cpu 4 → 0, requests.memory 16Gi → 0, "
        "requests.nvidia.com/gpu 1 → 0; priority-online-inference requests.nvidia.com/gpu 1 → 0); pods that run "
        "there keep running, but new pods beyond the quota are refused"
    )
    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[text.index("WARNINGS (1)") + 1].startswith("  ! dev: namespace inference-canary: ResourceQuota goes DOWN TO ZERO")
    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev", "--format", "json"]) == 0
    assert [w["kind"] for w in json.loads(capsys.readouterr().out)["warnings"]] == ["quota-lowered"]


def test_a_quota_going_down_on_one_key_warns_down(repo, capsys):
    replace_once(repo / "tenants" / "eval.yaml", 'cpu: {requests: "16", limits: "32"}', 'cpu: {requests: "12", limits: "32"}')

    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev", "--format", "json"]) == 0

    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert [w["message"] for w in warnings if w["kind"] == "quota-lowered"] == [
        "namespace eval: ResourceQuota goes DOWN (tenant-quota requests.cpu 16 → 12); pods that run there keep "
        "running, but new pods beyond the quota are refused"
    ]
