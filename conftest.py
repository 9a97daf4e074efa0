"""The names every docstring example in components/ may use (`make test` runs them with --doctest-modules).

Loaded once per session: `prod`, `staging`, `dev` (the stacks of stacks/ with the tenants of
tenants/), `environment` (= `prod`, for examples about any environment), `tenant` (prod's first
tenant spec, `eval`), `view` (that tenant's view of prod's fleet), `lab` (tests/fixtures/sharded:
one environment split across the shard stacks `lab.blue` and `lab.green`) and `dra`
(tests/fixtures/dra: GPUs claimed through DRA device classes), `dra_mig` (tests/fixtures/dra-mig: MIG
through DRA). `root` is the example project,
`git_project` a committed copy of it in its own git repository, `scratch` an empty directory of the
example's own, `cli_args(*argv)` the arguments `tenants --root <example project> *argv` parses to,
and `pulumi_mocks(body)` runs `body` under Pulumi's mock runtime and returns what it registered.
Examples must not change these values: every example of the session shares them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
SHARDED = REPO / "tests" / "fixtures" / "sharded"


@pytest.fixture(scope="session")
def example_namespace(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from components import load_environment

    prod, staging, dev = (load_environment(REPO, name) for name in ("prod", "staging", "dev"))
    return {
        "root": REPO,
        "prod": prod,
        "staging": staging,
        "dev": dev,
        "environment": prod,
        "tenant": prod.tenants[0].spec,
        "view": prod.view(prod.tenants[0].spec),
        "lab": load_environment(SHARDED, "lab"),
        "lab_root": SHARDED,
        "dra": load_environment(REPO / "tests" / "fixtures" / "dra", "dra"),
        "dra_mig": load_environment(REPO / "tests" / "fixtures" / "dra-mig", "dra"),
        "git_project": _committed_copy(tmp_path_factory.mktemp("git-project")),
        "pulumi_mocks": _pulumi_mocks,
        "cli_args": _cli_args,
    }


@pytest.fixture(autouse=True)
def _docstring_example_names(request: pytest.FixtureRequest, doctest_namespace: dict, tmp_path_factory) -> None:
    # Only doctests ask for the environments, so a plain test run never loads them.
    if isinstance(request.node, pytest.DoctestItem):
        doctest_namespace.update(request.getfixturevalue("example_namespace"))
        doctest_namespace["scratch"] = tmp_path_factory.mktemp("scratch")


def _committed_copy(into: Path) -> Path:
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, into / part)
    shutil.copy(REPO / "Pulumi.yaml", into / "Pulumi.yaml")
    identity = ["-c", "user.name=docs", "-c", "user.email=docs@example.com", "-c", "commit.gpgsign=false"]
    for command in (["init", "-q", "-b", "main"], ["add", "."], [*identity, "commit", "-q", "-m", "example project"]):
        subprocess.run(["git", "-C", str(into), *command], check=True, capture_output=True)
    return into


def _cli_args(*argv: str):
    from components.cli.main import _parser

    return _parser().parse_args(["--root", str(REPO), *argv])


def _pulumi_mocks(body, stack: str = "prod") -> list:
    from tools.pulumi_mocks import run_body

    registrations, _ = run_body(stack, {}, body)
    return registrations
