"""`tenants diff --format stacks`: the Pulumi stacks a pull request previews (the CI matrix)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from components.cli.main import main
from tests.cli.test_diff import commit_all, git
from tests.project_edits import replace_once

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "sharded"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    (root / "components").mkdir()
    (root / "components" / "quota.py").write_text("# code\n")
    (root / "README.md").write_text("# readme\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "base")
    return root


def stacks(capsys, root: Path) -> list[dict]:
    code = main(["--root", str(root), "diff", "--base", "HEAD", "--format", "stacks"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_no_change_previews_nothing(capsys, repo):
    assert stacks(capsys, repo) == []


def test_a_tenant_edit_previews_its_shard_only(capsys, repo):
    replace_once(repo / "tenants" / "robotics.yaml", "gpu: {l4: 1}", "gpu: {l4: 2}")
    assert stacks(capsys, repo) == [{"environment": "lab", "stack": "lab.green"}]


def test_documentation_alone_previews_nothing(capsys, repo):
    (repo / "README.md").write_text("# readme, edited\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "new.txt").write_text("notes\n")
    assert stacks(capsys, repo) == []


@pytest.mark.parametrize("change", ["edit", "untracked", "committed"])
def test_code_changes_preview_every_stack(capsys, repo, change):
    if change == "untracked":
        (repo / "components" / "new_builder.py").write_text("# new\n")
    else:
        (repo / "components" / "quota.py").write_text("# code, edited\n")
        if change == "committed":
            commit_all(repo, "code")
            code = main(["--root", str(repo), "diff", "--base", "HEAD~1", "--format", "stacks"])
            out, _ = capsys.readouterr()
            assert code == 0
            assert [s["stack"] for s in json.loads(out)] == ["lab", "lab.blue", "lab.green"]
            return
    assert [s["stack"] for s in stacks(capsys, repo)] == ["lab", "lab.blue", "lab.green"]
