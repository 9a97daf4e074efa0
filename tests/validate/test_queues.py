"""Queue settings are checked against the stack's scheduler, GPU classes, cohorts and KAI departments,
each problem located at the line that causes it."""

from __future__ import annotations

from pathlib import Path


from tests.project_edits import append_to, line_of, replace_once, validation_errors
from components.load import load_environment










def _warnings(root: Path, env: str) -> list[str]:
    return [str(p) for p in load_environment(root, env).warnings]


def test_the_examples_have_no_queue_problems():
    repo = Path(__file__).resolve().parents[2]
    for env in ("dev", "prod", "staging"):
        assert not [w for w in _warnings(repo, env) if "queue" in w or "KAI" in w or "Kueue" in w]


# ---- Kueue (prod) ---------------------------------------------------------------------------------


def test_limit_for_an_unknown_gpu_class(project_copy):
    eval_file = project_copy / "tenants" / "eval.yaml"
    append_to(eval_file, "queue:\n  cohort: shared\n  borrowingLimit:\n    a10: 2\n")
    line = line_of(eval_file, "a10: 2")
    assert f"tenants/eval.yaml:{line}:5: queue.borrowingLimit.a10: unknown GPU class 'a10'; did you mean 'a100'? (stack prod)" in validation_errors(project_copy, "prod")


def test_limits_for_classes_the_tenant_cannot_use_or_mig_slices(project_copy):
    eval_file = project_copy / "tenants" / "eval.yaml"
    append_to(eval_file, "queue:\n  cohort: shared\n  lendingLimit:\n    h100: 2\n    a100-mig: 1\n")
    errors = validation_errors(project_copy, "prod")
    assert any(e.startswith(f"tenants/eval.yaml:{line_of(eval_file, 'h100: 2')}:5: queue.lendingLimit.h100: GPU class 'h100' is not one the tenant may use") for e in errors)
    assert any(e.startswith(f"tenants/eval.yaml:{line_of(eval_file, 'a100-mig: 1')}:5: queue.lendingLimit.a100-mig: GPU class 'a100-mig' hands out MIG slices") for e in errors)


def test_borrowing_needs_a_cohort(project_copy):
    eval_file = project_copy / "tenants" / "eval.yaml"
    append_to(eval_file, "queue:\n  borrowingLimit: {a100: 2}\n")
    line = line_of(eval_file, "borrowingLimit")
    assert f"tenants/eval.yaml:{line}:3: queue.borrowingLimit: borrowing needs a cohort to borrow from: set queue.cohort (or the stack's queues.defaultCohort) (stack prod)" in validation_errors(project_copy, "prod")


def test_borrowing_above_what_the_cohort_can_lend(project_copy):
    eval_file = project_copy / "tenants" / "eval.yaml"
    append_to(eval_file, "queue:\n  cohort: shared\n  borrowingLimit: {a100: 4}\n")
    append_to(project_copy / "tenants" / "llm-finetune.yaml", "queue:\n  cohort: shared\n")
    line = line_of(eval_file, "borrowingLimit")
    assert (
        f"tenants/eval.yaml:{line}:20: queue.borrowingLimit.a100: borrowing limit 4 is above what the rest of cohort 'shared' "
        "can lend of GPU class 'a100' on the pools this tenant may use (0; no other member lends any); lower it or add lenders to the cohort (stack prod)"
    ) in validation_errors(project_copy, "prod")


def test_a_dedicated_only_class_cannot_be_borrowed(project_copy):
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    append_to(finetune, "queue:\n  cohort: shared\n  borrowingLimit: {h100: 8}\n")
    errors = validation_errors(project_copy, "prod")
    assert any("queue.borrowingLimit.h100: the tenant reaches GPU class 'h100' only through its dedicated pools" in e for e in errors)


def _dev_with_kueue(root: Path) -> None:
    replace_once(root / "stacks" / "Pulumi.dev.yaml", "    tenants: [llm-finetune, inference, eval]\n", "    tenants: [llm-finetune, inference, eval]\n    scheduler: kueue\n")


