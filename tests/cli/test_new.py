"""`tenants new` as a platform engineer uses it: every option checked first (exit 1, nothing
written, the option named), quota options, and the next steps (stacks that list their tenants)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.cli.main import main
from tests.project_edits import line_of


def run(capsys, root: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--root", str(root), *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def tenant_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "tenants").iterdir())


def test_unknown_gpu_class_is_refused_with_a_suggestion_and_nothing_written(capsys, project_copy):
    before = tenant_files(project_copy)
    code, out, err = run(capsys, project_copy, "new", "research", "--owner-group", "research-leads", "--gpu-class", "h10")
    assert code == 1 and out == ""
    assert "tenants new: --gpu-class h10: unknown GPU class 'h10'; did you mean 'h100'?" in err
    assert "(GPU classes of the stacks dev, prod, staging: a100, a100-mig, h100, l4)" in err
    assert err.rstrip().endswith("tenants new: nothing written")
    assert tenant_files(project_copy) == before


def test_a_class_missing_from_a_stack_that_deploys_every_tenant_is_refused(capsys, project_copy):
    # l4 exists only in dev; prod and staging deploy every tenant (tenants: all) and have no l4.
    code, _, err = run(capsys, project_copy, "new", "research", "--owner-group", "g", "--gpu-class", "l4")
    assert code == 1
    assert "--gpu-class l4: GPU class 'l4' is not in stack(s) prod (stacks/Pulumi.prod.yaml: a100, a100-mig, h100)" in err
    assert "it is only in dev" in err
    assert not (project_copy / "tenants" / "research.yaml").exists()


def test_gpu_quota_beyond_capacity_is_refused_located_on_every_quota_involved(capsys, project_copy):
    """The shared A100 pool is over-promised: reported on eval's quota line and on the new --gpu."""
    eval_file = project_copy / "tenants" / "eval.yaml"
    code, _, err = run(capsys, project_copy, "new", "research", "--owner-group", "g", "--gpu", "a100=2")
    assert code == 1
    line = line_of(eval_file, "gpu: {a100: 20}")
    assert f"tenants new: with research added, tenants/eval.yaml:{line}:13: environments.prod.quota.gpu.a100: " in err
    assert "tenants new: --gpu a100=2: quota.gpu.a100: GPU class 'a100' is over-promised" in err
    assert "tenants eval: 20, research: 2 ask for 22 on the pools they may use (a100-shared:" in err and "(stack prod)" in err
    assert not (project_copy / "tenants" / "research.yaml").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--cpu", "8cpus"], "tenants new: --cpu 8cpus: '8cpus' is not a Kubernetes quantity"),
        (["--memory", "32GB"], "tenants new: --memory 32GB: '32GB' is not a Kubernetes quantity"),
        (["--gpu", "h100"], "tenants new: --gpu h100: write --gpu h100=4 (a name and a whole number)"),
        (["--gpu", "a100=-1"], "tenants new: --gpu a100=-1: write --gpu h100=4"),
        (["--mig", "1g.10gb"], "tenants new: --mig 1g.10gb: write --mig 1g.10gb=2"),
        (["--email", "x@"], "tenants new: --email x@: contacts[0].email: 'x@' is not an email address (e.g. kim.lee@example.com)"),
        (["--owner-group", ""], "tenants new: --owner-group \"\": access.owners.groups[1]: must not be empty"),
        # The stacks' LimitRange default request (250m) would not fit in the quota: named by option and stack.
        (["--cpu", "50m"], "tenants new: --cpu 50m: limits.defaultRequest.cpu: the default request (250m) is larger than the whole quota (50m) (stack prod)"),
    ],
)
def test_bad_options_are_refused_naming_the_option(capsys, project_copy, argv, message):
    before = tenant_files(project_copy)
    code, out, err = run(capsys, project_copy, "new", "research", "--owner-group", "g", *argv)
    assert code == 1 and out == ""
    assert message in err
    assert tenant_files(project_copy) == before


