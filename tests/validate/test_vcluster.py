"""vCluster settings: chart-schema rejections, values outside the allow-list (`VALUES`) and guarded
keys located at the offending key, and the warnings about settings that cannot work as written."""

from __future__ import annotations

import pytest

from tests.project_edits import line_of, replace_once, validation_errors
from components.load import load_environment
from components.manifests.build import helm_releases
from components.spec.tenant import Tenant
from components.validate.vcluster import GUARDED_PATHS, VALUES, schema_errors, values_problems, values_schema

TEAM_A = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="team-a", displayName="A", costCenter="cc-1")


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
    # eval may use two shared classes: its vCluster is not pinned (as no tenant on shared pools is), nothing to warn of
    assert not [w for w in dev if "vcluster.enabled" in w], dev


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


def test_every_key_of_the_table_exists_in_the_chart_schema():
    definitions = values_schema()["$defs"]

    def resolve(schema):
        ref = schema.get("$ref", "")
        return definitions[ref.split("/")[-1]] if ref else schema

    assert set(GUARDED_PATHS) < set(VALUES)
    for path in VALUES:
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


# --- the allow-list: hostile values a tenant could write, each refused at its key -----------------

FINETUNE_VALUES = "        controlPlane:\n"


def _with_values(project, yaml_block: str):
    """llm-finetune's dev vCluster values with `yaml_block` (at the values' indentation) added before them."""
    finetune = project / "tenants" / "llm-finetune.yaml"
    replace_once(finetune, FINETUNE_VALUES, yaml_block + FINETUNE_VALUES)
    return finetune


HOSTILE = [
    # (values written, key the error is located at, fragment of its message)
    ("        sync:\n          fromHost:\n            secrets:\n              enabled: true\n              mappings:\n                byName: {'kube-system/*': 'stolen/*'}\n",
     "secrets:", "sync.fromHost.secrets: refused: it makes the chart grant the vCluster's ServiceAccount list and watch of Secrets in every namespace"),
    ("        sync:\n          fromHost:\n            configMaps:\n              enabled: true\n              mappings:\n                byName: {'/settings': 'default/settings'}\n",
     "configMaps:", "sync.fromHost.configMaps: refused: it makes the chart grant the vCluster's ServiceAccount list and watch of ConfigMaps in every namespace"),
    ("        sync:\n          fromHost:\n            customResources:\n              'widgets.example.com': {enabled: true}\n",
     "customResources:", "sync.fromHost.customResources: refused: it adds reads in every namespace of each resource it names"),
    ("        sync:\n          toHost:\n            customResources:\n              'widgets.example.com': {enabled: true}\n",
     "customResources:", "sync.toHost.customResources: refused: it would let the vCluster write any resource kind"),
    ("        sync:\n          toHost:\n            networkPolicies: {enabled: true}\n",
     "networkPolicies:", "sync.toHost.networkPolicies: refused: it would let the vCluster create, change and delete NetworkPolicies"),
    ("        rbac:\n          clusterRole:\n            extraRules: [{apiGroups: [''], resources: [secrets], verbs: [list]}]\n",
     "rbac:", "rbac: set by the platform: it bounds what the vCluster may do on the host"),
    ("        rbac:\n          role:\n            extraRules: [{apiGroups: [''], resources: [resourcequotas], verbs: [delete]}]\n",
     "rbac:", "rbac: set by the platform"),
    ("        experimental:\n          deploy:\n            host:\n              manifests: 'kind: Namespace'\n",
     "experimental:", "experimental: refused: it deploys any manifest into the host with the platform's deployment credentials"),
    ("        plugins:\n          spy:\n            image: evil/spy\n            rbac:\n              clusterRole:\n                extraRules: [{apiGroups: [''], resources: [secrets], verbs: [list]}]\n",
     "plugins:", "plugins: refused: it runs extra containers with the vCluster's ServiceAccount"),
    ("        integrations:\n          externalSecrets: {enabled: true}\n",
     "integrations:", "integrations: refused: it makes kubeVirt, externalSecrets"),
    ("        networking:\n          replicateServices:\n            fromHost: [{from: kube-system/kube-dns, to: default/dns}]\n",
     "fromHost:", "networking.replicateServices.fromHost: refused: it adds get, list and watch of Services and Endpoints in every namespace"),
    ("        networking:\n          advanced:\n            proxyKubelets: {byIP: true}\n",
     "proxyKubelets:", "networking.advanced.proxyKubelets: set by the platform: it stays off: on, the vCluster's ClusterRole holds the kubelet API of every node"),
    ("        pro: true\n", "pro:", "pro: refused: it adds reads of vCluster Platform objects, and of every pod and node"),
    ("        platform:\n          apiKey: {namespace: kube-system, secretName: bootstrap}\n",
     "platform:", "platform: refused: it makes the chart create a Role and RoleBinding in platform.apiKey.namespace"),
    ("        exportKubeConfig:\n          secret: {name: kubeconfig, namespace: eval}\n",
     "secret:", "exportKubeConfig.secret.namespace: namespace 'eval' is not the vCluster's ('llm-finetune')"),
    ("        networking:\n          replicateServices:\n            toHost: [{from: default/web, to: eval/web}]\n",
     "toHost:", "networking.replicateServices.toHost[0].to: 'eval/web' names namespace 'eval', which is not the vCluster's ('llm-finetune')"),
]
HOSTILE_CONTROL_PLANE = [
    # under llm-finetune's own `controlPlane:` (at the indentation of its `statefulSet:`)
    ("          advanced:\n            serviceAccount: {name: default}\n",
     "advanced:", "controlPlane.advanced: refused: it holds the ServiceAccount the chart binds the vCluster's host roles to"),
    ("          distro:\n            k8s:\n              scheduler: {enabled: true}\n",
     "scheduler:", "controlPlane.distro.k8s.scheduler: refused: it runs a virtual scheduler, which adds cluster-wide reads"),
    ("          statefulSet:\n            security:\n              containerSecurityContext: {privileged: true}\n",
     "security:", "controlPlane.statefulSet.security: refused: it sets the control-plane pod's securityContext (privileged"),
    ("          statefulSet:\n            persistence:\n              addVolumes: [{name: root, hostPath: {path: /}}]\n",
     "addVolumes:", "controlPlane.statefulSet.persistence.addVolumes: refused: it adds volumes to the control-plane pod (a hostPath reaches the node's disks)"),
    ("          statefulSet:\n            persistence:\n              volumeClaim: {enabled: false}\n",
     "volumeClaim:", "controlPlane.statefulSet.persistence.volumeClaim.enabled: refused: it decides whether the chart runs the control plane as a StatefulSet"),
    ("          statefulSet:\n            sidecarContainers: [{name: spy, image: evil/spy}]\n",
     "sidecarContainers:", "controlPlane.statefulSet.sidecarContainers: refused: it runs other code in the control-plane pod"),
    ("          statefulSet:\n            scheduling:\n              tolerations: [{operator: Exists}]\n",
     "scheduling:", "controlPlane.statefulSet.scheduling: refused: it places the control-plane pod"),
]


