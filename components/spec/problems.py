"""Problems found in input files, each located at file, line and column, and the error that carries them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Literal

Severity = Literal["error", "warning"]


def printable(text: Any) -> str:
    """`text` on one line: every character that is not printable (line breaks, including YAML's
    NEL and the Unicode line and paragraph separators, tabs, terminal escapes) written as its
    Python escape, so that a value put in a comment or a report line cannot end it.

    >>> printable("ci\\nquota:\\n  gpu: {h100: 64}  # \\x1b[2K")
    'ci\\\\nquota:\\\\n  gpu: {h100: 64}  # \\\\x1b[2K'
    """
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the input, printed as `file:line:col: field: message`.

    >>> str(Problem("tenants/a.yaml", 12, 7, "quota.gpu", "must be >= 0 (got -1)"))
    'tenants/a.yaml:12:7: quota.gpu: must be >= 0 (got -1)'
    >>> str(Problem("tenants/a.yaml", 12, 7, "quota.gpu", "must be >= 0 (got -1)", stack="dev"))
    'tenants/a.yaml:12:7: quota.gpu: must be >= 0 (got -1) (stack dev)'
    """

    file: str
    line: int = 0
    column: int = 0
    field: str = ""
    message: str = ""
    severity: Severity = "error"
    # The stack whose `environments.<stack>` override was merged into the document, if any: the
    # problem may hold only there, so the message names it.
    stack: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.line:
            where += f":{self.line}:{self.column or 1}"
        prefix = "warning: " if self.severity == "warning" else ""
        subject = f"{self.field}: " if self.field else ""
        suffix = f" ({'stacks' if ', ' in self.stack else 'stack'} {self.stack})" if self.stack else ""
        return f"{where}: {prefix}{subject}{self.message}{suffix}"


@dataclass
class InvalidInput(Exception):
    """Raised when input files have errors; holds every problem found, not just the first."""

    problems: list[Problem] = field(default_factory=list)
    # Files to report first (those a change edited: `tenants diff` knows them from its base).
    first_files: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.summary())

    def summary(self) -> str:
        errors = [p for p in self.problems if p.severity == "error"]
        return f"{len(errors)} error(s) in the input"

    def __str__(self) -> str:
        return "\n".join(str(p) for p in sorted_problems(self.problems))


def sorted_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Problems in file/line order, each reported once: the same problem found in several stacks
    names them all, and none when it was also found without an override (it is the base file's).

    >>> p = Problem("t.yaml", 3, 1, "quota", "bad")
    >>> [str(x) for x in sorted_problems([replace(p, stack="prod"), replace(p, stack="dev")])]
    ['t.yaml:3:1: quota: bad (stacks dev, prod)']
    """
    stacks: dict[Problem, set[str]] = {}
    for problem in problems:
        stacks.setdefault(replace(problem, stack=""), set()).add(problem.stack)
    merged = [replace(p, stack="" if "" in found else ", ".join(sorted(found))) for p, found in stacks.items()]
    return sorted(merged, key=lambda p: (p.file, p.line, p.column, p.field, p.message))


def errors_only(problems: Iterable[Problem]) -> list[Problem]:
    """The problems that are errors (warnings left out).

    >>> errors_only([Problem("a.yaml", 1, 1, "x", "bad"), Problem("a.yaml", 2, 1, "y", "odd", severity="warning")])
    [Problem(file='a.yaml', line=1, column=1, field='x', message='bad', severity='error', stack='')]
    """
    return [p for p in problems if p.severity == "error"]
