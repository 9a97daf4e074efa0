"""tools/file_backend.py: a checkpoint a killed CLI left cut off is put back from the newest copy the
file backend keeps that reads whole, or refused with the command to start from an empty state
(the real engine's case is in tests/e2e/pulumi_engine/test_faults.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tools.file_backend import CheckpointLost, backup_copies, repair_checkpoint, stack_checkpoint

PROJECT = "gpu-tenancy"


def _checkpoint(resources: int, stack: str = "prod") -> bytes:
    latest = {"resources": [{"urn": f"urn:pulumi:{stack}::{PROJECT}::kubernetes:core/v1:Namespace::ns{i}"} for i in range(resources)]}
    return json.dumps({"version": 3, "checkpoint": {"stack": f"organization/{PROJECT}/{stack}", "latest": latest}}).encode()


def _backend(tmp_path: Path, stack: str = "prod", *, checkpoint: bytes, bak: bytes | None = None,
             backups: dict[int, bytes] = {}, history: dict[int, bytes] = {}) -> Path:
    """A file backend as the CLI lays it out: the checkpoint and its `.bak`, copies in backups/ and
    history/ (each history copy next to the update record the CLI writes with it)."""
    backend = tmp_path / "backend"
    stacks = backend / ".pulumi" / "stacks" / PROJECT
    stacks.mkdir(parents=True)
    (stacks / f"{stack}.json").write_bytes(checkpoint)
    if bak is not None:
        (stacks / f"{stack}.json.bak").write_bytes(bak)
    for kind, copies in (("backups", backups), ("history", history)):
        folder = backend / ".pulumi" / kind / PROJECT / stack
        folder.mkdir(parents=True, exist_ok=True)
        for stamp, data in copies.items():
            name = f"{stack}.{stamp}.json" if kind == "backups" else f"{stack}-{stamp}.checkpoint.json"
            (folder / name).write_bytes(data)
            if kind == "history":
                (folder / f"{stack}-{stamp + 1}.history.json").write_text('{"kind": "update"}')
    return backend


def _cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def test_a_readable_checkpoint_is_left_alone(tmp_path):
    backend = _backend(tmp_path, checkpoint=_checkpoint(3), bak=_checkpoint(2))
    assert repair_checkpoint(backend, "prod") == []
    assert stack_checkpoint(backend, "prod").read_bytes() == _checkpoint(3)


def test_a_cut_off_checkpoint_is_put_back_from_its_bak_and_kept_aside(tmp_path):
    backend = _backend(tmp_path, checkpoint=_cut(_checkpoint(5)), bak=_checkpoint(4), backups={100: _checkpoint(3)})
    [line] = repair_checkpoint(backend, "prod")
    checkpoint = backend / ".pulumi" / "stacks" / PROJECT / "prod.json"
    assert checkpoint.read_bytes() == _checkpoint(4)
    assert (checkpoint.parent / "prod.json.unreadable").read_bytes() == _cut(_checkpoint(5))
    assert line.startswith("the checkpoint prod.json was unreadable (not JSON, ")
    assert f"restored from .pulumi/stacks/{PROJECT}/prod.json.bak (4 resources;" in line, line
    assert repair_checkpoint(backend, "prod") == []   # repaired once


def test_an_empty_checkpoint_is_unreadable_too(tmp_path):
    backend = _backend(tmp_path, checkpoint=b"", bak=_checkpoint(1))
    [line] = repair_checkpoint(backend, "prod")
    assert "was unreadable (empty: " in line


def test_without_a_readable_bak_the_newest_whole_copy_of_backups_or_history_is_taken(tmp_path):
    backend = _backend(tmp_path, checkpoint=_cut(_checkpoint(5)), bak=b"{",
                       backups={100: _checkpoint(1), 300: _cut(_checkpoint(3))}, history={200: _checkpoint(2)})
    assert [p.name for p in backup_copies(backend, stack_checkpoint(backend, "prod"))] == [
        "prod.json.bak", "prod.300.json", "prod-200.checkpoint.json", "prod.100.json"]   # no update record
    [line] = repair_checkpoint(backend, "prod")
    assert f"restored from .pulumi/history/{PROJECT}/prod/prod-200.checkpoint.json (2 resources;" in line, line
    assert stack_checkpoint(backend, "prod").read_bytes() == _checkpoint(2)


def test_a_gzip_copy_is_read_and_a_cut_gzip_one_is_not(tmp_path):
    backend = _backend(tmp_path, checkpoint=_cut(gzip.compress(_checkpoint(5))), bak=gzip.compress(_checkpoint(4)))
    [line] = repair_checkpoint(backend, "prod")
    assert "(4 resources;" in line
    assert gzip.decompress(stack_checkpoint(backend, "prod").read_bytes()) == _checkpoint(4)


def test_with_no_readable_copy_it_refuses_with_the_command_and_changes_nothing(tmp_path):
    backend = _backend(tmp_path, checkpoint=b"", bak=_cut(_checkpoint(4)), backups={100: b""})
    checkpoint = stack_checkpoint(backend, "prod")
    with pytest.raises(CheckpointLost) as refused:
        repair_checkpoint(backend, "prod")
    message = str(refused.value)
    assert "(prod.json.bak, prod.100.json)" in message, message
    assert message.endswith(f"`mv {checkpoint} {checkpoint}.unreadable`, then `make up` again")
    assert checkpoint.read_bytes() == b"" and not checkpoint.with_name("prod.json.unreadable").exists()


def test_a_shard_stack_is_not_taken_for_its_environments_stack(tmp_path):
    backend = _backend(tmp_path, "lab.blue", checkpoint=b"", bak=_checkpoint(1, "lab.blue"))
    assert stack_checkpoint(backend, "lab") is None and repair_checkpoint(backend, "lab") == []
    [line] = repair_checkpoint(backend, "lab.blue")
    assert "lab.blue.json.bak (1 resources;" in line


def test_a_stack_without_a_checkpoint_has_nothing_to_repair(tmp_path):
    assert repair_checkpoint(tmp_path, "prod") == []
