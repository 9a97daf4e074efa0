"""Role bundles: named sets of RBAC rules that a tenant adds to one of its roles.

The three tenant roles cover core Kubernetes workloads. Teams also run Kubeflow notebooks and
pipelines, Ray clusters, KServe inference services, LeaderWorkerSets, PodDisruptionBudgets and
their own controllers' leases: the stack offers such rules as bundles (`roleBundles`, on top of the
shipped ones below) and a tenant opts in per role (`access.developers.bundles: [ray]`). Viewers
get the read verbs of a bundle only.

A bundle never grants what the escalation guard rails forbid: RBAC objects, ResourceQuota,
LimitRange, NetworkPolicy, namespace writes, scheduler queues, admission and API registration,
ServiceAccount tokens, pod bindings and ephemeral containers, wildcards, and the verbs escalate,
bind, impersonate (and approve, sign, use): `components.validate.role_bundles` refuses such a rule
at its line.
"""

from __future__ import annotations

import functools
from typing import Annotated

from pydantic import Field

from .base import Model

READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = (*READ_VERBS, "create", "update", "patch", "delete", "deletecollection")


class BundleRule(Model):
    """One RBAC PolicyRule of a bundle (a namespaced Role rule: no resourceNames, no URLs)."""

    api_groups: list[Annotated[str, Field(max_length=253)]] = Field(min_length=1, description="API groups, e.g. [ray.io]; \"\" is the core group")
    resources: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(min_length=1, description="resources (plural, lower case), optionally with a subresource, e.g. rayclusters, leaderworkersets/scale")
    verbs: list[Annotated[str, Field(min_length=1, max_length=63)]] = Field(min_length=1, description="verbs, e.g. [get, list, watch, create, update, patch, delete]; no '*'")


class RoleBundle(Model):
    """Rules a tenant may add to a role by naming the bundle under `access.<role>.bundles`."""

    description: str = Field(min_length=1, description="what the bundle is for, for the tenants that choose it")
    rules: list[BundleRule] = Field(min_length=1, description="RBAC rules; checked against the escalation guard rails")


def _write(group: str, *resources: str, extra: tuple[str, ...] = ()) -> dict:
    return {"apiGroups": [group], "resources": list(resources), "verbs": [*WRITE_VERBS, *extra]}


# Shipped bundles: the API groups and resources of each project's CRDs.
SHIPPED_BUNDLES: dict[str, dict] = {
    "kubeflow-notebooks": {
        "description": "Kubeflow Notebooks (Jupyter servers) and the PodDefaults they select (kubeflow.org).",
        "rules": [_write("kubeflow.org", "notebooks", "poddefaults")],
    },
    "kubeflow-pipelines": {
        "description": "Kubeflow Pipelines: pipelines, versions, experiments, runs and recurring runs "
        "(pipelines.kubeflow.org, with the API server's own verbs), ScheduledWorkflows and the Argo Workflows they run.",
        "rules": [
            _write("pipelines.kubeflow.org", "experiments", "jobs", "pipelines", "pipelines/versions", "pipelineversions", "recurringruns", "runs"),
            {"apiGroups": ["pipelines.kubeflow.org"], "resources": ["experiments", "jobs", "recurringruns", "runs"],
             "verbs": ["archive", "disable", "enable", "readArtifact", "reportMetrics", "retry", "terminate", "unarchive"]},
            _write("kubeflow.org", "scheduledworkflows"),
            _write("argoproj.io", "workflows"),
        ],
    },
    "ray": {
        "description": "KubeRay: RayClusters, RayJobs and RayServices (ray.io).",
        "rules": [_write("ray.io", "rayclusters", "rayjobs", "rayservices")],
    },
    "kserve": {
        "description": "KServe model serving: InferenceServices, InferenceGraphs, ServingRuntimes and TrainedModels (serving.kserve.io).",
        "rules": [_write("serving.kserve.io", "inferencegraphs", "inferenceservices", "servingruntimes", "trainedmodels")],
    },
    "leaderworkersets": {
        "description": "LeaderWorkerSets for multi-node inference (leaderworkerset.x-k8s.io), with scaling.",
        "rules": [
            _write("leaderworkerset.x-k8s.io", "leaderworkersets"),
            {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets/scale"], "verbs": ["get", "patch", "update"]},
        ],
    },
    "pod-disruption-budgets": {
        "description": "PodDisruptionBudgets for serving teams (policy). One that allows no disruption blocks "
        "draining its nodes: grant it to teams that keep spare replicas.",
        "rules": [_write("policy", "poddisruptionbudgets")],
    },
    "leases": {
        "description": "Leases for leader election of the team's own controllers and operators (coordination.k8s.io).",
        "rules": [_write("coordination.k8s.io", "leases")],
    },
}


@functools.lru_cache(maxsize=1)
def shipped_bundles() -> dict[str, RoleBundle]:
    """The shipped bundles as models.

    >>> sorted(shipped_bundles())[:2]
    ['kserve', 'kubeflow-notebooks']
    """
    return {name: RoleBundle.model_validate(data) for name, data in SHIPPED_BUNDLES.items()}


def effective_bundles(platform) -> dict[str, RoleBundle]:
    """The bundles a stack offers: the shipped ones, then its `roleBundles` (adding or replacing by name)."""
    return {**shipped_bundles(), **platform.role_bundles}
