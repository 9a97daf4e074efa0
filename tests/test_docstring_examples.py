"""Every public function and Pulumi component of components/ shows an example, and `make test`
runs every example: none skipped, none lost to a module that fails to import."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pulumi

import components

REPO = Path(__file__).resolve().parents[1]


def _package_modules(package: types.ModuleType) -> list[types.ModuleType]:
    """Every module of the package; not `__main__`, which runs the CLI when imported."""
    names = [info.name for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    return [package, *(importlib.import_module(n) for n in names if not n.endswith(".__main__"))]


def _without_example(module: types.ModuleType) -> list[str]:
    """Public functions and Pulumi components defined in `module` whose docstring has no `>>>`."""
    missing = []
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        component = inspect.isclass(obj) and issubclass(obj, pulumi.ComponentResource)
        if (inspect.isfunction(obj) or component) and ">>>" not in (obj.__doc__ or ""):
            missing.append(f"{module.__name__}.{name}")
    return missing


def _docstring_tests(module: types.ModuleType) -> list[doctest.DocTest]:
    """The module's docstrings that hold examples, as doctest (and so pytest) finds them."""
    return [test for test in doctest.DocTestFinder().find(module) if test.examples]


def _skipped_examples(tests: list[doctest.DocTest]) -> list[str]:
    return [f"{t.name} (line {t.lineno + e.lineno + 1})" for t in tests for e in t.examples if e.options.get(doctest.SKIP)]


MODULES = _package_modules(components)
TESTS = [test for module in MODULES for test in _docstring_tests(module)]


def test_every_public_function_and_component_shows_an_example():
    missing = [name for module in MODULES for name in _without_example(module)]
    assert missing == [], "add a `>>>` example (run by make test) to: " + ", ".join(missing)


def test_no_example_is_skipped():
    assert _skipped_examples(TESTS) == [], "give the example the names it needs (conftest.py) instead of +SKIP"


def test_make_test_runs_every_example():
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.MULTILINE).group(1)
    [command] = [line.strip() for line in recipe.splitlines() if "--doctest-modules" in line]
    argv = [sys.executable if word == "$(PY)" else word for word in shlex.split(command)]
    assert "components" in argv, command
    done = subprocess.run([*argv, "--collect-only"], cwd=REPO, capture_output=True, text=True)
    collected = {line.rsplit("::", 1)[-1] for line in done.stdout.splitlines() if "::" in line}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert collected == {t.name for t in TESTS}
    assert len(collected) > 200  # the examples of today; a finder that found none would pass the equality


def test_the_checks_catch_a_missing_and_a_skipped_example(tmp_path, monkeypatch):
    (tmp_path / "sloppy.py").write_text(
        'def shown():\n    """>>> 1 + 1\n    2\n    """\n\n'
        'def unshown():\n    """No example."""\n\n'
        'def skipped():\n    """>>> unknown_name  # doctest: +SKIP\n    """\n\n'
        'def _private():\n    pass\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sloppy = importlib.import_module("sloppy")
    assert _without_example(sloppy) == ["sloppy.unshown"]
    assert _skipped_examples(_docstring_tests(sloppy)) == ["sloppy.skipped (line 10)"]
