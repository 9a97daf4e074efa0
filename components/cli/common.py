"""What every `tenants` command shares: exit codes and how problems are printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from ..spec.problems import sorted_problems

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class Stop(Exception):
    """Ends a command early with its exit code, once the reason is printed: the steps of a command
    stay small functions, and `run` turns the exception into the code it returns."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def fail(message: str, code: int = EXIT_INVALID) -> Stop:
    """Print `message` to stderr; the `Stop` to raise with `code`.

    >>> fail("tenants x: no such stack", EXIT_USAGE).code
    2
    """
    print(message, file=sys.stderr)
    return Stop(code)


def stacks(root: Path, wanted: Sequence[str] | None) -> list[str]:
    """The environments a command works on: those asked for, else every stack file under `root`.

    >>> stacks(Path("."), ["dev"])
    ['dev']
    """
    from ..load import stack_names

    return list(wanted) if wanted else stack_names(root)


def report(problems, stream=None, first_files=()) -> None:
    """Print each problem on its own line, in file/line order, to stderr (or `stream`); problems in
    `first_files` (the files a change edited) come first, so that a clash between two files shows
    on the edited one before the other.

    >>> report([])
    """
    stream = stream or sys.stderr
    first = set(first_files)
    for problem in sorted(sorted_problems(problems), key=lambda p: p.file not in first):
        print(problem, file=stream)
