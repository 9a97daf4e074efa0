"""PriorityClasses of the environment: who preempts whom when GPUs run out.

Tenants may only use a class within the caps of their PriorityClass-scoped quotas (built with the
quotas); the classes themselves are cluster-wide.
"""

from __future__ import annotations

from ..fleet.facts import FleetFacts
from .meta import KubeObject, kube_object, object_meta, platform_labels


def priority_classes(facts: FleetFacts) -> list[KubeObject]:
    """One `scheduling.k8s.io/v1` PriorityClass per entry of the stack's `priorityClasses`, by name.

    >>> [(o["metadata"]["name"], o["value"]) for o in priority_classes(prod.facts)][:1]   # doctest: +SKIP
    [('batch', 10000)]
    """
    objects = []
    for name, spec in sorted(facts.platform.priority_classes.items()):
        objects.append(
            kube_object(
                "scheduling.k8s.io/v1",
                "PriorityClass",
                object_meta(name, labels=platform_labels(facts.environment_label)),
                value=spec.value,
                globalDefault=spec.global_default,
                preemptionPolicy=spec.preemption_policy,
                description=spec.description,
            )
        )
    return objects
