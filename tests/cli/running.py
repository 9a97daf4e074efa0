"""Running the `tenants` command in-process, as the CLI tests do."""

from __future__ import annotations

from components.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """`(exit code, stdout, stderr)` of `tenants *argv`; a traceback is always a failure.

    >>> run(capsys, "stacks")   # doctest: +SKIP
    (0, 'dev: platform objects and tenants ...', '')
    """
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err
