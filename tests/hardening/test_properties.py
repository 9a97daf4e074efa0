"""Properties of generated projects (tests/hardening/strategies.py), valid and mutated.

1. Loading never crashes: `load_environment` returns an environment or raises `InvalidInput` whose
   every problem names one of the project's files and a line >= 1.
2. A project that validates renders objects that validate strictly against Kubernetes 1.30 (and
   the shipped Kueue/KAI CRDs), rendering twice gives the same bytes, the rendered YAML reads back
   as exactly the built objects, and no GPU class or MIG profile is promised beyond capacity x
   overcommit.
3. The CLI answers any project with exit code 0 or 1 and never a traceback; a failed render
   leaves the output directory untouched.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from fractions import Fraction
from pathlib import Path

import yaml
from hypothesis import event, given, note, settings

from components.cli import main
from components.manifests.build import environment_objects
from components.output.render import render_files
from components.fleet import gpu_capacity as cap
from components.fleet.environment import Environment
from components.load import load_environment
from components.spec.problems import InvalidInput
from tests.hardening.strategies import ENV, TEXT_DAMAGE, Project, mutated_projects, projects
from tests.hardening.support import EXAMPLES, canonical, strict_validator, unlocated


def load(project: Project) -> tuple[Environment | None, list, list[str]]:
    """Write the project to a fresh directory and load it: (environment or None, problems, files)."""
    with tempfile.TemporaryDirectory(prefix="hardening-") as scratch:
        root = project.write(Path(scratch))
        files = sorted(project.files())
        try:
            return load_environment(root, ENV), [], files
        except InvalidInput as err:
            return None, err.problems, files


def check_rendered(environment: Environment) -> None:
    validator = strict_validator()
    objects = environment_objects(environment)
    for owner, items in objects.items():
        for obj in items:
            errors = validator.errors(obj)
            assert errors == [], f"{owner}: {obj['kind']} {obj['metadata'].get('name')}: {errors}"
    first, second = render_files(environment), render_files(environment)
    assert first == second
    for owner, items in objects.items():
        documents = list(yaml.load_all(first[f"{owner}.yaml"], Loader=yaml.CSafeLoader))
        assert documents == canonical(items), owner


def check_capacity(environment: Environment) -> None:
    """Sum of active tenants' quotas per class / MIG profile <= capacity x overcommit."""
    platform = environment.platform
    capacity = cap.capacity(platform)
    active = [t.spec for t in environment.tenants if t.spec.lifecycle == "active"]
    per_class: dict[str, int] = {}
    per_profile: dict[str, int] = {}
    for spec in active:
        for name, count in cap.gpu_quota_by_class(spec, platform).items():
            per_class[name] = per_class.get(name, 0) + count
        for profile, count in spec.quota.mig.items():
            per_profile[profile] = per_profile.get(profile, 0) + count
    for name, total in per_class.items():
        if total:
            assert name in platform.gpu_classes, f"quota for unknown class {name!r} validated"
            limit = capacity.per_class.get(name, 0) * Fraction(platform.gpu_classes[name].overcommit)
            assert total <= limit, f"class {name}: quotas {total} > {limit}"
    for profile, total in per_profile.items():
        if total:
            assert total <= capacity.limit_for_profile(platform, profile), f"MIG {profile}: quotas {total}"


@settings(max_examples=EXAMPLES["valid"])
@given(projects())
def test_generated_projects_validate_or_fail_located_and_render_strictly_valid_objects(project):
    environment, problems, files = load(project)
    if environment is None:
        event("invalid")
        note("\n".join(str(p) for p in problems))
        assert problems and unlocated(problems, files) == []
        return
    event(f"valid, scheduler {environment.platform.scheduler}")
    check_capacity(environment)
    check_rendered(environment)


@settings(max_examples=EXAMPLES["mutated"])
@given(mutated_projects())
def test_mutated_projects_never_crash_and_every_problem_is_located(project):
    environment, problems, files = load(project)
    if environment is None:
        event("invalid")
        note("\n".join(str(p) for p in problems))
        assert problems, "InvalidInput without a problem"
        assert unlocated(problems, files) == []
        return
    event("still valid")
    check_capacity(environment)
    check_rendered(environment)


def run_cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@settings(max_examples=EXAMPLES["cli"])
@given(mutated_projects())
def test_cli_exits_0_or_1_without_traceback_and_a_failed_render_writes_nothing(project):
    with tempfile.TemporaryDirectory(prefix="hardening-cli-") as scratch:
        root = project.write(Path(scratch) / "project")
        code, output = run_cli("--root", str(root), "validate", "--stack", ENV)
        assert code in (0, 1) and "Traceback" not in output, output
        out = Path(scratch) / "out"
        render_code, render_output = run_cli("--root", str(root), "render", "--stack", ENV, "--out", str(out))
        assert "Traceback" not in render_output
        assert render_code == code, render_output
        if render_code == 0:
            assert (out / "_platform.yaml").is_file()
        else:
            assert not out.exists()
            assert sorted(p.name for p in Path(scratch).iterdir()) == ["project"]


def test_every_text_damage_applies_to_a_file_an_earlier_damage_emptied():
    """A mutated project may damage one file twice; the generator itself must not crash then
    (the "a key again" damage indexed the lines of an emptied file)."""
    for damage in TEXT_DAMAGE:
        assert isinstance(damage(b""), bytes), damage
        assert isinstance(damage(b"name: a\n"), bytes), damage
