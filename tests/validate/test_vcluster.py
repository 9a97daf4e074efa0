"""vCluster settings: chart-schema rejections and guarded keys located at the offending key, and the
warnings about settings that cannot work as written."""

from __future__ import annotations



from tests.project_edits import line_of, replace_once, validation_errors
from components.load import load_environment
from components.validate.vcluster import GUARDED_PATHS, schema_errors, values_schema








OVERRIDE = "              requests: {cpu: 200m, memory: 512Mi}\n"


def test_an_unknown_key_is_located_in_the_environment_override(project_copy):
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    replace_once(finetune, "            resources:\n" + OVERRIDE, "            resourcez:\n" + OVERRIDE)
    line = line_of(finetune, "resourcez:")
    assert (
        f"tenants/llm-finetune.yaml:{line}:13: environments.dev.vcluster.values.controlPlane.statefulSet.resourcez: "
        "rejected by the vCluster 0.36.1 chart schema: unknown key 'resourcez'; did you mean 'resources'? (stack dev)"
    ) in validation_errors(project_copy, "dev")


def test_a_wrong_type_is_located_at_its_value(project_copy):
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    replace_once(finetune, "        controlPlane:\n", "        sync:\n          toHost:\n            ingresses: {enabled: sure}\n        controlPlane:\n")
    line = line_of(finetune, "ingresses:")
    assert (
        f"tenants/llm-finetune.yaml:{line}:25: environments.dev.vcluster.values.sync.toHost.ingresses.enabled: "
        "rejected by the vCluster 0.36.1 chart schema: 'sure' is not of type 'boolean' (stack dev)"
    ) in validation_errors(project_copy, "dev")


def test_isolation_settings_cannot_be_overridden(project_copy):
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    replace_once(
        finetune,
        "        controlPlane:\n",
        "        policies:\n          networkPolicy: {enabled: false}\n        sync:\n          fromHost:\n            nodes:\n              selector: {all: true}\n        controlPlane:\n",
    )
    errors = validation_errors(project_copy, "dev")
    assert any(e.startswith(f"tenants/llm-finetune.yaml:{line_of(finetune, 'policies:')}:9: environments.dev.vcluster.values.policies: set by the platform: it mirrors the tenant's quota") for e in errors)
    assert any(e.startswith(f"tenants/llm-finetune.yaml:{line_of(finetune, 'selector:')}:15: environments.dev.vcluster.values.sync.fromHost.nodes.selector: set by the platform: it pins") for e in errors)


def test_priority_class_must_exist_and_be_granted(project_copy):
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    replace_once(finetune, "      enabled: true\n", "      enabled: true\n      priorityClassName: trainin\n")
    assert any("vcluster.priorityClassName: unknown PriorityClass 'trainin'; did you mean 'training'?" in e for e in validation_errors(project_copy, "dev"))
    replace_once(finetune, "priorityClassName: trainin\n", "priorityClassName: online-inference\n")
    assert any("the tenant may run no pods at PriorityClass 'online-inference'" in e for e in validation_errors(project_copy, "dev"))
    replace_once(finetune, "priorityClassName: online-inference\n", "priorityClassName: training\n")
    assert load_environment(project_copy, "dev").tenants


def test_warnings_for_settings_that_cannot_work_as_written(project_copy):
    eval_file = project_copy / "tenants" / "eval.yaml"
    eval_file.write_text(eval_file.read_text() + "vcluster:\n  values: {exportKubeConfig: {context: x}}\n")
    prod = [str(p) for p in load_environment(project_copy, "prod").warnings]
    assert f"tenants/eval.yaml:{line_of(eval_file, 'vcluster:')}:1: warning: vcluster: vCluster settings have no effect while `enabled` is false (stack prod)" in prod
    eval_file.write_text(eval_file.read_text() + "  enabled: true\n")
    dev = [str(p) for p in load_environment(project_copy, "dev").warnings]
    assert any("vcluster.enabled: one node-label set cannot select several GPU classes (a100-mig, l4)" in w for w in dev)


def test_a_chart_version_without_its_schema_warns(project_copy):
    stack = project_copy / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text() + "    vcluster: {chartVersion: 0.37.0}\n")
    warnings = [str(p) for p in load_environment(project_copy, "dev").warnings]
    assert any("vcluster.chartVersion: tenants' vCluster values are checked against the 0.36.1 chart schema" in w for w in warnings)


