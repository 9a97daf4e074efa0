"""A sharded environment under the mock runtime: the stacks together register exactly what the
unsharded stack registers, each object once, under the same URNs but for the stack name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.manifests.build import environment_objects
from components.manifests.meta import object_id
from components.load import load_environment
from tests.project_edits import replace_once
from tools.pulumi_mocks import REPO, run_program

FIXTURE = REPO / "tests" / "fixtures" / "sharded"
STACKS = ["lab", "lab.blue", "lab.green"]


def _project(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest)
    for part in ("Pulumi.yaml", "__main__.py"):
        shutil.copy2(REPO / part, dest / part)
    return dest


def _kubernetes_urns(registrations) -> dict[str, str]:
    return {r.urn: r.type for r in registrations if r.type.startswith("kubernetes:") and r.type != "pulumi:providers:kubernetes"}


def _objects(registrations) -> list:
    """The registrations of objects (not providers, not the reads of inventory Nodes)."""
    return [r for r in registrations if r.type.startswith("kubernetes:") and r.type != "pulumi:providers:kubernetes" and not r.read]


def _without_stack(urn: str) -> str:
    prefix, _, rest = urn.partition("::")  # urn:pulumi:<stack>::<project>::<type>::<name>
    return f"urn:pulumi:-::{rest}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    sharded = _project(tmp_path_factory.mktemp("sharded") / "project")
    unsharded = _project(tmp_path_factory.mktemp("unsharded") / "project")
    stack_file = unsharded / "stacks" / "Pulumi.lab.yaml"
    text = stack_file.read_text()
    stack_file.write_text(text[: text.index("    sharding:")])
    return (
        sharded,
        {stack: run_program(stack, sharded)[0] for stack in STACKS},
        run_program("lab", unsharded)[0],
    )


def test_each_object_is_registered_by_exactly_one_stack(runs):
    project, by_stack, _ = runs
    built = environment_objects(load_environment(project, "lab"))
    expected = sorted(object_id(o) for objects in built.values() for o in objects)
    registered = sorted(
        object_id(r.inputs) for regs in by_stack.values() for r in _objects(regs)
    )
    assert registered == expected


def test_platform_stack_holds_no_tenant_and_shards_only_theirs(runs):
    _, by_stack, _ = runs
    tenants = {stack: sorted(r.name for r in regs if r.type == "gpu-tenancy:index:Tenant") for stack, regs in by_stack.items()}
    assert tenants == {"lab": [], "lab.blue": ["audio", "speech"], "lab.green": ["robotics", "vision"]}
    platforms = {stack: [r.name for r in regs if r.type == "gpu-tenancy:index:GpuPlatform"] for stack, regs in by_stack.items()}
    assert platforms == {"lab": ["lab-platform"], "lab.blue": [], "lab.green": []}


def test_urns_match_the_unsharded_stack_but_for_the_stack_name(runs):
    """What makes `pulumi state move` between the stacks (and from the unsharded stack) a pure move."""
    _, by_stack, unsharded = runs
    sharded_urns = sorted(_without_stack(u) for regs in by_stack.values() for u in _kubernetes_urns(regs))
    assert sharded_urns == sorted(_without_stack(u) for u in _kubernetes_urns(unsharded))
    for stack, regs in by_stack.items():
        assert all(u.startswith(f"urn:pulumi:{stack}::gpu-tenancy::") for u in _kubernetes_urns(regs))


def test_every_stack_uses_the_environments_provider(runs):
    _, by_stack, _ = runs
    for stack, regs in by_stack.items():
        providers = [r for r in regs if r.type == "pulumi:providers:kubernetes"]
        assert [(p.name, p.inputs.get("context")) for p in providers] == [("cluster", "lab-admin")], stack
        custom = [r for r in regs if r.type.startswith("kubernetes:") and r.type != "pulumi:providers:kubernetes"]
        used = {r.options["provider"].rsplit("::", 1)[0] for r in custom}
        assert custom and len(used) == 1, stack
        [urn] = used
        assert urn.startswith(f"urn:pulumi:{stack}::gpu-tenancy::") and urn.endswith("pulumi:providers:kubernetes::cluster")


def test_unknown_shard_stack_registers_nothing(tmp_path):
    project = _project(tmp_path / "project")
    replace_once(project / "stacks" / "Pulumi.lab.yaml", "shards: [blue, green]", "shards: [blue, green, red]")
    with pytest.raises(Exception, match="shard 'purple' is not in lab's `sharding.shards`"):
        run_program("lab.purple", project)


def test_tenants_adopt_their_state_when_pulumi_state_move_parented_it_to_the_root(runs):
    """`pulumi state move` of a tenant parents it to the destination stack's root (the CLI moves
    no parent it is not given); each tenant, in every stack, aliases that URN so the shard adopts
    it under its Fleet (tests/e2e/pulumi_engine/test_sharding.py runs the move on the real engine)."""
    _, by_stack, _ = runs
    for stack, regs in by_stack.items():
        for r in regs:
            if r.type == "gpu-tenancy:index:Tenant":
                roots = [(a.spec.name, a.spec.noParent) for a in r.options["aliases"]]
                assert roots == [(r.name, True)], (stack, r.name, r.options["aliases"])


def test_a_renamed_tenant_is_adopted_under_its_old_name_at_the_root_too(tmp_path):
    """Renamed (`previousNames`) and moved in one change: the old name, under the Fleet and at the root."""
    project = _project(tmp_path / "project")
    replace_once(project / "tenants" / "audio.yaml", "name: audio\n", "name: audio\npreviousNames: [sound]\n")
    [tenant] = [r for r in run_program("lab.blue", project)[0] if r.type == "gpu-tenancy:index:Tenant" and r.name == "audio"]
    aliases = [(a.spec.name, a.spec.noParent) for a in tenant.options["aliases"]]
    assert aliases == [("sound", False), ("audio", True), ("sound", True)], aliases
