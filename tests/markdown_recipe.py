"""Run a how-to document's steps in order, so that the document cannot drift from the tool.

A recipe is the fenced blocks of a Markdown file, in order:

* ```` ```sh ````: commands, one a line (`\\` continues a line), run by bash in the project with
  `tenants` being this checkout's command; any non-zero exit fails the recipe;
* ```` ```diff ````: an edit of the file named by its `+++ b/<path>` line; each hunk's context
  (` `) and removed (`-`) lines must occur exactly once in the file, in that order, and become
  the context and added (`+`) lines;
* ```` ```text ```` after a `sh` block (prose may come between, no other step): lines its
  commands must print, each a part of an output line, in order.

Other blocks (yaml examples, ...) are for reading only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)


@dataclass
class Step:
    kind: str  # sh | diff | text
    body: str
    line: int  # of the opening fence, for failure messages


def recipe(markdown: str) -> list[Step]:
    steps: list[Step] = []
    for match in _FENCE.finditer(markdown):
        kind, body = match.group(1), match.group(2)
        line = markdown.count("\n", 0, match.start()) + 1
        if kind in ("sh", "diff") or (kind == "text" and steps and steps[-1].kind == "sh"):
            steps.append(Step(kind, body, line))
    return steps


def apply_diff(root: Path, body: str, where: str) -> None:
    target = next((line[6:].strip() for line in body.splitlines() if line.startswith("+++ b/")), None)
    assert target, f"{where}: a diff block needs a `+++ b/<path>` line"
    path = root / target
    hunks: list[list[str]] = [[]]
    for line in body.splitlines():
        if line.startswith(("--- ", "+++ ")):
            continue
        if line.startswith("@@"):
            hunks.append([])
            continue
        hunks[-1].append(line)
    text = path.read_text()
    for hunk in (h for h in hunks if h):
        old = [line[1:] for line in hunk if line[:1] in (" ", "-")]
        new = [line[1:] for line in hunk if line[:1] in (" ", "+")]
        assert old, f"{where}: a hunk needs context or removed lines to find its place in {target}"
        lines = text.splitlines()
        places = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
        assert len(places) == 1, f"{where}: {target} holds these lines {len(places)} times (expected once):\n" + "\n".join(old)
        lines[places[0]:places[0] + len(old)] = new
        text = "\n".join(lines) + "\n"
    path.write_text(text)


def _shell_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update({
        "PYTHONPATH": str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        "GIT_AUTHOR_NAME": "doc", "GIT_AUTHOR_EMAIL": "doc@example.com",
        "GIT_COMMITTER_NAME": "doc", "GIT_COMMITTER_EMAIL": "doc@example.com",
        "GIT_CONFIG_NOSYSTEM": "1", "HOME": env.get("HOME", "/tmp"),
    })
    return env


def run_recipe(document: Path, root: Path) -> list[tuple[Step, str]]:
    """Run every step of `document` in `root`; return each `sh` step with its output."""
    outputs: list[tuple[Step, str]] = []
    prelude = f'set -e\ntenants() {{ "{sys.executable}" -m components "$@"; }}\n'
    for step in recipe(document.read_text()):
        where = f"{document.name}:{step.line}"
        if step.kind == "diff":
            apply_diff(root, step.body, where)
        elif step.kind == "sh":
            done = subprocess.run(
                ["bash", "-c", prelude + step.body], cwd=root, env=_shell_env(), capture_output=True, text=True,
            )
            output = done.stdout + done.stderr
            assert done.returncode == 0, f"{where}: exit {done.returncode}\n{step.body}\n{output}"
            outputs.append((step, output))
        else:
            printed = outputs[-1][1].splitlines()
            position = 0
            for expected in (line.strip() for line in step.body.splitlines()):
                if not expected or expected == "...":
                    continue
                found = next((i for i in range(position, len(printed)) if expected in printed[i]), None)
                assert found is not None, f"{where}: not printed (in order): {expected!r}\n{outputs[-1][1]}"
                position = found  # several excerpts may come from one line
    return outputs