def test_borrowing_within_what_the_cohort_lends_is_fine(project_copy):
    _dev_with_kueue(project_copy)
    append_to(project_copy / "tenants" / "eval.yaml", "queue:\n  cohort: shared\n  borrowingLimit: {l4: 4}\n")
    append_to(project_copy / "tenants" / "llm-finetune.yaml", "queue:\n  cohort: shared\n")
    assert any("borrowing limit 4 is above what the rest of cohort 'shared' can lend of GPU class 'l4' on the pools this tenant may use (2; llm-finetune: 2)" in e for e in validation_errors(project_copy, "dev"))
    # a second lender in the cohort covers it; a lending limit of 0 takes one away again
    append_to(project_copy / "tenants" / "inference.yaml", "queue:\n  cohort: shared\n")
    environment = load_environment(project_copy, "dev")
    assert not [w for w in environment.warnings if "queue" in w.field]
    append_to(project_copy / "tenants" / "inference.yaml", "  lendingLimit: {l4: 0}\n")
    assert any("(2; llm-finetune: 2)" in e for e in validation_errors(project_copy, "dev"))


def test_kueue_without_cpu_or_memory_quota_warns(project_copy):
    append_to(project_copy / "tenants" / "eval.yaml", "queue:\n  weight: 2\n")
    (project_copy / "tenants" / "tiny.yaml").write_text(
        "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: tiny\ndisplayName: Tiny\ncostCenter: cc-1\nquota:\n  objects: {pods: 2}\n"
    )
    warnings = _warnings(project_copy, "prod")
    assert "tenants/tiny.yaml:6:1: warning: quota: Kueue admits only workloads whose resources its ClusterQueue covers; without quota.cpu.requests (or the stack's cpuMemoryCapacity) workloads requesting cpu or memory stay pending" in warnings


def test_borrow_within_cohort_needs_reclaim(project_copy):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    append_to(stack, "    queues:\n      kueue:\n        preemption: {reclaimWithinCohort: Never, borrowWithinCohort: LowerPriority}\n")
    line = line_of(stack, "borrowWithinCohort")
    assert any(e.startswith(f"stacks/Pulumi.prod.yaml:{line}:") and "borrowWithinCohort needs reclaimWithinCohort other than Never" in e for e in validation_errors(project_copy, "prod"))


# ---- scheduler none (dev) ---------------------------------------------------------------------


def test_queue_settings_without_a_scheduler_warn(project_copy):
    eval_file = project_copy / "tenants" / "eval.yaml"
    append_to(eval_file, "queue:\n  cohort: shared\n  weight: 2\n")
    line = line_of(eval_file, "queue:")
    warnings = _warnings(project_copy, "dev")
    assert f"tenants/eval.yaml:{line}:1: warning: queue: the stack's scheduler is 'none', so queue settings (cohort, weight) have no effect; set `scheduler: kueue` or `kai` in the stack, or remove them (stack dev)" in warnings
    assert not [w for w in _warnings(project_copy, "prod") if "no effect" in w]


def test_kai_departments_without_kai_warn(project_copy):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    append_to(stack, "    queues:\n      kai:\n        departments:\n          research: {gpu: 10}\n")
    assert any("KAI departments have no effect with scheduler 'kueue'" in w for w in _warnings(project_copy, "prod"))


# ---- KAI (staging) ------------------------------------------------------------------------------


def test_a_child_queue_above_its_department(project_copy):
    stack = project_copy / "stacks" / "Pulumi.staging.yaml"
    replace_once(stack, "research: {displayName: Research, gpu: 64}", "research: {displayName: Research, gpu: 20}")
    errors = validation_errors(project_copy, "staging")
    eval_file = project_copy / "tenants" / "eval.yaml"
    assert any(
        e.startswith(f"tenants/eval.yaml:{line_of(eval_file, 'quota:', after='staging:')}:5: environments.staging.quota: the tenant's KAI gpu quota (50 GPUs) exceeds its department 'research' (20 GPUs)")
        for e in errors
    ), errors
    assert not any("llm-finetune" in e for e in errors)  # 12 GPUs fit


