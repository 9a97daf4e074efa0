"""`tenants diff` end to end: throwaway git repositories built from a copy of the example project.

The base commit adds a GPU class of its own (`l40s`, one node of 8 GPUs) to every stack, so the
tests' quota changes never depend on how full the example's classes happen to be.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.cli import main
from components.spec.stack import CONFIG_KEY

VISION = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: vision
displayName: Vision
costCenter: cc-7
access:
  owners:
    groups: [vision-leads]
quota:
  cpu: {{requests: "8", limits: "16"}}
  memory: {{requests: 32Gi, limits: 64Gi}}
  gpu: {gpus}
network:
  egress:
{egress}
gpu:
  classes: [l40s]
"""
NARROW_EGRESS = "    - cidr: 10.20.0.0/16\n      ports: [{port: 443}]"


def vision(gpus: int = 4, egress: str = NARROW_EGRESS) -> str:
    return VISION.format(gpus=gpus, egress=egress)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=root, capture_output=True, text=True, check=True,
    )
    return done.stdout.strip()


def add_l40s(stack_file: Path) -> None:
    data = yaml.safe_load(stack_file.read_text())
    platform = data["config"][CONFIG_KEY]
    platform["gpuClasses"]["l40s"] = {"model": "L40S", "product": "NVIDIA-L40S", "memory": "48Gi"}
    stem = stack_file.name.split(".")[1]
    platform["nodePools"]["l40s-pool"] = {"gpuClass": "l40s", "gpusPerNode": 8, "nodes": [f"{stem}-l40s-01"]}
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def repo(project_copy: Path) -> Path:
    """A git repository whose HEAD is the example plus the l40s pool and no `vision` tenant yet."""
    for stack_file in sorted((project_copy / "stacks").glob("Pulumi.*.yaml")):
        add_l40s(stack_file)
    git(project_copy, "init", "-q", "-b", "main")
    commit_all(project_copy, "base")
    return project_copy


@pytest.fixture
def repo_with_vision(repo: Path) -> Path:
    (repo / "tenants" / "vision.yaml").write_text(vision())
    commit_all(repo, "add vision")
    return repo


