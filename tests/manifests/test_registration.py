"""The registration plan keeps the product's first promise: removing a tenant that is not
decommissioned deletes nothing, and a decommissioned one goes namespaces first. Unit tests of the
rule tables, then properties over the example tenants of every environment in every lifecycle,
with objects dropped and shuffled."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.load import load_environment
from components.manifests.build import helm_releases, platform_objects, tenant_objects
from components.manifests.gpu_nodes import label_patch, taint_patch
from components.manifests.registration import (
    GUARD_KINDS, LIFECYCLES, PLACES, PLATFORM_PLACES, RELEASE_KEY, ROLES, Place, Planned, kept_on_removal, object_key, place_rule,
    platform_plan, role_of, tenant_plan,
)
from components.manifests.tenant_grant import is_tenant_grant, reads_grant
from components.spec.tenant import Lifecycle
from tests.test_architecture import _lint_planted

SHARDED = Path(__file__).resolve().parents[1] / "fixtures" / "sharded"


# -- what the properties say, as functions that name the offending keys (so a test can show each catches a bad plan)

def deleted_on_removal(plan: tuple[Planned, ...]) -> list[str]:
    """Keys of a kept tenant's plan that removal would delete: neither retained nor deleted with a
    retained entry (following deleted_with to its end). Namespaces must also be protected as the
    stack asks, which `unprotected` checks."""
    by_key = {entry.key: entry for entry in plan}

    def survives(entry: Planned, seen: frozenset[str] = frozenset()) -> bool:
        if entry.retain_on_delete:
            return True
        owner = by_key.get(entry.deleted_with or "")
        return owner is not None and owner.key not in seen and survives(owner, seen | {entry.key})

    return [entry.key for entry in plan if not survives(entry)]


def dangling(plan: tuple[Planned, ...]) -> list[str]:
    """References (deleted_with, depends_on) to a key that is not registered before the entry."""
    earlier: set[str] = set()
    found = []
    for entry in plan:
        found += [f"{entry.key} -> {k}" for k in (*entry.depends_on, *filter(None, [entry.deleted_with])) if k not in earlier]
        earlier.add(entry.key)
    return found


@pytest.fixture(scope="module")
def cases(environments):
    """(spec, objects, releases) of every example tenant in every environment and lifecycle, plus the sharded lab's."""
    found = []
    for environment in [*environments.values(), load_environment(SHARDED, "lab")]:
        for loaded in environment.tenants:
            for lifecycle in LIFECYCLES:
                spec = loaded.spec.model_copy(update={"lifecycle": lifecycle})
                view = environment.view(spec)
                found.append((spec, tenant_objects(spec, view), helm_releases(spec, view)))
    return found


@st.composite
def plan_inputs(draw, cases):
    """A case with some of its objects dropped and the rest shuffled, and a stack's protectNamespaces.
    A Helm release stays only with its Namespace: the vCluster is always in one of the tenant's."""
    spec, objects, releases = draw(st.sampled_from(cases))
    kept = [objects[i] for i in draw(st.lists(st.sampled_from(range(len(objects))), unique=True, max_size=len(objects)))]
    namespaces = {o["metadata"]["name"] for o in kept if o["kind"] == "Namespace"}
    releases = [r for r in releases if r["namespace"] in namespaces and draw(st.booleans())]
    return spec, kept, releases, draw(st.booleans())


# -- the tables

def test_every_lifecycle_of_the_spec_has_a_row_and_only_a_confirmed_decommission_is_deletable():
    assert set(LIFECYCLES) == set(typing.get_args(Lifecycle))
    assert [name for name, rule in LIFECYCLES.items() if not rule.kept] == ["decommissioned"]
    assert kept_on_removal("something new") and kept_on_removal(None)   # unknown: the safe side


def test_each_place_has_exactly_one_rule_for_a_kept_and_for_a_deletable_tenant():
    for place in typing.get_args(Place):
        for kept in (True, False):
            assert len([r for r in PLACES if r.place == place and r.kept in (None, kept)]) == 1, (place, kept)
    assert all(rule.why for rule in PLACES) and all(role.why for role in ROLES)


def test_a_kept_tenant_retains_its_namespaces_and_ties_the_rest_to_one():
    assert (place_rule("namespace", True).retain_on_delete, place_rule("namespace", True).protect) == (True, "stack")
    assert [place_rule(p, True).deleted_with for p in ("outside", "inside", "release")] == [
        "primary namespace", "own namespace", "own namespace"]
    # Namespaces before the objects tied to them; inside a decommissioned tenant, the policies first.
    assert place_rule("namespace", True).phase < place_rule("outside", True).phase
    assert place_rule("outside", False).phase < place_rule("namespace", False).phase