def test_children_adding_up_above_the_department_warn(project_copy):
    stack = project_copy / "stacks" / "Pulumi.staging.yaml"
    replace_once(stack, "research: {displayName: Research, gpu: 64}", "research: {displayName: Research, gpu: 55}")
    line = line_of(stack, "research: {")
    assert any(
        w.startswith(f"stacks/Pulumi.staging.yaml:{line}:") and "the department's tenants hold 62 GPUs of gpu quota (eval: 50, llm-finetune: 12), more than its 55" in w
        for w in _warnings(project_copy, "staging")
    )


def test_kai_has_no_lending_limit(project_copy):
    inference = project_copy / "tenants" / "inference.yaml"
    append_to(inference, "queue:\n  lendingLimit: {h100: 0}\n")
    assert any("queue.lendingLimit: KAI has no lending limit" in w for w in _warnings(project_copy, "staging"))


def test_a_tenant_named_like_a_department_queue(project_copy):
    (project_copy / "tenants" / "dept-research.yaml").write_text(
        "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: dept-research\ndisplayName: D\ncostCenter: cc-1\n"
    )
    assert "tenants/dept-research.yaml:3:1: name: tenant 'dept-research' has the name of the KAI parent queue of department 'research'; parent and leaf queues share one set of names, rename the tenant or the department" in validation_errors(project_copy, "staging")


# ---- cohorts: spare capacity and nesting ----------------------------------------------------------


def test_a_pool_nothing_queued_can_use_warns_with_why(project_copy):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    replace_once(stack, "        migLayout: eval-mix\n", "        migLayout: eval-mix\n"
                 "      h100-spare:\n        gpuClass: h100\n        gpusPerNode: 8\n        nodes: [gpu-h100-09, gpu-h100-10]\n")
    line = line_of(stack, "h100-spare:")
    assert (f"stacks/Pulumi.prod.yaml:{line}:7: warning: config.gpu-tenancy:platform.nodePools.h100-spare: nothing queued can ever be "
            "admitted on node pool 'h100-spare': no tenant lists GPU class 'h100' in gpu.classes, so no ClusterQueue lists the pool's flavor") in _warnings(project_copy, "prod")
    (project_copy / "tenants" / "research.yaml").write_text(
        "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: research\ndisplayName: Research\ncostCenter: cc-1\n"
        "quota:\n  cpu: {requests: \"8\"}\n  memory: {requests: 64Gi}\ngpu:\n  classes: [h100]\n")
    assert any(w.endswith("nothing queued can ever be admitted on node pool 'h100-spare': the tenants whose ClusterQueues list it (research) "
                          "hold no quota on it, and no cohort lends its capacity (set queues.spareCohort or queues.defaultCohort)")
               for w in _warnings(project_copy, "prod"))
    # with a default cohort, its tree holds the spare and research borrows it: no warning
    replace_once(stack, "    scheduler: kueue\n", "    scheduler: kueue\n    queues:\n      defaultCohort: shared\n")
    assert not [w for w in _warnings(project_copy, "prod") if "nothing queued" in w]


def test_cohorts_nesting_in_a_cycle_are_refused_at_one_parent(project_copy):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    append_to(stack, "    queues:\n      cohorts:\n        research: {parent: org}\n        org: {parent: research}\n        nlp: {parent: research}\n")
    line = line_of(stack, "org: {parent: research}")
    errors = validation_errors(project_copy, "prod")
    assert [e for e in errors if "cycle" in e] == [
        f"stacks/Pulumi.prod.yaml:{line}:15: config.gpu-tenancy:platform.queues.cohorts.org.parent: cohorts nest in a cycle "
        "(org -> research -> org): Kueue stops admitting in every cohort of a cycle; unset the parent of one of them"
    ]