def _located(errors: list[str], finetune, key: str, fragment: str) -> bool:
    return any(e.startswith(f"tenants/llm-finetune.yaml:{line_of(finetune, key, after='vcluster:')}:") and f"environments.dev.vcluster.values.{fragment}" in e for e in errors)


@pytest.mark.parametrize(("block", "key", "fragment"), HOSTILE, ids=[f[2].split(":")[0] for f in HOSTILE])
def test_hostile_values_are_refused_at_their_key(project_copy, block, key, fragment):
    finetune = _with_values(project_copy, block)
    errors = validation_errors(project_copy, "dev")
    assert _located(errors, finetune, key, fragment), errors


@pytest.mark.parametrize(("block", "key", "fragment"), HOSTILE_CONTROL_PLANE, ids=[f[2].split(":")[0] for f in HOSTILE_CONTROL_PLANE])
def test_hostile_control_plane_values_are_refused_at_their_key(project_copy, block, key, fragment):
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    # a block of statefulSet keys merges into the example's own `statefulSet:`; others go beside it
    replace_once(finetune, "          statefulSet:\n", block if block.startswith("          statefulSet:\n") else block + "          statefulSet:\n")
    errors = validation_errors(project_copy, "dev")
    assert _located(errors, finetune, key, fragment), errors


def test_a_mapping_from_another_namespace_is_named_at_its_own_key(project_copy):
    finetune = _with_values(project_copy, "        sync:\n          fromHost:\n            secrets:\n              enabled: true\n"
                            "              mappings:\n                byName:\n                  'kube-system/*': 'stolen/*'\n                  '/own': 'default/own'\n")
    errors = validation_errors(project_copy, "dev")
    assert _located(errors, finetune, "'kube-system/*'", "sync.fromHost.secrets.mappings.byName.kube-system/*: 'kube-system/*' copies Secrets of namespace 'kube-system', which is not the tenant's"), errors
    # the tenant's own namespace is not named: the refusal of the key itself still stands for it
    assert not any("byName./own" in e for e in errors), errors


