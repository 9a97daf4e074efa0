from __future__ import annotations

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
