from __future__ import annotations

import copy
from dataclasses import FrozenInstanceError, fields, replace
from pathlib import Path

import pytest

from tools.synthetic import write_project
from components.fleet import feasibility as feas
from components.fleet import gpu_capacity as cap
from components.fleet.budget import effective_limits
from components.fleet.environment import Environment
from components.fleet.facts import VIEW_FIELDS, TenantView, lendable_on_pools
from components.load import load_environment
from components.fleet.queue_arithmetic import kai_amounts, queue_group
from components.manifests.build import environment_objects

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def examples():
    return {name: load_environment(REPO, name) for name in ("prod", "staging", "dev")}


def _lent_by_walking(environment, tenant) -> dict:
    """What every other member of the tenant's queue group lends on its pools, one member at a time
    (the rule as first written: a walk of the fleet per tenant)."""
    platform = environment.platform
    group = queue_group(tenant, platform)
    if group is None:
        return {}
    owners = feas.pool_owners([(t.name, t.spec) for t in environment.tenants], platform)
    reach = set(feas.reachable_pools(tenant.name, tenant, platform, owners))
    split = feas.split_of(feas.feasibility(
        [(t.name, t.spec) for t in environment.tenants if t.spec.lifecycle != "decommissioned"], platform, owners))
    totals: dict = {}
    for member in environment.tenants:
        if member.name == tenant.name or member.spec.lifecycle == "decommissioned":
            continue
        if queue_group(member.spec, platform) != group:
            continue
        for commodity, by_pool in lendable_on_pools(member.spec, platform, split.get(member.name, {})).items():
            units = sum(n for p, n in by_pool.items() if p in reach)
            if units:
                totals[commodity] = totals.get(commodity, 0) + units
    return totals


def _cohort_fleet(tmp_path: Path, scheduler: str):
    """A synthetic fleet whose tenants share two cohorts, one with a lending limit per tenant."""
    root = write_project(tmp_path / scheduler, 12, scheduler=scheduler)
    for index, path in enumerate(sorted((root / "tenants").glob("*.yaml"))):
        queue = f"queue:\n  cohort: {'even' if index % 2 == 0 else 'odd'}\n"
        if scheduler == "kueue" and index % 3 == 0:
            queue += "  lendingLimit: {h100: 1}\n"
        path.write_text(path.read_text() + queue)
    return load_environment(root, "bench")


def test_dedicated_owners_skip_decommissioned_tenants(examples):
    prod = examples["prod"]
    assert dict(prod.facts.pool_owners) == {"h100-serve": "inference", "h100-train": "llm-finetune"}
    environment = replace(prod, tenants=[
        replace(t, spec=t.spec.model_copy(update={"lifecycle": "decommissioned"})) if t.name == "inference" else t
        for t in prod.tenants
    ])
    assert dict(environment.facts.pool_owners) == {"h100-train": "llm-finetune"}


@pytest.mark.parametrize("scheduler", ["kueue", "kai"])
def test_what_a_group_lends_a_tenant_is_the_sum_a_walk_of_its_members_finds(tmp_path, scheduler):
    environment = _cohort_fleet(tmp_path, scheduler)
    lent = {loaded.name: environment.facts.lent_to(loaded.spec) for loaded in environment.tenants}
    assert lent == {loaded.name: _lent_by_walking(environment, loaded.spec) for loaded in environment.tenants}
    assert all(lent.values()), "every tenant has cohort members that lend, so the comparison means something"
    for loaded in environment.tenants:
        by_member = environment.facts.lenders(loaded.spec)
        summed: dict = {}
        for units in by_member.values():
            for commodity, n in units.items():
                summed[commodity] = summed.get(commodity, 0) + n
        assert summed == lent[loaded.name]


def test_the_example_stacks_lend_as_the_walk_does(examples):
    for environment in examples.values():
        for loaded in environment.tenants:
            assert environment.facts.lent_to(loaded.spec) == _lent_by_walking(environment, loaded.spec)


def test_facts_are_made_once_and_anew_when_the_fleet_is_replaced(examples):
    prod = examples["prod"]
    assert prod.facts is prod.facts
    fewer = replace(prod, tenants=prod.tenants[1:])
    assert prod.tenants[0].name not in fewer.facts.specs
    copied = copy.deepcopy(prod)
    assert copied.facts is not prod.facts
    assert copied.view(copied.tenants[0].spec) == prod.view(prod.tenants[0].spec)


def test_a_view_changes_with_what_its_tenant_reads_of_the_fleet_and_nothing_else(examples):
    prod = examples["prod"]
    finetune = next(t.spec for t in prod.tenants if t.name == "llm-finetune")
    before = prod.view(finetune)

    def with_eval(update):   # eval admits llm-finetune: its ports are in llm-finetune's egress
        return replace(prod, tenants=[
            replace(t, spec=t.spec.model_copy(update=update(t.spec))) if t.name == "eval" else t for t in prod.tenants
        ])

    narrowed = with_eval(lambda spec: {"network": spec.network.model_copy(update={
        "ingress_from": spec.network.ingress_from.model_copy(update={"ports": []})})})
    assert [name for name, _, _ in before.accepting] == ["eval"]
    assert narrowed.view(finetune) != before
    assert with_eval(lambda spec: {"display_name": "Renamed"}).view(finetune) == before


