"""PriorityClasses built from the stack's `priorityClasses`."""

from __future__ import annotations

from dataclasses import replace

from components.manifests.priority_classes import priority_classes
from components.spec.stack import PriorityClassSpec


def test_one_class_per_entry_with_every_field(prod):
    objects = {o["metadata"]["name"]: o for o in priority_classes(prod.facts)}
    assert sorted(objects) == ["batch", "interactive", "online-inference", "training"]
    assert objects["interactive"] == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": "interactive",
            "labels": {"app.kubernetes.io/managed-by": "gpu-tenancy", "gpu-tenancy.dev/environment": "prod"},
        },
        "value": 40000,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": "Notebooks and interactive sessions; never preempt others.",
    }
    assert [name for name, o in objects.items() if o["globalDefault"]] == ["batch"]
    assert objects["online-inference"]["value"] > objects["training"]["value"] > objects["batch"]["value"]


def test_stack_classes_are_rendered_as_given(prod):
    platform = prod.platform.model_copy(
        update={"priority_classes": {"urgent": PriorityClassSpec(value=900, description="Urgent work.")}}
    )
    objects = priority_classes(replace(prod, platform=platform).facts)
    assert [(o["metadata"]["name"], o["value"], o["preemptionPolicy"]) for o in objects] == [
        ("urgent", 900, "PreemptLowerPriority")
    ]
