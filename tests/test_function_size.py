"""Every function under components/ stays small enough to read at once: at most 40 lines of body and a
McCabe complexity of at most 15, unless the EXCEPTIONS table below names it with a reason.

What is counted: the lines from the first statement after the docstring to the function's last line
(comments and blank lines inside included; the signature, decorators and docstring not). A nested
function counts in its own right and inside the function that holds it. Complexity is the `mccabe`
package's (flake8's C901), measured on each function alone.

The table cannot go stale: an entry whose function is gone or is back within both limits fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mccabe

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 40
MAX_COMPLEXITY = 15

# {"module:function": why it may stay longer or more complex}; none today.
EXCEPTIONS: dict[str, str] = {}


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = function.body
    has_docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
    statements = body[1:] if has_docstring else body
    return function.end_lineno - statements[0].lineno + 1 if statements else 0


def _complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    visitor = mccabe.PathGraphingAstVisitor()
    visitor.preorder(function, visitor)
    return max(graph.complexity() for graph in visitor.graphs.values())


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function, methods as Class.method, nested ones as outer.inner."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def measured(root: Path) -> dict[str, tuple[int, int]]:
    """{"module:function": (body lines, complexity)} of every function under root/components."""
    sizes = {}
    for path in sorted((root / "components").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for name, node in _functions(ast.parse(path.read_text(), str(path))):
            sizes[f"{module}:{name}"] = (_body_lines(node), _complexity(node))
    return sizes


def size_problems(sizes: dict[str, tuple[int, int]], exceptions: dict[str, str]) -> list[str]:
    def too_big(lines_and_complexity):
        lines, complexity = lines_and_complexity
        return lines > MAX_LINES or complexity > MAX_COMPLEXITY

    problems = [
        f"{name}: {lines} lines, complexity {complexity} (limits {MAX_LINES}, {MAX_COMPLEXITY}): split it"
        for name, (lines, complexity) in sizes.items() if too_big((lines, complexity)) and name not in exceptions
    ]
    problems += [f"{name}: in EXCEPTIONS but no such function" for name in exceptions if name not in sizes]
    problems += [
        f"{name}: in EXCEPTIONS but within the limits now ({sizes[name][0]} lines, complexity {sizes[name][1]}): drop the entry"
        for name in exceptions if name in sizes and not too_big(sizes[name])
    ]
    return problems


def test_every_function_is_within_the_limits_or_a_named_exception():
    assert size_problems(measured(REPO), EXCEPTIONS) == []


def test_every_exception_says_why():
    assert all(reason.strip() for reason in EXCEPTIONS.values())


def _planted(tmp_path: Path, source: str) -> dict[str, tuple[int, int]]:
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "planted.py").write_text(source)
    return measured(tmp_path)


def test_a_long_function_fails(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(41))
    sizes = _planted(tmp_path, f'def long():\n    """Docstring lines are not counted.\n\n    really.\n    """\n{body}')
    assert sizes["components.planted:long"] == (41, 1)
    assert size_problems(sizes, {}) == ["components.planted:long: 41 lines, complexity 1 (limits 40, 15): split it"]
    assert size_problems(sizes, {"components.planted:long": "a declaration"}) == []


def test_forty_lines_pass(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(40))
    assert size_problems(_planted(tmp_path, f'def fits():\n    """Doc."""\n{body}'), {}) == []


def test_a_complex_method_fails(tmp_path):
    branches = "".join(f"        if x == {i}:\n            return {i}\n" for i in range(15))
    sizes = _planted(tmp_path, f"class Thing:\n    def pick(self, x):\n{branches}        return -1\n")
    assert sizes["components.planted:Thing.pick"] == (31, 16)
    assert size_problems(sizes, {}) == ["components.planted:Thing.pick: 31 lines, complexity 16 (limits 40, 15): split it"]


def test_a_stale_or_unknown_exception_fails(tmp_path):
    sizes = _planted(tmp_path, "def small():\n    return 1\n")
    assert size_problems(sizes, {"components.planted:small": "was long", "components.planted:gone": "was long"}) == [
        "components.planted:gone: in EXCEPTIONS but no such function",
        "components.planted:small: in EXCEPTIONS but within the limits now (1 lines, complexity 1): drop the entry",
    ]
