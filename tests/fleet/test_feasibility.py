"""Capacity as a feasibility check: quotas must fit together on the pools each tenant may reach.

The max-flow answer is cross-checked two ways on small generated inventories: against Hall's
condition over every subset of tenants (abstract graphs), and against a brute-force enumeration
of every way to place each tenant's quota on the pools the placement policy lets it use (whole
environments built from the models).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.manifests.placement_policy import placement
from components.fleet import gpu_capacity as cap
from components.fleet import feasibility as feas
from components.fleet.environment import Environment, LoadedTenant
from components.load import load_environment
from components.spec.stack import Platform
from components.spec.tenant import Tenant
from tests.e2e.scheduling.borrowing import shrink_mig_east, write_spare_project
from tests.fleet.reference_flow import reference_max_flow
from tests.project_edits import line_of, replace_once, validation_errors

REPO = Path(__file__).resolve().parents[2]


# --- the abstract flow -------------------------------------------------------------------------


@st.composite
def graphs(draw):
    tenants = [f"t{i}" for i in range(draw(st.integers(1, 5)))]
    pools = [f"p{i}" for i in range(draw(st.integers(1, 4)))]
    demand = {t: draw(st.integers(0, 12)) for t in tenants}
    edges = {t: sorted(draw(st.sets(st.sampled_from(pools)))) for t in tenants}
    limit = {p: draw(st.integers(0, 10)) for p in pools}
    return demand, edges, limit


def _hall_violators(demand, edges, limit) -> list[tuple[str, ...]]:
    out = []
    for size in range(1, len(demand) + 1):
        for subset in itertools.combinations(sorted(demand), size):
            if feas.hall_violated(subset, demand, edges, limit):
                out.append(subset)
    return out


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_max_flow_meets_every_quota_exactly_when_halls_condition_holds(graph):
    demand, edges, limit = graph
    flow, reached = feas.max_flow(demand, edges, limit)
    violators = _hall_violators(demand, edges, limit)
    # flows are a valid placement: only reachable pools, never above a pool or a quota
    for t, by_pool in flow.items():
        assert set(by_pool) <= set(edges[t]) and all(n > 0 for n in by_pool.values())
        assert sum(by_pool.values()) <= demand[t]
    for p in limit:
        assert sum(by_pool.get(p, 0) for by_pool in flow.values()) <= limit[p]
    feasible = all(sum(flow[t].values()) == demand[t] for t in demand)
    assert feasible == (not violators) == (not reached)
    if reached:
        smallest = feas.minimal_violators(reached, demand, edges, limit)
        assert feas.hall_violated(smallest, demand, edges, limit)
        for t in smallest:   # inclusion-minimal: no tenant can be dropped
            rest = [x for x in smallest if x != t]
            assert not rest or not feas.hall_violated(rest, demand, edges, limit)


@st.composite
def larger_graphs(draw):
    """Fleets of up to 40 tenants, in any order, some pools full: long augmenting paths."""
    pools = [f"p{i}" for i in range(draw(st.integers(1, 6)))]
    names = draw(st.lists(st.sampled_from([f"t{i:02d}" for i in range(40)]), unique=True, max_size=40))
    demand = {t: draw(st.integers(0, 8)) for t in names}
    edges = {t: draw(st.lists(st.sampled_from(pools), unique=True)) for t in names}
    limit = {p: draw(st.integers(0, 40)) for p in pools}
    return demand, edges, limit


@settings(max_examples=300, deadline=None)
@given(st.one_of(graphs(), larger_graphs()))
def test_the_flow_is_exactly_the_plain_edmonds_karp_split(graph):
    """The split becomes deployed per-pool quotas: a faster search must not move a single unit."""
    assert feas.max_flow(*graph) == reference_max_flow(*graph)


def test_the_flow_is_deterministic():
    graph = ({"a": 5, "b": 5, "c": 2}, {"a": ["p", "q"], "b": ["q"], "c": ["p"]}, {"p": 7, "q": 5})
    assert feas.max_flow(*graph) == feas.max_flow(*graph)
    assert feas.max_flow(*graph)[0] == {"a": {"p": 5}, "b": {"q": 5}, "c": {"p": 2}}


# --- whole environments against brute force ----------------------------------------------------

LABEL = "gpu.example.com"
CLASSES = {
    "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
    "a100": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "overcommit": 1.5},
}


@st.composite
def inventories(draw) -> Environment:
    pools = {}
    for i in range(draw(st.integers(1, 3))):
        pools[f"pool{i}"] = {"gpuClass": draw(st.sampled_from(sorted(CLASSES))),
                             "gpusPerNode": draw(st.integers(1, 3)), "nodes": [f"n{i}"]}
    platform = Platform.model_validate({"labelDomain": LABEL, "gpuClasses": CLASSES, "nodePools": pools})
    names = [f"team{i}" for i in range(draw(st.integers(1, 3)))]
    free = sorted(pools)
    tenants = []
    for name in names:
        dedicated = sorted(draw(st.sets(st.sampled_from(free), max_size=1))) if free else []
        free = [p for p in free if p not in dedicated]
        classes = sorted(draw(st.sets(st.sampled_from(sorted(CLASSES)))))
        allowed = set(classes) | {pools[p]["gpuClass"] for p in dedicated}
        quota = {c: draw(st.integers(0, 4)) for c in sorted(allowed)}
        tenants.append(Tenant.model_validate({
            "apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": name, "displayName": name,
            "costCenter": "cc-1", "gpu": {"classes": classes, "dedicatedPools": dedicated}, "quota": {"gpu": quota}}))
    return Environment("lab", platform, None, [LoadedTenant(t, None) for t in tenants])


def _placements(demand: int, pools: list[str]):
    """Every way to put `demand` units on `pools` (compositions)."""
    if not pools:
        if demand == 0:
            yield {}
        return
    first, rest = pools[0], pools[1:]
    for n in range(demand + 1):
        for tail in _placements(demand - n, rest):
            yield {first: n, **tail} if n else tail


def _brute_force_fits(environment: Environment, gpu_class: str) -> bool:
    platform = environment.platform
    limits = {}
    for name, pool in platform.node_pools.items():
        if pool.gpu_class == gpu_class:
            units = pool.node_count * pool.gpus_per_node
            limits[name] = int(units * platform.gpu_classes[gpu_class].overcommit)
    choices = []
    for loaded in environment.tenants:
        want = cap.gpu_quota_by_class(loaded.spec, platform).get(gpu_class, 0)
        reach = [p for p in placement(loaded.spec, environment.view(loaded.spec)).pools if p in limits]   # what the policy enforces
        choices.append(list(_placements(want, reach)))
    for combo in itertools.product(*choices):
        used = {p: 0 for p in limits}
        for by_pool in combo:
            for p, n in by_pool.items():
                used[p] += n
        if all(used[p] <= limits[p] for p in limits):
            return True
    return False


@settings(max_examples=60, deadline=None)
@given(inventories())
def test_feasibility_agrees_with_brute_force_placement(environment):
    results = feas.feasibility([(t.name, t.spec) for t in environment.tenants], environment.platform)
    for gpu_class in CLASSES:
        result = results.get(("class", gpu_class))
        feasible = result is None or result.feasible
        assert feasible == _brute_force_fits(environment, gpu_class)


# --- validation ----------------------------------------------------------------------------------

SHARED_H100 = """      h100-shared:
        gpuClass: h100
        gpusPerNode: 8
        nodes: [gpu-h100-09]
