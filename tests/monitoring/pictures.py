"""Pictures of the dashboards for docs/monitoring.md, drawn with matplotlib from what a real Prometheus answered.

Grafana cannot run here (no headless browser), so each panel is drawn as a bar chart of the
series its query returned at the end of the synthetic data, laid out like the dashboard's grid
(panel width 12 = half a row, 24 = a whole row). The answers are written next to the pictures
(`dashboard-data.json`) and each PNG records the SHA-256 of those answers in its metadata, so
the lane can tell when a picture no longer shows what the dashboards answer.

Regenerate with `make monitoring-pictures` (GPU_TENANCY_WRITE_PICTURES=1 in the lane).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
DATA_FILE = "dashboard-data.json"


def rounded(answers: dict[str, Any]) -> dict[str, Any]:
    """Answers with values at 6 significant digits (stable across float noise), as plain JSON."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in sorted(node.items())}
        if isinstance(node, list):
            return [[dict(sorted(labels.items())), float(f"{value:.6g}")] for labels, value in node]
        return node

    return walk(answers)


def data_text(answers: dict[str, Any]) -> str:
    return json.dumps(rounded(answers), indent=1, sort_keys=True) + "\n"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*([a-zA-Z_]+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template) or "value"


def _fmt(unit: str, value: float) -> str:
    if unit == "percentunit":
        return f"{value * 100:.1f}%"
    if unit == "bytes":
        return f"{value / 2**30:.0f} GiB"
    if unit == "s":
        return f"{value:g} s"
    return f"{value:g}"


def render(dashboard: dict[str, Any], panel_answers: dict[str, dict[str, list]], title: str, path: Path, data_digest: str) -> None:
    """One PNG: the dashboard's rows and panels, each panel a horizontal bar chart of its answers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layout: list[tuple[str, Any]] = []  # ("row", title) or ("panels", [panel, ...]) per grid line
    line: list[dict] = []
    used = 0
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            if line:
                layout.append(("panels", line))
                line, used = [], 0
            layout.append(("row", panel["title"]))
            continue
        width = panel["gridPos"]["w"]
        if used + width > 24:
            layout.append(("panels", line))
            line, used = [], 0
        line.append(panel)
        used += width
    if line:
        layout.append(("panels", line))

    heights = [0.35 if kind == "row" else 2.2 for kind, _ in layout]
    fig = plt.figure(figsize=(13, sum(heights) + 0.8), dpi=80)
    grid = fig.add_gridspec(len(layout), 2, height_ratios=heights, hspace=0.9, wspace=0.6, left=0.17, right=0.97, top=1 - 0.6 / (sum(heights) + 0.8))
    fig.suptitle(title, fontsize=14, fontweight="bold")
    for index, (kind, item) in enumerate(layout):
        if kind == "row":
            ax = fig.add_subplot(grid[index, :])
            ax.axis("off")
            ax.text(0, 0.2, item, fontsize=12, fontweight="bold", color="#444444")
            continue
        column = 0
        for panel in item:
            span = 2 if panel["gridPos"]["w"] > 12 else 1
            ax = fig.add_subplot(grid[index, column:column + span])
            column += span
            unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
            bars = []
            for target in panel["targets"]:
                for labels, value in panel_answers[panel["title"]][target["refId"]]:
                    bars.append((_legend(target.get("legendFormat", ""), labels), value))
            names = [name for name, _ in bars][::-1]
            values = [value for _, value in bars][::-1]
            ax.barh(names, values, color="#5794F2")
            for y, value in enumerate(values):
                ax.text(value, y, " " + _fmt(unit, value), va="center", fontsize=8)
            ax.set_title(panel["title"], fontsize=10, loc="left")
            ax.tick_params(labelsize=8)
            ax.set_xlim(0, (max(values) if values and max(values) > 0 else 1) * 1.35)
            ax.xaxis.set_visible(False)
            for side in ("top", "right", "bottom"):
                ax.spines[side].set_visible(False)
            if not bars:
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None, "Description": f"data sha256 {data_digest}"})
    plt.close(fig)


def png_description(path: Path) -> str:
    """The Description text chunk of a PNG (where `render` records the data digest)."""
    data = path.read_bytes()
    position = 8
    while position < len(data):
        length = int.from_bytes(data[position:position + 4], "big")
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Description\0"):
            return body.split(b"\0", 1)[1].decode("latin-1")
        position += 12 + length
    return ""
