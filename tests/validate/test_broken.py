"""The broken corpus: every file in tests/validate/broken/ is one kind of bad input.

Each file says in its header where it goes in a copy of the example project and what
`tenants validate` must print about it:

    # Broken: <what is wrong>
    # place: tenants/research.yaml         (path inside the project; replaces a file of that name)
    # stack: prod                           (optional: validate only this stack)
    # exit: 0                               (optional: warnings only; default 1)
    # expect: tenants/research.yaml:9:1: qouta: unknown field; did you mean 'quota'?

An `expect` line is `file:line:col:` followed by a fragment of the message; some printed line must
start with exactly that location and contain the fragment.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from components.cli import main

CORPUS = Path(__file__).parent / "broken"
CASES = sorted(CORPUS.rglob("*.yaml"))
_EXPECT = re.compile(r"^(?P<where>\S+?:[0-9]+:[0-9]+):\s(?P<fragment>.+)$")


@dataclass
class Case:
    place: str = ""
    stack: str | None = None
    exit: int = 1
    broken: str = ""
    expects: list[tuple[str, str]] = field(default_factory=list)


def read_case(path: Path) -> Case:
    """The header directives of one corpus file (read as Latin-1: some files are not UTF-8 on purpose)."""
    case = Case()
    for line in path.read_bytes().decode("latin-1").splitlines():
        directive = re.match(r"^# (broken|place|stack|exit|expect): (.*)$", line, re.IGNORECASE)
        if not directive:
            continue
        key, value = directive[1].lower(), directive[2].strip()
        if key == "expect":
            match = _EXPECT.match(value)
            assert match, f"{path.name}: malformed expect line {value!r}"
            case.expects.append((match["where"], match["fragment"]))
        elif key == "exit":
            case.exit = int(value)
        else:
            setattr(case, key, value)
    return case


# How a message says what to do: a did-you-mean, an instruction, an example or the value to write.
FIX_CUES = ("did you mean", "e.g.", "for example", "write ", "use ", "add ", "remove ", "set ", "give ", "pin ", "rename",
            "lower ", "raise ", "change ", "list ", "drop ", "move ", "instead", "either ", "must be", "should be", "expected",
            "confirm", "allowed", "known:", "valid ", "only ", "is one of", "one of", "put ", "quote", "replace", "delete", "keep ",
            "spell", "name ", "choose", "save ", "need", "fix", "reduce", "increase", "split", "request", "leave", "take ")


def rating(line: str, text: str, place: str) -> tuple[int, list[str]]:
    """0-3, as the #41 trial rated messages: one point each for naming the field, for pointing at a
    line the user wrote in the file they changed, and for saying how to fix it (`FIX_CUES`).

    >>> rating("tenants/a.yaml:2:1: quota: unknown field; did you mean 'quota'?", "kind: Tenant\\nqouta: {}\\n", "tenants/a.yaml")
    (3, [])
    """
    where, _, rest = line.partition(": ")
    field_, _, message = rest.partition(": ")
    missing = []
    if not field_ or " " in field_.strip() or field_ == "warning":
        field_, _, message = message.partition(": ") if field_ == "warning" else ("", "", rest)
    if not field_ or " " in field_.strip():
        missing.append("field")
    parts = where.split(":")
    lines = text.splitlines()
    at = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    if not (where.startswith(place + ":") and 0 < at <= len(lines) and lines[at - 1].strip()):
        missing.append("line the user changed")
    if not any(cue in message.lower() for cue in FIX_CUES):
        missing.append("fix")
    return 3 - len(missing), missing


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _install(path: Path, project: Path) -> Case:
    case = read_case(path)
    target = project / case.place
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(path.read_bytes())
    return case


def test_corpus_is_complete_and_every_file_says_what_it_expects():
    assert len(CASES) >= 64   # the #41 trial made 64 mistakes; each kind has a file here
    assert len([p for p in CASES if p.parent.name == "stacks"]) >= 10
    for path in CASES:
        case = read_case(path)
        assert case.broken, f"{path.name}: no '# Broken:' line"
        assert case.place.startswith(("tenants/", "stacks/")), f"{path.name}: no '# place:' line"
        assert case.expects, f"{path.name}: no '# expect:' line"
        # Most problems are in the placed file; clashes are reported on the other files involved too.
        assert any(where.startswith(case.place) for where, _ in case.expects), f"{path.name}: nothing expected in {case.place}"
        assert all(where.startswith(("tenants/", "stacks/")) for where, _ in case.expects)


@pytest.mark.parametrize("path", CASES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_broken_file_is_reported_at_its_line(path, project_copy, capsys, monkeypatch):
    # The project is the working directory, so anything a YAML tag tried to run would show up in it.
    monkeypatch.chdir(project_copy)
    case = _install(path, project_copy)
    before = _snapshot(project_copy)
    args = ["--root", str(project_copy), "validate"] + (["--stack", case.stack] if case.stack else [])

    code = main(args)

    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == case.exit, err
    lines = err.splitlines()
    for where, fragment in case.expects:
        at_place = [line for line in lines if line.startswith(where + ":")]
        assert at_place, f"nothing reported at {where}; got:\n{err}"
        assert any(fragment in line for line in at_place), f"at {where}, expected {fragment!r}; got:\n{err}"
    # The message the user reads first at the file they changed is rated as #41 rated them.
    where, fragment = next((w, f) for w, f in case.expects if w.startswith(case.place))
    printed = next(line for line in lines if line.startswith(where + ":") and fragment in line)
    score, missing = rating(printed, path.read_bytes().decode("latin-1"), case.place)
    assert score >= 2, f"{path.name}: rated {score} of 3 (missing: {', '.join(missing)}): {printed}"
    if case.exit == 0:
        assert all(": warning: " in line for line in lines), err
    else:
        assert "tenants validate:" in err and "error(s)" in err
    assert _snapshot(project_copy) == before, "validate must not write anything"


@pytest.mark.parametrize("name", ["yaml-python-object-tag.yaml", "yaml-non-utf8.yaml"])
def test_broken_file_through_the_installed_command(name, project_copy):
    """The real process: exit status 1, the located line on stderr, no traceback."""
    case = _install(CORPUS / name, project_copy)
    result = subprocess.run(
        [sys.executable, "-m", "components", "--root", str(project_copy), "validate"],
        capture_output=True,
        text=True,
        cwd=project_copy,
        timeout=120,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    where, fragment = case.expects[0]
    assert any(line.startswith(where + ":") and fragment in line for line in result.stderr.splitlines()), result.stderr
    assert not (project_copy / "pwned").exists()
