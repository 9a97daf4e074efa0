"""API Priority and Fairness objects (components/manifests/api_fairness.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.fleet.tenant_claims import reserved_namespaces
from components.manifests.api_fairness import (PLATFORM_FLOW, TENANT_FLOW, TENANT_LEVEL, api_fairness_objects,
                                               platform_subjects)
from components.manifests.build import platform_objects
from components.spec.stack import Platform

from .kube_schemas import KubeSchemas

# The suggested FlowSchemas of kube-apiserver (v1.37) ours must sit between: those that classify the
# cluster's own components first, and the ones that would otherwise take tenants' writes.
BUILT_IN_FIRST = {"system-nodes": 500, "kube-controller-manager": 800, "kube-scheduler": 800, "kube-system-service-accounts": 900}
BUILT_IN_AFTER = {"service-accounts": 9000, "global-default": 9900}


def by_name(environment):
    return {o["metadata"]["name"]: o for o in api_fairness_objects(environment.facts)}


def test_three_objects_every_stack_renders_on_the_platform(environments):
    for environment in environments.values():
        names = {o["metadata"]["name"] for o in platform_objects(environment) if o["apiVersion"].startswith("flowcontrol.")}
        assert names == {TENANT_LEVEL, PLATFORM_FLOW, TENANT_FLOW}, environment.name


@pytest.mark.parametrize("version", KubeSchemas().versions)
def test_they_validate_strictly_on_every_supported_version(prod, kube_schemas, version):
    assert [e for o in api_fairness_objects(prod.facts) for e in kube_schemas.errors(o, version)] == []


def test_platform_first_then_tenants_between_the_built_in_schemas(prod):
    objects = by_name(prod)
    platform, tenants = (objects[n]["spec"]["matchingPrecedence"] for n in (PLATFORM_FLOW, TENANT_FLOW))
    assert max(BUILT_IN_FIRST.values()) < platform < tenants < min(BUILT_IN_AFTER.values())


def test_tenant_writes_are_queued_per_namespace_in_their_own_level(prod):
    flow = by_name(prod)[TENANT_FLOW]["spec"]
    assert flow["priorityLevelConfiguration"] == {"name": TENANT_LEVEL}
    assert flow["distinguisherMethod"] == {"type": "ByNamespace"}
    [rule] = flow["rules"]
    assert rule["subjects"] == [{"kind": "Group", "group": {"name": "system:authenticated"}}]
    [resources] = rule["resourceRules"]
    assert sorted(resources["verbs"]) == ["create", "delete", "deletecollection", "patch", "update"]
    assert resources["namespaces"] == ["*"] and "clusterScope" not in resources and "nonResourceRules" not in rule


def test_the_schemas_do_not_grow_with_the_fleet(prod):
    """No tenant, group or namespace of a tenant is named: one object each, whatever the fleet's size."""
    text = repr(by_name(prod))
    for loaded in prod.tenants:
        for namespace in loaded.spec.all_namespaces:
            assert f"'{namespace}'" not in text, namespace


def test_the_platforms_own_clients_keep_their_level(prod):
    subjects = platform_subjects(prod.facts)
    namespaces = {s["serviceAccount"]["namespace"] for s in subjects if s["kind"] == "ServiceAccount"}
    platform = prod.platform
    assert {platform.queues.kueue.namespace, platform.gpu_operator.namespace, "kai-scheduler",
            platform.monitoring.namespace} <= namespaces
    assert namespaces == set(reserved_namespaces(platform)) - {"kube-system"}
    assert {"kind": "Group", "group": {"name": platform.platform_admin_group}} in subjects
    tenant_namespaces = {ns for loaded in prod.tenants for ns in loaded.spec.all_namespaces}
    assert not namespaces & tenant_namespaces


def test_listed_deploy_identities_join_the_platform(make_environment):
    environment = make_environment(apiFairness={"platformUsers": ["pulumi-deploy"], "platformGroups": ["ci-deployers"]})
    subjects = platform_subjects(environment.facts)
    assert {"kind": "User", "user": {"name": "pulumi-deploy"}} in subjects
    assert {"kind": "Group", "group": {"name": "ci-deployers"}} in subjects


def test_the_level_takes_the_stacks_settings(make_environment):
    environment = make_environment(apiFairness={"concurrencyShares": 40, "queues": 128, "handSize": 8, "queueLengthLimit": 20})
    limited = by_name(environment)[TENANT_LEVEL]["spec"]["limited"]
    assert limited["nominalConcurrencyShares"] == 40
    assert limited["limitResponse"]["queuing"] == {"handSize": 8, "queueLengthLimit": 20, "queues": 128}


def test_off_renders_nothing(make_environment):
    assert api_fairness_objects(make_environment(apiFairness={"enabled": False}).facts) == []


def test_a_hand_larger_than_the_queues_is_refused_with_the_fix():
    with pytest.raises(ValidationError) as err:
        Platform.model_validate({"labelDomain": "g.dev", "apiFairness": {"queues": 4, "handSize": 6}})
    assert "handSize 6 is more than queues 4" in str(err.value) and "lower handSize or raise queues" in str(err.value)
