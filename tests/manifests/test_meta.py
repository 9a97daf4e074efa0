from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from components.manifests.build import environment_objects
from components.manifests.meta import ENVIRONMENT_LABEL, environment_label, object_id
from components.fleet.environment import Environment
from components.load import load_environment, stack_names


REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_ENVIRONMENTS = tuple(stack_names(REPO_ROOT))
RENAMED = REPO_ROOT / "tests" / "fixtures" / "environment-label"
PLATFORM_KEY = "  gpu-tenancy:platform:\n"


def _environment_labels(environment: Environment) -> dict[str, str]:
    """object id -> its environment label, for every object that carries one."""
    return {
        object_id(obj): obj["metadata"]["labels"][ENVIRONMENT_LABEL]
        for objects in environment_objects(environment).values()
        for obj in objects
        if ENVIRONMENT_LABEL in obj["metadata"].get("labels", {})
    }


def _with_environment_field(stack: str, value: str, root: Path) -> Path:
    """A copy of the example project whose stack `stack` sets `environment: value`."""
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    path = root / "stacks" / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    assert text.count(PLATFORM_KEY) == 1, "the example stack layout changed; insert the field elsewhere"
    path.write_text(text.replace(PLATFORM_KEY, f"{PLATFORM_KEY}    environment: {value}\n"))
    return root


def test_environment_label_prefers_the_stack_environment_field(make_environment):
    assert environment_label(make_environment("prod-eu")) == "prod-eu"
    assert environment_label(make_environment("prod-eu", environment="prod")) == "prod"


def test_a_stack_named_apart_from_its_environment_labels_every_object_with_the_environment():
    environment = load_environment(RENAMED, "lab-eu")
    labels = _environment_labels(environment)
    assert set(labels.values()) == {"laboratory"}
    # The kinds that once carried the stack name instead are all in the fixture, so the test can fail.
    kinds = {key.split("/")[-3] for key in labels}
    assert {"PriorityClass", "ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds


@pytest.mark.parametrize("stack", EXAMPLE_ENVIRONMENTS)
def test_every_object_of_an_example_stack_carries_one_environment_label(stack, tmp_path):
    assert set(_environment_labels(load_environment(REPO_ROOT, stack)).values()) == {stack}
    renamed = load_environment(_with_environment_field(stack, f"{stack}-renamed", tmp_path), stack)
    assert set(_environment_labels(renamed).values()) == {f"{stack}-renamed"}


# A label or annotation key written out: `<DNS domain>/<name>` (apiVersions, `/v1...`, are not keys).
LABEL_KEY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?\.[a-z]{2,}/[A-Za-z0-9][A-Za-z0-9._-]*$")
# Strings of that shape that are no label or annotation key, and may stand where they are used.
NOT_LABEL_KEYS = {
    "nvidia.com/gpu": "an extended resource name (meta's GPU_TAINT_KEY, the one taint key of that spelling, is in meta)",
    "nvidia.com/gpu.shared": "an extended resource name (time-sliced and MPS shares)",
    "nvidia.com/mig-": "the prefix of the MIG extended resource names",
    "kubernetes.io/service-account-token": "a Secret type, refused by the guard policy",
}
# Keys built outside meta on purpose: (module, key as written).
KEPT = {
    ("components.validate.platform", "{platform.label_domain}/tenant"):
        "a message that names the taint for people; validate/ sits below manifests/ and cannot import meta (text unchanged)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _keys_built(node: ast.JoinedStr) -> list[str]:
    """The keys an f-string builds with `{GROUP}/` or `{<...>label_domain}/`: our own label keys."""
    return [f"{{{ast.unparse(value.value)}}}{re.match(r'/[A-Za-z0-9._-]*', after.value).group()}"
            for value, after in zip(node.values, node.values[1:])
            if isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant) and str(after.value).startswith("/")
            and re.search(r"\bGROUP\b|label_domain", ast.unparse(value.value))]


def label_keys_outside_meta(root: Path) -> list[str]:
    """`module:line: key` of every label or annotation key written under components/ outside meta.py
    (docstrings, whose examples show keys, excepted)."""
    found = []
    for path in sorted((root / "components").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        if module == "components.manifests.meta":
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                found += [f"{module}:{node.lineno}: {key}" for key in _keys_built(node) if (module, key) not in KEPT]
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and LABEL_KEY.match(node.value) and not re.search(r"/v[0-9]", node.value) and node.value not in NOT_LABEL_KEYS):
                found.append(f"{module}:{node.lineno}: {node.value}")
    return found


def test_every_label_and_annotation_key_is_in_meta():
    assert label_keys_outside_meta(REPO_ROOT) == []


def test_the_key_scan_sees_a_literal_key_and_a_key_built_from_the_group(tmp_path):
    (tmp_path / "components" / "manifests").mkdir(parents=True)
    (tmp_path / "components" / "manifests" / "meta.py").write_text('GROUP = "gpu-tenancy.dev"\nTEAM = f"{GROUP}/team"\n')
    (tmp_path / "components" / "manifests" / "planted.py").write_text(
        '"""Docstring: gpu-tenancy.dev/tenant is shown, not written."""\n'
        'ROLE = "gpu-tenancy.dev/role"\nAPI = "gpu-tenancy.dev/v1alpha1"\nGPU = "nvidia.com/gpu"\n'
        'def labels(platform):\n    return {f"{platform.label_domain}/pool": "a", f"{GROUP}/x": "b"}\n')
    assert label_keys_outside_meta(tmp_path) == [
        "components.manifests.planted:2: gpu-tenancy.dev/role",
        "components.manifests.planted:6: {platform.label_domain}/pool",
        "components.manifests.planted:6: {GROUP}/x",
    ]