def test_several_bad_options_are_all_reported_the_gpu_class_too(capsys, project_copy):
    # #41: a bad GPU class was hidden behind a bad quantity.
    code, _, err = run(capsys, project_copy, "new", "research", "--owner-group", "g", "--gpu", "h100=x",
                       "--gpu-class", "h1000", "--admission", "sometimes")
    assert code == 1
    for message in ("--gpu h100=x: write --gpu h100=4", "--admission sometimes: queue.admission: 'sometimes' is not allowed",
                    "--gpu-class h1000: unknown GPU class 'h1000'; did you mean 'h100'?"):
        assert f"tenants new: {message}" in err, err
    assert not (project_copy / "tenants" / "research.yaml").exists()


def test_a_serving_team_on_its_own_pool_with_an_end_date(capsys, tmp_path):
    # #41: --dedicated-pool, --admission and --expires, written as tenants validate reads them.
    assert run(capsys, tmp_path, "init", "--label-domain", "gpu.example.com", "--gpu-class", "h100=H100-80GB",
               "--pool", "h100-a=h100:8:gpu-01,gpu-02", "--pool", "h100-b=h100:8:gpu-03")[0] == 0
    code, out, err = run(capsys, tmp_path, "new", "serving", "--owner-group", "serving-leads", "--gpu", "h100=8",
                         "--dedicated-pool", "h100-b", "--admission", "direct", "--expires", "2027-03-31")
    assert code == 0, err
    text = (tmp_path / "tenants" / "serving.yaml").read_text()
    assert "\nexpires: 2027-03-31 " in text and '\n  admission: "direct"' in text and '\n  dedicatedPools: ["h100-b"]' in text
    from components.load import load_environment
    spec = next(t.spec for t in load_environment(tmp_path, "prod").tenants if t.name == "serving")
    assert (spec.gpu.dedicated_pools, spec.queue.admission, str(spec.expires)) == (["h100-b"], "direct", "2027-03-31")
    code, _, err = run(capsys, tmp_path, "new", "late", "--owner-group", "g", "--expires", "2027-13-01")
    assert code == 1 and "tenants new: --expires 2027-13-01: expires: '2027-13-01' is not a date" in err
    code, _, err = run(capsys, tmp_path, "new", "second", "--owner-group", "g", "--gpu", "h100=1", "--dedicated-pool", "h100-b")
    assert code == 1 and "tenants new: --dedicated-pool h100-b: gpu.dedicatedPools[0]: node pool 'h100-b' is already dedicated" in err


def test_quota_options_are_written_and_the_file_validates(capsys, project_copy):
    code, out, err = run(capsys, project_copy, "new", "research", "--owner-group", "research-leads",
                         "--gpu-class", "a100-mig", "--mig", "1g.10gb=1", "--cpu", "8:16", "--memory", "32Gi")
    assert code == 0, err
    text = (project_copy / "tenants" / "research.yaml").read_text()
    assert 'cpu: {requests: "8", limits: "16"}' in text
    assert 'memory: {requests: "32Gi", limits: "32Gi"}' in text
    assert "mig: {1g.10gb: 1}" in text
    assert 'classes: ["a100-mig"]' in text
    code, out, err = run(capsys, project_copy, "validate")
    assert code == 0, err
    assert "prod: 4 tenant(s) ok" in out


def test_gpu_quota_allows_its_class(capsys, project_copy):
    # Free room in prod's a100 class first (eval holds all of it), then ask for 2.
    eval_file = project_copy / "tenants" / "eval.yaml"
    eval_file.write_text(eval_file.read_text().replace("a100: 20", "a100: 10"))
    code, _, err = run(capsys, project_copy, "new", "research", "--owner-group", "g", "--gpu", "a100=2")
    assert code == 0, err
    text = (project_copy / "tenants" / "research.yaml").read_text()
    assert "gpu: {a100: 2}" in text and 'classes: ["a100"]' in text


