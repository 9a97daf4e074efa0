"""No provider process outlives the `pulumi` CLI that started it (`make up`, tools/up.py).

The CLI starts each plugin (the Kubernetes provider, the language host) in a process group of its
own, so a killed CLI (SIGKILL, the OOM killer) leaves them running as orphans of init, and no
process-group kill reaches them. A process that calls `become_subreaper()` gets its descendants'
orphans as its own children instead (Linux `PR_SET_CHILD_SUBREAPER`); `reap_orphans` then ends
every child it did not start on purpose, with their descendants, and waits for them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path
from typing import Iterable

from tools.procfs import proc_stat

_PR_SET_CHILD_SUBREAPER = 36
REPO = Path(__file__).resolve().parents[1]


def become_subreaper() -> bool:
    r"""Make orphaned descendants of this process its children; False where Linux refuses.

    >>> import subprocess, sys   # in a process of its own: a subreaper keeps the role until it exits
    >>> subprocess.run([sys.executable, "-c", "from tools.reaping import become_subreaper as b; print(b())"],
    ...                capture_output=True, text=True, cwd=REPO).stdout
    'True\n'
    """
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def children(pid: int) -> list[tuple[int, str]]:
    """`(pid, command name)` of the live children of `pid`, from /proc.

    >>> children(os.getpid()) == [] or all(isinstance(p, int) for p, _ in children(os.getpid()))
    True
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            name, parent, _ = proc_stat(int(entry))
        except OSError:
            continue
        if parent == pid:
            found.append((int(entry), name))
    return sorted(found)


def _tree(pid: int) -> list[tuple[int, str]]:
    out = []
    for child in children(pid):
        out += [child, *_tree(child[0])]
    return out


def reap_orphans(keep: Iterable[int] = (), grace: float = 5.0) -> list[tuple[int, str]]:
    """End every child of this process but those in `keep` (and each one's descendants): SIGTERM,
    then SIGKILL after `grace` seconds; wait for the children. Returns `(pid, name)` of each ended.

    >>> reap_orphans(keep=[p for p, _ in children(os.getpid())])
    []
    """
    kept = set(keep)
    victims = [c for c in children(os.getpid()) if c[0] not in kept]
    ended = [v for child in victims for v in (child, *_tree(child[0]))]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in ended:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(_alive(p) for p, _ in ended):
            time.sleep(0.1)
    for pid, _ in victims:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return ended


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")
