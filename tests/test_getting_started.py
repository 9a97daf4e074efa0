"""docs/getting-started.md is executed: its commands run in order on a fresh empty directory and
their output must match what the page shows, so the page cannot drift from the tool.

In ```console blocks, a line `$ CMD` is a command (a `<<'EOF'` heredoc continues it up to `EOF`);
the lines after it, up to the next command, are output that must appear in order in what the
command printed (stdout then stderr), `...` matching any text. Every command must exit 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "getting-started.md"


def steps(markdown: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of every console block, in page order."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```", markdown, flags=re.S | re.M):
        lines = block.splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            index += 1
            if not line.startswith("$ "):
                assert out, f"output before any command: {line!r}"
                out[-1][1].append(line)
                continue
            command = line[2:]
            heredoc = re.search(r"<<'(\w+)'$", command)
            if heredoc:
                end = lines.index(heredoc.group(1), index)
                command = "\n".join([command, *lines[index:end + 1]])
                index = end + 1
            out.append((command, []))
    return out


def _pattern(expected: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in expected.strip().split("...")))


def test_the_page_has_the_documented_flow():
    commands = [command.split()[0:2] for command, _ in steps(PAGE.read_text())]
    assert [c[1] for c in commands if c[0] == "tenants"] == ["init", "init", "validate", "new", "validate", "diff", "render"]


@pytest.mark.skipif(shutil.which("git") is None, reason="the page's diff step needs git")
def test_getting_started_commands_run_in_order_on_an_empty_directory(tmp_path):
    work = tmp_path / "my-gpu-cluster"
    work.mkdir()
    bin_dir = str(Path(sys.executable).parent)  # the `tenants` script of this environment
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Platform Team", "GIT_AUTHOR_EMAIL": "platform@example.com",
        "GIT_COMMITTER_NAME": "Platform Team", "GIT_COMMITTER_EMAIL": "platform@example.com",
        "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
    }
    assert shutil.which("tenants", path=bin_dir), "the tenants console script is not installed next to python"
    ran = 0
    for command, expected in steps(PAGE.read_text()):
        result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=work, env=env,
                                capture_output=True, text=True, timeout=120)
        printed = result.stdout + result.stderr
        assert result.returncode == 0, f"$ {command}\nexit {result.returncode}\n{printed}"
        assert "Traceback" not in printed
        position = 0
        lines = printed.splitlines()
        for want in expected:
            pattern = _pattern(want)
            found = next((i for i in range(position, len(lines)) if pattern.search(lines[i])), None)
            assert found is not None, f"$ {command}\nexpected (in order): {want!r}\ngot:\n{printed}"
            position = found + 1
        ran += 1
    assert ran >= 9
    # What the page promises at the end.
    assert sorted(p.name for p in (work / "out" / "prod").iterdir()) == ["_platform.yaml", "vision.yaml"]
    assert sorted(p.name for p in (work / "stacks").iterdir()) == ["Pulumi.dev.yaml", "Pulumi.prod.yaml"]