def test_the_roles_put_grants_first_and_bindings_after_them():
    by_name = {role.name: role for role in ROLES}
    assert by_name["grant"].rank < by_name["other"].rank < by_name["binding"].rank == by_name["placement binding"].rank
    assert by_name["binding"].after_grants and not by_name["grant"].after_grants
    assert ROLES[-1].name == "other" and ROLES[-1].matches({}, "x")   # the catch-all is last


# -- one example, spelt out

def test_the_plan_of_prod_eval(prod, tenant_in):
    spec = tenant_in(prod, "eval")
    plan = tenant_plan(spec, tenant_objects(spec, prod.view(spec)), protect_namespaces=True)
    by_key = {entry.key: entry for entry in plan}
    assert plan[0].key == "namespace-eval" and (plan[0].retain_on_delete, plan[0].protect) == (True, True)
    grant, binding = by_key["tenantgrant-eval"], by_key["validatingadmissionpolicybinding-gpu-tenancy-guard-eval"]
    assert (grant.deleted_with, grant.waits_for, grant.provides) == ("namespace-eval", ("admission",), ("taint gates",))
    assert (binding.depends_on, binding.waits_for, binding.provides) == (("tenantgrant-eval",), ("admission",), ())
    assert by_key["validatingadmissionpolicybinding-gpu-tenancy-placement-eval"].provides == ("taint gates",)
    assert by_key["role-eval-tenant-owner"].depends_on == ("namespace-eval",)


def test_a_decommissioned_tenant_goes_namespaces_first(prod, tenant_in):
    spec = tenant_in(prod, "inference").model_copy(update={"lifecycle": "decommissioned"})
    plan = tenant_plan(spec, tenant_objects(spec, prod.view(spec)), protect_namespaces=True)
    outside = [e.key for e in plan if e.place == "outside"]
    namespaces = [e for e in plan if e.place == "namespace"]
    assert [e.key for e in namespaces] == ["namespace-inference", "namespace-inference-canary"]
    assert plan[: len(outside)] == tuple(e for e in plan if e.place == "outside")   # registered first, deleted last
    for entry in namespaces:
        assert (entry.retain_on_delete, entry.protect, entry.depends_on) == (False, False, tuple(outside))


def test_the_release_goes_with_its_namespace_without_aliases(dev, tenant_in):
    spec = tenant_in(dev, "llm-finetune")
    releases = helm_releases(spec, dev.view(spec))
    *_, release = tenant_plan(spec, tenant_objects(spec, dev.view(spec)), releases, protect_namespaces=False)
    assert (release.key, release.place, release.aliased) == (RELEASE_KEY, "release", False)
    assert release.deleted_with == release.depends_on[0] == f"namespace-{releases[0]['namespace']}"


def test_the_property_checks_catch_a_bad_plan():
    namespace = Planned("namespace-a", {}, "namespace", retain_on_delete=True)
    role = Planned("role-a-x", {}, "inside", deleted_with="namespace-a", depends_on=("namespace-a",))
    assert deleted_on_removal((namespace, role)) == [] and dangling((namespace, role)) == []
    assert deleted_on_removal((Planned("namespace-a", {}, "namespace"), role)) == ["namespace-a", "role-a-x"]
    assert dangling((role, namespace)) == ["role-a-x -> namespace-a", "role-a-x -> namespace-a"]


# -- properties