def test_a_key_outside_the_table_is_refused_with_the_allowed_keys_beside_it(project_copy):
    finetune = _with_values(project_copy, "        telemetry: {enabled: false}\n        sync:\n          toHost:\n            pods:\n              translateImage: {'a': 'b'}\n")
    errors = validation_errors(project_copy, "dev")
    assert _located(errors, finetune, "telemetry:", "telemetry: not on the list of vCluster values a tenant may set (a value outside it may widen what the vCluster's ServiceAccount may do on the host); allowed at the top: controlPlane, exportKubeConfig, logging, networking, sync; remove it, or ask the platform team"), errors
    assert _located(errors, finetune, "pods:", "sync.toHost.pods: not on the list of vCluster values a tenant may set (a value outside it may widen what the vCluster's ServiceAccount may do on the host); allowed under sync.toHost: configMaps, ingresses, persistentVolumeClaims, secrets, serviceAccounts, services;"), errors


def test_a_section_replaced_whole_is_refused():
    """A null (Helm deletes the key) or a list in place of a map replaces everything below it."""
    assert values_problems({"sync": {"fromHost": {"nodes": None}, "toHost": {"ingresses": None}}}, TEAM_A) == [
        (("sync", "fromHost", "nodes"), "replaces keys set by the platform (sync.fromHost.nodes.enabled, sync.fromHost.nodes.selector, "
         "sync.fromHost.nodes.syncBackChanges); remove it (ask the platform team if you need a change)"),
        (("sync", "toHost", "ingresses"), "replaces a whole section of the chart values; set the allowed keys below it one by one (enabled)"),
    ]


def test_an_unknown_key_is_reported_once_by_the_schema(project_copy):
    finetune = project_copy / "tenants" / "llm-finetune.yaml"
    replace_once(finetune, "            resources:\n" + OVERRIDE, "            resourcez:\n" + OVERRIDE)
    assert [e for e in validation_errors(project_copy, "dev") if "resourcez" in e] == [
        f"tenants/llm-finetune.yaml:{line_of(finetune, 'resourcez:')}:13: environments.dev.vcluster.values.controlPlane.statefulSet.resourcez: "
        "rejected by the vCluster 0.36.1 chart schema: unknown key 'resourcez'; did you mean 'resources'? (stack dev)"
    ]


SAFE = (
    "        sync:\n"
    "          toHost:\n            ingresses: {enabled: true}\n            serviceAccounts: {enabled: true}\n"
    "          fromHost:\n            storageClasses: {enabled: true}\n            runtimeClasses: {enabled: true}\n"
    "        exportKubeConfig:\n          context: finetune\n          secret: {name: kubeconfig, namespace: llm-finetune}\n"
    "          additionalSecrets: [{name: kubeconfig-ci}]\n"
    "        networking:\n          replicateServices:\n            toHost: [{from: default/web, to: web}, {from: default/api, to: llm-finetune/api}]\n"
    "        logging: {encoding: json}\n"
)


def test_safe_values_validate_and_reach_the_release(project_copy):
    """The legitimate neighbour of the attacks above: sizing, syncing kinds the tenant may write or read itself."""
    _with_values(project_copy, SAFE)
    replace_once(project_copy / "tenants" / "llm-finetune.yaml", "            resources:\n" + OVERRIDE,
                 "            resources:\n" + OVERRIDE + "            persistence:\n              volumeClaim: {size: 10Gi}\n")
    env = load_environment(project_copy, "dev")
    spec = next(t.spec for t in env.tenants if t.name == "llm-finetune")
    (release,) = helm_releases(spec, env.view(spec))
    values = release["values"]
    assert values["sync"]["toHost"]["ingresses"] == {"enabled": True}
    assert values["sync"]["fromHost"]["storageClasses"] == {"enabled": True}
    assert values["exportKubeConfig"]["secret"] == {"name": "kubeconfig", "namespace": "llm-finetune"}
    assert values["networking"]["replicateServices"]["toHost"][1] == {"from": "default/api", "to": "llm-finetune/api"}
    assert values["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"] == {"size": "10Gi"}
    assert values["controlPlane"]["statefulSet"]["resources"]["requests"] == {"cpu": "200m", "memory": "512Mi"}
    assert schema_errors(values) == []


def test_empty_maps_change_nothing_and_pass():
    assert values_problems({}, TEAM_A) == []
    assert values_problems({"controlPlane": {}, "sync": {"toHost": {}}, "experimental": {}}, TEAM_A) == []