def run(root: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--root", str(root), "diff", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(root: Path, capsys, *args: str) -> dict:
    code, out, err = run(root, capsys, "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def stack(document: dict, name: str) -> dict:
    return next(s for s in document["stacks"] if s["name"] == name)


def detail(stack_report: dict, tenant: str) -> dict:
    return next(d for d in stack_report["tenantDetails"] if d["tenant"] == tenant)


# --- adding and removing tenants ---------------------------------------------------------------------


def test_added_tenant_is_named_with_its_quota_and_capacity_and_nothing_else_changes(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(vision(gpus=4))

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "prod")

    prod = stack(document, "prod")
    assert prod["tenants"]["added"] == ["vision"]
    assert prod["tenants"]["changed"] == [] and prod["tenants"]["removed"] == []
    assert [d["tenant"] for d in prod["tenantDetails"]] == ["vision"]
    quota = {q["key"]: q for q in detail(prod, "vision")["quota"]}
    assert quota["gpu.l40s"]["from"] is None and quota["gpu.l40s"]["to"] == 4
    row = next(r for r in prod["capacity"] if r["name"] == "l40s")
    assert row["changed"] and row["from"]["requested"] == 0 and row["to"]["requested"] == 4
    assert row["to"]["byTenant"] == {"vision": 4} and row["to"]["capacity"] == 8
    assert [r["name"] for r in prod["capacity"] if r["changed"]] == ["l40s"]
    kinds = {o["kind"] for o in detail(prod, "vision")["objects"]}
    assert {"Namespace", "ResourceQuota"} <= kinds
    assert all(o["change"] == "added" for o in detail(prod, "vision")["objects"])


def test_added_tenant_in_text_and_markdown(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(vision(gpus=4))

    code, text, _ = run(repo, capsys, "--base", "HEAD", "--stack", "prod")
    assert code == 0
    assert "tenant vision: added" in text
    assert "GPUs l40s: 4" in text
    assert "GPU class l40s: quotas 0 → 4 (vision 0 → 4) of limit 8" in text
    assert "tenant llm-finetune" not in text and "tenant inference" not in text

    code, markdown, _ = run(repo, capsys, "--base", "HEAD", "--stack", "prod", "--format", "markdown")
    assert code == 0
    assert "| prod | changed | `vision` | — | — |" in markdown
    assert "<details><summary><b>vision</b>: added</summary>" in markdown
    assert markdown.count("<details>") == 1
    assert "| GPU class l40s | 8 | 1 | 8 | 0 | 4 | ok | vision 0 → 4 |" in markdown


def test_removed_tenant_warns_that_its_namespaces_are_retained(repo_with_vision, capsys):
    (repo_with_vision / "tenants" / "vision.yaml").unlink()

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    prod = stack(document, "prod")
    assert prod["tenants"]["removed"] == ["vision"]
    removal = [w for w in document["warnings"] if w["kind"] == "tenant-removed"]
    assert [(w["stack"], w["tenant"]) for w in removal] == [("prod", "vision")]
    assert "NOTHING of it is deleted" in removal[0]["message"] and "lifecycle: decommissioned" in removal[0]["message"]
    assert "cluster-wide objects (placement policy, role bindings, queues)" in removal[0]["message"]
    assert "decommission: {confirm: vision}" in removal[0]["message"]
    assert "pulumi state unprotect" in removal[0]["message"]  # prod protects namespaces
    row = next(r for r in prod["capacity"] if r["name"] == "l40s")
    assert (row["from"]["requested"], row["to"]["requested"]) == (4, 0)

    code, markdown, _ = run(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod", "--format", "markdown")
    assert code == 0
    warning_at = markdown.index("> [!WARNING]")
    assert warning_at < markdown.index("| Stack |")
    assert "NOTHING of it is deleted" in markdown[warning_at:markdown.index("| Stack |")]
    assert "Objects (dropped from Pulumi, none deleted: the namespaces, everything in them and the cluster-wide objects stay)" in markdown


def test_removing_a_decommissioned_tenant_warns_that_it_is_deleted(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(vision() + "lifecycle: decommissioned\ndecommission: {confirm: vision}\n")
    commit_all(repo, "decommission vision")
    (repo / "tenants" / "vision.yaml").unlink()

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "prod")

    kinds = {w["kind"]: w["message"] for w in document["warnings"]}
    assert "tenant-removed" not in kinds
    assert "DELETES its namespaces (vision)" in kinds["tenant-deleted"]


def test_decommissioning_warns_before_anything_is_deleted(repo_with_vision, capsys):
    path = repo_with_vision / "tenants" / "vision.yaml"
    path.write_text(path.read_text() + "lifecycle: decommissioned\ndecommission: {confirm: vision}\n")

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    prod = stack(document, "prod")
    assert prod["tenants"]["lifecycle"] == [{"tenant": "vision", "from": "active", "to": "decommissioned"}]
    assert any(w["kind"] == "tenant-decommissioned" for w in prod["warnings"])


def test_a_vanishing_and_a_new_tenant_suggest_previous_names(repo_with_vision, capsys):
    text = (repo_with_vision / "tenants" / "vision.yaml").read_text()
    (repo_with_vision / "tenants" / "vision.yaml").unlink()
    (repo_with_vision / "tenants" / "sight.yaml").write_text(text.replace("name: vision", "name: sight"))

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    rename = [w for w in document["warnings"] if w["kind"] == "possible-rename"]
    assert len(rename) == 1 and "previousNames: [vision]" in rename[0]["message"]


def test_a_rename_with_previous_names_is_one_tenant_diff(repo_with_vision, capsys):
    text = (repo_with_vision / "tenants" / "vision.yaml").read_text()
    (repo_with_vision / "tenants" / "vision.yaml").unlink()
    renamed = text.replace("name: vision", "name: sight\npreviousNames: [vision]").replace("gpu: 4", "gpu: 5")
    (repo_with_vision / "tenants" / "sight.yaml").write_text(renamed)

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    prod = stack(document, "prod")
    assert prod["tenants"]["renamed"] == [{"from": "vision", "to": "sight"}]
    assert prod["tenants"]["added"] == [] and prod["tenants"]["removed"] == []
    sight = detail(prod, "sight")
    assert sight["quota"] == [{"key": "gpu.l40s", "label": "GPUs l40s", "from": 4, "to": 5}]
    kinds = {w["kind"] for w in prod["warnings"]}
    assert "tenant-renamed" in kinds and "possible-rename" not in kinds and "tenant-removed" not in kinds


# --- changes to an existing tenant -------------------------------------------------------------------


def test_quota_delta_reads_old_to_new_in_every_format(repo_with_vision, capsys):
    (repo_with_vision / "tenants" / "vision.yaml").write_text(vision(gpus=6))

    code, text, _ = run(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")
    assert code == 0
    assert "tenant vision: GPUs l40s 4 → 6" in text
    assert "spec.hard.requests.nvidia.com/gpu: 4 → 6" in text

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")
    prod = stack(document, "prod")
    assert prod["tenants"]["changed"] == ["vision"]
    assert detail(prod, "vision")["quota"] == [{"key": "gpu.l40s", "label": "GPUs l40s", "from": 4, "to": 6}]
    quota_objects = [o for o in detail(prod, "vision")["objects"] if o["kind"] == "ResourceQuota" and o["change"] == "changed"]
    assert {"path": "spec.hard.requests.nvidia.com/gpu", "from": "4", "to": "6"} in quota_objects[0]["fields"]

    code, markdown, _ = run(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod", "--format", "markdown")
    assert "<details><summary><b>vision</b>: GPUs l40s 4 → 6</summary>" in markdown


def test_quota_near_capacity_warns(repo_with_vision, capsys):
    (repo_with_vision / "tenants" / "vision.yaml").write_text(vision(gpus=8))

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    capacity = [w for w in document["warnings"] if w["kind"] == "capacity"]
    assert len(capacity) == 1 and "GPU class l40s" in capacity[0]["message"] and "warning band" in capacity[0]["message"]


@pytest.mark.parametrize(
    ("egress", "reason"),
    [
        ("    - cidr: 10.16.0.0/12\n      ports: [{port: 443}]", "broader CIDR 10.16.0.0/12"),
        ("    - cidr: 10.20.0.0/16", "ports removed: now every port to 10.20.0.0/16"),
        ("    - cidr: 192.168.0.0/24\n      ports: [{port: 443}]", "new destination 192.168.0.0/24"),
        # The prod stack declares its pod, service and node ranges: a wide rule must except them.
        ("    - cidr: 0.0.0.0/0\n      except: [10.0.0.0/16, 10.96.0.0/12, 10.244.0.0/16]\n      ports: [{port: 443}]", "every address"),
    ],
)
def test_egress_widening_warns(repo_with_vision, capsys, egress, reason):
    (repo_with_vision / "tenants" / "vision.yaml").write_text(vision(egress=egress))

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    widened = [w for w in document["warnings"] if w["kind"] == "egress-widened"]
    assert len(widened) == 1 and reason in widened[0]["message"]


def test_narrower_egress_does_not_warn(repo_with_vision, capsys):
    (repo_with_vision / "tenants" / "vision.yaml").write_text(vision(egress="    - cidr: 10.20.1.0/24\n      ports: [{port: 443}]"))

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    vision_network = detail(stack(document, "prod"), "vision")["network"]
    assert {n["change"] for n in vision_network} == {"added", "removed"}
    assert not [w for w in document["warnings"] if w["kind"] == "egress-widened"]


def test_new_owner_group_warns_and_access_lists_the_grant(repo_with_vision, capsys):
    path = repo_with_vision / "tenants" / "vision.yaml"
    path.write_text(path.read_text().replace("groups: [vision-leads]", "groups: [vision-leads, contractors]"))

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    assert detail(stack(document, "prod"), "vision")["access"] == [{"role": "owner", "subject": "group:contractors", "change": "granted"}]
    owners = [w for w in document["warnings"] if w["kind"] == "owner-granted"]
    assert len(owners) == 1 and "group:contractors" in owners[0]["message"]


def test_enabling_a_vcluster_shows_its_helm_release(repo_with_vision, capsys):
    path = repo_with_vision / "tenants" / "vision.yaml"
    path.write_text(path.read_text() + "vcluster: {enabled: true}\n")

    prod = stack(run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod"), "prod")

    releases = [o for o in detail(prod, "vision")["objects"] if o["kind"] == "HelmRelease"]
    assert [(r["namespace"], r["change"]) for r in releases] == [("vision", "added")]


# --- platform: nodes, MIG -----------------------------------------------------------------------------


def test_node_added_and_dedicated_pool_relabels_nodes(repo_with_vision, capsys):
    stack_file = repo_with_vision / "stacks" / "Pulumi.prod.yaml"
    data = yaml.safe_load(stack_file.read_text())
    data["config"][CONFIG_KEY]["nodePools"]["l40s-pool"]["nodes"].append("prod-l40s-02")
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))
    path = repo_with_vision / "tenants" / "vision.yaml"
    path.write_text(path.read_text().replace("classes: [l40s]", "classes: [l40s]\n  dedicatedPools: [l40s-pool]"))

    prod = stack(run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod"), "prod")

    nodes = {n["node"]: n for n in prod["nodes"]}
    assert nodes["prod-l40s-02"]["change"] == "added"
    assert {"key": "gpu.acme.dev/tenant", "from": None, "to": "vision"} in nodes["prod-l40s-01"]["labels"]
    row = next(r for r in prod["capacity"] if r["name"] == "l40s")
    assert (row["from"]["capacity"], row["to"]["capacity"]) == (8, 16)


def test_mig_layout_change_shows_in_the_mig_section(repo, capsys):
    stack_file = repo / "stacks" / "Pulumi.prod.yaml"
    data = yaml.safe_load(stack_file.read_text())
    platform = data["config"][CONFIG_KEY]
    platform["gpuClasses"]["mig-test"] = {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"}
    platform["nodePools"]["mig-test"] = {"gpuClass": "mig-test", "gpusPerNode": 8, "nodes": ["mig-test-01"], "migLayout": "all-1g.10gb"}
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))
    commit_all(repo, "mig pool")
    platform["nodePools"]["mig-test"]["migLayout"] = "all-3g.40gb"
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))

    code, text, err = run(repo, capsys, "--base", "HEAD", "--stack", "prod")
    assert code == 0, err
    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "prod")
    prod = stack(document, "prod")
    paths = " ".join(m["path"] for m in prod["mig"])
    assert "all-3g.40gb" in paths and "all-1g.10gb" in paths
    label = next(n for n in prod["nodes"] if n["node"] == "mig-test-01")["labels"]
    assert {"key": "nvidia.com/mig.config", "from": "all-1g.10gb", "to": "all-3g.40gb"} in label
    assert "MIG layouts:" in text


# --- no changes, bases, exit codes -------------------------------------------------------------------


@pytest.mark.parametrize("output", ["text", "markdown", "json"])
def test_identical_trees_print_no_changes_and_exit_0(repo, capsys, output):
    code, out, _ = run(repo, capsys, "--base", "HEAD", "--format", output)

    assert code == 0
    if output == "json":
        document = json.loads(out)
        assert document["changed"] is False and document["formatVersion"] == 1
        assert all(s["change"] == "unchanged" for s in document["stacks"])
    else:
        assert "no changes" in out


def test_json_is_byte_stable(repo_with_vision, capsys):
    (repo_with_vision / "tenants" / "vision.yaml").write_text(vision(gpus=6))

    first = run(repo_with_vision, capsys, "--base", "HEAD", "--format", "json")[1]
    second = run(repo_with_vision, capsys, "--base", "HEAD", "--format", "json")[1]

    assert first == second
    assert sorted(json.loads(first)) == ["base", "changed", "formatVersion", "head", "notes", "shardMoves", "stacks", "touchedStacks", "warnings"]


def test_bad_ref_exits_2(repo, capsys):
    code, out, err = run(repo, capsys, "--base", "no-such-branch")

    assert code == 2 and out == ""
    assert "unknown git ref 'no-such-branch'" in err


def test_option_like_ref_is_refused(repo, capsys):
    code, _, err = run(repo, capsys, "--base=--output=/tmp/x")

    assert code == 2 and "is not a git ref" in err


def test_outside_a_git_repository_exits_2(project_copy, capsys):
    code, _, err = run(project_copy, capsys, "--base", "HEAD")

    assert code == 2 and "not inside a git repository" in err


def test_unknown_stack_exits_2(repo, capsys):
    code, _, err = run(repo, capsys, "--base", "HEAD", "--stack", "nope")

    assert code == 2 and "no such stack nope" in err


def test_invalid_working_tree_exits_1_with_located_errors(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(vision().replace("gpu: 4", "gpu: -4"))

    code, out, err = run(repo, capsys, "--base", "HEAD")

    assert code == 1 and out == ""
    line = vision().splitlines().index("  gpu: 4") + 1
    assert f"tenants/vision.yaml:{line}:3: quota.gpu: must be >= 0" in err


def test_invalid_base_is_diffed_as_far_as_it_loads(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(vision().replace("gpu: 4", "gpu: four"))
    commit_all(repo, "broken vision")
    (repo / "tenants" / "vision.yaml").write_text(vision())

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "prod")

    assert any("the base is invalid (1 error(s))" in n and "tenants/vision.yaml" in n for n in document["notes"])
    prod = stack(document, "prod")
    assert prod["tenants"]["added"] == ["vision"]
    assert prod["tenants"]["changed"] == []


def test_default_base_is_the_merge_base_with_origin_main(repo, capsys):
    upstream = git(repo, "rev-parse", "HEAD")
    git(repo, "update-ref", "refs/remotes/origin/main", upstream)
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "tenants" / "vision.yaml").write_text(vision())
    commit_all(repo, "add vision on a branch")

    document = run_json(repo, capsys)

    assert document["base"] == {"ref": "origin/main", "commit": upstream, "how": "merge base of HEAD and origin/main"}
    assert stack(document, "prod")["tenants"]["added"] == ["vision"]


def test_default_base_without_origin_falls_back_to_head_and_says_so(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(vision())

    code, out, err = run(repo, capsys, "--format", "json")

    assert code == 0
    assert "no origin/main" in err
    assert json.loads(out)["base"]["ref"] == "HEAD"


def test_stack_only_in_the_working_tree_is_added(repo, capsys):
    shutil.copy(repo / "stacks" / "Pulumi.prod.yaml", repo / "stacks" / "Pulumi.qa.yaml")

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "qa")

    qa = stack(document, "qa")
    assert qa["change"] == "added"
    assert "vision" not in qa["tenants"]["added"] and "llm-finetune" in qa["tenants"]["added"]


def test_removed_stack_warns_without_per_tenant_noise(repo, capsys):
    (repo / "stacks" / "Pulumi.prod.yaml").unlink()

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "prod")

    assert stack(document, "prod")["change"] == "removed"
    assert [w["kind"] for w in document["warnings"]] == ["stack-removed"]


def test_project_in_a_subdirectory_of_the_repository(tmp_path, project_copy, capsys):
    outer = tmp_path / "monorepo"
    shutil.copytree(project_copy, outer / "platform" / "gpu")
    for stack_file in sorted((outer / "platform" / "gpu" / "stacks").glob("Pulumi.*.yaml")):
        add_l40s(stack_file)
    git(outer, "init", "-q", "-b", "main")
    commit_all(outer, "base")
    root = outer / "platform" / "gpu"
    (root / "tenants" / "vision.yaml").write_text(vision())

    document = run_json(root, capsys, "--base", "HEAD", "--stack", "prod")

    assert stack(document, "prod")["tenants"]["added"] == ["vision"]
    assert stack(document, "prod")["tenants"]["removed"] == []


# --- format versions and expiry -----------------------------------------------------------------------


def test_an_expiry_in_the_past_shows_as_a_suspension(repo_with_vision, capsys, monkeypatch):
    monkeypatch.setenv("GPU_TENANCY_TODAY", "2027-04-01")
    path = repo_with_vision / "tenants" / "vision.yaml"
    path.write_text(path.read_text().replace("costCenter: cc-7\n", "costCenter: cc-7\nexpires: 2027-03-31\n"))

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    assert stack(document, "prod")["tenants"]["lifecycle"] == [{"tenant": "vision", "from": "active", "to": "suspended"}]
    monkeypatch.setenv("GPU_TENANCY_TODAY", "2027-03-31")  # its last day: nothing changes yet
    assert stack(run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod"), "prod")["tenants"]["lifecycle"] == []


def test_every_pr_names_an_expired_tenant_it_does_not_touch(repo_with_vision, capsys, monkeypatch):
    """Issue 34 B: vision expired in a file already merged; a PR about eval still says the deploy suspends it."""
    path = repo_with_vision / "tenants" / "vision.yaml"
    path.write_text(path.read_text().replace("costCenter: cc-7\n", "costCenter: cc-7\nexpires: 2027-03-31\n"))
    commit_all(repo_with_vision, "a trial until March")
    eval_file = repo_with_vision / "tenants" / "eval.yaml"
    eval_file.write_text(eval_file.read_text().replace("costCenter: cc-4300", "costCenter: cc-4301"))

    monkeypatch.setenv("GPU_TENANCY_TODAY", "2027-03-20")
    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")
    (soon,) = [w for w in document["warnings"] if w["kind"] == "expires-soon"]
    assert soon["tenant"] == "vision" and "expires on 2027-03-31 (11 day(s) left)" in soon["message"]

    monkeypatch.setenv("GPU_TENANCY_TODAY", "2027-04-01")
    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")
    assert stack(document, "prod")["tenants"]["changed"] == ["eval"]
    (expired,) = [w for w in document["warnings"] if w["kind"] == "expired"]
    assert expired["tenant"] == "vision" and "this deploy suspends vision" in expired["message"]
    code, out, _ = run(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod", "--format", "markdown")
    assert code == 0 and "`vision`: tenant vision expired on 2027-03-31: this deploy suspends vision" in out


def test_a_base_in_the_older_format_diffs_as_what_it_meant(repo, capsys):
    """The PR that migrates files: the base says v1alpha1 (tenants) and no version (stacks)."""
    current = {path: path.read_text() for path in [*(repo / "tenants").glob("*.yaml"), *(repo / "stacks").glob("*.yaml")]}
    for path, text in current.items():
        old = text.replace("gpu-tenancy.dev/v1alpha2", "gpu-tenancy.dev/v1alpha1")
        if path.parent.name == "stacks":
            old = "\n".join(line for line in text.splitlines() if "apiVersion:" not in line) + "\n"
        path.write_text(old)
    commit_all(repo, "files of the older format")
    for path, text in current.items():
        path.write_text(text)

    code, out, err = run(repo, capsys, "--base", "HEAD")

    assert code == 0, err
    assert "no changes" in out


def _with_images(repo: Path, **images) -> None:
    path = repo / "stacks" / "Pulumi.prod.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"][CONFIG_KEY]["images"] = images
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_wider_registry_list_warns(repo_with_vision, capsys):
    _with_images(repo_with_vision, registries=["nvcr.io/nvidia"], requireDigest=True)
    commit_all(repo_with_vision, "registries")
    path = repo_with_vision / "tenants" / "vision.yaml"
    path.write_text(path.read_text() + "images:\n  registries: [nvcr.io/nvidia/nemo, docker.io]\n")

    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")

    widened = [w["message"] for w in stack(document, "prod")["warnings"] if w["kind"] == "images-widened"]
    assert widened == ["tenant vision may pull images from docker.io too (was: nvcr.io/nvidia)"]
    _with_images(repo_with_vision)  # no list, no digests: any registry, any tag
    path.write_text(vision())
    document = run_json(repo_with_vision, capsys, "--base", "HEAD", "--stack", "prod")
    widened = {w["message"] for w in stack(document, "prod")["warnings"] if w["kind"] == "images-widened" and w.get("tenant") == "vision"}
    assert widened == {"tenant vision may pull images from any registry (was: nvcr.io/nvidia)",
                       "images of tenant vision no longer need a digest (tags may be re-pushed)"}


def test_more_ingress_hosts_warn_and_a_foreign_host_fails_the_diff(repo, capsys):
    path = repo / "tenants" / "inference.yaml"
    text = path.read_text()
    assert "ingressHosts: [api.acme.dev]" in text
    path.write_text(text.replace("ingressHosts: [api.acme.dev]", 'ingressHosts: [api.acme.dev, v2.api.acme.dev, "*.api.acme.dev", x.inference.apps.acme.dev]'))

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "prod")

    widened = [w["message"] for w in stack(document, "prod")["warnings"] if w["kind"] == "ingress-hosts-widened"]
    assert widened == ["tenant inference may serve Ingress hosts *.api.acme.dev, v2.api.acme.dev too (was: api.acme.dev, "
                       "inference.apps.acme.dev, *.inference.apps.acme.dev): an Ingress of a host takes its traffic, so check "
                       "that these names are the tenant's"]
    # Fewer hosts, or only names below its own domain: nothing to warn about.
    path.write_text(text.replace("ingressHosts: [api.acme.dev]", "ingressHosts: [x.inference.apps.acme.dev]"))
    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "prod")
    assert not [w for w in stack(document, "prod")["warnings"] if w["kind"] == "ingress-hosts-widened"]
    # Another tenant's host is no diff at all: the located error, exit 1.
    path.write_text(text.replace("ingressHosts: [api.acme.dev]", "ingressHosts: [api.acme.dev, eval.apps.acme.dev]"))
    code, out, err = run(repo, capsys, "--base", "HEAD", "--stack", "prod")
    assert code == 1 and out == ""
    assert "tenants/inference.yaml:39:32: network.ingressHosts[1]: 'eval.apps.acme.dev' belongs to tenant 'eval'" in err


