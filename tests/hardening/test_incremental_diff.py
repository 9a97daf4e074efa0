"""The one-tenant diff skips the tenants whose spec and fleet view are unchanged; the report is the
same as the one that builds every tenant on both sides, for any generated project and any change
to one of its tenants (replaced by another valid tenant, added, removed) or to its stack.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tools.synthetic import tenant_name, write_project
from components.fleet.environment import Environment
from components.load import load_environment
from components.review.diff import Side, compare_stack, unchanged_tenants
from components.spec.problems import InvalidInput
from tests.hardening.strategies import ENV, TENANT_NAMES, Project, projects, tenant
from tests.hardening.support import EXAMPLES


def _load(project: Project) -> Environment | None:
    with tempfile.TemporaryDirectory(prefix="incremental-diff-") as scratch:
        try:
            return load_environment(project.write(Path(scratch)), ENV)
        except InvalidInput:
            return None


def _platform(project: Project) -> dict:
    return project.stack["config"]["gpu-tenancy:platform"]


@st.composite
def changes(draw, base: Project) -> tuple[str, Project]:
    """(what changed, the head project): one tenant replaced, added or removed, or the stack edited."""
    head = copy.deepcopy(base)
    names = sorted(head.tenants)
    kind = draw(st.sampled_from(["replace", "replace", "replace", "add", "remove", "stack"]))
    claimed = {p for data in head.tenants.values() for p in data.get("gpu", {}).get("dedicatedPools", [])}
    if kind in ("replace", "remove") or (kind == "add" and len(names) == len(TENANT_NAMES)):
        name = draw(st.sampled_from(names))
        if kind == "remove" and len(names) > 1:
            del head.tenants[name]
            return "remove", head
        kind = "replace"
        claimed -= set(head.tenants[name].get("gpu", {}).get("dedicatedPools", []))
    else:
        name = draw(st.sampled_from([n for n in TENANT_NAMES if n not in names]))
    if kind == "stack":
        pool = _platform(head)["nodePools"][draw(st.sampled_from(sorted(_platform(head)["nodePools"])))]
        if "nodes" in pool and draw(st.booleans()):
            pool["nodes"] = [*pool["nodes"], f"{pool['nodes'][0]}-extra"] if pool["nodes"] else ["extra-node"]
        else:
            _platform(head)["labelDomain"] = "other.example.org"
        return "stack", head
    free = sorted(set(_platform(head)["nodePools"]) - claimed)
    others = [n for n in [*names, name] if n != name]
    head.tenants[name] = draw(tenant(name, others, head.stack, free))
    return kind, head


@st.composite
def diffs(draw) -> tuple[str, Project, Project]:
    base = draw(projects())
    kind, head = draw(changes(base))
    return kind, base, head


@settings(max_examples=EXAMPLES["diff"])
@given(diffs())
def test_the_incremental_diff_is_the_full_diff(case):
    kind, base_project, head_project = case
    base, head = _load(base_project), _load(head_project)
    if base is None or head is None:   # a diff needs both sides valid; validation has its own properties
        event("a side is invalid")
        return
    skipped = unchanged_tenants(base, head)
    event(f"{kind}: {'some' if skipped else 'no'} tenants skipped")
    incremental = compare_stack(ENV, Side(base), Side(head))
    full = compare_stack(ENV, Side(base), Side(head), incremental=False)
    assert incremental == full


def test_an_unchanged_fleet_skips_every_tenant_and_a_neighbours_grant_is_not_skipped(tmp_path):
    root = write_project(tmp_path / "fleet", 5)
    base = load_environment(root, "bench")
    assert unchanged_tenants(base, load_environment(root, "bench")) == {t.name for t in base.tenants}
    # team-00002 admits team-00003 (each synthetic tenant admits its successor): changing the ports
    # team-00002 admits on changes team-00003's egress too, so both are built again.
    path = root / "tenants" / f"{tenant_name(2)}.yaml"
    path.write_text(path.read_text().replace("ports: [{port: 8080}]", "ports: [{port: 8081}]"))
    head = load_environment(root, "bench")
    assert {t.name for t in base.tenants} - unchanged_tenants(base, head) == {tenant_name(2), tenant_name(3)}
    assert compare_stack("bench", Side(base), Side(head)) == compare_stack("bench", Side(base), Side(head), incremental=False)
