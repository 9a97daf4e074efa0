"""`tenants diff` prints the same bytes as the golden files (tests/review/diff_outputs.py) in every
format: refactoring the diff or its formatting must not change what a reviewer reads."""

from __future__ import annotations

import pytest

from tests.review.diff_outputs import FORMATS, SCENARIOS, golden, outputs


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_tenants_diff_prints_the_golden_bytes(tmp_path, scenario):
    printed = outputs(scenario, tmp_path)
    assert set(printed) == set(FORMATS)
    for name, text in printed.items():
        assert text == golden(scenario, name).read_text(), f"{scenario}.{name} differs; see tests/review/diff_outputs.py"


def test_the_scenarios_show_what_they_are_for():
    # Each scenario's change reaches the part of the diff it is there to keep byte-identical.
    assert "goes DOWN" in golden("quota-lowered", "text").read_text()
    assert "tenant vision: added" in golden("tenant-added", "text").read_text()
    assert "NOTHING of it is deleted" in golden("tenant-removed", "text").read_text()
    assert "is decommissioned" in golden("tenant-decommissioned", "text").read_text()
    assert "drain them before" in golden("pool-changed", "text").read_text()
    assert "tenant-renamed" in golden("tenant-renamed", "json").read_text()
    assert golden("unchanged", "text").read_text().startswith("no changes between HEAD (BASE")
