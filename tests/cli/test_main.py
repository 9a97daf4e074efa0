"""The `tenants` command: exit codes, validate, new, schema (checked with the jsonschema library)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.cli.main import _parser, main
from components.spec.json_schema import stack_schema, tenant_schema
from tests.cli.running import run

REPO = Path(__file__).resolve().parents[2]
BROKEN = REPO / "tests" / "validate" / "broken"


def exit_code(capsys, *argv: str) -> tuple[int, str, str]:
    """For argparse paths that end in SystemExit (--help, usage errors)."""
    with pytest.raises(SystemExit) as caught:
        main(list(argv))
    out, err = capsys.readouterr()
    return caught.value.code, out, err


# validate ---------------------------------------------------------------------------------------


def test_validate_examples_ok(capsys):
    code, out, err = run(capsys, "--root", str(REPO), "validate")
    assert code == 0
    # The summary, then what dev's autoscaled pool's node group must set (tests/cli/test_validate.py).
    assert out.splitlines()[0] == "dev: 3 tenant(s) ok; prod: 3 tenant(s) ok; staging: 3 tenant(s) ok"
    assert out.splitlines()[1].startswith("Autoscaled pools: ") and "  dev/l4-shared:" in out.splitlines()
    assert all(": warning: " in line for line in err.splitlines())


def test_validate_one_stack(capsys):
    code, out, _ = run(capsys, "--root", str(REPO), "validate", "--stack", "dev")
    assert code == 0
    assert out.splitlines()[0] == "dev: 3 tenant(s) ok"
    code, out, _ = run(capsys, "--root", str(REPO), "validate", "--stack", "prod")
    assert code == 0 and out.strip() == "prod: 3 tenant(s) ok"


def test_strict_fails_on_the_example_warnings(capsys):
    code, out, err = run(capsys, "--root", str(REPO), "validate", "--stack", "prod", "--strict")
    assert code == 1
    assert out == ""
    assert "stacks/Pulumi.prod.yaml:" in err and "tenants validate: 2 error(s)" in err  # two near-full shared pools


def test_validate_unknown_stack(capsys):
    code, _, err = run(capsys, "--root", str(REPO), "validate", "--stack", "qa")
    assert code == 1
    assert "stacks/Pulumi.qa.yaml: no such stack 'qa' (known stacks: dev, prod, staging)" in err


def test_validate_without_stacks(capsys, tmp_path):
    code, _, err = run(capsys, "--root", str(tmp_path), "validate")
    assert code == 1
    assert "no stacks found" in err


def test_validate_prints_each_problem_once_though_every_stack_sees_it(capsys, project_copy):
    path = project_copy / "tenants" / "eval.yaml"
    path.write_text(path.read_text().replace("costCenter: cc-4300", "costCenter: cc-4300\nqouta: {}"))
    code, out, err = run(capsys, "--root", str(project_copy), "validate")
    assert code == 1 and out == ""
    assert err.count("qouta: unknown field; did you mean 'quota'?") == 1


# help and usage ---------------------------------------------------------------------------------


def _subcommands() -> list[str]:
    parser = _parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(action.choices)


def test_every_command_in_the_table_has_a_parser():
    from components.cli.main import COMMANDS

    assert _subcommands() == sorted(COMMANDS)
    assert {"init", "validate", "migrate", "schema", "new", "import", "render", "diff", "capacity", "report", "stacks", "moves", "simulate"} == set(COMMANDS)


@pytest.mark.parametrize("argv", [["--help"], *[[name, "--help"] for name in _subcommands()]], ids=" ".join)
def test_help_exits_zero(capsys, argv):
    code, out, _ = exit_code(capsys, *argv)
    assert code == 0
    assert out.startswith("usage: tenants")


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        ["validate", "--no-such-option"],
        ["new", "team-x"],  # --owner-group is required
        ["schema", "--kind", "cluster"],
    ],
    ids=" ".join,
)
def test_usage_errors_exit_two(capsys, argv):
    code, _, err = exit_code(capsys, *argv)
    assert code == 2
    assert "error:" in err and "(see tenants" in err


def test_no_command_prints_help_and_exits_two(capsys):
    code, _, err = run(capsys)
    assert code == 2
    assert "usage: tenants" in err


# new --------------------------------------------------------------------------------------------


def test_new_writes_a_file_that_validates(capsys, project_copy):
    code, out, _ = run(capsys, "--root", str(project_copy), "new", "research", "--owner-group", "research-leads",
                       "--email", "research@acme.dev", "--developer-group", "research-eng")
    assert code == 0
    written = project_copy / "tenants" / "research.yaml"
    assert str(written) in out
    text = written.read_text()
    assert text.startswith("# yaml-language-server: $schema=../docs/schema/tenant.schema.json\n")
    assert "groups: [\"research-leads\"]" in text

    code, out, err = run(capsys, "--root", str(project_copy), "validate")
    assert code == 0, err
    assert "prod: 4 tenant(s) ok" in out


def test_new_refuses_to_overwrite(capsys, project_copy):
    target = project_copy / "tenants" / "eval.yaml"
    before = target.read_bytes()
    code, _, err = run(capsys, "--root", str(project_copy), "new", "eval", "--owner-group", "g")
    assert code == 1
    assert "exists; use --force to overwrite" in err
    assert target.read_bytes() == before


def test_new_force_overwrites(capsys, project_copy):
    code, _, _ = run(capsys, "--root", str(project_copy), "new", "eval", "--owner-group", "eval-leads", "--force")
    assert code == 0
    assert "name: eval" in (project_copy / "tenants" / "eval.yaml").read_text()


def test_new_stdout_writes_nothing(capsys, project_copy):
    before = sorted(p.name for p in (project_copy / "tenants").iterdir())
    code, out, _ = run(capsys, "--root", str(project_copy), "new", "team-x", "--owner-group", "g", "--stdout")
    assert code == 0
    assert "name: team-x" in out
    assert sorted(p.name for p in (project_copy / "tenants").iterdir()) == before


@pytest.mark.parametrize("name", ["Team_X", "team-", "a" * 41])
def test_new_refuses_bad_names(capsys, project_copy, name):
    code, out, err = run(capsys, "--root", str(project_copy), "new", name, "--owner-group", "g")
    assert code == 1 and out == ""
    assert f"tenants new: NAME '{name}': name: '{name}' is not a valid tenant name" in err
    assert not (project_copy / "tenants" / f"{name}.yaml").exists()


# schema -----------------------------------------------------------------------------------------


def _schema_from_cli(capsys, kind: str) -> dict:
    code, out, _ = run(capsys, "schema", "--kind", kind)
    assert code == 0
    return json.loads(out)


def _validator(schema: dict) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_tenant_schema_is_draft_2020_12_and_accepts_the_examples(capsys):
    schema = _schema_from_cli(capsys, "tenant")
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    validator = _validator(schema)
    examples = sorted((REPO / "tenants").glob("*.yaml"))
    assert len(examples) >= 3
    for path in examples:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], path.name


@pytest.mark.parametrize(
    "name, words",
    [
        ("unknown-field-typo", "'qouta' was unexpected"),
        ("wrong-type-integer", "is not valid under any of the given schemas"),
        ("wrong-type-list", "is not of type 'array'"),
        ("wrong-type-mapping", "is not of type 'object'"),
        ("wrong-type-bool", "is not of type 'boolean'"),
        ("wrong-kind", "'Tenant' was expected"),
        ("missing-required-field", "'costCenter' is a required property"),
        ("invalid-name-uppercase", "does not match"),
        ("invalid-name-too-long", "is too long"),
        ("invalid-namespace-name", "does not match"),
        ("negative-gpu", "-1 is not valid under any of the given schemas"),
        ("quantity-near-miss-gb", "is not valid under any of the given schemas"),
        ("quantity-decimal-comma", "is not valid under any of the given schemas"),
        ("quantity-near-miss-gpus", "'4 GPUs' is not valid under any of the given schemas"),
    ],
)
def test_tenant_schema_rejects_the_broken_files_it_can_express(name, words):
    validator = _validator(tenant_schema())
    data = yaml.safe_load((BROKEN / f"{name}.yaml").read_text())
    messages = [e.message for e in validator.iter_errors(data)]
    assert any(words in m for m in messages), messages


def test_stack_schema_accepts_the_examples_and_rejects_a_typo(capsys):
    validator = _validator(_schema_from_cli(capsys, "stack"))
    for env in ("dev", "prod"):
        data = yaml.safe_load((REPO / "stacks" / f"Pulumi.{env}.yaml").read_text())
        assert [e.message for e in validator.iter_errors(data)] == [], env
    for name, words in [("stack-unknown-field", "'nodePool' was unexpected"), ("stack-quantity-near-miss", "'1GB'")]:
        data = yaml.safe_load((BROKEN / "stacks" / f"{name}.yaml").read_text())
        assert any(words in e.message for e in validator.iter_errors(data)), name


def test_schema_out_writes_the_file(capsys, tmp_path):
    target = tmp_path / "nested" / "tenant.schema.json"
    code, out, _ = run(capsys, "schema", "--out", str(target))
    assert code == 0 and out == ""
    assert json.loads(target.read_text()) == tenant_schema()


@pytest.mark.parametrize("kind, build", [("tenant", tenant_schema), ("stack", stack_schema)])
def test_committed_schemas_are_up_to_date(kind, build):
    committed = (REPO / "docs" / "schema" / f"{kind}.schema.json").read_text()
    generated = json.dumps(build(), indent=2, sort_keys=True) + "\n"
    assert committed == generated, f"docs/schema/{kind}.schema.json is stale; run `make schema`"
