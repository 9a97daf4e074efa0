"""The layers stay layered: `lint-imports` checks the contracts in pyproject.toml (cli -> resources |
review | output | authoring | simulate -> manifests | load -> validate -> fleet -> spec, no cycles, builders
never import loading or validation, Pulumi only in resources/), and no import inside a function
hides a cycle."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    return subprocess.run([command, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept():
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def _lint_planted(tmp_path: Path, module: str, planted: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the package with one import appended to `module` (a path under components/)."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "components", copy / "components", ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    target = copy / "components" / module
    target.write_text(target.read_text() + f"\n{planted}  # noqa: E402  (planted)\n")
    return subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from importlinter.cli import lint_imports_command; lint_imports_command()", "--no-cache"],
        cwd=copy, capture_output=True, text=True, timeout=300,
    )


LAYERS = "Layers: cli -> resources | review | output | authoring | simulate -> manifests |\nload -> validate -> fleet -> spec BROKEN"
BUILDERS = "Builders take validated specs and fleet facts: manifests never import loading or\nvalidation BROKEN"


@pytest.mark.parametrize(("module", "planted", "contract", "chain"), [
    ("manifests/quota.py", "from ..review import diff", LAYERS, "components.manifests.quota -> components.review.diff"),
    ("spec/tenant.py", "from ..fleet import budget", LAYERS, "components.spec.tenant -> components.fleet.budget"),
    ("fleet/budget.py", "from ..validate import fleet", LAYERS, "components.fleet.budget -> components.validate.fleet"),
    ("manifests/quota.py", "from .. import load", LAYERS, "components.manifests.quota -> components.load"),
    ("manifests/quota.py", "from ..validate import tenant", BUILDERS, "components.manifests.quota -> components.validate.tenant"),
])
def test_an_import_against_the_layers_breaks_a_contract(tmp_path, module, planted, contract, chain):
    result = _lint_planted(tmp_path, module, planted)
    assert result.returncode != 0
    assert contract in result.stdout
    assert chain in result.stdout


def _function_level_imports() -> list[tuple[str, str]]:
    """(importer, imported) of every import of our own modules written inside a function body."""
    graph = grimp.build_graph("components")
    found = []
    for path in sorted((REPO / "components").rglob("*.py")):
        importer = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    target = f"{base}.{node.module}" if node.module else base
                    for alias in node.names:
                        module = f"{target}.{alias.name}" if f"{target}.{alias.name}" in graph.modules else target
                        found.append((importer, module))
    return found


def test_no_import_inside_a_function_hides_a_cycle():
    # Imports inside functions stay only where they keep a start cheap (the CLI loads a command's
    # modules when it runs; Pulumi and Grafana's SDK load when used), never to dodge a cycle:
    # the imported module must not reach back to the importer.
    graph = grimp.build_graph("components")
    lazy = _function_level_imports()
    assert ("components.cli.new", "components.authoring.new_tenant") in lazy  # the scan sees them
    cycles = [(a, b) for a, b in lazy if graph.find_shortest_chain(importer=b, imported=a)]
    assert cycles == []


def test_the_public_api_imports_the_pulumi_components_lazily():
    code = "import sys, components; assert 'pulumi' not in sys.modules; components.Fleet; assert 'pulumi' in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=120)


def test_no_package_but_the_builders_holds_more_than_a_dozen_modules():
    # manifests/ has one module per kind of object; every other package stays small enough to read
    # as one concern (spec, fleet, validate, ...), so a thirteenth module asks for a new package.
    sizes = {
        package.name: len([m for m in package.glob("*.py") if m.name != "__init__.py"])
        for package in (REPO / "components").iterdir()
        if (package / "__init__.py").exists() and package.name != "manifests"
    }
    assert {"spec", "fleet", "validate", "authoring", "cli"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > 12} == {}


# What the view (`TenantView`) and the facts (`FleetFacts`) hold, answered once per environment:
# builders read `view.<answer>` / `facts.<answer>` and never call these. What builders may still
# import from these modules: constants and key helpers (`GPU`, `GPU_SHARED`, `quota_key`,
# `device_class_quota_keys`, `IMPLICIT_EXTENDED_RESOURCE_PREFIX`), facts of one GPU class or pool
# of the inventory (`class_resource`, `is_mig_mixed`, `pool_layout`, `node_gpu_resources`,
# `commodity_resource`), names (`KUEUE_CPU_FLAVOR`, `cohort_of`, `cohort_chain`, `kai_department_of`,
# `kai_parent_queue`, `kai_gpu_units`, `kai_declared_amount`) and the budget arithmetic of the
# spec's own `namespaceQuotas` (`compute_hard`, `namespace_slices`, `split_budget`, `budget_home`).
RECOMPUTING = {
    "components.fleet.gpu_capacity": {"capacity", "allowed_classes", "gpu_quota_by_class", "gpu_quota_by_resource"},
    "components.fleet.budget": {"effective_limits", "ephemeral_storage_quota"},
    "components.fleet.queue_arithmetic": {
        "kai_amounts", "kueue_compute_nominal", "compute_nominal", "borrowing_limits", "lending_limits",
        "dedicated_only_classes", "queue_borrows", "queue_group",
    },
    "components.fleet.feasibility": {"tenant_demand", "reachable_pools", "feasibility", "split_of", "pool_owners"},
    "components.spec.role_bundles": {"effective_bundles"},
}


def _recomputed(source: str, package: str = "components.manifests") -> list[str]:
    """`module.name` of every function of RECOMPUTING that `source` (a module of `package`) imports
    by name or reads from an imported module (`cap.gpu_quota_by_class`)."""
    found, aliases = [], {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else (package if node.level else "")
            target = ".".join(filter(None, [base, node.module]))
            for alias in node.names:
                if f"{target}.{alias.name}" in RECOMPUTING:
                    aliases[alias.asname or alias.name] = f"{target}.{alias.name}"
                elif alias.name in RECOMPUTING.get(target, ()):
                    found.append(f"{target}.{alias.name}")
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.name in RECOMPUTING and a.asname})
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr in RECOMPUTING[aliases[node.value.id]]:
                found.append(f"{aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_builders_read_the_views_answers_instead_of_working_them_out():
    found = {
        path.name: _recomputed(path.read_text())
        for path in sorted((REPO / "components" / "manifests").glob("*.py"))
    }
    assert {name: names for name, names in found.items() if names} == {}


def test_the_answer_check_sees_a_call_by_module_and_an_import_by_name():
    planted = (
        "from ..fleet import gpu_capacity as cap\nfrom ..fleet.budget import effective_limits, compute_hard\n"
        "def f(t, p):\n    return cap.quota_key('x'), cap.gpu_quota_by_class(t, p), effective_limits(t, p)\n"
    )
    assert _recomputed(planted) == ["components.fleet.budget.effective_limits", "components.fleet.gpu_capacity.gpu_quota_by_class"]
