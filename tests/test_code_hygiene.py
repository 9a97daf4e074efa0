"""Names that are imported or assigned and never used, caught by a tool (pyflakes), not by review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ["components", "tests", "bench", "tools", "__main__.py", "conftest.py"]


def test_no_unused_imports_or_variables_and_no_undefined_names():
    done = subprocess.run([sys.executable, "-m", "pyflakes", *CHECKED], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_reports_an_unused_import(tmp_path):
    (tmp_path / "sloppy.py").write_text("import os\n")
    done = subprocess.run([sys.executable, "-m", "pyflakes", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1 and "'os' imported but unused" in done.stdout, done.stdout + done.stderr


def _shared_code_problems(root: Path) -> list[str]:
    """Imports from a conftest and sys.path edits in tests/, tools/ and bench/ (helpers they share
    live in the `tools` package; pytest's `pythonpath` and `python -m` put the root on the path)."""
    import ast

    found = []
    for path in sorted(p for part in ("tests", "tools", "bench") for p in (root / part).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or "", *(a.name for a in node.names)]
            else:
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(m == "conftest" or m.endswith(".conftest") for m in modules):
                found.append(f"{path.relative_to(root)}:{node.lineno}: imports a conftest")
            if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{path.relative_to(root)}:{node.lineno}: uses sys.path")
    return found


def test_shared_helpers_come_from_packages_not_conftest_or_sys_path():
    assert _shared_code_problems(REPO) == []


def test_the_shared_code_check_sees_a_conftest_import_and_a_path_edit(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("from .conftest import REPO\nfrom tests.e2e import conftest as e2e\n")
    (tmp_path / "bench" / "run.py").write_text("import sys\nsys.path.insert(0, '.')\n")
    assert _shared_code_problems(tmp_path) == [
        "bench/run.py:2: uses sys.path",
        "tests/test_x.py:1: imports a conftest",
        "tests/test_x.py:2: imports a conftest",
    ]


def _module_name_clashes(tests: Path) -> list[str]:
    """Test modules pytest would import under one name: a module outside a package is imported by
    its basename, so two `test_x.py` of which one is not in a package stop the collection of the
    whole lane ("import file mismatch"), which a run of single files never shows."""
    def name(path: Path) -> str:
        parts = [path.stem]
        folder = path.parent
        while (folder / "__init__.py").exists():
            parts.insert(0, folder.name)
            folder = folder.parent
        return ".".join(parts)
    seen: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        seen.setdefault(name(path), []).append(str(path.relative_to(tests.parent)))
    return [" and ".join(paths) for paths in seen.values() if len(paths) > 1]


def test_no_two_test_modules_are_imported_under_one_name():
    assert _module_name_clashes(REPO / "tests") == []


def test_the_name_check_sees_a_clash_outside_a_package(tmp_path):
    (tmp_path / "tests" / "lane").mkdir(parents=True)
    (tmp_path / "tests" / "pkg").mkdir()
    (tmp_path / "tests" / "pkg" / "__init__.py").write_text("")
    for where in ("lane", "pkg", "."):
        (tmp_path / "tests" / where / "test_same.py").write_text("")
    assert _module_name_clashes(tmp_path / "tests") == ["tests/lane/test_same.py and tests/test_same.py"]
