"""`compare_stack` on loaded environments (no git): capacity rows, stack-level changes, warnings."""

from __future__ import annotations

from pathlib import Path

import yaml

from components.review.diff import Side, capacity_rows, compare_stack, report
from components.load import load_environment
from components.spec.base import API_VERSION
from components.spec.stack import CONFIG_KEY

TEAM = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: {name}
displayName: Team
costCenter: cc
access: {{owners: {{groups: [{name}-leads]}}}}
quota: {{gpu: {gpus}}}
gpu: {{classes: [h100]}}
"""
STACK = {
    "apiVersion": API_VERSION,
    "labelDomain": "gpu.example.com",
    "gpuClasses": {"h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}},
    "nodePools": {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]}},
    "capacityWarningRatio": 0.75,
}


def project(root: Path, teams: dict[str, int], **platform) -> Path:
    (root / "tenants").mkdir(parents=True, exist_ok=True)
    (root / "stacks").mkdir(parents=True, exist_ok=True)
    for old in (root / "tenants").glob("*.yaml"):
        old.unlink()
    for name, gpus in teams.items():
        (root / "tenants" / f"{name}.yaml").write_text(TEAM.format(name=name, gpus=gpus))
    config = {"config": {CONFIG_KEY: {**STACK, **platform}}}
    (root / "stacks" / "Pulumi.prod.yaml").write_text(yaml.safe_dump(config))
    return root


def env(root: Path, teams: dict[str, int], **platform):
    return load_environment(project(root, teams, **platform), "prod")


def test_capacity_rows_follow_validation_arithmetic(tmp_path):
    rows = capacity_rows(env(tmp_path, {"a": 6, "b": 6}))

    assert rows[("gpuClass", "h100")] == {
        "capacity": 16, "overcommit": 1, "limit": 16, "requested": 12, "status": "warning", "byTenant": {"a": 6, "b": 6},
        "kaiFractions": None,
    }
    assert ("kaiQueues", "gpu") not in rows   # scheduler none: no KAI queues


def test_suspended_tenants_still_count_against_capacity_until_decommissioned(tmp_path):
    # A suspended tenant's running pods keep their GPUs: its quota is not free for others.
    root = project(tmp_path, {"a": 6, "b": 6})
    path = root / "tenants" / "b.yaml"
    text = path.read_text()
    path.write_text(text + "lifecycle: suspended\n")
    assert capacity_rows(load_environment(root, "prod"))[("gpuClass", "h100")]["requested"] == 12
    path.write_text(text + "lifecycle: decommissioned\ndecommission: {confirm: b}\n")
    assert capacity_rows(load_environment(root, "prod"))[("gpuClass", "h100")]["requested"] == 6


def test_identical_environments_are_unchanged_without_warnings(tmp_path):
    environment = env(tmp_path, {"a": 4})

    result = compare_stack("prod", Side(environment), Side(environment))

    assert result["change"] == "unchanged" and result["warnings"] == [] and result["tenantDetails"] == []
    assert report([result], {"ref": "HEAD", "commit": "0" * 40})["changed"] is False


def test_entering_the_warning_band_warns_once(tmp_path):
    before = env(tmp_path / "a", {"a": 4})
    after = env(tmp_path / "b", {"a": 12})

    result = compare_stack("prod", Side(before), Side(after))

    assert [w["kind"] for w in result["warnings"]] == ["capacity"]
    assert "quotas add up to 12" in result["warnings"][0]["message"]


def test_staying_in_the_warning_band_with_less_demand_does_not_warn(tmp_path):
    before = env(tmp_path / "a", {"a": 14})
    after = env(tmp_path / "b", {"a": 13})

    warnings = compare_stack("prod", Side(before), Side(after))["warnings"]

    # No capacity warning; the lowered namespace quota itself is always flagged.
    assert [w["kind"] for w in warnings] == ["quota-lowered"]


def test_removing_capacity_under_quotas_warns(tmp_path):
    before = env(tmp_path / "a", {"a": 14})
    pools = {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]}, "spare": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n3"]}}
    bigger = env(tmp_path / "b", {"a": 14}, nodePools=pools)

    result = compare_stack("prod", Side(bigger), Side(before))

    # the 8 GPUs a held on the removed pool (listed first) move to train, and the diff names them
    assert [w["kind"] for w in result["warnings"]] == ["capacity", "split-move"]
    assert [n["node"] for n in result["nodes"]] == ["n3"] and result["nodes"][0]["change"] == "removed"


def test_tenant_disabled_in_the_stack_is_retained_too(tmp_path):
    before = env(tmp_path / "a", {"a": 4, "b": 4})
    after = env(tmp_path / "b", {"a": 4, "b": 4}, tenants=["a"])

    result = compare_stack("prod", Side(before), Side(after))

    removed = [w for w in result["warnings"] if w["kind"] == "tenant-removed"]
    assert len(removed) == 1 and "disabled in this stack" in removed[0]["message"]


def test_base_problems_become_notes(tmp_path):
    environment = env(tmp_path, {"a": 4})

    result = compare_stack("prod", Side(None, ["the base is invalid (1 error(s))"]), Side(environment))

    assert result["notes"] == ["stack prod: the base is invalid (1 error(s))"]
    assert result["change"] == "changed"  # not "added": the stack existed, it just did not load


def test_new_dedicated_autoscaled_pool_asks_for_a_node_group_update(tmp_path):
    pools = {"auto": {"gpuClass": "h100", "gpusPerNode": 8, "maxNodes": 2, "nodeSelector": {"pool": "auto"}}}
    before = env(tmp_path / "a", {"a": 4}, nodePools=pools)
    root = project(tmp_path / "b", {"a": 4}, nodePools=pools)
    path = root / "tenants" / "a.yaml"
    path.write_text(path.read_text().replace("gpu: {classes: [h100]}", "gpu: {dedicatedPools: [auto]}"))
    after = load_environment(root, "prod")

    result = compare_stack("prod", Side(before), Side(after))

    assert [g["pool"] for g in result["nodeGroups"]] == ["auto"]
    assert "node-group" in [w["kind"] for w in result["warnings"]]


def test_a_split_that_must_move_names_the_moved_tenants_and_pools(tmp_path):
    # a and b prefer p1 (listed first); when p1 shrinks to 4 GPUs only one fits there: b, second in
    # name order, moves to p2 and is named; a keeps its placement and is not
    pools = {"p1": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1"]}, "p2": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n2"]}}
    shrunk = {**pools, "p1": {"gpuClass": "h100", "gpusPerNode": 4, "nodes": ["n1"]}}
    before = env(tmp_path / "a", {"a": 4, "b": 4}, nodePools=pools, scheduler="kueue")
    after = env(tmp_path / "b", {"a": 4, "b": 4}, nodePools=shrunk, scheduler="kueue")

    result = compare_stack("prod", Side(before), Side(after))

    assert result["splitMoves"] == [{"tenant": "b", "quota": "GPU class 'h100'", "units": 4,
                                     "pools": {"p1": {"from": 4, "to": 0}, "p2": {"from": 0, "to": 4}}}]
    assert [w["message"] for w in result["warnings"] if w["kind"] == "split-move"] == [
        "tenant b: its GPU class 'h100' quota stays 4 but moves between pools (p1 4 -> 0, p2 0 -> 4); "
        "its running workloads above a pool's new nominal quota count as borrowed and may be preempted"]
    # growing p2 instead moves nobody: both fit on p1 as before
    grown = {**pools, "p2": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n2", "n3"]}}
    assert compare_stack("prod", Side(before), Side(env(tmp_path / "c", {"a": 4, "b": 4}, nodePools=grown, scheduler="kueue")))["splitMoves"] == []


def test_tainting_a_shared_pool_is_said_per_node(tmp_path):
    """Issue 22 step 4: a shared pool that starts carrying the GPU taint shows as a taint added to each
    of its static nodes (`patchTaints: false` before renders exactly the untainted nodes of earlier versions)."""
    from components.review.diff_format import format_text

    pools = {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"], "patchTaints": False}}
    before = env(tmp_path / "a", {"a": 4}, nodePools=pools)
    after = env(tmp_path / "b", {"a": 4})

    result = compare_stack("prod", Side(before), Side(after))

    assert [(n["node"], n["change"], n["taints"]) for n in result["nodes"]] == [
        (name, "changed", {"added": ["nvidia.com/gpu=present:NoSchedule"], "removed": []}) for name in ("n1", "n2")
    ]
    text = format_text(report([result], {"ref": "main"}))
    assert ("  nodes:\n    ~ node n1\n        + taint nvidia.com/gpu=present:NoSchedule\n"
            "    ~ node n2\n        + taint nvidia.com/gpu=present:NoSchedule\n") in text, text


def test_upgrading_from_one_patch_per_node_says_only_the_shared_mig_nodes_get_a_taint():
    """Issue 22 item 4: against what the previous version deployed (one patch per node, tests/node_patch_forms.py),
    the only change on the nodes is the GPU taint on the shared MIG pool's; every other node keeps its
    labels and taints, its taints moving to their own patch (its label patch changes, its taint patch is new)."""
    from components.manifests.build import platform_objects
    from components.review.diff import mig_drain_nodes, node_changes
    from components.review.diff_format import _node_lines
    from tests.node_patch_forms import with_single_patches

    prod = load_environment(Path(__file__).resolve().parents[2], "prod")
    after = platform_objects(prod)
    before = with_single_patches(after, prod.facts)
    changes = {c["node"]: c for c in node_changes(before, after)}
    nodes = sorted(n for pool in prod.platform.node_pools.values() for n in pool.nodes)
    assert sorted(changes) == nodes and {c["change"] for c in changes.values()} == {"changed"}
    assert all(c["labels"] == [] for c in changes.values())
    gpu = "nvidia.com/gpu=present:NoSchedule"
    for name in ("gpu-a100-03", "gpu-a100-04"):   # a100-mig: untainted before
        assert changes[name]["taints"] == {"added": [gpu], "removed": []}
        # Its label patch was label-only and forced already: only the taint patch is new.
        assert changes[name]["patches"] == [{"id": f"v1/Node//{name}#taints", "change": "added"}]
    for name in set(nodes) - {"gpu-a100-03", "gpu-a100-04"}:
        assert changes[name]["taints"] == {"added": [], "removed": []}, name
        assert changes[name]["patches"] == [{"id": f"v1/Node//{name}", "change": "changed"},
                                            {"id": f"v1/Node//{name}#taints", "change": "added"}], name
    assert mig_drain_nodes(before, after, {prod.platform.gpu_operator.mig_config}) == []
    lines = _node_lines({"nodes": list(changes.values()), "nodeGroups": []})
    assert lines[lines.index("~ node gpu-a100-03") + 1] == f"    + taint {gpu}"
    assert lines[lines.index("~ node gpu-h100-01") + 1] == (
        "    same labels and taints; its patches: v1/Node//gpu-h100-01 changed, v1/Node//gpu-h100-01#taints added")


def test_opting_a_pool_out_of_its_taint_removes_the_taint_patch_only(tmp_path):
    pools = {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1"]}}
    before = env(tmp_path / "a", {"a": 4}, nodePools=pools)
    after = env(tmp_path / "b", {"a": 4}, nodePools={"train": {**pools["train"], "patchTaints": False}})

    [node] = compare_stack("prod", Side(before), Side(after))["nodes"]

    assert node["taints"] == {"added": [], "removed": ["nvidia.com/gpu=present:NoSchedule"]} and node["labels"] == []
    assert node["patches"] == [{"id": "v1/Node//n1#taints", "change": "removed"}]


def _kai(memory_bound: str) -> dict:
    h100 = {**STACK["gpuClasses"]["h100"], "kaiFractions": {"memoryBound": memory_bound}}
    return {"scheduler": "kai", "gpuClasses": {"h100": h100}}


def test_kai_queues_and_fractions_are_compared_and_said(tmp_path):
    from components.review.diff_format import format_markdown, format_text

    before = env(tmp_path / "a", {"a": 4}, **_kai("none"))
    after = env(tmp_path / "b", {"a": 6, "b": 2}, **_kai("hamicore"))

    result = compare_stack("prod", Side(before), Side(after))

    rows = {(r["kind"], r["name"]): r for r in result["capacity"]}
    kai = rows[("kaiQueues", "gpu")]
    assert kai["from"] == {"requested": 4, "byTenant": {"a": 4}, "departments": {"dept-tenants": 4}, "fractions": ["h100"],
                           "memoryBound": "none"}
    assert kai["to"]["requested"] == 8 and kai["to"]["memoryBound"] == "hamicore"
    assert rows[("gpuClass", "h100")]["to"]["kaiFractions"] == "hamicore"
    text = format_text(report([result], {"ref": "HEAD", "commit": "0" * 40}))
    assert ("KAI queues (GPU, fractions included): queue quotas 4 → 8 (a 4 → 6, b 0 → 2); "
            "KAI fractions memory bound none → hamicore") in text
    assert "GPU class h100: quotas 4 → 8 (a 4 → 6, b 0 → 2) of limit 16 (capacity 16 x overcommit 1) [ok]; " \
           "KAI fractions memory bound none → hamicore" in text
    markdown = format_markdown(report([result], {"ref": "HEAD", "commit": "0" * 40}))
    assert "| KAI queues (GPU, fractions included) | — | — | — | 4 | 8 | — | a 4 → 6, b 0 → 2; KAI fractions memory bound none → hamicore |" in markdown


def test_dra_devices_are_compared_per_device_class(tmp_path):
    from components.review.diff_format import format_text

    dra = {
        "kubernetesVersion": "v1.34",
        "gpuClasses": {"h100": {**STACK["gpuClasses"]["h100"], "serving": "dra"}},
        "deviceClasses": {"h100.gpu.example.com": {"gpuClass": "h100", "driver": "gpu.nvidia.com"}},
    }
    before = env(tmp_path / "a", {"a": 4}, **dra)
    after = env(tmp_path / "b", {"a": 2}, **dra)

    result = compare_stack("prod", Side(before), Side(after))

    row = next(r for r in result["capacity"] if r["kind"] == "draDevices")
    assert (row["name"], row["from"], row["to"]["requested"]) == (
        "h100.gpu.example.com", {"gpuClass": "h100", "requested": 4, "byTenant": {"a": 4}}, 2)
    assert "DRA devices of h100.gpu.example.com: devices granted 4 → 2 (a 4 → 2)" in format_text(
        report([result], {"ref": "HEAD", "commit": "0" * 40}))


def _example_copy(root: Path) -> Path:
    import shutil

    repo = Path(__file__).resolve().parents[2]
    for part in ("tenants", "stacks"):
        shutil.copytree(repo / part, root / part)
    return root


def test_a_mig_layout_change_names_the_nodes_to_drain(tmp_path):
    base, head = _example_copy(tmp_path / "base"), _example_copy(tmp_path / "head")
    stack = head / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    old = "        - devices: [0, 1, 2, 3]\n          profiles: {1g.10gb: 7}\n        - devices: [4, 5, 6, 7]\n"
    assert text.count(old) == 1
    stack.write_text(text.replace(old, "        - devices: [4, 5, 6, 7]\n          profiles: {1g.10gb: 7}\n        - devices: [0, 1, 2, 3]\n"))
    document = compare_stack("prod", Side(load_environment(base, "prod")), Side(load_environment(head, "prod")))
    (drain,) = [w for w in document["warnings"] if w["kind"] == "mig-drain"]
    assert drain["message"].endswith(": gpu-a100-03, gpu-a100-04")   # the a100-mig pool, not the whole-GPU A100s
    unchanged = compare_stack("prod", Side(load_environment(base, "prod")), Side(load_environment(base, "prod")))
    assert not [w for w in unchanged["warnings"] if w["kind"] == "mig-drain"]


def _prod_warning(tmp_path, kind: str, tenant: str, both: str = "", head: str = "", edit=None) -> tuple[dict, dict]:
    """(the one `kind` warning, the document) of prod's diff when `tenant`'s file gets `both` on both
    sides and `head` (or `edit(head_root)`) on the head side."""
    base, after = _example_copy(tmp_path / "base"), _example_copy(tmp_path / "head")
    for root, text in ((base, both), (after, both + head)):
        path = root / "tenants" / f"{tenant}.yaml"
        path.write_text(path.read_text() + text)
    if edit is not None:
        edit(after)
    document = compare_stack("prod", Side(load_environment(base, "prod")), Side(load_environment(after, "prod")))
    (warning,) = [w for w in document["warnings"] if w["kind"] == kind]
    return warning, document


DECOMMISSION = "lifecycle: decommissioned\ndecommission: {{confirm: {}}}\n"


def test_decommissioning_on_kueue_says_the_cluster_queue_is_stopped(tmp_path):
    warning, _ = _prod_warning(tmp_path, "tenant-decommissioned", "inference", head=DECOMMISSION.format("inference"))
    assert "ClusterQueue inference is stopped (stopPolicy: HoldAndDrain), not deleted: admitted workloads must finish" in warning["message"]


def test_decommissioning_a_direct_tenant_says_nothing_of_a_cluster_queue(tmp_path):
    # #41: a `queue.admission: direct` tenant has no ClusterQueue; the warning said it was stopped and evicted work.
    warning, _ = _prod_warning(tmp_path, "tenant-decommissioned", "inference", both="queue: {admission: direct}\n",
                               head=DECOMMISSION.format("inference"))
    assert "tenant inference is decommissioned" in warning["message"]
    assert "ClusterQueue" not in warning["message"] and "evict" not in warning["message"], warning["message"]


def test_renaming_a_direct_tenant_says_nothing_of_a_cluster_queue(tmp_path):
    # #41: the rename warning spoke of a stopped ClusterQueue evicting work a queue-less tenant never had.
    from tests.project_edits import rename_llm_finetune

    warning, _ = _prod_warning(tmp_path, "tenant-renamed", "llm-finetune", both="queue: {admission: direct}\n", edit=rename_llm_finetune)
    assert warning["message"].startswith("tenant llm-finetune is renamed to finetune")
    assert "ClusterQueue" not in warning["message"] and "evict" not in warning["message"], warning["message"]


def test_decommissioning_names_whose_write_access_goes_and_which_guards_stay(tmp_path):
    """Issue 34: the same deploy takes the members' writes; the guard, image and placement bindings
    stay until the namespaces are gone."""
    warning, document = _prod_warning(tmp_path, "tenant-decommissioned", "llm-finetune",
                                      both="images: {registries: [ghcr.io/llm-finetune]}\n", head=DECOMMISSION.format("llm-finetune"))
    message = warning["message"]
    assert ("its owners and developers (Group llm-finetune-eng, Group llm-finetune-leads, ServiceAccount "
            "llm-finetune/trainer-ci) keep read access only, as viewers") in message
    assert ("Guards that stay until the namespaces are gone (removing the file deletes the namespaces first, then these): "
            "ValidatingAdmissionPolicy gpu-tenancy-images-llm-finetune, ValidatingAdmissionPolicyBinding "
            "gpu-tenancy-guard-llm-finetune, ValidatingAdmissionPolicyBinding gpu-tenancy-images-llm-finetune, "
            "ValidatingAdmissionPolicyBinding gpu-tenancy-placement-llm-finetune, TenantGrant llm-finetune") in message
    # And the objects say the same: the Roles change, no admission object is removed.
    (detail,) = [d for d in document["tenantDetails"] if d["tenant"] == "llm-finetune"]
    assert not [c for c in detail["objects"] if c["change"] == "removed" and c["kind"].startswith("ValidatingAdmission")]
    assert {c["name"] for c in detail["objects"] if c["kind"] == "Role" and c["change"] == "changed"} == {"tenant-owner", "tenant-developer"}


def test_a_borrowers_lower_ceiling_is_said_as_borrowing_not_as_its_quota_going_down(project_copy):
    # #41: a tenant whose own quota did not change got "ResourceQuota goes DOWN" when what it may
    # borrow shrank (here staging's a100 overcommit 1.25 -> 1: eval borrowed the 2 spare GPUs).
    before = load_environment(project_copy, "staging")
    stack = project_copy / "stacks" / "Pulumi.staging.yaml"
    stack.write_text(stack.read_text().replace("overcommit: 1.25", "overcommit: 1", 1))
    after = load_environment(project_copy, "staging")

    warnings = compare_stack("staging", Side(before), Side(after))["warnings"]
    mine = [w for w in warnings if w["tenant"] == "eval" and w["kind"] in ("quota-lowered", "borrowing-lowered")]
    assert [w["kind"] for w in mine] == ["borrowing-lowered"], mine
    assert "what tenant eval may borrow from its cohort goes down (tenant-quota requests.nvidia.com/gpu 10 → 8" in mine[0]["message"]
    assert "its own quota is unchanged" in mine[0]["message"]


def test_a_tenants_own_lower_quota_is_still_quota_lowered(project_copy):
    before = load_environment(project_copy, "staging")
    path = project_copy / "tenants" / "eval.yaml"
    path.write_text(path.read_text().replace('cpu: {requests: "96", limits: "192"}', 'cpu: {requests: "64", limits: "192"}', 1))
    after = load_environment(project_copy, "staging")

    kinds = [w["kind"] for w in compare_stack("staging", Side(before), Side(after))["warnings"] if w["tenant"] == "eval"]
    assert "quota-lowered" in kinds and "borrowing-lowered" not in kinds, kinds


def test_a_newly_added_autoscaled_pool_prints_the_labels_and_taints_its_node_group_must_set(tmp_path):
    """It printed "its node group must set" followed by nothing: an added pool has no earlier value to compare."""
    from components.review.diff_format import _node_lines

    before = env(tmp_path / "a", {"a": 4})
    pools = {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1"]},
             "auto": {"gpuClass": "h100", "gpusPerNode": 8, "maxNodes": 2, "minNodes": 0, "nodeSelector": {"pool": "auto"}}}
    after = env(tmp_path / "b", {"a": 4}, nodePools=pools)

    result = compare_stack("prod", Side(before), Side(after))

    (group,) = result["nodeGroups"]
    assert group["change"] == "added" and group["requires"]["labels"]["gpu.example.com/pool"] == "auto"
    lines = _node_lines(result)
    start = lines.index("~ autoscaled pool auto (added): its node group must set")
    assert lines[start + 1].startswith("    labels: gpu.example.com/gpu-class=h100, gpu.example.com/pool=auto")
    assert lines[start + 2] == "    taints: nvidia.com/gpu=present:NoSchedule"
    assert lines[start + 3] == "    the group: nodes labelled pool=auto, 0 to 2 nodes"

    removed = compare_stack("prod", Side(after), Side(before))
    assert _node_lines(removed)[-1] == "- autoscaled pool auto (removed): its node group no longer needs this tool's labels and taints"


def _with_dedicated_pool(root: Path, owner_gpus: int, shared_gpus: int, dedicated_nodes: int):
    """Pool train (2 nodes, 16 GPUs) shared by team a; pool own (`dedicated_nodes` x 8) dedicated to team o, its only pool."""
    pools = {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]},
             "own": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": [f"o{i}" for i in range(dedicated_nodes)]}}
    root = project(root, {"a": shared_gpus, "o": owner_gpus}, nodePools=pools)
    path = root / "tenants" / "o.yaml"
    path.write_text(path.read_text().replace("gpu: {classes: [h100]}", "gpu: {classes: [], dedicatedPools: [own]}"))
    return load_environment(root, "prod")


def test_a_dedicated_pool_its_owner_fills_is_no_capacity_warning_as_in_validate(tmp_path):
    # #41: the class as a whole is 18/24 (75%, the band), so the diff warned; validate does not, since
    # the full part is a pool dedicated to the tenant that fills it (8 of 8), and train has 6 of 16 free.
    before = env(tmp_path / "a", {"a": 2})
    after = _with_dedicated_pool(tmp_path / "b", owner_gpus=8, shared_gpus=10, dedicated_nodes=1)
    assert [p for p in after.warnings if "tenant quotas" in p.message] == []

    warnings = compare_stack("prod", Side(before), Side(after))["warnings"]

    assert [w for w in warnings if w["kind"] == "capacity"] == []


def test_a_crowded_shared_pool_warns_in_the_diff_as_in_validate_though_the_class_has_room(tmp_path):
    # The class has 13 of 32 GPUs promised (41%), but the shared pool train holds 13 of 16 (81%):
    # validate warns at the pool, and so does the diff, with the same figures.
    before = _with_dedicated_pool(tmp_path / "a", owner_gpus=0, shared_gpus=4, dedicated_nodes=2)
    after = _with_dedicated_pool(tmp_path / "b", owner_gpus=0, shared_gpus=13, dedicated_nodes=2)
    [validated] = [p for p in after.warnings if "tenant quotas" in p.message]

    [warning] = [w for w in compare_stack("prod", Side(before), Side(after))["warnings"] if w["kind"] == "capacity"]

    assert warning["message"] == "GPU class h100: " + validated.message.split(": ", 1)[1]
    assert "pool train add up to 13 (a: 13), 81% of what it holds (16)" in warning["message"]


def test_a_shared_pool_dedicated_to_another_tenant_warns_that_the_sharers_pods_are_refused_there_on_their_next_start(tmp_path):
    # #41: moving a customer off a shared pool did not say that its running pods are refused on their next rollout.
    pools = {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]},
             "own": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["o1"]}}
    before = env(tmp_path / "a", {"a": 4, "o": 2}, nodePools=pools)
    after = _with_dedicated_pool(tmp_path / "b", owner_gpus=2, shared_gpus=4, dedicated_nodes=1)

    warnings = [w for w in compare_stack("prod", Side(before), Side(after))["warnings"] if w["kind"] == "placement-narrowed"]

    # a loses the pool o takes; o, whose file now lists no class, loses the shared pool it had.
    assert [(w["tenant"], w["message"].split(" (")[0]) for w in warnings] == [
        ("a", "tenant a may no longer place pods on pools own"), ("o", "tenant o may no longer place pods on pools train")]
    assert "(it keeps: train)" in warnings[0]["message"] and "refused there by the placement policy" in warnings[0]["message"]
    assert "(it keeps: own)" in warnings[1]["message"]
    # A diff that takes nothing away says nothing.
    assert not [w for w in compare_stack("prod", Side(after), Side(after))["warnings"] if w["kind"] == "placement-narrowed"]
