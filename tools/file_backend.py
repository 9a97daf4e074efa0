"""What the Pulumi CLI's file backend (`file://`, `make up`'s) keeps of a stack, and the repair of a
checkpoint a killed CLI left unreadable.

The file backend (pkg/backend/diy of the Pulumi CLI, v3.274.1) keeps, under `<backend>/.pulumi/`:

* `stacks/<project>/<stack>.json`: the checkpoint, the stack's whole state, rewritten after every
  step when checkpoints are on (`make up`'s worker, production's backends);
* `stacks/<project>/<stack>.json.bak`: a copy of the checkpoint made just before each rewrite, so
  it is the state one step older than the checkpoint;
* `backups/<project>/<stack>/<stack>.<unix ns>.json` and
  `history/<project>/<stack>/<stack>-<unix ns>.checkpoint.json`: copies of the checkpoint at the
  end of every update.

A CLI killed while it writes the checkpoint can leave it cut off (seen on the real engine: every
later operation fails with `failed to load checkpoint: EOF`). `repair_checkpoint` puts back the
newest copy that reads as a whole checkpoint, the `.bak` first: the steps it lacks are what the
next `up --refresh` reads from the cluster and applies again (creates are server-side applies
that adopt what exists). With no readable copy it refuses, naming the command that starts from
an empty state instead (docs/when-things-fail.md).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Optional

BAK = ".bak"
UNREADABLE = ".unreadable"   # the cut-off checkpoint is kept next to it under this suffix
_GZIP, _ZSTD = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"


class CheckpointLost(RuntimeError):
    """The checkpoint is unreadable and so is every copy the file backend keeps of it."""


def stack_checkpoint(backend: Path, stack: str) -> Optional[Path]:
    """The checkpoint file of `stack` in the file backend at `backend` (the newest of its plain and
    compressed variants, as the CLI picks it), or None when the stack has none.

    >>> stack_checkpoint(Path("/nonexistent"), "prod") is None
    True
    """
    found = [p for suffix in (".json", ".json.gz", ".json.zst")
             for p in (backend / ".pulumi" / "stacks").glob(f"*/{stack}{suffix}") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime_ns, default=None)


def unreadable(data: bytes) -> Optional[str]:
    """Why `data` is not a whole checkpoint, or None when it is one (a JSON object with its
    `version` and `checkpoint`; a zstd-compressed file is not judged).

    >>> unreadable(b'{"version": 3, "checkpoint": {"stack": "organization/gpu-tenancy/prod"}}') is None
    True
    >>> unreadable(b""), unreadable(b'{"version": 3, "checkp')
    ('empty', 'not JSON, 22 bytes: Unterminated string starting at: line 1 column 16 (char 15)')
    """
    if not data:
        return "empty"
    if data.startswith(_ZSTD):
        return None
    try:
        text = gzip.decompress(data) if data.startswith(_GZIP) else data
        document = json.loads(text)
    except (EOFError, OSError, ValueError) as err:
        return f"not JSON, {len(data)} bytes: {err}"
    if not isinstance(document, dict) or not isinstance(document.get("checkpoint"), dict) or "version" not in document:
        return f"not a checkpoint ({len(data)} bytes, no `version` and `checkpoint`)"
    return None


def backup_copies(backend: Path, checkpoint: Path) -> list[Path]:
    """The copies the file backend keeps of `checkpoint`, newest first: its `.bak`, then those of
    `backups/` and `history/` (by the time in their names).

    >>> backup_copies(Path("/b"), Path("/b/.pulumi/stacks/gpu-tenancy/prod.json"))
    []
    """
    project, stack = checkpoint.parent.name, checkpoint.name.split(".json")[0]
    dirs = [backend / ".pulumi" / kind / project / stack for kind in ("backups", "history")]
    kept = [p for d in dirs if d.is_dir() for p in d.iterdir() if p.is_file() and _stamp(p.name, stack)]
    newest_first = sorted(kept, key=lambda p: _stamp(p.name, stack), reverse=True)
    bak = checkpoint.with_name(checkpoint.name + BAK)
    return ([bak] if bak.is_file() else []) + newest_first


def _stamp(name: str, stack: str) -> int:
    """The unix nanoseconds in the name of a checkpoint's copy (`prod.1765000000000000000.json` in
    `backups/`, `prod-1765000000000000000.checkpoint.json` in `history/`); 0 for any other name (the
    update records `prod-<ns>.history.json` beside them).

    >>> [_stamp(n, "prod") for n in ("prod.1765.json", "prod-1765.checkpoint.json", "prod-1765.history.json", "prod.json")]
    [1765, 1765, 0, 0]
    """
    digits, _, rest = name[len(stack) + 1:].partition(".")
    copy = name.startswith(f"{stack}.") and rest.startswith("json") or name.startswith(f"{stack}-") and rest.startswith("checkpoint.")
    return int(digits) if copy and digits.isdigit() else 0


def resource_count(data: bytes) -> int:
    """How many resources a readable checkpoint holds.

    >>> resource_count(b'{"version": 3, "checkpoint": {"latest": {"resources": [{}, {}]}}}')
    2
    """
    text = gzip.decompress(data) if data.startswith(_GZIP) else data
    return len(((json.loads(text)["checkpoint"].get("latest") or {}).get("resources")) or [])


def repair_checkpoint(backend: Path, stack: str) -> list[str]:
    """Put back the newest readable copy of `stack`'s checkpoint when the checkpoint itself is
    unreadable, keeping the unreadable file as `<checkpoint>.unreadable`. Returns one line saying
    what was done, or nothing when the checkpoint reads (or the stack has none). Raises
    `CheckpointLost`, with the command to start from an empty state, when no copy reads either.
    Call it only while no `pulumi` process works on the stack (its lock is free or stale).

    >>> repair_checkpoint(Path("/nonexistent"), "prod")
    []
    """
    checkpoint = stack_checkpoint(backend, stack)
    if checkpoint is None:
        return []
    why = unreadable(checkpoint.read_bytes())
    if why is None:
        return []
    copies = backup_copies(backend, checkpoint)
    good = next((p for p in copies if unreadable(p.read_bytes()) is None), None)
    if good is None:
        tried = ", ".join(p.name for p in copies) or "none kept"
        raise CheckpointLost(
            f"stack {stack}: its checkpoint {checkpoint} is unreadable ({why}) and so is every copy the file "
            f"backend keeps of it ({tried}). Restore one from elsewhere over it, or start from an empty state, "
            f"whose first `up` adopts the cluster's objects (docs/when-things-fail.md, \"A lost state\"): "
            f"`mv {checkpoint} {checkpoint}{UNREADABLE}`, then `make up` again")
    data = good.read_bytes()
    os.replace(checkpoint, checkpoint.with_name(checkpoint.name + UNREADABLE))
    partial = checkpoint.with_name(checkpoint.name + ".restoring")
    partial.write_bytes(data)
    os.replace(partial, checkpoint)   # whole or not at all: never another cut-off checkpoint
    return [f"the checkpoint {checkpoint.name} was unreadable ({why}: a write cut off, as a killed CLI leaves it): "
            f"restored from {good.relative_to(backend)} ({resource_count(data)} resources; the refresh reads "
            f"what the steps after it did), the unreadable file kept as {checkpoint.name}{UNREADABLE}"]