@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_removal_deletes_nothing_unless_decommissioned_and_then_namespaces_first(cases, data):
    spec, objects, releases, protect = data.draw(plan_inputs(cases))
    plan = tenant_plan(spec, objects, releases, protect_namespaces=protect)
    if not kept_on_removal(spec.lifecycle):
        assert not any(e.retain_on_delete or e.protect for e in plan)
        assert all(e.deleted_with is None for e in plan if e.place == "outside")
        outside = {e.key for e in plan if e.place == "outside"}   # deleted after every Namespace (and its pods)
        assert all(outside <= set(e.depends_on) for e in plan if e.place == "namespace")
        return
    namespaces = [e for e in plan if e.place == "namespace"]
    assert all(e.retain_on_delete is True and e.protect is protect for e in namespaces)
    if namespaces:   # without any Namespace nothing holds data; the plan can tie nothing to one
        assert deleted_on_removal(plan) == []
        assert all(e.retain_on_delete is None for e in plan if e.place != "namespace")   # only Namespaces: see PLACES


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_reference_names_an_entry_registered_before(cases, data):
    spec, objects, releases, protect = data.draw(plan_inputs(cases))
    plan = tenant_plan(spec, objects, releases, protect_namespaces=protect)
    assert dangling(plan) == []
    keys = [e.key for e in plan]
    assert sorted(keys) == sorted([object_key(o) for o in objects] + [RELEASE_KEY] * len(releases))
    assert len(set(keys)) == len(keys)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_plan_is_deterministic_and_keeps_input_order_within_a_rank(cases, data):
    spec, objects, releases, protect = data.draw(plan_inputs(cases))
    plan = tenant_plan(spec, objects, releases, protect_namespaces=protect)
    assert plan == tenant_plan(spec, list(objects), list(releases), protect_namespaces=protect)
    kept = kept_on_removal(spec.lifecycle)
    ranks = [(place_rule(e.place, kept).phase, (role_of(e.subject, spec.name) if e.place != "release" else ROLES[-1]).rank)
             for e in plan]
    assert ranks == sorted(ranks)
    position = {id(o): i for i, o in enumerate(objects)}
    for (rank, entry), (next_rank, following) in zip(zip(ranks, plan), zip(ranks[1:], plan[1:])):
        if rank == next_rank and entry.place != "release":
            assert position[id(entry.subject)] < position[id(following.subject)]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_grants_come_before_the_bindings_that_read_them_and_after_the_platforms_guard(cases, data):
    spec, objects, releases, protect = data.draw(plan_inputs(cases))
    plan = tenant_plan(spec, objects, releases, protect_namespaces=protect)
    grants = [e.key for e in plan if e.place != "release" and is_tenant_grant(e.subject)]
    seen: set[str] = set()
    for entry in plan:
        if entry.place != "release" and reads_grant(entry.subject):
            assert set(grants) <= seen and set(grants) <= set(entry.depends_on), entry.key
        if entry.key in grants or (entry.place != "release" and reads_grant(entry.subject)):
            assert entry.waits_for == ("admission",), entry.key
        seen.add(entry.key)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_no_member_gets_access_before_every_guard_of_the_tenant_is_accepted(cases, data):
    # Guards before grants (#40): a policy or binding the API server refuses stops the RoleBindings
    # (and the vCluster's release), so a half-applied tenant is never reachable without its guards.
    spec, objects, releases, protect = data.draw(plan_inputs(cases))
    plan = tenant_plan(spec, objects, releases, protect_namespaces=protect)
    guards = {e.key for e in plan if e.place != "release" and e.subject["kind"] in GUARD_KINDS}
    for entry in plan:
        if entry.place == "release" or entry.subject["kind"] == "RoleBinding":
            assert guards <= set(entry.depends_on), (entry.key, sorted(guards - set(entry.depends_on)))
        if entry.key in guards:
            assert not {e.key for e in plan if e.subject.get("kind") == "RoleBinding"} & set(entry.depends_on), entry.key


def test_the_access_row_catches_a_role_binding_that_skips_a_guard(prod, tenant_in):
    spec = tenant_in(prod, "eval")
    plan = tenant_plan(spec, tenant_objects(spec, prod.view(spec)), protect_namespaces=True)
    owners = next(e for e in plan if e.key == "rolebinding-eval-tenant-owners")
    assert {"validatingadmissionpolicybinding-gpu-tenancy-guard-eval", "validatingadmissionpolicybinding-gpu-tenancy-placement-eval",
            "tenantgrant-eval"} <= set(owners.depends_on), owners.depends_on
    assert "guard" in role_of(owners.subject, "eval").why


# -- the platform

def test_node_taints_come_last_after_the_platform_and_the_tenants_gates(prod):
    objects = platform_objects(prod)
    plan = platform_plan(objects)
    first = [e.key for e in plan if not e.deferred]
    taints = [e for e in plan if e.place == "node taints"]
    assert taints and all(e.depends_on == tuple(first) and e.waits_for == ("taint gates",) for e in taints)
    for entry in (e for e in plan if e.place == "node labels"):
        assert entry.depends_on == (f"{entry.key}-taints",) and entry.deferred
    assert dangling(plan) == [] and sorted(e.key for e in plan) == sorted(object_key(o) for o in objects)
    assert {e.key for e in plan if e.provides == ("admission",)} == {
        "customresourcedefinition-tenantgrants.gpu-tenancy.dev", "validatingadmissionpolicy-gpu-tenancy-guard",
        "validatingadmissionpolicy-gpu-tenancy-placement"}


def test_an_untainted_nodes_label_patch_is_an_ordinary_platform_object():
    (entry,) = platform_plan([label_patch("n1", {"a": "b"})])
    assert (entry.place, entry.deferred, entry.depends_on) == ("platform", False, ())
    assert [e.place for e in platform_plan([label_patch("n1", {}), taint_patch("n1", [])])] == ["node taints", "node labels"]
    assert {rule.place for rule in PLATFORM_PLACES} == {"platform", "node taints", "node labels"}


def test_the_plan_imports_no_pulumi(tmp_path):
    """The rules stay testable without an engine: importing Pulumi here breaks the Pure core contract."""
    result = _lint_planted(tmp_path, "manifests/registration.py", "import pulumi")
    assert result.returncode != 0
    assert "Pure core: only the Pulumi components import Pulumi BROKEN" in result.stdout
    assert "components.manifests.registration -> pulumi" in result.stdout
