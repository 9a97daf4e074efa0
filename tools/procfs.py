"""What Linux's /proc says about a process, for the benchmarks' CPU and memory probes (stdlib only,
so that a benchmark's phase process can read it without loading the Kubernetes client)."""

from __future__ import annotations

import os

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proc_stat(pid: int) -> tuple[str, int, float]:
    """(command name, parent pid, user + system CPU seconds so far) of a live process, from
    /proc/<pid>/stat; OSError once it has exited.

    >>> name, parent, cpu = proc_stat(os.getpid())
    >>> parent == os.getppid() and cpu >= 0
    True
    """
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read().decode(errors="replace")
    fields = stat[stat.rindex(")") + 2:].split()
    return stat[stat.index("(") + 1:stat.rindex(")")], int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
