"""`tenants migrate` on the example files as they were before platform grants needed ports."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from components.authoring.migrate import UnreadableFile, migrate_stack_text, migrate_tenant_text
from components.load import load_environment
from components.spec.problems import InvalidInput
from tests.cli.running import run

# Kept as tenant-files/ and stack-files/, not tenants/ and stacks/: other lanes take every tests/**/stacks
# directory for a project in the current format; the tests copy them to where a project has them.
BEFORE = Path(__file__).parent / "migrate_fixtures" / "before-port-grants"
LAYOUT = {"tenant-files": "tenants", "stack-files": "stacks"}
FILES = sorted(f"{LAYOUT[p.parent.name]}/{p.name}" for p in BEFORE.rglob("*.yaml"))
# Each platform grant of the old files, (file, role): written by name, so it reached every port.
OLD_GRANTS = [("tenants/eval.yaml", "monitoring"), ("tenants/inference.yaml", "ingress"),
              ("tenants/inference.yaml", "monitoring"), ("tenants/llm-finetune.yaml", "monitoring")]
# A person's answers, by what the choice line asks.
ANSWERS = {"ports": "[{port: 8080}]", "nodeRead": "false", "guardRails": "{objects: {}, storage: {}}", "patchTaints": "true"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for kept, directory in LAYOUT.items():
        shutil.copytree(BEFORE / kept, tmp_path / directory)
    return tmp_path


def _choices(err: str) -> list[tuple[str, int, str]]:
    found = re.findall(r"^(\S+\.yaml):(\d+): (.*)$", err, flags=re.M)
    return [(file, int(line), what) for file, line, what in found]


def _texts(root: Path) -> dict[str, str]:
    return {name: (root / name).read_text() for name in FILES}


def test_validate_on_an_old_file_says_to_run_migrate(project, capsys):
    code, _, err = run(capsys, "--root", str(project), "validate", "--stack", "prod")
    assert code == 1
    for name in FILES:
        if "prod" in name or name.startswith("tenants/"):
            assert f"run `tenants migrate {name}`" in err, err
    assert "platformPorts has none" not in err  # not seven field errors: one line per file


def test_migrate_reports_every_old_grant_at_its_line_and_keeps_comments(project, capsys):
    before = _texts(project)
    code, out, err = run(capsys, "--root", str(project), "migrate")
    assert code == 1
    assert out.count("migrated gpu-tenancy.dev/v1alpha1 -> gpu-tenancy.dev/v1alpha2") == len(FILES)
    choices = _choices(err)
    grants = []
    for file, line, what in choices:
        written = (project / file).read_text().splitlines()[line - 1]
        assert "DECIDE" in written, (file, line, written)
        role = re.search(r"platform role '([a-z-]+)'", what)
        if role:
            assert f"{{role: {role.group(1)}, ports: DECIDE}}" in written
            grants.append((file, role.group(1)))
    assert sorted(grants) == sorted(OLD_GRANTS)
    for name, text in before.items():
        migrated = (project / name).read_text()
        for comment in re.findall(r"#.*$", text, flags=re.M):
            assert comment in migrated, (name, comment)
        # Only the version line and the choice points change: every other line stays as written.
        kept = [line for line in text.splitlines() if "v1alpha1" not in line and not re.search(r"platform: \[", line)]
        assert [line for line in kept if line not in migrated.splitlines()] == [], name


def test_migrate_is_idempotent(project, capsys):
    first = run(capsys, "--root", str(project), "migrate")
    after_first = _texts(project)
    second = run(capsys, "--root", str(project), "migrate")
    assert _texts(project) == after_first
    assert second[0] == first[0] == 1
    assert _choices(second[2]) == _choices(first[2])
    assert "migrated" not in second[1]


def test_the_migrated_files_are_valid_once_every_choice_is_decided(project, capsys):
    _, _, err = run(capsys, "--root", str(project), "migrate")
    with pytest.raises(InvalidInput) as undecided:
        load_environment(project, "prod")
    assert all("undecided" in p.message for p in undecided.value.problems)
    for file, line, what in _choices(err):
        path = project / file
        lines = path.read_text().splitlines(keepends=True)
        key = what.split(" ", 1)[0].rstrip(":").split(".")[-1]
        lines[line - 1] = lines[line - 1].replace("DECIDE", ANSWERS[key], 1)
        path.write_text("".join(lines))
    code, out, err = run(capsys, "--root", str(project), "validate")
    assert code == 0, err
    code, out, err = run(capsys, "--root", str(project), "migrate")
    assert (code, err) == (0, "")
    assert "every file is in the current format" in out
    environment = load_environment(project, "prod")
    inference = next(t.spec for t in environment.tenants if t.name == "inference")
    assert [(g.role, [p.port for p in g.ports]) for g in inference.network.ingress_from.platform] == [
        ("ingress", [8080]), ("monitoring", [8080])]


def test_a_grant_in_an_environment_override_is_a_choice_too():
    text = ("apiVersion: gpu-tenancy.dev/v1alpha1\nkind: Tenant\nname: a\nenvironments:\n  dev:\n"
            "    network:\n      ingressFrom:\n        platform:\n          - ingress   # the dev router\n")
    result = migrate_tenant_text(text, "tenants/a.yaml")
    assert "- {role: ingress, ports: DECIDE}" in result.text
    assert "# the dev router" in result.text
    assert [c.what.split(" (")[0] for c in result.choices] == [
        "environments.dev.network.ingressFrom.platform[0].ports: which ports of the tenant's pods platform role 'ingress' may reach in environment dev"]


def test_a_grant_that_names_its_ports_is_kept():
    text = ("apiVersion: gpu-tenancy.dev/v1alpha1\nkind: Tenant\nname: a\nnetwork:\n  ingressFrom:\n"
            "    platform: [{role: ingress, ports: [{port: 8000}]}]\n")
    result = migrate_tenant_text(text, "tenants/a.yaml")
    assert result.choices == []
    assert result.text == text.replace("v1alpha1", "v1alpha2")


def test_a_stack_that_sets_the_changed_defaults_has_nothing_to_decide():
    text = ("config:\n  gpu-tenancy:platform:\n    labelDomain: x.dev\n    podSecurity: {version: v1.30}\n"
            "    tenantAccess: {nodeRead: true}\n    guardRails: {objects: {}}\n")
    result = migrate_stack_text(text, "stacks/Pulumi.dev.yaml")
    assert result.choices == []
    assert result.text.splitlines()[2] == "    apiVersion: gpu-tenancy.dev/v1alpha2"


def test_a_file_migrate_cannot_read_stops_every_write(project, capsys):
    broken = project / "tenants" / "broken.yaml"
    broken.write_text("apiVersion: gpu-tenancy.dev/v1alpha1\nname: a\nname: b\n")
    before = _texts(project)
    code, out, err = run(capsys, "--root", str(project), "migrate")
    assert code == 1
    assert "tenants/broken.yaml:3:1" in err and "nothing written" in err
    assert _texts(project) == before and out == ""
    with pytest.raises(UnreadableFile):
        migrate_tenant_text(broken.read_text(), "tenants/broken.yaml")


def test_the_current_example_files_need_no_migration(capsys):
    root = Path(__file__).parents[2]
    code, out, err = run(capsys, "--root", str(root), "migrate", "--check")
    assert (code, err) == (0, "")


def test_a_stack_that_leaves_the_changed_defaults_unset_gets_each_as_a_choice():
    text = "config:\n  gpu-tenancy:platform:\n    labelDomain: x.dev   # our domain\n"
    result = migrate_stack_text(text, "stacks/Pulumi.dev.yaml")
    asked = {c.what.split(": ", 1)[0].split(".")[-1] for c in result.choices}
    assert asked == {"version", "nodeRead", "guardRails"}
    lines = result.text.splitlines()
    assert all("DECIDE" in lines[c.line - 1] for c in result.choices)
    assert "    labelDomain: x.dev   # our domain" in lines


def test_reading_the_base_as_current_skips_the_round_trip_parser_for_current_files(monkeypatch):
    from components.authoring import migrate

    tenant = "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: a\n"
    stack = "config:\n  gpu-tenancy:platform:\n    apiVersion: 'gpu-tenancy.dev/v1alpha2'   # current\n    labelDomain: x.dev\n"
    unversioned = "config:\n  gpu-tenancy:platform:\n    labelDomain: x.dev   # gpu-tenancy.dev/v1alpha2 in a comment only\n"
    old = "apiVersion: gpu-tenancy.dev/v1alpha1\nkind: Tenant\nname: a\n"
    parsed = []
    real_load = migrate._load
    monkeypatch.setattr(migrate, "_load", lambda text, file: parsed.append(file) or real_load(text, file))
    assert migrate.read_as_current(tenant, "t.yaml", False) == tenant
    assert migrate.read_as_current(stack, "s.yaml", True) == stack
    assert parsed == []   # 30 ms a file saved: the diff reads every base file
    assert "apiVersion: gpu-tenancy.dev/v1alpha2" in migrate.read_as_current(unversioned, "u.yaml", True)
    assert migrate.read_as_current(old, "o.yaml", False).startswith("apiVersion: gpu-tenancy.dev/v1alpha2\n")
    assert parsed == ["u.yaml", "o.yaml"]
