"""Helpers for tests that edit a copy of the example project and expect located errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.load import load_environment
from components.spec.problems import InvalidInput

REPO = Path(__file__).resolve().parents[1]


def append_to(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def replace_once(path: Path, old: str, new: str) -> str:
    """Replace `old`, which must occur exactly once, and return the new text."""
    content = path.read_text()
    assert content.count(old) == 1, old
    content = content.replace(old, new)
    path.write_text(content)
    return content


def line_of(source: Path | str, needle: str, after: str | None = None) -> int:
    """1-based line of the first line containing `needle` (after the first line containing `after`).

    `source` is a file or its text. Tests look lines up instead of hard-coding them, so that they
    survive edits of the examples.
    """
    lines = (source.read_text() if isinstance(source, Path) else source).splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    for number, line in enumerate(lines[start:], start=start + 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not found")


def validation_errors(root: Path, env: str) -> list[str]:
    """Error lines (warnings left out) of loading `env` from `root`, which must fail."""
    with pytest.raises(InvalidInput) as caught:
        load_environment(root, env)
    return [str(p) for p in caught.value.problems if p.severity == "error"]


def rename_llm_finetune(root: Path, *, keep_namespace: bool = True) -> None:
    """Rename the example's `llm-finetune` to `finetune` the way docs/renaming.md does: a new file
    with `previousNames`, the old namespace kept under `namespaces` (unless `keep_namespace` is
    false), and `eval`'s ingress grant following the new name."""
    old = root / "tenants" / "llm-finetune.yaml"
    text = old.read_text().replace("name: llm-finetune\n", "name: finetune\npreviousNames: [llm-finetune]\n", 1)
    if keep_namespace:
        text = text.replace("namespaces: [llm-finetune-data]", "namespaces: [llm-finetune, llm-finetune-data]")
    old.unlink()
    (root / "tenants" / "finetune.yaml").write_text(text)
    replace_once(root / "tenants" / "eval.yaml", "tenants: [llm-finetune]", "tenants: [finetune]")


def example_with_registry_tenant(root: Path, registries: int) -> Path:
    """The example project copied to `root`, plus tenant `sizelab` listing `registries` image registries
    (the lists a tenant file may hold but the API server's limits may refuse)."""
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, root / part)
    listed = ", ".join(f"registry.example.com/team-sizelab/project-{i:05d}" for i in range(registries))
    (root / "tenants" / "sizelab.yaml").write_text(
        "apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: sizelab\ndisplayName: Size lab\ncostCenter: cc-1\n"
        f"access:\n  owners:\n    groups: [sizelab-leads]\nimages:\n  registries: [{listed}]\n")
    return root
