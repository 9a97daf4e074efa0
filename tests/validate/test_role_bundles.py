"""Role bundles as a platform team uses them: a bundle defined in the stack file is checked against
the escalation guard rails by `tenants validate` (located on the stack line); tenants name bundles
per role, and a name that is not offered is an error on the tenant line."""

from __future__ import annotations

import pytest

from components.cli.main import main
from components.spec.role_bundles import SHIPPED_BUNDLES, BundleRule, shipped_bundles
from components.validate.role_bundles import rule_problems
from tests.project_edits import line_of, replace_once

PROD = "stacks/Pulumi.prod.yaml"


def validate(capsys, root) -> tuple[int, str]:
    code = main(["--root", str(root), "validate", "--stack", "prod"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def add_bundle(root, rule: str) -> int:
    """Append a `roleBundles` entry to the prod stack; return the line of its rule's first key."""
    path = root / PROD
    text = path.read_text()
    assert "roleBundles" not in text
    path.write_text(text + f"    roleBundles:\n      team-tools:\n        description: tools of one team\n        rules:\n          - {rule}\n")
    return len(path.read_text().splitlines())


def test_every_shipped_bundle_keeps_to_the_guard_rails():
    assert set(shipped_bundles()) == set(SHIPPED_BUNDLES) == {
        "kubeflow-notebooks", "kubeflow-pipelines", "ray", "kserve", "leaderworkersets", "pod-disruption-budgets", "leases"}
    for name, bundle in shipped_bundles().items():
        for rule in bundle.rules:
            assert rule_problems(rule) == [], name


@pytest.mark.parametrize(
    "rule, bad, message",
    [
        ('{apiGroups: [ray.io], resources: [rayclusters], verbs: ["*"]}', "verbs", "verb '*' is not allowed in a bundle: a wildcard verb"),
        ('{apiGroups: [ray.io], resources: ["*"], verbs: [get]}', "resources", "a wildcard resource grants every resource"),
        ('{apiGroups: ["*"], resources: [rayclusters], verbs: [get]}', "apiGroups", "a wildcard API group grants every group"),
        ('{apiGroups: [ray.io], resources: ["rayclusters/*"], verbs: [get]}', "resources", "a wildcard resource"),
        ('{apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [create]}', "apiGroups", "API group 'rbac.authorization.k8s.io' is not allowed in a bundle: RBAC objects"),
        ('{apiGroups: [""], resources: [resourcequotas], verbs: [get, patch]}', "resources", "a bundle may only read 'resourcequotas' (ResourceQuota is the tenant's budget); remove the verbs patch"),
        ('{apiGroups: [""], resources: [resourcequotas/status], verbs: [update]}', "resources", "a bundle may only read 'resourcequotas/status'"),
        ('{apiGroups: [""], resources: [limitranges], verbs: [delete]}', "resources", "a bundle may only read 'limitranges'"),
        ('{apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [create]}', "resources", "a bundle may only read 'networkpolicies'"),
        ('{apiGroups: [""], resources: [namespaces], verbs: [patch]}', "resources", "a bundle may only read 'namespaces'"),
        ('{apiGroups: [gateway.networking.k8s.io], resources: [httproutes], verbs: [create]}', "resources",
         "a bundle may only read 'httproutes' (Gateway API routes attach to the platform's Gateways"),
        ('{apiGroups: [gateway.networking.k8s.io], resources: [referencegrants], verbs: [create, delete]}', "resources",
         "a bundle may only read 'referencegrants'"),
        ('{apiGroups: [""], resources: [serviceaccounts/token], verbs: [create]}', "resources", "'serviceaccounts/token' is not allowed in a bundle: it mints tokens"),
        ('{apiGroups: [""], resources: [pods/ephemeralcontainers], verbs: [patch]}', "resources", "'pods/ephemeralcontainers' is not allowed"),
        ('{apiGroups: [""], resources: [pods/binding], verbs: [create]}', "resources", "'pods/binding' is not allowed"),
        ('{apiGroups: [jobset.x-k8s.io], resources: [jobsets/status], verbs: [update]}', "resources",
         "'jobsets/status' is not allowed in a bundle: the queue policy takes whoever may update it for the JobSet controller"),
        ('{apiGroups: [batch], resources: [jobs/status], verbs: [patch]}', "resources", "'jobs/status' is not allowed in a bundle: the queue policy"),
        ('{apiGroups: [ray.io], resources: [rayclusters/status], verbs: [update]}', "resources",
         "'rayclusters/status' is not allowed in a bundle: the queue policy takes whoever may update it for the KubeRay operator"),
        ('{apiGroups: [ray.io], resources: [rayjobs/status], verbs: [patch]}', "resources", "'rayjobs/status' is not allowed in a bundle"),
        ('{apiGroups: [ray.io], resources: [rayclusters], verbs: [get, escalate]}', "verbs", "verb 'escalate' is not allowed"),
        ('{apiGroups: [ray.io], resources: [rayclusters], verbs: [bind]}', "verbs", "verb 'bind' is not allowed"),
        ('{apiGroups: [""], resources: [users], verbs: [impersonate]}', "verbs", "verb 'impersonate' is not allowed"),
        ('{apiGroups: [kueue.x-k8s.io], resources: [localqueues], verbs: [update]}', "apiGroups", "API group 'kueue.x-k8s.io' is not allowed"),
        ('{apiGroups: [admissionregistration.k8s.io], resources: [validatingadmissionpolicybindings], verbs: [delete]}', "apiGroups", "API group 'admissionregistration.k8s.io' is not allowed in a bundle: admission webhooks"),
    ],
)
def test_validate_refuses_a_stack_bundle_beyond_the_guard_rails_on_its_line(capsys, project_copy, rule, bad, message):
    line = add_bundle(project_copy, rule)
    code, output = validate(capsys, project_copy)
    assert code == 1
    column = (project_copy / PROD).read_text().splitlines()[line - 1].index(f"{bad}:") + 1
    expected = f"{PROD}:{line}:"
    assert f"config.gpu-tenancy:platform.roleBundles.team-tools.rules[0].{bad}" in output
    assert f"role bundle 'team-tools': {message}" in output
    located = [l for l in output.splitlines() if message in l]
    assert located and all(l.startswith(expected) for l in located), output
    # The problem points into the rule's `bad` list (flow style: at or after the key).
    assert int(located[0].split(":")[2]) >= column


def test_reading_guarded_objects_is_fine(capsys, project_copy):
    add_bundle(project_copy, '{apiGroups: [""], resources: [resourcequotas, limitranges], verbs: [get, list, watch]}')
    code, output = validate(capsys, project_copy)
    assert code == 0, output


def test_a_tenant_names_an_unknown_bundle(capsys, project_copy):
    path = project_copy / "tenants" / "inference.yaml"
    replace_once(path, "bundles: [kserve, leaderworkersets, leases]", "bundles: [kserv, leaderworkersets, leases]")
    code, output = validate(capsys, project_copy)
    assert code == 1
    line = line_of(path, "bundles: [kserv,")
    assert f"tenants/inference.yaml:{line}:" in output
    assert "access.developers.bundles[0]: unknown role bundle 'kserv'; did you mean 'kserve'?" in output


def test_a_stack_bundle_can_be_named_by_a_tenant_and_replaces_a_shipped_one(capsys, project_copy):
    add_bundle(project_copy, "{apiGroups: [batch.volcano.sh], resources: [jobs], verbs: [get, list, create]}")
    replace_once(project_copy / "tenants" / "eval.yaml", "bundles: [kubeflow-pipelines]", "bundles: [kubeflow-pipelines, team-tools]")
    code, output = validate(capsys, project_copy)
    assert code == 0, output


def test_rule_problems_are_empty_for_plain_crd_rules():
    assert rule_problems(BundleRule(apiGroups=["ray.io"], resources=["rayclusters", "rayservices/status"], verbs=["get", "patch"])) == []


def test_the_docs_list_every_shipped_bundle_with_its_groups_and_resources():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "role-bundles.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in doc.splitlines() if line.startswith("| `")}
    assert set(rows) == set(SHIPPED_BUNDLES)
    for name, bundle in shipped_bundles().items():
        for rule in bundle.rules:
            for group in rule.api_groups:
                assert f"{group}:" in rows[name], (name, group)
            for resource in rule.resources:
                assert resource in rows[name], (name, resource)


def test_a_stack_bundle_creating_an_uncounted_kind_is_warned_about(capsys, project_copy):
    line = add_bundle(project_copy, '{apiGroups: [example.com], resources: [widgets, widgets/status], verbs: [get, create]}')
    code, output = validate(capsys, project_copy)
    assert code == 0
    assert (f"{PROD}:{line}:13: warning: config.gpu-tenancy:platform.roleBundles.team-tools.rules[0]: role bundle 'team-tools' "
            "lets members create widgets.example.com, which guardRails.objects.kinds does not count") in output, output


def test_a_stack_bundle_creating_counted_kinds_only_is_not_warned_about(capsys, project_copy):
    add_bundle(project_copy, '{apiGroups: [apps], resources: [deployments, deployments/status], verbs: [get, create]}')
    code, output = validate(capsys, project_copy)
    assert code == 0 and "does not count" not in output, output
