"""A rename's message names the objects the engine deletes: those named after the old name."""

from __future__ import annotations

import shutil
from pathlib import Path

from components.manifests.build import tenant_objects
from components.manifests.renames import rename_message, renamed_objects
from components.load import load_environment
from components.review.diff import Side, compare_stack
from tests.project_edits import rename_llm_finetune

REPO = Path(__file__).resolve().parents[2]


def _renamed_project(tmp_path: Path, **edit) -> tuple[Path, Path]:
    base, head = tmp_path / "base", tmp_path / "head"
    for root in (base, head):
        for part in ("stacks", "tenants"):
            shutil.copytree(REPO / part, root / part)
    rename_llm_finetune(head, **edit)
    return base, head


def test_the_objects_named_after_the_old_name_are_those_the_diff_removes(tmp_path):
    base, head = _renamed_project(tmp_path)
    environment = load_environment(head, "prod")
    tenant = next(t.spec for t in environment.tenants if t.name == "finetune")

    listed = renamed_objects("llm-finetune", tenant, tenant_objects(tenant, environment.view(tenant)))

    document = compare_stack("prod", Side(load_environment(base, "prod")), Side(environment))
    [detail] = [d for d in document["tenantDetails"] if d["tenant"] == "finetune"]
    removed = {(o["kind"], f"{o['namespace']}/{o['name']}" if o["namespace"] else o["name"])
               for o in detail["objects"] if o["change"] == "removed"
               and o["namespace"] not in tenant.all_namespaces + ["llm-finetune"]}
    assert set(listed) == removed
    assert ("ClusterQueue", "llm-finetune") not in listed   # kept, stopped: Kueue would hold its delete
    assert ("PrometheusRule", "monitoring/gpu-tenancy-tenant-llm-finetune") in listed
    assert listed == sorted(listed)


def test_a_name_inside_another_word_is_not_renamed():
    environment = load_environment(REPO, "prod")
    tenant = next(t.spec for t in environment.tenants if t.name == "eval")
    objects = [{"kind": "ClusterRole", "metadata": {"name": "evaluator"}},
               {"kind": "ClusterRole", "metadata": {"name": "team:eval:viewer"}}]

    assert renamed_objects("old", tenant, objects) == [("ClusterRole", "team:old:viewer")]


def test_the_message_says_where_the_budget_is_and_what_is_deleted(tmp_path):
    _, head = _renamed_project(tmp_path)
    environment = load_environment(head, "prod")
    tenant = next(t.spec for t in environment.tenants if t.name == "finetune")

    message = rename_message("llm-finetune", tenant, tenant_objects(tenant, environment.view(tenant)), True)

    assert message.startswith("tenant llm-finetune is renamed to finetune (previousNames): Pulumi adopts its resources")
    assert "llm-finetune stays one of its namespaces, keeping the tenant's compute and GPU budget" in message
    assert "protects namespaces" not in message  # the kept namespace is not replaced
    assert "the objects named after llm-finetune are DELETED and created under the new name: " in message
    assert "ClusterQueue llm-finetune is not deleted but stopped (stopPolicy: HoldAndDrain): admitted workloads must finish" in message
    assert "ClusterQueue llm-finetune," not in message


def test_a_dropped_old_namespace_is_said_to_be_retained_and_protection_to_refuse(tmp_path):
    _, head = _renamed_project(tmp_path, keep_namespace=False)
    environment = load_environment(head, "prod")
    tenant = next(t.spec for t in environment.tenants if t.name == "finetune")

    message = rename_message("llm-finetune", tenant, [], True)

    assert "namespace llm-finetune is RETAINED with its workloads and data" in message
    assert "`pulumi up` refuses to replace the protected namespace" in message
    assert "DELETED" not in message  # no object given, none listed