def test_schema_errors_list_every_problem_in_path_order():
    assert schema_errors({"sync": {"toHost": {"pods": {"enabled": "yes"}}}, "controlPlane": {"distro": {"k3s": {}}}}) == [
        (("controlPlane", "distro", "k3s"), "unknown key 'k3s'; did you mean 'k8s'?"),
        (("sync", "toHost", "pods", "enabled"), "'yes' is not of type 'boolean'"),
    ]
    assert schema_errors({}) == []


def test_guarded_paths_exist_in_the_chart_schema():
    definitions = values_schema()["$defs"]

    def resolve(schema):
        ref = schema.get("$ref", "")
        return definitions[ref.split("/")[-1]] if ref else schema

    for path in GUARDED_PATHS:
        schema = resolve(values_schema())
        for part in path:
            assert part in schema.get("properties", {}), path
            schema = resolve(schema["properties"][part])


def test_yaml_numbers_are_shown_as_written():
    from decimal import Decimal

    assert schema_errors({"exportKubeConfig": {"context": Decimal("1.5")}}) == [
        (("exportKubeConfig", "context"), "1.5 is not of type 'string'")
    ]


def _local_chart(project, relative, version="0.36.1"):
    chart = project / relative
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: vcluster\nversion: {version}\n")
    return chart


def _use_chart(project, path):
    dev = project / "stacks" / "Pulumi.dev.yaml"
    replace_once(dev, "    labelDomain: gpu.acme.dev\n", f"    labelDomain: gpu.acme.dev\n    vcluster:\n      chart: {path}\n")
    return dev


def test_a_local_chart_directory_or_package_replaces_the_repository(project_copy):
    import tarfile

    from components.manifests.build import helm_releases

    _local_chart(project_copy, "charts/vcluster")
    _use_chart(project_copy, "charts/vcluster")
    env = load_environment(project_copy, "dev")
    (release,) = [r for t in env.tenants for r in helm_releases(t.spec, env.view(t.spec))]
    assert release["chart"] == "charts/vcluster" and release["repository"] is None

    with tarfile.open(project_copy / "vcluster-0.36.1.tgz", "w:gz") as archive:
        archive.add(project_copy / "charts" / "vcluster", arcname="vcluster")
    replace_once(project_copy / "stacks" / "Pulumi.dev.yaml", "chart: charts/vcluster", "chart: vcluster-0.36.1.tgz")
    env = load_environment(project_copy, "dev")
    assert env.platform.vcluster.chart == "vcluster-0.36.1.tgz"


def test_a_missing_or_wrong_local_chart_is_located_at_the_stack_key(project_copy):
    dev = _use_chart(project_copy, "charts/nowhere")
    line = line_of(dev, "chart: charts/nowhere")
    (error,) = validation_errors(project_copy, "dev")
    assert error.startswith(f"stacks/Pulumi.dev.yaml:{line}:7: config.gpu-tenancy:platform.vcluster.chart: ") and "no chart at 'charts/nowhere'" in error, error

    _local_chart(project_copy, "charts/nowhere", version="0.30.0")
    (error,) = validation_errors(project_copy, "dev")
    assert "has version 0.30.0, but vcluster.chartVersion is 0.36.1" in error, error


def test_dra_sync_cannot_be_switched_on_by_the_tenant(project_copy):
    """llm-finetune has no DeviceClass grant in dev: syncing claims would hand the vCluster host claim verbs for nothing."""
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    replace_once(
        finetune,
        "        controlPlane:\n",
        "        sync:\n          toHost:\n            resourceClaims: {enabled: true}\n          fromHost:\n            deviceClasses: {enabled: true}\n        controlPlane:\n",
    )
    errors = validation_errors(project_copy, "dev")
    for key, column in (("resourceClaims", 13), ("deviceClasses", 13)):
        where = "toHost" if key == "resourceClaims" else "fromHost"
        assert any(e.startswith(
            f"tenants/llm-finetune.yaml:{line_of(finetune, key + ':')}:{column}: environments.dev.vcluster.values.sync.{where}.{key}: "
            "set by the platform: it syncs DRA claims and the claimable DeviceClasses only for a tenant with a DeviceClass grant"
        ) for e in errors), errors
