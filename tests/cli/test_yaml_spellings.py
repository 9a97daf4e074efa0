"""What users read spells values as they write them in YAML: null, true/false, [h100, l4], never
Python's None, True/False or ['h100', 'l4']."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.cli import main
from tests.cli.test_diff import commit_all, git
from tests.project_edits import replace_once

PYTHON_SPELLING = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\['|\bNoneType\b")


def run(root: Path, capsys, *args: str) -> tuple[int, str]:
    code = main(["--root", str(root), *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("old, new, field, message", [
    ("  gpu: 40\n", "  gpu: {h100: null}\n", "quota.gpu.h100", "must be a whole number (got null)"),
    ("displayName: LLM Fine-tuning", "displayName: [llm, finetune]", "displayName", "must be a string (got [llm, finetune])"),
    ("  objects: {pods: 400, services: 20, servicesLoadBalancers: 0, persistentVolumeClaims: 100}", "  objects: [pods]", "quota.objects", "must be a mapping of fields (got a list: [pods])"),
    ("  dedicatedPools: [h100-train]", "  dedicatedPools: h100-train", "gpu.dedicatedPools", "must be a list (got a string: 'h100-train')"),
    ("  gpu: 40\n", "  gpu: true\n", "quota.gpu", "must be a whole number (got true)"),
])
def test_validate_messages_use_yaml_spellings(project_copy, capsys, old, new, field, message):
    path = project_copy / "tenants" / "llm-finetune.yaml"
    replace_once(path, old, new)

    code, output = run(project_copy, capsys, "validate", "--stack", "prod")

    assert code == 1
    ours = [line for line in output.splitlines() if line.startswith("tenants/llm-finetune.yaml:")]
    assert any(f" {field}: {message}" in line for line in ours), output
    assert not PYTHON_SPELLING.search(output), output


def test_a_mig_layout_that_mixes_profiles_lists_them_as_yaml(project_copy, capsys):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    replace_once(stack, "          strategy: mixed\n", "          strategy: single\n")

    code, output = run(project_copy, capsys, "validate", "--stack", "prod")

    assert code == 1
    assert "mixes [1g.10gb, 3g.40gb] (use strategy: mixed)" in output, output
    assert not PYTHON_SPELLING.search(output), output


def test_diff_of_a_boolean_reads_false_to_true(project_copy, capsys):
    git(project_copy, "init", "-q", "-b", "main")
    commit_all(project_copy, "base")
    replace_once(project_copy / "stacks" / "Pulumi.dev.yaml", "          replicas: 4\n", "          replicas: 4\n          renameByDefault: true\n")

    outputs = []
    for output_format in ("text", "markdown"):
        code, output = run(project_copy, capsys, "diff", "--base", "HEAD", "--stack", "dev", "--format", output_format)
        assert code == 0, output
        outputs.append(output)

    for output in outputs:
        assert "renameByDefault: false → true" in output, output
        assert not PYTHON_SPELLING.search(output), output


def test_capacity_reads_without_python_spellings(capsys):
    for stack in ("dev", "staging", "prod"):
        for output_format in ("text", "markdown"):
            code, output = run(Path("."), capsys, "capacity", "--stack", stack, "--format", output_format)
            assert code == 0 and not PYTHON_SPELLING.search(output), output
