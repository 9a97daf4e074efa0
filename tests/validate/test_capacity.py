"""Near-full pool warnings: a shared pool one tenant fills warns, a pool dedicated to its filler does not."""

from __future__ import annotations

from pathlib import Path

from components.load import load_environment

REPO = Path(__file__).resolve().parents[2]


def _pool_warnings(stack: str) -> dict[str, str]:
    warnings = load_environment(REPO, stack).warnings
    return {p.field.rsplit(".", 1)[-1]: p.message for p in warnings if ".nodePools." in p.field and "of what it" in p.message}


def test_a_dedicated_pool_its_owner_fills_is_not_a_warning():
    environment = load_environment(REPO, "prod")
    owners = {t.name: t.spec.gpu.dedicated_pools for t in environment.tenants}
    assert "h100-train" in owners["llm-finetune"] and "h100-serve" in owners["inference"]  # else this proves nothing
    warned = _pool_warnings("prod")
    assert "h100-train" not in warned and "h100-serve" not in warned, warned
    assert "h100-serve" not in _pool_warnings("staging")


def test_a_shared_pool_one_tenant_fills_still_warns():
    warned = _pool_warnings("prod")
    assert sorted(warned) == ["a100-mig", "a100-shared"]
    assert "(eval: 20), 100% of what it holds" in warned["a100-shared"]


# --- over-promises caused by an edit of the stack file ---------------------------------------------

PROD = REPO / "stacks" / "Pulumi.prod.yaml"


def _prod_tenants():
    environment = load_environment(REPO, "prod")
    return environment, [(t.name, t.spec) for t in environment.tenants]


def _line(needle: str, after: str) -> int:
    from tests.project_edits import line_of

    return line_of(PROD, needle, after)


def test_a_node_taken_from_a_pool_is_reported_at_the_pools_nodes_line_with_change_it_back():
    from components.validate.capacity import stack_edit_problems

    environment, tenants = _prod_tenants()
    shrunk = environment.platform.model_copy(deep=True)
    shrunk.node_pools["h100-train"].nodes.remove("gpu-h100-05")
    [problem] = stack_edit_problems(environment.platform, shrunk, environment.platform_doc, tenants)
    assert (problem.file, problem.line) == ("stacks/Pulumi.prod.yaml", _line("nodes: [gpu-h100-01", "h100-train:"))
    assert problem.field == "config.gpu-tenancy:platform.nodePools.h100-train.nodes"
    assert problem.message == (
        "GPU class 'h100' is over-promised by this edit (nodePools.h100-train.nodes 5 nodes → 4 nodes): the pools "
        "tenant llm-finetune: 40 may use hold 32 for 40 asked; change it back (nodes: 5 nodes, with gpu-h100-05), "
        "add nodes to these pools, lower a quota or raise overcommit"
    )


def test_lowered_overcommit_is_reported_at_the_overcommit_line():
    from components.validate.capacity import stack_edit_problems

    environment, tenants = _prod_tenants()
    lowered = environment.platform.model_copy(deep=True)
    lowered.gpu_classes["a100"].overcommit = 1
    [problem] = stack_edit_problems(environment.platform, lowered, environment.platform_doc, tenants)
    assert problem.field == "config.gpu-tenancy:platform.gpuClasses.a100.overcommit"
    assert "change it back (overcommit: 1.25)" in problem.message


def test_an_over_promise_the_stack_did_not_cause_is_not_put_on_the_stack():
    from components.validate.capacity import stack_edit_problems

    environment, tenants = _prod_tenants()
    raised = [(name, spec.model_copy(update={"quota": spec.quota.model_copy(update={"gpu": 48})}) if name == "llm-finetune"
               else spec) for name, spec in tenants]
    assert stack_edit_problems(environment.platform, environment.platform, environment.platform_doc, raised) == []