@pytest.mark.parametrize("name", ["prod", "staging", "dev"])
def test_capacity_is_worked_out_once_per_environment_build(examples, monkeypatch, name):
    # Building prod's three tenants worked it out 10 times (and gpu_quota_by_class 31 times) while
    # every builder recomputed its tenant's numbers: now the facts hold it, the views read it.
    loaded = examples[name]
    before = environment_objects(loaded)
    calls = []
    real = cap.capacity
    monkeypatch.setattr(cap, "capacity", lambda platform: calls.append(platform) or real(platform))
    built = Environment(loaded.name, loaded.platform, loaded.platform_doc, loaded.tenants)   # built anew
    assert built.facts is not loaded.facts
    assert environment_objects(built) == before
    assert calls == [built.platform]
    environment_objects(built)
    assert len(calls) == 1      # building again reads the same facts


def test_a_view_answers_with_the_tenants_own_numbers(examples):
    prod = examples["prod"]
    for loaded in prod.tenants:
        spec, view = loaded.spec, prod.view(loaded.spec)
        assert view is prod.view(spec)          # a member's view is made once
        assert view.allowed_classes == tuple(cap.allowed_classes(spec, prod.platform))
        assert dict(view.gpu_quota_by_class) == cap.gpu_quota_by_class(spec, prod.platform)
        assert dict(view.gpu_quota_by_resource) == cap.gpu_quota_by_resource(spec, prod.platform)
        assert view.kai_quota == kai_amounts(spec, prod.platform)
        assert view.effective_limits == effective_limits(spec, prod.platform)
    with pytest.raises(TypeError):
        prod.view(prod.tenants[0].spec).gpu_quota_by_class["a100"] = 1   # read-only
    eval_ = prod.tenants[0].spec
    other = eval_.model_copy(update={"quota": eval_.quota.model_copy(update={"gpu": {"a100": 4}})})
    assert dict(prod.view(other).gpu_quota_by_class) == {"a100": 4}   # not a member's spec: its own view


def test_an_environment_keeps_its_facts_only_while_made_of_the_same_parts(examples):
    prod = examples["prod"]
    assert replace(prod, warnings=[]).facts is prod.facts
    assert replace(prod, tenants=list(prod.tenants)).facts is prod.facts    # the same specs, in order
    assert replace(prod, tenants=prod.tenants[::-1]).facts is not prod.facts
    renamed = replace(prod.tenants[0], spec=prod.tenants[0].spec.model_copy(update={"display_name": "E"}))
    assert replace(prod, tenants=[renamed, *prod.tenants[1:]]).facts is not prod.facts
    assert replace(prod, platform=prod.platform.model_copy()).facts is not prod.facts
    with pytest.raises(FrozenInstanceError):
        prod.tenants = []


def test_every_view_field_says_what_it_is_made_of():
    assert list(VIEW_FIELDS) == [f.name for f in fields(TenantView)]
    assert set(VIEW_FIELDS.values()) == {"spec", "platform", "fleet"}


def _fleet_edits(prod) -> dict:
    """prod with one other tenant's part of the fleet changed, each a way a view can change."""
    def edit(name, update):
        return replace(prod, tenants=[replace(t, spec=t.spec.model_copy(update=update(t.spec))) if t.name == name else t
                                      for t in prod.tenants])

    network = lambda spec, **kw: {"network": spec.network.model_copy(update={  # noqa: E731
        "ingress_from": spec.network.ingress_from.model_copy(update=kw)})}
    return {
        "ports narrowed": edit("eval", lambda spec: network(spec, ports=[])),
        "grant withdrawn": edit("eval", lambda spec: network(spec, tenants=[])),
        "namespace added": edit("llm-finetune", lambda spec: {"namespaces": [*spec.namespaces, "llm-finetune-extra"]}),
        "pool no longer dedicated": edit("inference", lambda spec: {"gpu": spec.gpu.model_copy(update={"dedicated_pools": []})}),
        "quota moved": edit("llm-finetune", lambda spec: {"quota": spec.quota.model_copy(update={"gpu": {"h100": 8}})}),
        "renamed only": edit("eval", lambda spec: {"display_name": "Renamed"}),
        "other label": replace(prod, platform=prod.platform.model_copy(update={"environment": "prod-b"})),
    }


def test_equal_fleet_inputs_are_exactly_equal_views(examples):
    # What `tenants diff` relies on to skip an unchanged tenant without making its two views: for
    # one spec under one platform, the fleet inputs agree exactly when the views do.
    prod = examples["prod"]
    moved = set()
    for what, other in _fleet_edits(prod).items():
        for loaded in prod.tenants:
            spec = next((t.spec for t in other.tenants if t.name == loaded.name and t.spec is loaded.spec), None)
            if spec is None:
                continue   # the edited tenant itself: its spec differs, it is built
            same_inputs = prod.facts.fleet_inputs(spec) == other.facts.fleet_inputs(spec)
            a, b = prod.view(spec), other.view(spec)
            same_view = all(getattr(a, f) == getattr(b, f) for f in VIEW_FIELDS if f != "platform")
            assert same_inputs == same_view, (what, loaded.name)
            for field, made_of in VIEW_FIELDS.items():
                if made_of != "fleet" and field != "platform":
                    assert getattr(a, field) == getattr(b, field), (what, loaded.name, field)
            if not same_view:
                moved.add(what)
    # Each edit reaches some other tenant's view (else the test proves nothing of it) but the rename
    # and the quota: prod's pools hold every quota with room, so no other tenant's split moves.
    assert moved == set(_fleet_edits(prod)) - {"renamed only", "quota moved"}, moved