def test_next_steps_name_the_stacks_that_list_their_tenants_with_the_line(capsys, project_copy):
    dev = project_copy / "stacks" / "Pulumi.dev.yaml"
    code, out, _ = run(capsys, project_copy, "new", "research", "--owner-group", "g")
    assert code == 0
    line = line_of(dev, "tenants: [")
    assert f"wrote {project_copy / 'tenants' / 'research.yaml'}" in out
    assert "next steps:" in out
    assert "add research to the tenants of the stacks that list them" in out
    assert f"stacks/Pulumi.dev.yaml:{line}: tenants: [llm-finetune, inference, eval]" in out
    assert "it is deployed in prod, staging (tenants: all)" in out
    assert f"tenants --root {project_copy} validate" in out
    assert "prod: research lands in stack prod (not sharded: one stack holds every tenant)" in out
    assert "dev: research lands in stack dev (not sharded: one stack holds every tenant) once listed there" in out


def test_a_new_tenant_is_told_its_shard_and_never_lands_in_a_reserved_one(capsys, tmp_path):
    from components.spec.sharding import hashed_shard
    from tests.sharded_fleet import HASHED, RESERVED, write_sharded_fleet

    root = write_sharded_fleet(tmp_path)
    # A name that the reserved shard would win, were it not reserved.
    name = next(n for n in (f"research-{i}" for i in range(100)) if hashed_shard(n, [*HASHED, RESERVED]) == RESERVED)
    code, out, err = run(capsys, root, "new", name, "--owner-group", "g")
    assert code == 0, err
    shard = hashed_shard(name, HASHED)
    assert f"bench: {name} lands in stack bench.{shard} (shard {shard})\n" in out


def test_next_steps_say_what_to_fix_before_listing_it_in_a_stack(capsys, project_copy):
    # a100 exists in prod and staging but not in dev, which lists its tenants.
    eval_file = project_copy / "tenants" / "eval.yaml"
    eval_file.write_text(eval_file.read_text().replace("a100: 20", "a100: 10"))
    code, out, _ = run(capsys, project_copy, "new", "research", "--owner-group", "g", "--gpu", "a100=2")
    assert code == 0
    assert "before adding it there, fix: --gpu a100=2:" in out
    assert "unknown GPU class 'a100'; did you mean 'a100-mig'? (stack dev)" in out


def test_gpu_class_without_any_stack_says_to_run_init(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path, "new", "research", "--owner-group", "g", "--gpu-class", "h100")
    assert code == 1
    assert "there are no stacks to check GPU classes against" in err and "tenants init" in err
    assert not (tmp_path / "tenants").exists()


def test_every_bad_option_is_reported_at_once(capsys, project_copy):
    before = tenant_files(project_copy)
    code, out, err = run(capsys, project_copy, "new", "BadName", "--owner-group", "", "--gpu", "h100=x",
                         "--mig", "1g.10gb=2", "--mig", "1g.10gb=3", "--cpu", "8:lots")
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines == [
        "tenants new: --gpu h100=x: write --gpu h100=4 (a name and a whole number)",
        "tenants new: --mig 1g.10gb=3: '1g.10gb' is given twice",
        "tenants new: --cpu 8:lots: 'lots' is not a Kubernetes quantity: write a number with an optional suffix, e.g. 500m, 4, 1.5, 64Gi",
        "tenants new: NAME 'BadName': name: 'BadName' is not a valid tenant name: use lower-case letters, digits and '-', "
        "at most 40 characters, starting and ending with a letter or digit",
        'tenants new: --owner-group "": access.owners.groups[0]: must not be empty',
        "tenants new: nothing written",
    ]
    assert tenant_files(project_copy) == before


def test_a_bad_option_alone_still_writes_nothing(capsys, project_copy):
    before = tenant_files(project_copy)
    code, _, err = run(capsys, project_copy, "new", "research", "--owner-group", "g", "--memory", "32Gb")
    assert code == 1
    assert err.splitlines()[0].startswith("tenants new: --memory 32Gb: ") and err.rstrip().endswith("nothing written")
    assert tenant_files(project_copy) == before
