"""Hostile and unusual inputs: each gives a clear, located error or a correct result, never a
traceback, and a failed `tenants render` leaves the output directory exactly as it was.

Every case starts from a copy of the example project (`project_copy`) with an earlier, good render
in `out/`, breaks one thing, and runs the real CLI in-process (plus one subprocess run, to see the
process's own stderr).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.synthetic import write_project
from components.cli import main
from components.load import load_environment

STACK = "prod"
EVAL = textwrap.dedent(
    """\
    apiVersion: gpu-tenancy.dev/v1alpha2
    kind: Tenant
    name: {name}
    displayName: Hostile
    costCenter: cc-1
    """
)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())} if directory.exists() else {}


@pytest.fixture
def project(project_copy: Path) -> Path:
    """The example project plus `out/`, a good render of it (what a failed render must not touch)."""
    code, _, err = run("--root", project_copy, "render", "--stack", STACK, "--out", project_copy.parent / "out")
    assert code == 0, err
    return project_copy


def rejected(root: Path, *expected: str) -> str:
    """Render and validate fail with exit 1, say every `expected` text, and change nothing."""
    out = root.parent / "out"
    before, siblings = snapshot(out), sorted(p.name for p in root.parent.iterdir())
    code, stdout, stderr = run("--root", root, "render", "--stack", STACK, "--out", out)
    assert code == 1, stdout + stderr
    assert "Traceback" not in stderr and stdout == ""
    for text in expected:
        assert text in stderr, stderr
    assert snapshot(out) == before, "a failed render changed the output directory"
    assert sorted(p.name for p in root.parent.iterdir()) == siblings, "a failed render left files behind"
    code, _, validate_err = run("--root", root, "validate", "--stack", STACK)
    assert code == 1 and "Traceback" not in validate_err
    return stderr


# --- size, depth, expansion --------------------------------------------------------------------------


def test_a_10_mb_file_is_refused_before_it_is_read(project):
    big = project / "tenants" / "big.yaml"
    big.write_bytes(EVAL.format(name="big").encode() + b"# padding\n" * (1024 * 1024))
    assert big.stat().st_size > 10 * 1024 * 1024
    rejected(project, f"tenants/big.yaml: is {big.stat().st_size} bytes; a tenant or stack file may be at most 1048576 bytes")


@pytest.mark.parametrize(
    "body, message",
    [
        ("q: " + "[" * 5000 + "]" * 5000 + "\n", "exceeded maximum nesting depth"),
        ("q:\n" + "- " * 5000 + "x\n", "exceeded maximum nesting depth"),
        ("q:\n" + "".join("  " * i + "a:\n" for i in range(100)) + "  " * 100 + "b: 1\n", "nesting deeper than 64 levels"),
    ],
    ids=["flow", "block-sequence", "block-mapping"],
)
def test_deeply_nested_yaml_is_refused(project, body, message):
    (project / "tenants" / "deep.yaml").write_text(EVAL.format(name="deep") + body)
    rejected(project, "tenants/deep.yaml:", message)


def test_a_billion_laughs_alias_bomb_is_stopped_at_the_node_limit(project):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (project / "tenants" / "lol.yaml").write_text(EVAL.format(name="lol") + "\n".join(lines) + "\ndescription: *a9\n")
    rejected(project, "tenants/lol.yaml:", "expands to more than 100000 values")


# --- bytes and characters ----------------------------------------------------------------------------


def test_bytes_that_are_not_utf8_are_located(project):
    (project / "tenants" / "latin1.yaml").write_bytes(EVAL.format(name="latin1").encode() + b"description: caf\xe9\n")
    rejected(project, "tenants/latin1.yaml:6:17: is not UTF-8 (byte 0xe9); save the file as UTF-8")


def test_tabs_in_indentation_are_named(project):
    (project / "tenants" / "tabs.yaml").write_text(EVAL.format(name="tabs") + "access:\n\towners:\n\t\tgroups: [x]\n")
    rejected(project, "tenants/tabs.yaml:7:", "YAML does not allow tabs for indentation")


def test_a_cyrillic_look_alike_letter_in_a_name_is_named(project):
    (project / "tenants" / "evil.yaml").write_text(EVAL.format(name="\u0435vil"))  # Cyrillic е
    rejected(project, "tenants/evil.yaml:3:1: name:", "U+0435 CYRILLIC SMALL LETTER IE")


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "the file is empty"),
        ("# only a comment\n", "the file is empty"),
        ("- a\n- b\n", "a tenant file must be a mapping"),
        ("just text\n", "a tenant file must be a mapping"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("a: 1\n---\nb: 2\n", "invalid YAML"),
        ("<<: {name: x}\n", "merge keys (<<) are not supported"),
    ],
)
def test_malformed_documents_are_located(project, body, message):
    (project / "tenants" / "odd.yaml").write_text(body)
    rejected(project, "tenants/odd.yaml:", message)


def test_python_tags_are_refused_and_never_executed(project):
    marker = project.parent / "PWNED"
    (project / "tenants" / "pwn.yaml").write_text(
        EVAL.format(name="pwn")
        + f"description: !!python/object/apply:os.system ['touch {marker}']\n"
        + f"contacts: !!python/object/new:subprocess.Popen [['touch', '{marker}']]\n"
        + "quota: !!python/name:os.system\n"
    )
    stderr = rejected(project, "unsupported YAML tag !!python/object/apply:os.system", "unsupported YAML tag !!python/name:os.system")
    assert "!!python/object/new:subprocess.Popen" in stderr
    assert not marker.exists(), "a YAML tag ran a command"


# --- files that are not plain files ------------------------------------------------------------------


def test_a_symlink_out_of_the_tenants_directory_is_refused(project, tmp_path):
    secret = tmp_path / "secret.yaml"
    secret.write_text(EVAL.format(name="secret"))
    (project / "tenants" / "secret.yaml").symlink_to(secret)
    rejected(project, "tenants/secret.yaml: is a symbolic link to", "outside")


def test_a_symlink_loop_is_refused(project):
    (project / "tenants" / "loop.yaml").symlink_to("loop.yaml")
    rejected(project, "tenants/loop.yaml: is a symbolic link that cannot be followed")


def test_a_symlink_inside_the_directory_is_followed(project):
    (project / "tenants" / "shared").mkdir()
    (project / "tenants" / "shared" / "extra.txt").write_text(EVAL.format(name="extra"))
    (project / "tenants" / "extra.yaml").symlink_to("shared/extra.txt")
    assert "extra" in [t.name for t in load_environment(project, STACK).tenants]


def test_a_directory_named_like_a_tenant_file_is_refused(project):
    (project / "tenants" / "team.yaml").mkdir()
    rejected(project, "tenants/team.yaml: is a directory, not a file")


def test_a_fifo_named_like_a_tenant_file_is_refused_without_blocking(project):
    os.mkfifo(project / "tenants" / "pipe.yaml")
    rejected(project, "tenants/pipe.yaml: is not a regular file")


def test_an_unreadable_file_is_reported(project, monkeypatch):
    """Tests run as root in CI, and root reads a chmod 000 file anyway, so the failure is simulated:
    reading that one file raises PermissionError, exactly what open() raises for a normal user."""
    locked = project / "tenants" / "locked.yaml"
    locked.write_text(EVAL.format(name="locked"))
    locked.chmod(0)
    real = pathlib.Path.read_bytes

    def read_bytes(self):
        if self.name == "locked.yaml":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", read_bytes)
    rejected(project, "tenants/locked.yaml: cannot read: Permission denied")


# --- the output directory ----------------------------------------------------------------------------


@pytest.mark.parametrize("target", [".", "tenants", "stacks"])
def test_render_never_replaces_the_project_or_its_inputs(project, target):
    before = {p: p.read_bytes() for p in sorted(project.rglob("*")) if p.is_file()}
    code, _, err = run("--root", project, "render", "--stack", STACK, "--out", project / target)
    assert code == 2 and "which tenants render did not write" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in sorted(project.rglob("*")) if p.is_file()} == before


def test_an_output_path_that_cannot_be_created_is_an_error_not_a_traceback(project):
    blocker = project.parent / "a-file"
    blocker.write_text("x")
    code, _, err = run("--root", project, "render", "--stack", STACK, "--out", blocker / "out")
    assert code == 2 and "tenants render:" in err and "Traceback" not in err


def test_rendering_over_an_earlier_render_replaces_it(project):
    out = project.parent / "out"
    (out / "_platform.yaml").write_text("# Generated by `tenants render` from tenants/ and stacks/; do not edit.\nstale\n")
    code, _, err = run("--root", project, "render", "--stack", STACK, "--out", out)
    assert code == 0, err
    assert "stale" not in (out / "_platform.yaml").read_text()


# --- valid files with unusual encodings ----------------------------------------------------------------


def test_crlf_line_endings_and_a_bom_give_the_same_objects(project):
    out = project.parent / "out"
    lf = snapshot(out)
    for path in [*(project / "tenants").glob("*.yaml"), *(project / "stacks").glob("*.yaml")]:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    code, _, err = run("--root", project, "render", "--stack", STACK, "--out", project.parent / "crlf")
    assert code == 0, err
    assert snapshot(project.parent / "crlf") == lf


def test_a_problem_in_a_crlf_file_has_the_same_line_and_column(project):
    path = project / "tenants" / "eval.yaml"
    path.write_text(path.read_text().replace("costCenter: cc-4300", "costCenter: cc-4300\nqouta: {}"))
    lf = rejected(project, "qouta: unknown field")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    assert rejected(project, "qouta: unknown field") == lf


# --- in a real process ---------------------------------------------------------------------------------


def test_the_process_prints_located_errors_and_no_traceback(project):
    (project / "tenants" / "tabs.yaml").write_text(EVAL.format(name="tabs") + "access:\n\towners: {}\n")
    (project / "tenants" / "loop.yaml").symlink_to("loop.yaml")
    done = subprocess.run(
        [sys.executable, "-m", "components", "--root", str(project), "validate", "--stack", STACK],
        capture_output=True, text=True, cwd=project.parent, check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "tenants/tabs.yaml:7:" in done.stderr and "tenants/loop.yaml: is a symbolic link" in done.stderr


# --- scale ---------------------------------------------------------------------------------------------

_TEN_THOUSAND = """
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a ceiling, not a measurement
from components.fleet.gpu_capacity import gpu_quota_by_class
from components.load import load_environment
env = load_environment(Path(sys.argv[1]), "bench")
totals = {}
for t in env.tenants:
    for name, count in gpu_quota_by_class(t.spec, env.platform).items():
        totals[name] = totals.get(name, 0) + count
print(json.dumps({"tenants": [t.name for t in env.tenants], "errors": [str(p) for p in env.warnings], "gpus": totals}))
"""


def test_ten_thousand_tenants_load_correctly_within_a_memory_ceiling(tmp_path):
    write_project(tmp_path, 10_000)
    done = subprocess.run(
        [sys.executable, "-c", _TEN_THOUSAND, str(tmp_path)], capture_output=True, text=True, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["tenants"] == [f"team-{i:05d}" for i in range(10_000)]
    assert result["errors"] == []
    assert result["gpus"] == {"h100": 20_000, "l4": 10_000}
