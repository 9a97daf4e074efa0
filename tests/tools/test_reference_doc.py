"""docs/file-format.md is generated from the models and must match them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from components.spec.quantity import Quantity
from components.spec.stack import Platform
from components.spec.tenant import Tenant
from tools import reference_doc
from tools.reference_doc import render, type_text, undocumented_fields

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "file-format.md"


def test_committed_reference_is_up_to_date():
    assert DOC.read_text(encoding="utf-8") == render(), (
        f"docs/file-format.md is out of date with the models; regenerate it with `{reference_doc.REGENERATE}`"
    )


def test_the_module_prints_the_reference():
    result = subprocess.run(
        [sys.executable, "-m", "tools.reference_doc"], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == render()


def test_every_field_has_a_description():
    assert undocumented_fields() == [], "add Field(description=...) to these fields"


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^### (\w+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_field_of_both_formats_has_a_row_in_its_models_table():
    sections = _sections(render())
    seen: dict = {}
    for root in (Tenant, Platform):
        for model in reference_doc._walk(root, "", seen):
            assert model.__name__ in sections, model.__name__
            for name, field in model.model_fields.items():
                key = field.alias or name
                assert f"| `{key}` |" in sections[model.__name__], f"{model.__name__}.{key}"


def test_rows_show_type_default_and_description():
    sections = _sections(render())
    assert "| `lifecycle` | one of `active`, `suspended`, `decommissioned` | `active` |" in sections["Tenant"]
    assert "| `name` | DNS label (at most 40 characters) | **required** | the tenant's name" in sections["Tenant"]
    assert "| `overcommit` | number from 1 to 10 | `1` | how far the sum of tenant quotas may exceed capacity" in sections["GpuClass"]
    assert "| `requests` | [quantity](#quantities) | unset |" in sections["RequestsLimits"]
    assert "Used at `quota.cpu`, `quota.memory`, `quota.ephemeralStorage`, `namespaceQuotas.<name>.cpu`" in sections["RequestsLimits"]
    assert "| `port` | integer from 1 to 65535 | **required** |" in sections["Port"]
    # long defaults are spelled out as YAML under the table
    assert "Default of `priorityClasses`:" in sections["Platform"]
    assert "  online-inference:\n    value: 100000" in sections["Platform"]


def test_the_introduction_covers_what_authors_need():
    text = render()
    for words in [
        "# yaml-language-server: $schema=../docs/schema/tenant.schema.json",
        "one file per team",
        "## Quantities",
        "Maps merge key by key",
        "Lists replace",
        "requests.nvidia.com/gpu: 12",
        "no memory or fault isolation",
        "isolated in hardware",
        "decommission: {confirm: <name>}",
        "`suspended`",
    ]:
        assert words in text, words


def _github_anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def test_every_link_points_at_a_heading():
    text = render()
    anchors = {_github_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= anchors, sorted(links - anchors)


def test_table_cells_do_not_break_the_table():
    columns = None
    for line in render().splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        cells = len(re.split(r"(?<!\\)\|", line))
        if columns is None:
            columns = cells  # the header row
        assert cells == columns, line


def test_type_text():
    assert type_text(list[int]) == "list of integer"
    assert type_text(Quantity) == "[quantity](#quantities)"
    assert type_text(dict[str, Tenant]) == "map of string to [Tenant](#tenant)"
    assert type_text(bool) == "boolean"
