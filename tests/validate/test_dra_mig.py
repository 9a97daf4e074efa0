"""What validate refuses of MIG through DRA, at the line (tests/fixtures/dra-mig edited in a copy)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from components.load import load_environment
from components.spec.stack import Platform
from tests.project_edits import line_of, replace_once, validation_errors

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "dra-mig"
STACK = "stacks/Pulumi.dra.yaml"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    return root


def test_the_fixture_validates_without_warnings():
    environment = load_environment(FIXTURE, "dra")
    assert [str(p) for p in environment.warnings] == []


def test_a_layout_whose_counters_overflow_a_gpu_is_refused_at_its_profiles(copy):
    stack = copy / STACK
    replace_once(stack, "profiles: {3g.40gb: 1, 1g.10gb: 4}", "profiles: {3g.40gb: 1, 1g.10gb: 5}")
    compute, memory = validation_errors(copy, "dra")
    for error in (compute, memory):
        assert error.startswith(f"{STACK}:{line_of(stack, 'profiles: {3g.40gb')}:")
        assert "more than one GPU's shared counters (memory-slice-0..7, multiprocessors)" in error
    assert "needs 8 compute slices; a A100-80GB has 7" in compute and "needs 9 memory slices; a A100-80GB has 8" in memory


def test_a_profile_the_gpu_model_cannot_hold_is_refused(copy):
    stack = copy / STACK
    replace_once(stack, "profiles: {3g.40gb: 1, 1g.10gb: 4}", "profiles: {3g.40gb: 1, 1g.5gb: 4}")
    errors = validation_errors(copy, "dra")
    assert any(e.startswith(f"{STACK}:{line_of(stack, 'profiles: {3g.40gb')}:") and "profile 1g.5gb does not exist on A100-80GB" in e
               for e in errors), errors


def test_a_mig_device_class_of_a_profile_the_model_lacks_is_refused_at_its_mig_profile(copy):
    stack = copy / STACK
    replace_once(stack, "      mig.nvidia.com: {owner: driver,",
                 "      tiny.gpu.mig.dev: {driver: gpu.nvidia.com, gpuClass: a100-mig, migProfile: 1g.5gb}\n      mig.nvidia.com: {owner: driver,")
    (error,) = validation_errors(copy, "dra")
    assert error.startswith(f"{STACK}:{line_of(stack, 'tiny.gpu.mig.dev')}:") and "migProfile" in error
    assert "a A100-80GB GPU has no MIG profile 1g.5gb" in error


def test_kai_is_refused_with_mig_through_dra_and_kueue_counts_it(copy):
    stack = copy / STACK
    replace_once(stack, "    gpuStack: dra\n", "    gpuStack: dra\n    scheduler: kai\n")
    errors = validation_errors(copy, "dra")
    assert len(errors) == 2 and all("KAI charges a queue one whole GPU per device" in e and "migProfile" in e for e in errors), errors
    replace_once(stack, "    scheduler: kai\n", "    scheduler: kueue\n")
    load_environment(copy, "dra")   # valid: tests/e2e/scheduling/test_kueue_dra_mig.py shows the real Kueue counting it


def test_mig_on_the_dra_stack_without_dra_serving_is_refused_at_the_class():
    base = {"labelDomain": "g.dev", "gpuStack": "dra", "deviceClasses": {}}
    with pytest.raises(ValidationError, match="MIG through DRA needs `serving: dra` and `devices`"):
        Platform.model_validate({**base, "gpuClasses": {"a": {"model": "A100-80GB", "memory": "80Gi", "product": "NVIDIA-A100",
                                                              "sharing": "mig", "serving": "both"}}})
    with pytest.raises(ValidationError, match="MIG strategy is the device plugin's"):
        Platform.model_validate({**base, "gpuClasses": {"a": {"model": "A100-80GB", "memory": "80Gi", "sharing": "mig", "serving": "dra",
                                                              "mig": {"strategy": "single"}, "devices": {"productName": "NVIDIA A100"}}}})
