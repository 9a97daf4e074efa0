"""Text and Markdown renderings of a diff document."""

from __future__ import annotations

from components.review.diff_format import MARKDOWN_LIMIT, delta, format_markdown, format_text, value_text


def document(objects: int = 1, fields: int = 1) -> dict:
    detail = {
        "tenant": "team", "change": "changed", "renamedFrom": None,
        "lifecycle": {"from": "active", "to": "active"},
        "namespaces": {"added": [], "removed": []},
        "quota": [{"key": "gpu.h100", "label": "GPUs h100", "from": 40, "to": 48}],
        "access": [], "network": [],
        "placement": {"classes": {"added": [], "removed": []}, "dedicatedPools": {"added": [], "removed": []}},
        "objects": [
            {"id": f"v1/ConfigMap/team/c{i}", "kind": "ConfigMap", "namespace": "team", "name": f"c{i}", "change": "changed",
             "fields": [{"path": f"data.key{j}", "from": "a" * 40, "to": "b" * 40} for j in range(fields)]}
            for i in range(objects)
        ],
    }
    stack = {
        "name": "prod", "change": "changed",
        "tenants": {"added": [], "removed": [], "renamed": [], "changed": ["team"], "lifecycle": []},
        "objectTotals": {"added": 0, "changed": objects, "removed": 0},
        "capacity": [], "nodes": [], "nodeGroups": [], "mig": [], "platformObjects": [],
        "tenantDetails": [detail],
        "warnings": [{"stack": "prod", "tenant": "team", "kind": "owner-granted", "message": "group:x becomes owner"}],
        "notes": [],
    }
    return {"formatVersion": 1, "base": {"ref": "origin/main", "commit": "f" * 40, "how": ""}, "head": "working tree",
            "changed": True, "warnings": stack["warnings"], "notes": [], "stacks": [stack]}


def test_text_puts_warnings_before_stacks():
    text = format_text(document())

    assert text.index("WARNINGS (1)") < text.index("stack prod: changed")
    assert "tenant team: GPUs h100 40 → 48" in text
    assert "~ ConfigMap team/c0" in text


def test_markdown_has_warning_summary_table_and_details():
    markdown = format_markdown(document())

    assert markdown.index("> [!WARNING]") < markdown.index("| Stack |") < markdown.index("<details>")
    assert "> - **prod** · `team`: group:x becomes owner" in markdown
    assert "| prod | changed | — | — | `team` | 0 / 1 / 0 |" in markdown
    assert "<details><summary><b>team</b>: GPUs h100 40 → 48</summary>" in markdown and "</details>" in markdown


def test_markdown_drops_field_diffs_to_fit_a_comment():
    huge = document(objects=400, fields=12)

    markdown = format_markdown(huge)

    assert len(markdown) <= MARKDOWN_LIMIT
    assert "Field-level object changes are left out" in markdown
    assert "~ ConfigMap team/c399" in markdown and "data.key0" not in markdown


def test_many_fields_of_one_object_are_capped():
    text = format_text(document(fields=20))

    assert "... 8 more field(s)" in text


def test_values_read_compactly():
    assert value_text(None) == "unset"
    assert len(value_text({"k": "v" * 500})) == 100
    assert delta(None, {"a": 1}) == 'added {a: 1}'
    assert delta({"a": 1}, None) == 'removed {a: 1}'
