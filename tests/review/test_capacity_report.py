"""`tenants capacity`: figures checked by hand, every format, every stack, invalid input."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from components.review.capacity_report import capacity_table, format_markdown, format_text
from components.cli import main
from components.fleet.environment import Environment
from components.load import load_environment, stack_names
from components.spec.stack import Platform
from tests.e2e.scheduling.borrowing import write_spare_project
from tests.project_edits import replace_once

REPO = Path(__file__).resolve().parents[2]
FORMATS = ["text", "markdown", "json"]


@pytest.fixture(scope="module")
def prod():
    return load_environment(REPO, "prod")


@pytest.fixture(scope="module")
def dev():
    return load_environment(REPO, "dev")


def test_prod_figures(prod):
    table = capacity_table(prod)
    h100 = table["gpuClasses"]["h100"]
    # 5 + 3 nodes x 8 H100; quotas inference 24 + llm-finetune 40.
    assert (h100["nodes"], h100["capacity"], h100["limit"], h100["requested"], h100["free"]) == (8, 64, 64, 64, 0)
    assert h100["byTenant"] == {"inference": 24, "llm-finetune": 40} and h100["status"] == "warning"
    a100 = table["gpuClasses"]["a100"]
    # 2 nodes x 8 A100, overcommit 1.25 -> limit 20; eval holds 20.
    assert (a100["capacity"], a100["overcommit"], a100["limit"], a100["requested"], a100["free"]) == (16, 1.25, 20, 20, 0)
    assert table["gpuClasses"]["a100-mig"]["capacity"] == 0  # every GPU of the pool is partitioned
    one, three = table["migProfiles"]["1g.10gb"], table["migProfiles"]["3g.40gb"]
    # 2 nodes x 4 GPUs x 7 slices, and 2 nodes x 4 GPUs x 2 slices.
    assert (one["capacity"], one["requested"], one["free"], one["status"]) == (56, 48, 8, "ok")
    assert (three["capacity"], three["requested"], three["free"], three["status"]) == (16, 16, 0, "warning")
    assert one["resource"] == "nvidia.com/mig-1g.10gb" and one["classes"] == ["a100-mig"]


def test_dev_figures(dev):
    table = capacity_table(dev)
    l4 = table["gpuClasses"]["l4"]
    # (1 static + 1 autoscaled) nodes x 2 GPUs x 4 replicas; overcommit 1.5; three tenants hold 2 each.
    assert (l4["capacity"], l4["limit"], l4["requested"], l4["free"], l4["status"]) == (16, 24, 6, 18, "ok")
    assert l4["sharing"] == "time-slicing x4" and "no memory or fault isolation" in l4["isolation"]
    assert table["migProfiles"]["1g.10gb"]["capacity"] == 56  # 1 node x 8 GPUs x 7
    assert table["migProfiles"]["1g.10gb"]["byTenant"] == {"eval": 40}


def test_a_suspended_tenant_still_counts_and_a_decommissioned_one_does_not(prod):
    # #41: suspension freed capacity in the books while the suspended tenant's pods kept their GPUs.
    def with_lifecycle(lifecycle: str, **more):
        return replace(prod, tenants=[
            replace(t, spec=t.spec.model_copy(update={"lifecycle": lifecycle, **more})) if t.name == "inference" else t
            for t in prod.tenants
        ])

    suspended = capacity_table(with_lifecycle("suspended"))
    assert suspended["gpuClasses"]["h100"]["requested"] == 64
    assert suspended["tenants"]["inference"] == {"lifecycle": "suspended", "counted": True, "gpu": {"h100": 24}, "mig": {}, "draDevices": {}}
    assert "inference: h100 24 (suspended: counted, its running pods keep their GPUs)" in format_text(suspended)
    gone = capacity_table(with_lifecycle("decommissioned", decommission={"confirm": "inference"}))
    assert gone["gpuClasses"]["h100"]["requested"] == 40
    assert gone["tenants"]["inference"]["counted"] is False
    assert "inference: h100 24 (decommissioned: not counted)" in format_text(gone)


@pytest.mark.parametrize("stack", stack_names(REPO))
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_stack_in_every_format(stack, fmt, capsys):
    assert main(["--root", str(REPO), "capacity", "--stack", stack, "--format", fmt]) == 0
    out = capsys.readouterr().out
    table = capacity_table(load_environment(REPO, stack))
    if fmt == "json":
        assert json.loads(out) == table
    else:
        for name, row in table["gpuClasses"].items():
            assert name in out and row["sharing"] in out
        for profile in table["migProfiles"]:
            assert profile in out


def test_text_states_time_slicing_isolation(dev):
    text = format_text(capacity_table(dev))
    assert "l4: time-slicing x4: up to 4 pods take turns on each GPU with no memory or fault isolation" in text
    row = next(line for line in text.splitlines() if line.startswith("l4 "))
    assert row.split() == ["l4", "time-slicing", "x4", "nvidia.com/gpu", "2", "16", "1.5", "24", "6", "18", "ok"]


def test_mps_states_each_pods_memory_and_compute_share():
    platform = Platform.model_validate({
        "labelDomain": "gpu.example.com",
        "gpuClasses": {"h100-mps": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi",
                                    "sharing": "mps", "mps": {"replicas": 4}}},
        "nodePools": {"p": {"gpuClass": "h100-mps", "gpusPerNode": 8, "nodes": ["n1", "n2"]}},
    })
    row = capacity_table(Environment("test", platform, None, []))["gpuClasses"]["h100-mps"]
    assert (row["capacity"], row["resource"]) == (2 * 8 * 4, "nvidia.com/gpu")
    assert row["sharing"] == "MPS x4 (20Gi each)"  # 80Gi / 4
    assert row["isolation"] == (
        "up to 4 pods run on each GPU at once through the MPS server, each limited to 20Gi of GPU memory and "
        "25% of its threads; no fault isolation: a fatal GPU fault in one can end the others"
    )


def test_markdown_tables(prod):
    markdown = format_markdown(capacity_table(prod))
    assert "| h100 | exclusive | nvidia.com/gpu | 8 | 64 | 1 | 64 | 64 | 0 | warning | inference 24, llm-finetune 40 |" in markdown
    assert "| 1g.10gb | nvidia.com/mig-1g.10gb | a100-mig | 56 | 1 | 56 | 48 | 8 | ok | eval 48 |" in markdown


def test_agrees_with_the_diff_capacity_rows(prod, dev):
    from components.review.diff import capacity_rows

    for environment in (prod, dev):
        table = capacity_table(environment)
        for (kind, name), row in capacity_rows(environment).items():
            if kind in ("draDevices", "kaiQueues"):
                continue   # compared in test_staging_shows_kai_queues_and_fractions and the DRA test
            ours = table["gpuClasses" if kind == "gpuClass" else "migProfiles"][name]
            assert {k: ours[k] for k in row} == row, (kind, name)


def test_invalid_input_exits_1_with_located_errors(project_copy, capsys):
    path = project_copy / "stacks" / "Pulumi.prod.yaml"
    text = path.read_text().replace("profiles: {1g.10gb: 7}", "profiles: {1g.10gb: 8}")
    path.write_text(text)
    line = next(i for i, content in enumerate(text.splitlines(), 1) if "profiles: {1g.10gb: 8}" in content)
    assert main(["--root", str(project_copy), "capacity", "--stack", "prod", "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"stacks/Pulumi.prod.yaml:{line}:11: config.gpu-tenancy:platform.migLayouts.eval-mix[0].profiles: " in captured.err


def test_unknown_stack_and_usage(capsys):
    assert main(["--root", str(REPO), "capacity", "--stack", "nope"]) == 1
    assert "no such stack 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        main(["--root", str(REPO), "capacity"])
    assert err.value.code == 2


def test_the_report_shows_capacity_per_pool_with_dedicated_pools_for_their_owner(prod):
    from components.review.capacity_report import capacity_table, format_text

    pools = capacity_table(prod)["pools"]
    assert pools["h100-serve"]["dedicatedTo"] == "inference"
    assert pools["h100-serve"]["resources"]["nvidia.com/gpu"]["byTenant"] == {"inference": 24}
    assert pools["a100-shared"]["resources"]["nvidia.com/gpu"] == {
        "capacity": 16, "limit": 20, "requested": 20, "free": 0, "status": "warning", "byTenant": {"eval": 20}, "freeFor": "-"}
    # prod has no cohort: the 8 1g.10gb slices eval does not hold are in no queue's books
    assert pools["a100-mig"]["resources"]["nvidia.com/mig-1g.10gb"]["freeFor"] == "no queue"
    assert set(pools["a100-mig"]["resources"]) == {"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"}
    assert "Per node pool" in format_text(capacity_table(prod))


def test_dra_served_classes_show_their_device_classes_and_the_keys_that_meter_them():
    table = capacity_table(load_environment(REPO / "tests" / "fixtures" / "dra", "dra"))
    b200, h100 = table["gpuClasses"]["b200"], table["gpuClasses"]["h100"]

    assert b200["deviceClasses"] == ["b200.gpu.dra.dev"] and h100["deviceClasses"] == ["h100.gpu.dra.dev"]
    assert "DRA: claims of DeviceClass b200.gpu.dra.dev, each device allocated to one claim by the driver" in b200["isolation"]
    assert b200["isolation"].endswith(
        "metered by requests.deviceclass.resource.kubernetes.io/b200.gpu.dra.dev, "
        "b200.gpu.dra.dev.deviceclass.resource.k8s.io/devices, requests.gpu.dra.dev/b200"
    )
    # Served by both: device-plugin GPUs and claims share the one `requests.nvidia.com/gpu` budget.
    assert "and pods through the device plugin" in h100["isolation"] and h100["isolation"].endswith("requests.nvidia.com/gpu")


def test_dra_devices_are_shown_per_device_class_and_tenant():
    table = capacity_table(load_environment(REPO / "tests" / "fixtures" / "dra", "dra"))

    assert table["gpuClasses"]["h100"]["draDevices"] == {"h100.gpu.dra.dev": {"requested": 10, "byTenant": {"robotics": 8, "vision": 2}}}
    assert table["tenants"]["vision"]["draDevices"] == {"b200.gpu.dra.dev": 1, "h100.gpu.dra.dev": 2}
    text = format_text(table)
    assert ("  DRA h100.gpu.dra.dev (class h100): devices 10 (robotics 8, vision 2), "
            "quota key h100.gpu.dra.dev.deviceclass.resource.k8s.io/devices") in text
    assert "  vision: b200 1, h100 2, DRA b200.gpu.dra.dev 1, DRA h100.gpu.dra.dev 2" in text
    assert "- DRA b200.gpu.dra.dev (class b200): devices 1 (vision 1)" in format_markdown(table)


def test_staging_shows_kai_queues_and_fractions():
    from components.review.diff import capacity_rows

    staging = load_environment(REPO, "staging")
    table = capacity_table(staging)
    a100 = table["gpuClasses"]["a100"]
    assert (a100["sharing"], a100["kaiFractions"]) == ("exclusive + KAI fractions (HAMi-core)", "hamicore")
    assert "metered by the tenant's KAI queue only" in a100["isolation"] and "a hostile container" in a100["isolation"]
    # KAI units: eval's 8 A100s, 24 x 1g.10gb (1 each) and 6 x 3g.40gb (3 each).
    assert table["kaiQueues"] == {"requested": 70, "byTenant": {"eval": 50, "inference": 8, "llm-finetune": 12},
                                  "departments": {"dept-research": 64, "dept-serving": 8},
                                  "fractions": ["a100"], "memoryBound": "hamicore"}
    assert table["tenants"]["eval"]["kaiQueueGpu"] == 50
    assert capacity_rows(staging)[("kaiQueues", "gpu")] == table["kaiQueues"]
    assert "  eval: a100 8, mig 1g.10gb 24, mig 3g.40gb 6, KAI queue 50 GPU" in format_text(table)
    assert "- KAI queues: 70 GPU (eval 50, inference 8, llm-finetune 12)" in format_markdown(table)


def test_fractional_kai_department_quotas_are_shown_as_fractions():
    staging = load_environment(REPO, "staging")
    kai = staging.platform.queues.kai
    research = kai.departments["research"].model_copy(update={"gpu": Decimal("62.5")})
    queues = staging.platform.queues.model_copy(update={"kai": kai.model_copy(update={"departments": {**kai.departments, "research": research}})})
    table = capacity_table(replace(staging, platform=staging.platform.model_copy(update={"queues": queues})))
    assert table["kaiQueues"]["departments"] == {"dept-research": 62.5, "dept-serving": 8}
    assert "departments dept-research 62.5, dept-serving 8" in format_text(table)


def test_device_plugin_classes_name_no_device_class(prod):
    assert all(row["deviceClasses"] == [] and "DRA" not in row["isolation"] for row in capacity_table(prod)["gpuClasses"].values())


def test_free_capacity_per_pool_as_queues_see_it(tmp_path):
    # the measured case: a new shared pool no tenant holds quota on said "free 16 ok"
    root = write_spare_project(tmp_path / "p")
    h100 = capacity_table(load_environment(root, "prod"))["pools"]["h100-spare"]["resources"]["nvidia.com/gpu"]
    assert (h100["free"], h100["status"], h100["freeFor"]) == (16, "ok", "cohort shared")
    replace_once(root / "stacks" / "Pulumi.prod.yaml", "    queues:\n      defaultCohort: shared\n", "")
    table = capacity_table(load_environment(root, "prod"))
    h100 = table["pools"]["h100-spare"]["resources"]["nvidia.com/gpu"]
    assert (h100["free"], h100["status"], h100["freeFor"]) == (16, "unqueued", "nothing queued")
    assert any(line.startswith("h100-spare") and line.endswith("16  unqueued  nothing queued") for line in format_text(table).splitlines())


def test_a_class_served_by_dra_alone_is_shown_as_what_its_pods_ask_for_not_nvidia_com_gpu():
    table = capacity_table(load_environment(REPO / "tests" / "fixtures" / "dra-operator", "dra"))
    assert table["gpuClasses"]["b200"]["resource"] == "deviceclass.resource.kubernetes.io/b200.gpu.op.dev"
    assert table["gpuClasses"]["b200"]["capacity"] == 16 and table["gpuClasses"]["b200"]["requested"] == 9
    shared = table["pools"]["b200-shared"]["resources"]
    assert list(shared) == ["deviceclass.resource.kubernetes.io/b200.gpu.op.dev"] and shared[list(shared)[0]]["byTenant"] == {"vision": 1}
    # The migration fixture's h100 maps nvidia.com/gpu: still shown as that one budget.
    assert capacity_table(load_environment(REPO / "tests" / "fixtures" / "dra", "dra"))["gpuClasses"]["h100"]["resource"] == "nvidia.com/gpu"


def test_an_autoscaled_pool_is_shown_present_against_promised():
    table = capacity_table(load_environment(REPO, "dev"))
    scaled = table["pools"]["l4-shared"]["autoscaled"]
    assert scaled == {"staticNodes": 1, "minNodes": 0, "maxNodes": 1, "presentNodes": 1, "presentLimit": {"nvidia.com/gpu": 12}}
    assert table["pools"]["l4-shared"]["resources"]["nvidia.com/gpu"]["limit"] == 24
    assert ("  l4-shared: nodes 1 present (1 static + minNodes 0) of 2 promised (maxNodes 1); "
            "nvidia.com/gpu 12 present of 24 promised, 6 placed") in format_text(table).splitlines()
    assert "#### Autoscaled pools" in format_markdown(table)
    assert "autoscaled" not in capacity_table(load_environment(REPO, "prod"))["pools"]["a100-shared"]
