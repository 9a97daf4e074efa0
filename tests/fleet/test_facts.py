from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from tools.synthetic import write_project
from components.fleet import feasibility as feas
from components.fleet.facts import lendable_on_pools
from components.load import load_environment
from components.fleet.queue_arithmetic import queue_group

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