def test_an_over_promise_from_a_stack_edit_is_reported_at_the_stack_line_first(repo, capsys):
    stack_file = repo / "stacks" / "Pulumi.prod.yaml"
    data = yaml.safe_load(stack_file.read_text())
    data["config"][CONFIG_KEY]["nodePools"]["h100-train"]["nodes"].remove("gpu-h100-05")
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))

    code, out, err = run(repo, capsys, "--base", "HEAD", "--stack", "prod")

    assert code == 1 and out == ""
    first, *rest = err.splitlines()
    assert first.startswith("stacks/Pulumi.prod.yaml:") and ": config.gpu-tenancy:platform.nodePools.h100-train.nodes: " in first
    assert "over-promised by this edit (nodePools.h100-train.nodes 5 nodes → 4 nodes)" in first
    assert "change it back (nodes: 5 nodes, with gpu-h100-05)" in first
    # The quota line it over-promises is still named, after the edited file.
    assert any(line.startswith("tenants/llm-finetune.yaml:") and "over-promised" in line for line in rest), err


def test_an_over_promise_from_a_quota_edit_stays_at_the_quota_line(repo, capsys):
    tenant = repo / "tenants" / "llm-finetune.yaml"
    tenant.write_text(tenant.read_text().replace("  gpu: 40\n", "  gpu: 48\n", 1))

    code, _, err = run(repo, capsys, "--base", "HEAD", "--stack", "prod")

    assert code == 1
    assert err.splitlines()[0].startswith("tenants/llm-finetune.yaml:") and "over-promised" in err
    assert "change it back" not in err and "stacks/Pulumi.prod.yaml:" not in err.split(": ", 1)[0]


