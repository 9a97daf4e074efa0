"""Objects the API server would refuse for their size (`components/review/object_limits.py`), offline."""

from __future__ import annotations

from pathlib import Path

from components.cli.main import main
from components.review.object_limits import CEL_EXPRESSION_CODE_POINTS
from tests.project_edits import example_with_registry_tenant, line_of



def _project(tmp_path: Path, registries: int) -> Path:
    return example_with_registry_tenant(tmp_path / "project", registries)


def test_a_registry_list_too_long_for_the_cel_parser_is_an_error_at_its_line(tmp_path, capsys):
    # ~52 code points a registry in the image policy's expressions: 2,500 of them are over 100,000.
    root = _project(tmp_path, 2500)
    code = main(["--root", str(root), "validate", "--stack", "prod"])
    err = capsys.readouterr().err
    assert code == 1
    line = line_of(root / "tenants" / "sizelab.yaml", "registries:")
    [error] = [e for e in err.splitlines() if e.startswith(f"tenants/sizelab.yaml:{line}:3: images.registries: ")]
    assert "ValidatingAdmissionPolicy gpu-tenancy-images-sizelab" in error and f"{CEL_EXPRESSION_CODE_POINTS:,}" in error
    assert "shorten this list" in error


def test_a_long_list_under_the_limits_is_fine(tmp_path, capsys):
    root = _project(tmp_path, 1000)
    assert main(["--root", str(root), "validate", "--stack", "prod"]) == 0, capsys.readouterr().err