"""


def _prod_with_a_shared_h100_pool(root: Path) -> None:
    stack = root / "stacks" / "Pulumi.prod.yaml"
    replace_once(stack, "      a100-shared:\n", SHARED_H100 + "      a100-shared:\n")


def test_an_over_promised_shared_pool_is_an_error_on_the_tenants_quota_line(project_copy):
    """72 H100s in the class and 66 promised (the old per-class check: a warning at 92%), but
    eval may only use the 8 of the shared pool: dedicated GPUs are capacity for their owner only."""
    _prod_with_a_shared_h100_pool(project_copy)
    eval_file = project_copy / "tenants" / "eval.yaml"
    replace_once(eval_file, "      gpu: {a100: 20}\n      mig: {1g.10gb: 48, 3g.40gb: 16}\n    gpu:\n      classes: [a100, a100-mig]",
                 "      gpu: {a100: 20, h100: 10}\n      mig: {1g.10gb: 48, 3g.40gb: 16}\n    gpu:\n      classes: [a100, a100-mig, h100]")
    replace_once(project_copy / "tenants" / "llm-finetune.yaml", "  gpu: 40\n", "  gpu: 32\n")
    line = line_of(eval_file, "gpu: {a100: 20, h100: 10}")
    errors = validation_errors(project_copy, "prod")
    assert errors == [
        f"tenants/eval.yaml:{line}:23: environments.prod.quota.gpu.h100: GPU class 'h100' is over-promised: tenant eval: 10 asks for 10 "
        "on the pools it may use (h100-shared: 8), which hold 8; lower a quota, add nodes to these pools "
        f"(h100-shared: stacks/Pulumi.prod.yaml:{line_of(project_copy / 'stacks' / 'Pulumi.prod.yaml', 'h100-shared:')}) "
        "or raise overcommit (stack prod)"
    ]


def test_the_error_names_every_tenant_of_a_minimal_over_promised_set(project_copy):
    _prod_with_a_shared_h100_pool(project_copy)
    eval_file, inference_file = project_copy / "tenants" / "eval.yaml", project_copy / "tenants" / "inference.yaml"
    replace_once(eval_file, "      gpu: {a100: 20}\n      mig: {1g.10gb: 48, 3g.40gb: 16}\n    gpu:\n      classes: [a100, a100-mig]",
                 "      gpu: {a100: 20, h100: 5}\n      mig: {1g.10gb: 48, 3g.40gb: 16}\n    gpu:\n      classes: [a100, a100-mig, h100]")
    # inference may use the shared pool too, and asks for 4 more than its dedicated pool holds
    replace_once(inference_file, "  gpu: 24\n", "  gpu: 28\n")
    replace_once(inference_file, "  dedicatedPools: [h100-serve]\n", "  dedicatedPools: [h100-serve]\n  classes: [h100]\n")
    errors = validation_errors(project_copy, "prod")
    message = ("GPU class 'h100' is over-promised: tenants eval: 5, inference: 28 ask for 33 on the pools they may use "
               "(h100-serve: 24, h100-shared: 8), which hold 32")
    assert [e.split(": ", 1)[0].split(":")[0] for e in errors if message in e] == ["tenants/eval.yaml", "tenants/inference.yaml"]


@pytest.mark.parametrize("stack", ["dev", "prod", "staging"])
def test_every_example_stack_is_feasible(stack):
    environment = load_environment(REPO, stack)
    active = [(t.name, t.spec) for t in environment.tenants if t.spec.lifecycle == "active"]
    assert all(r.feasible for r in feas.feasibility(active, environment.platform).values())


def test_near_full_pools_warn_per_pool_not_per_class():
    warnings = [str(p) for p in load_environment(REPO, "prod").warnings]
    assert any("nodePools.a100-shared" in w and "100% of what it holds" in w for w in warnings)
    assert not any("% of capacity 64" in w for w in warnings)   # the old per-class figure counted others' pools


# --- the stable split --------------------------------------------------------------------------


def _uncontended(demand, order, limit) -> bool:
    preferred = feas.preferred_placement(demand, order, limit)
    return all(sum(by_pool.get(p, 0) for by_pool in preferred.values()) <= limit[p] for p in limit)


def _split(demand, order, limit) -> dict:
    return feas.solve(("class", "x"), demand, order, limit, limit).flow


@st.composite
def preference_graphs(draw):
    """Tenants with their pools in an order of preference (not sorted), pools of any capacity."""
    pools = [f"p{i}" for i in range(draw(st.integers(1, 5)))]
    tenants = [f"t{i}" for i in range(draw(st.integers(1, 6)))]
    demand = {t: draw(st.integers(0, 12)) for t in tenants}
    order = {t: draw(st.lists(st.sampled_from(pools), unique=True)) for t in tenants}
    limit = {p: draw(st.integers(0, 30)) for p in pools}
    return demand, order, limit


@settings(max_examples=300, deadline=None)
@given(preference_graphs(), st.data())
def test_a_change_to_one_tenant_moves_no_other_tenant_unless_a_pool_is_contended(graph, data):
    demand, order, limit = graph
    tenant = data.draw(st.sampled_from(sorted(demand)))
    changed = {**demand, tenant: data.draw(st.integers(0, 12))}
    before, after = _split(demand, order, limit), _split(changed, order, limit)
    if _uncontended(demand, order, limit) and _uncontended(changed, order, limit):
        # each tenant gets exactly its preferred placement, which depends on itself and its pools only
        assert before == {t: {p: n for p, n in by.items() if n} for t, by in feas.preferred_placement(demand, order, limit).items()}
        assert {t: f for t, f in before.items() if t != tenant} == {t: f for t, f in after.items() if t != tenant}
    # and whatever happens, the split is a valid placement of as much as the plain flow places
    plain, _ = feas.max_flow(changed, order, limit)
    assert sum(map(sum, (f.values() for f in after.values()))) == sum(map(sum, (f.values() for f in plain.values())))
    for p in limit:
        assert sum(f.get(p, 0) for f in after.values()) <= limit[p]
    for t, f in after.items():
        assert set(f) <= set(order[t]) and sum(f.values()) <= changed[t]


@settings(max_examples=300, deadline=None)
@given(preference_graphs(), st.integers(0, 30), st.data())
def test_a_pool_appended_to_the_stack_moves_nobody_whose_quota_fits_before_it(graph, capacity, data):
    demand, order, limit = graph
    reaching = data.draw(st.sets(st.sampled_from(sorted(demand))))
    grown = {t: pools + ["new"] if t in reaching else pools for t, pools in order.items()}
    before, after = _split(demand, order, limit), _split(demand, grown, {**limit, "new": capacity})
    if _uncontended(demand, order, limit) and all(sum(f.values()) == demand[t] for t, f in before.items()):
        assert after == before


@settings(max_examples=200, deadline=None)
@given(preference_graphs(), st.data())
def test_a_capacity_change_of_one_pool_moves_only_tenants_whose_preferred_placement_reaches_it(graph, data):
    demand, order, limit = graph
    pool = data.draw(st.sampled_from(sorted(limit)))
    changed = {**limit, pool: data.draw(st.integers(0, 30))}
    if not (_uncontended(demand, order, limit) and _uncontended(demand, order, changed)):
        return
    before, after = _split(demand, order, limit), _split(demand, order, changed)
    preferred = feas.preferred_placement(demand, order, limit)
    for t in demand:
        # the pools a tenant's preferred fill ran through: up to and including the last it used
        used = [p for p in order[t] if preferred[t].get(p)]
        through = order[t][: order[t].index(used[-1]) + 1] if used else []
        if pool not in through and sum(preferred[t].values()) == demand[t]:
            assert before[t] == after[t], t


def test_a_mig_layout_change_moves_no_untouched_tenant(tmp_path):
    # the measured case: the name-ordered flow put alpha and beta on mig-east (its name sorts first)
    # and, when mig-east's layout dropped to 14 1g.10gb slices, moved beta to mig-west
    root = write_spare_project(tmp_path / "p", mig_lab=True)
    before = load_environment(root, "prod")
    shrink_mig_east(root)
    after = load_environment(root, "prod")
    slices = ("mig", "1g.10gb")
    for environment in (before, after):
        assert {t: dict(environment.facts.quota_split[t][slices]) for t in ("alpha", "beta")} == {
            "alpha": {"mig-west": 14}, "beta": {"mig-west": 14}}

    def name_ordered(environment):
        result = environment.facts.placement[slices]
        return feas.max_flow(result.demand, {t: sorted(p) for t, p in result.edges.items()}, result.limit)[0]

    assert (name_ordered(before)["beta"], name_ordered(after)["beta"]) == ({"mig-east": 14}, {"mig-west": 14})


def test_preference_is_dedicated_pools_then_the_stacks_order():
    platform = Platform.model_validate({
        "labelDomain": "x.dev", "gpuClasses": {"h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}},
        "nodePools": {name: {"gpuClass": "h100", "gpusPerNode": 8, "nodes": [name]} for name in ("zeta", "mine", "alpha")}})
    assert feas.preference_order("t", ["alpha", "mine", "zeta"], platform, {"mine": "t"}) == ["mine", "zeta", "alpha"]
