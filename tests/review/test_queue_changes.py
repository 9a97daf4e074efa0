"""Whether a change moves the queues (`components.review.queue_changes`): the diff of the example prod
stack after one edit is sorted into quotas, pools, cohorts and queue settings, and a change of none of
them (access, contacts) asks for no simulation, which the PR workflow then skips with one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components import load_environment
from components.review.diff import Side, compare_stack, report
from components.review.queue_changes import SKIPPED, change_classes, object_classes, simulations

REPO = Path(__file__).resolve().parents[2]


def _diff(tmp_path: Path, path: str, old: str, new: str) -> dict:
    """The diff document of prod with `old` replaced by `new` in `path` on the head side."""
    roots = []
    for side in ("base", "head"):
        for part in ("tenants", "stacks"):
            shutil.copytree(REPO / part, tmp_path / side / part)
        roots.append(tmp_path / side)
    target = roots[1] / path
    text = target.read_text()
    assert text.count(old) == 1, old
    target.write_text(text.replace(old, new))
    stack = compare_stack("prod", *(Side(load_environment(root, "prod")) for root in roots))
    return report([stack], {"ref": "HEAD", "commit": "0" * 40})


EVAL_PROD = "  prod:\n    quota:\n      gpu: {a100: 20}\n"


@pytest.mark.parametrize(("path", "old", "new", "classes"), [
    ("tenants/eval.yaml", "gpu: {a100: 20}", "gpu: {a100: 8}", ["quotas"]),
    ("stacks/Pulumi.prod.yaml", "nodes: [gpu-a100-01, gpu-a100-02]", "nodes: [gpu-a100-01, gpu-a100-02, gpu-a100-05]", ["pools"]),
    # joining a cohort raises the namespace's ResourceQuota by what it may borrow: its quota moves too
    ("tenants/eval.yaml", EVAL_PROD, "  prod:\n    queue: {cohort: research}\n    quota:\n      gpu: {a100: 20}\n", ["quotas", "cohorts"]),
    ("tenants/eval.yaml", EVAL_PROD, "  prod:\n    queue: {weight: 3}\n    quota:\n      gpu: {a100: 20}\n", ["queues"]),
])
def test_a_change_is_sorted_into_the_classes_that_move_the_queues(tmp_path, path, old, new, classes):
    document = _diff(tmp_path, path, old, new)
    assert change_classes(document["stacks"][0]) == classes
    assert simulations(document) == [{"environment": "prod", "changes": classes}]


def test_access_and_contacts_move_no_queue_and_are_skipped(tmp_path):
    document = _diff(tmp_path, "tenants/eval.yaml", "    users: [contractor-jo@acme.dev]\n",
                     "    users: [contractor-jo@acme.dev, intern-al@acme.dev]\n")
    assert document["changed"] is True       # the change is real: a RoleBinding changes
    assert change_classes(document["stacks"][0]) == [] and simulations(document) == []
    assert SKIPPED.startswith("Queue simulation skipped: this change touches no quotas, pools, cohorts or queue settings")


def test_nothing_changed_nothing_simulated(tmp_path):
    document = _diff(tmp_path, "tenants/eval.yaml", "description: Runs", "description: Runs")
    assert simulations(document) == []


def _change(kind: str, change: str = "changed", *paths: str) -> dict:
    return {"id": kind, "kind": kind, "namespace": None, "name": "x", "change": change,
            "fields": [{"path": p, "from": 1, "to": 2} for p in paths]}


@pytest.mark.parametrize(("change", "classes"), [
    (_change("ClusterQueue", "changed", "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota"), {"quotas"}),
    (_change("ClusterQueue", "changed", "spec.cohortName"), {"cohorts"}),
    (_change("ClusterQueue", "changed", "spec.fairSharing.weight", "spec.queueingStrategy"), {"queues"}),
    (_change("ClusterQueue", "added"), {"quotas", "queues"}),
    (_change("Cohort", "added"), {"cohorts"}),
    (_change("ResourceFlavor", "changed", "spec.nodeLabels"), {"pools"}),
    (_change("LocalQueue", "removed"), {"queues"}),
    (_change("ResourceQuota", "changed", "spec.hard.requests.nvidia.com/gpu"), {"quotas"}),
    (_change("NetworkPolicy", "changed", "spec.egress"), set()),
    (_change("RoleBinding", "added"), set()),
])
def test_each_object_kind_has_its_class(change, classes):
    assert object_classes(change) == classes