def test_plain_validate_points_at_the_pools_stack_line_too(tmp_path):
    import shutil

    from tests.project_edits import replace_once, validation_errors

    shutil.copytree(REPO / "tenants", tmp_path / "tenants")
    shutil.copytree(REPO / "stacks", tmp_path / "stacks")
    replace_once(tmp_path / "stacks" / "Pulumi.prod.yaml", "gpu-h100-04, gpu-h100-05]", "gpu-h100-04]")
    [error] = validation_errors(tmp_path, "prod")
    assert error.startswith("tenants/llm-finetune.yaml:")
    assert f"add nodes to these pools (h100-train: stacks/Pulumi.prod.yaml:{_line('h100-train:', 'nodePools:')})" in error


# ---- autoscaled pools: promised (maxNodes) against present (static + minNodes) --------------------


def _dev_without_its_static_l4_node(tmp_path: Path, min_nodes: int) -> Path:
    import shutil

    root = tmp_path / "project"
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, root / part)
    stack = root / "stacks" / "Pulumi.dev.yaml"
    text = stack.read_text()
    old = "        nodes: [dev-l4-01]\n        nodeSelector:\n          cloud.google.com/gke-nodepool: l4-pool\n        maxNodes: 1\n"
    assert text.count(old) == 1
    stack.write_text(text.replace(old, "        nodeSelector:\n          cloud.google.com/gke-nodepool: l4-pool\n"
                                       f"        maxNodes: 2\n        minNodes: {min_nodes}\n"))
    return root


def test_quotas_that_rely_on_nodes_the_autoscaler_has_not_added_warn_at_min_nodes(tmp_path):
    root = _dev_without_its_static_l4_node(tmp_path, 0)
    warnings = [str(w) for w in load_environment(root, "dev").warnings if "autoscaled pool" in str(w)]
    line = next(i for i, text in enumerate((root / "stacks" / "Pulumi.dev.yaml").read_text().splitlines(), 1) if "minNodes" in text)
    assert len(warnings) == 1 and warnings[0].startswith(f"stacks/Pulumi.dev.yaml:{line}:")
    assert "add up to 6, but its present nodes (0 static + minNodes 0) hold 0" in warnings[0]
    assert "set `minNodes: 1` to keep them" in warnings[0]
    # With the one node the quotas need kept by the group, nothing relies on a scale-up.
    assert not [w for w in load_environment(_dev_without_its_static_l4_node(tmp_path / "kept", 1), "dev").warnings
                if "autoscaled pool" in str(w)]


def _with_tenant_dedicating(environment, pool: str):
    from dataclasses import replace

    eval_tenant = next(t for t in environment.tenants if t.name == "eval")
    spec = eval_tenant.spec.model_copy(update={"name": "acme"}, deep=True)
    spec.gpu.dedicated_pools.append(pool)
    return replace(environment, tenants=[*environment.tenants, replace(eval_tenant, spec=spec)])


def test_a_new_dedication_of_a_pool_others_share_is_reported_at_the_dedication_entry():
    from components.validate.capacity import dedication_edit_problems

    environment, _ = _prod_tenants()
    [problem] = dedication_edit_problems(environment, _with_tenant_dedicating(environment, "a100-shared"))
    assert problem.field.endswith("gpu.dedicatedPools[0]")
    assert problem.message.startswith(
        "GPU class 'a100' is over-promised by this edit (tenant acme takes pool a100-shared for itself, which tenant "
        "eval may use otherwise): the pools tenant eval: 20 may use (none) hold 0 for 20 asked; undedicate a100-shared")


def test_a_dedication_that_was_there_before_or_leaves_room_is_not_blamed():
    from components.validate.capacity import dedication_edit_problems

    environment, _ = _prod_tenants()
    assert dedication_edit_problems(environment, environment) == []
    # A pool another tenant holds already stays its (validate says so at the entry): nothing is taken from the sharers.
    assert dedication_edit_problems(environment, _with_tenant_dedicating(environment, "h100-serve")) == []
