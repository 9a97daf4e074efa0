"""Helpers for tests that edit a copy of the example project and expect located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.spec.problems import InvalidInput


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
