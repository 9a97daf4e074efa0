"""The layers stay layered: `lint-imports` checks the contracts in pyproject.toml
(cli -> resources | review | output -> manifests -> model, no cycles, Pulumi only in resources/)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    return subprocess.run([command, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept():
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "components", copy / "components", ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    quota = copy / "components" / "manifests" / "quota.py"
    quota.write_text(quota.read_text() + "\nfrom ..review import diff  # noqa: E402  (planted: upward import)\n")
    result = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from importlinter.cli import lint_imports_command; lint_imports_command()", "--no-cache"],
        cwd=copy, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert "Layers: cli -> resources | review | output -> manifests -> model BROKEN" in result.stdout
    assert "components.manifests.quota -> components.review.diff" in result.stdout


def test_the_public_api_imports_the_pulumi_components_lazily():
    code = "import sys, components; assert 'pulumi' not in sys.modules; components.Fleet; assert 'pulumi' in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=120)