ACME = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: acme
displayName: Acme
costCenter: cc-7100
access:
  owners:
    groups: [acme-leads]
gpu:
  classes: [a100]
  dedicatedPools: [a100-acme]
quota:
  cpu: {requests: "8", limits: "16"}
  memory: {requests: 64Gi, limits: 128Gi}
  gpu: {a100: 8}
environments:
  staging: {enabled: false}
  dev: {enabled: false}
"""


def test_an_over_promise_from_dedicating_part_of_a_shared_pool_is_reported_at_the_lines_the_change_touched(repo, capsys):
    # The platform splits one node off the shared A100 pool into a pool dedicated to a new customer:
    # eval, who did not change, now asks 20 of the 10 the shared pool has left.
    stack_file = repo / "stacks" / "Pulumi.prod.yaml"
    data = yaml.safe_load(stack_file.read_text())
    pools = data["config"][CONFIG_KEY]["nodePools"]
    pools["a100-shared"]["nodes"] = ["gpu-a100-01"]
    pools["a100-acme"] = {"gpuClass": "a100", "gpusPerNode": 8, "nodes": ["gpu-a100-02"]}
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))
    (repo / "tenants" / "acme.yaml").write_text(ACME)

    code, out, err = run(repo, capsys, "--base", "HEAD", "--stack", "prod")

    assert code == 1 and out == ""
    lines = [line for line in err.splitlines() if ": warning: " not in line]
    first = lines[0]
    assert first.startswith("tenants/acme.yaml:11:20: gpu.dedicatedPools[0]: "), err
    assert "GPU class 'a100' is over-promised by this edit (tenant acme takes pool a100-acme for itself" in first
    assert "eval: 20" in first and "undedicate a100-acme" in first
    # The stack lines the change moved the node with are named, and so is what to do there.
    assert "with nodePools.a100-shared.nodes 2 nodes → 1 node (stacks/Pulumi.prod.yaml:" in first
    assert "lower its quota (eval: tenants/eval.yaml:35)" in first
    # The quota line it over-promises is still named, after the edited files.
    assert lines[-1].startswith("tenants/eval.yaml:35:") and "over-promised" in lines[-1], err


def test_dedicating_a_whole_shared_pool_that_others_use_is_reported_at_the_dedication(repo, capsys):
    # A new customer takes the whole shared A100 pool that eval uses.
    (repo / "tenants" / "acme.yaml").write_text(ACME.replace("[a100-acme]", "[a100-shared]"))

    code, _, err = run(repo, capsys, "--base", "HEAD", "--stack", "prod")

    assert code == 1
    first = next(line for line in err.splitlines() if ": warning: " not in line)
    assert first.startswith("tenants/acme.yaml:11:20: gpu.dedicatedPools[0]: "), err
    assert "tenant acme takes pool a100-shared for itself" in first and "eval: 20" in first
    assert "undedicate a100-shared" in first


def _use_local_chart(repo: Path, relative: str) -> None:
    chart = repo / relative
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: vcluster\nversion: 0.36.1\n")
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    data = yaml.safe_load(dev.read_text())
    data["config"][CONFIG_KEY]["vcluster"] = {"chart": relative}
    dev.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_committed_local_vcluster_chart_is_read_from_the_base_so_the_base_is_valid(repo, capsys):
    _use_local_chart(repo, "charts/vcluster")
    commit_all(repo, "air-gapped vcluster chart")
    tenant = repo / "tenants" / "llm-finetune.yaml"
    tenant.write_text(tenant.read_text().replace("interactive: {pods: 4, gpu: 1}", "interactive: {pods: 5, gpu: 1}", 1))

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "dev")

    assert "the base is invalid" not in json.dumps(document)
    assert stack(document, "dev")["tenants"]["changed"] == ["llm-finetune"], stack(document, "dev")["tenants"]


def test_a_local_chart_the_repository_does_not_hold_is_read_from_the_working_tree(repo, capsys):
    # A chart CI downloads into a git-ignored directory before the diff is in neither commit.
    (repo / ".gitignore").write_text("vendor/\n")
    _use_local_chart(repo, "vendor/vcluster")
    commit_all(repo, "chart fetched by CI")

    document = run_json(repo, capsys, "--base", "HEAD", "--stack", "dev")

    assert "the base is invalid" not in json.dumps(document)
