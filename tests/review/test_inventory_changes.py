"""Inventory edits in the diff: placement policies and ClusterQueues read as allowed pools and
flavors, not as CEL text (the text stays behind `--all-fields` and in the JSON)."""

from __future__ import annotations

import shutil
from pathlib import Path

from components.load import load_environment
from components.review.diff import Side, compare_stack, report
from components.review.diff_format import format_markdown, format_text
from tests.project_edits import replace_once

REPO = Path(__file__).resolve().parents[2]
NEW_POOL = "      h100-b:\n        gpuClass: h100\n        gpusPerNode: 8\n        nodes: [h100-b-1]\n"


def _document(base: Path, head: Path, env: str) -> dict:
    stack = compare_stack(env, Side(load_environment(base, env)), Side(load_environment(head, env)), project="proj")
    return report([stack], {"ref": "main", "commit": "0" * 40})


def _summaries(document: dict) -> dict[str, dict[str, list[str]]]:
    return {d["tenant"]: {o["kind"]: o.get("summary") for o in d["objects"]} for d in document["stacks"][0]["tenantDetails"]}


def test_a_pool_added_to_the_30_tenant_fleet_reads_as_allowed_pools_and_flavors(tmp_path: Path):
    from tests.sharded_fleet import write_sharded_fleet

    base, head = write_sharded_fleet(tmp_path / "base"), write_sharded_fleet(tmp_path / "head")
    # Appended: the order of `nodePools` is the tenants' preference (docs/queues-and-vclusters.md,
    # the per-pool split), so a new last pool moves no tenant's nominal quota.
    replace_once(head / "stacks" / "Pulumi.bench.yaml", "    limitRangeDefaults:\n", NEW_POOL + "    limitRangeDefaults:\n")
    document = _document(base, head, "bench")
    summaries = _summaries(document)
    assert len(summaries) == 30
    assert all(s == {"ClusterQueue": ["flavors: + h100-b"], "TenantGrant": ["allowed pools: + h100-b"]}
               for s in summaries.values()), summaries
    text, full = format_text(document), format_text(document, all_fields=True)
    assert "spec.pools" not in text and "spec.pools" in full   # the summary stands for the fields
    # The 30 tenants change alike: said once, not 30 times.
    names = ", ".join(f"team-{i:05d}" for i in range(30))
    assert f"  tenants {names} (30): flavors: + h100-b and 1 more" in text.splitlines()
    assert text.count("allowed pools: + h100-b") == 1 and "        allowed pools: + h100-b" in text.splitlines()
    assert len(text) * 10 < len(full)  # 1 KB instead of 11 KB when written (270 KB when each tenant had its own CEL)
    markdown = format_markdown(document)
    assert markdown.count("allowed pools: + h100-b") == 1 and "<b>30 tenants</b>: flavors: + h100-b and 1 more" in markdown
    # A tenant whose own file changes as well is shown on its own.
    replace_once(head / "tenants" / "team-00004.yaml", "gpu: {h100: 2, l4: 1}", "gpu: {h100: 3, l4: 1}")
    text = format_text(_document(base, head, "bench"))
    assert "(29): flavors: + h100-b and 1 more" in text and "  tenant team-00004: GPUs h100 2 → 3" in text.splitlines()
    # The JSON keeps every field change next to the summary.
    policy = next(o for o in document["stacks"][0]["tenantDetails"][0]["objects"] if o["kind"] == "TenantGrant")
    assert policy["fields"] and policy["summary"]


def _example(tmp_path: Path) -> tuple[Path, Path]:
    base, head = tmp_path / "base", tmp_path / "head"
    for side in (base, head):
        shutil.copytree(REPO / "tenants", side / "tenants")
        shutil.copytree(REPO / "stacks", side / "stacks")
    return base, head


def _add_a100_pool(root: Path) -> None:
    replace_once(root / "stacks" / "Pulumi.prod.yaml", "        nodes: [gpu-a100-01, gpu-a100-02]\n",
                 "        nodes: [gpu-a100-01, gpu-a100-02]\n      a100-b:\n        gpuClass: a100\n        gpusPerNode: 8\n"
                 "        nodes: [gpu-a100-09]\n")


def test_a_shared_pool_added_to_the_example_changes_only_the_tenants_of_its_class(tmp_path: Path):
    base, head = _example(tmp_path)
    _add_a100_pool(head)
    document = _document(base, head, "prod")
    summaries = _summaries(document)
    assert list(summaries) == ["eval"]
    assert summaries["eval"]["TenantGrant"] == ["allowed pools: + a100-b"]
    assert summaries["eval"]["ClusterQueue"][0] == "flavors: + a100-b"
    assert document["touchedStacks"] == ["prod"]


def test_a_new_dedicated_pool_reads_as_refused_for_every_other_tenant(tmp_path: Path):
    base, head = _example(tmp_path)
    _add_a100_pool(head)
    replace_once(head / "tenants" / "eval.yaml", "      classes: [a100, a100-mig]\n  dev:",
                 "      classes: [a100, a100-mig]\n      dedicatedPools: [a100-b]\n  dev:")
    summaries = _summaries(_document(base, head, "prod"))
    for other in ("inference", "llm-finetune"):
        assert summaries[other]["TenantGrant"] == [
            "other tenants' dedicated pools (refused): + a100-b (eval)", "nodes of a100-b (refused by name): + gpu-a100-09"]