def test_cohort_settings_without_a_scheduler_or_spare_cohort_with_kai_warn(project_copy):
    append_to(project_copy / "stacks" / "Pulumi.dev.yaml", "    queues:\n      cohorts:\n        research: {parent: org}\n")
    assert any("cohort settings have no effect" in w for w in _warnings(project_copy, "dev"))
    replace_once(project_copy / "stacks" / "Pulumi.staging.yaml", "    queues:\n", "    queues:\n      spareCohort: org\n")
    assert any("spareCohort has no effect" in w for w in _warnings(project_copy, "staging"))


def test_a_cohort_or_weight_on_a_direct_tenant_warns_that_it_does_nothing(project_copy):
    # #41: a cohort on a queue-less tenant did nothing, and nothing said so.
    eval_file = project_copy / "tenants" / "eval.yaml"
    append_to(eval_file, "queue:\n  cohort: shared\n  weight: 2\n  admission: direct\n")
    warnings = _warnings(project_copy, "prod")
    for key in ("cohort", "weight"):
        line = line_of(eval_file, f"  {key}:")
        assert any(w.startswith(f"tenants/eval.yaml:{line}:3: warning: queue.{key}: queue.{key} does nothing with `admission: direct`")
                   for w in warnings), warnings
    replace_once(eval_file, "  admission: direct\n", "")
    assert not any("does nothing with `admission: direct`" in w for w in _warnings(project_copy, "prod"))


def test_direct_admission_cannot_borrow(project_copy):
    eval_file = project_copy / "tenants" / "eval.yaml"
    append_to(eval_file, "queue:\n  cohort: shared\n  admission: direct\n  borrowingLimit: {a100: 2}\n")
    line = line_of(eval_file, "borrowingLimit")
    assert any(e.startswith(f"tenants/eval.yaml:{line}:3: queue.borrowingLimit: with `admission: direct` the tenant's pods may bypass its queue")
               for e in validation_errors(project_copy, "prod"))


# ---- Kueue's deviceClassMappings (tests/fixtures/dra-kueue) ----------------------------------------

DRA_KUEUE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "dra-kueue"


def _dra_kueue_copy(tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "project"
    shutil.copytree(DRA_KUEUE, root)
    return root


def test_a_device_class_too_long_for_a_kueue_mapping_name_is_refused_at_its_line(tmp_path):
    root = _dra_kueue_copy(tmp_path)
    stack = root / "stacks" / "Pulumi.dra.yaml"
    long_name = "b200-" + "x" * 55 + ".gpu.dra.dev"   # 72 characters: past the 63 of a mapping name's part
    replace_once(stack, "      b200.gpu.dra.dev:\n", f"      {long_name}:\n")
    (error,) = [e for e in validation_errors(root, "dra") if "deviceClassMappings" in e]
    assert error.startswith(f"stacks/Pulumi.dra.yaml:{line_of(stack, long_name)}:")
    assert f"deviceclass.resource.kubernetes.io/{long_name}" in error and "at most 63 characters" in error


def test_more_than_eight_device_classes_counted_as_one_resource_are_refused(tmp_path):
    root = _dra_kueue_copy(tmp_path)
    stack = root / "stacks" / "Pulumi.dra.yaml"
    more = "".join(f"      h100-{i}.gpu.dra.dev: {{driver: gpu.nvidia.com, gpuClass: h100, extendedResourceName: nvidia.com/gpu}}\n"
                   for i in range(8))
    replace_once(stack, "      gpu.nvidia.com: {owner: driver", more + "      gpu.nvidia.com: {owner: driver")
    errors = [e for e in validation_errors(root, "dra") if "Kueue maps at most 8" in e]
    assert len(errors) == 1 and "9 DeviceClasses are counted as 'nvidia.com/gpu'" in errors[0]


def test_the_dra_kueue_fixture_needs_no_change():
    assert not [w for w in _warnings(DRA_KUEUE, "dra")]
