"""Import is data, never text: names written on the source (a namespace admin there picks them)
reach the tenant file only as values or as escaped comments, so the file reads back as exactly the
data the importer meant, with no key the source smuggled in (issue #34)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.authoring.import_cluster import tenants_from_cluster
from components.authoring.import_files import tenants_from_documents
from components.authoring.importing import _ordered, tenant_file_text
from components.fleet.tenant_claims import subject_refusal
from components.spec.problems import printable
from components.load import load_platform
from components.spec.yaml_source import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = load_platform(ROOT, "staging")[0]

# What a hostile name tries: end the comment or the value and write keys of its own (API-server
# and metadata-service egress, another tenant's GPUs), with every line break YAML knows.
INJECTIONS = [
    "\nquota:\n  gpu: {h100: 64}\n",
    "\r\nnetwork:\n  egress: [{cidr: 10.2.0.10/32}, {cidr: 169.254.169.254/32}]",
    "\rgpu: {classes: [h100]}",
    "\x85access: {owners: {groups: [system:masters]}}",
    "\u2028network: {ingressFrom: {tenants: [llm-finetune]}}",
    "\u2029namespaces: [llm-finetune]",
    "  # ", "': \"", "- x", "{a: 1}", "&a *a", "!!python/object/apply:os.system ['id']", "\x1b[2K\x1b[1A",
    "\t", "\x00", "\ufeff", "\n---\n", "\n...\n", "%YAML 1.1", "yes", "0o17", "2026-12-03", "~", "",
]
HOSTILE = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=24),
    st.builds(lambda a, injection, b: a + injection + b, st.text(max_size=4), st.sampled_from(INJECTIONS), st.text(max_size=4)),
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reads_back_as_meant(text: str, data: dict, sources: list[str], unmapped: list) -> dict:
    """The file's data is exactly `data` (in the file's order); its comment block is exactly the lines it means."""
    parsed = parse_yaml(text, "tenants/x.yaml").data
    assert parsed == yaml.safe_load(text) == _ordered(data)
    header = text.split("\napiVersion: ", 1)[0].split("\n")
    assert all(line.startswith("#") for line in header), header
    assert len(header) == 2 + len(set(sources)) + (1 + len(set(unmapped)) if unmapped else 0), header
    return parsed


@SETTINGS
@given(display=HOSTILE, role=HOSTILE, user=HOSTILE, group=HOSTILE, account=HOSTILE)
def test_hostile_names_of_a_live_namespace_stay_values(display, role, user, group, account):
    namespace = {"kind": "Namespace", "metadata": {"name": "team-x", "annotations": {"openshift.io/display-name": display}}}
    objects = [
        {"kind": "RoleBinding", "metadata": {"name": "custom", "namespace": "team-x"},
         "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": [{"kind": "User", "name": user}]},
        {"kind": "RoleBinding", "metadata": {"name": "devs", "namespace": "team-x"}, "roleRef": {"kind": "ClusterRole", "name": "edit"},
         "subjects": [{"kind": "User", "name": user}, {"kind": "Group", "name": group},
                      {"kind": "ServiceAccount", "namespace": "other", "name": account}]},
    ]
    imported = tenants_from_cluster([namespace], objects, PLATFORM)
    data, sources, unmapped = imported.tenants["team-x"], imported.sources["team-x"], imported.unmapped_of("team-x")
    parsed = _reads_back_as_meant(tenant_file_text(data, sources=sources, unmapped=unmapped), data, sources, unmapped)
    if display:
        assert parsed["displayName"] == display
    developers = parsed["access"]["developers"]
    assert developers.get("users") == [user] or not user
    assert (developers.get("groups") == [group]) or group.startswith("system:") or not group
    assert "quota" not in parsed and "network" not in parsed and "namespaces" not in parsed


@SETTINGS
@given(origin=HOSTILE, description=HOSTILE, owner=HOSTILE, role=HOSTILE, registry=HOSTILE, pattern=HOSTILE, cohort=HOSTILE)
def test_hostile_names_of_capsule_and_kueue_files_stay_values(origin, description, owner, role, registry, pattern, cohort):
    tenant = {"apiVersion": "capsule.clastix.io/v1beta2", "kind": "Tenant",
              "metadata": {"name": "team-y", "annotations": {"info.projectcapsule.dev/description": description}},
              "spec": {"owners": [{"kind": "User", "name": owner}],
                       "additionalRoleBindings": [{"clusterRoleName": role, "subjects": [{"kind": "Group", "name": owner}]}],
                       "containerRegistries": {"allowed": [registry], "allowedRegex": pattern}}}
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
             "spec": {"namespaceSelector": {}, "cohort": cohort,
                      "resourceGroups": [{"flavors": [{"name": "f", "resources": [{"name": role, "nominalQuota": 1}]}]}]}}
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"namespace": "team-y", "name": "main"},
             "spec": {"clusterQueue": "q"}}
    imported = tenants_from_documents([tenant, queue, local], PLATFORM, origin=origin)
    assert not imported.refused
    data, sources, unmapped = imported.tenants["team-y"], imported.sources["team-y"], imported.unmapped_of("team-y")
    parsed = _reads_back_as_meant(tenant_file_text(data, sources=sources, unmapped=unmapped), data, sources, unmapped)
    assert parsed.get("description", "") == description
    owners = parsed.get("access", {}).get("owners", {}).get("users", [])
    if owner and subject_refusal(PLATFORM, "users", owner, ["team-y"]) is not None:
        assert owner not in owners  # a `system:` subject the stack does not list is never written (#34 item 4)
    elif owner:
        assert owners == [owner]
    assert parsed.get("queue", {}).get("cohort", cohort) == cohort
    assert set(parsed) <= {"apiVersion", "kind", "name", "displayName", "description", "costCenter", "access", "images", "queue"}


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c"])
def test_printable_leaves_no_line_break(brk):
    assert printable(f"a{brk}b").splitlines() == [printable(f"a{brk}b")]


def test_a_text_that_does_not_read_back_is_never_returned():
    with pytest.raises(ValueError, match="does not read back as the imported data"):
        tenant_file_text({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a", "quota": {"cpu": {"requests": 0.1}}})
