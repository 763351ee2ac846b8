"""Training checkpoints that a crash can never leave half-written as the latest one.

One checkpoint is its state and a sidecar, in the checkpoints folder:

    step-00000012.pt     torch.save of the training state (model, optimizer, LR
                         scheduler, gradient scaler, epoch and batch position, every
                         rank's RNG states, best metric), by rank 0 (`checkpoint:
                         torch_save`); or
    step-00000012/       torch.distributed.checkpoint's folder (`dcp`, `dcp_async`):
                         each rank's `__<rank>_0.distcp` and the `.metadata` its
                         coordinator writes last, once every rank's part is written
                         (benchlib.trainers.saver)
    step-00000012.json   its sidecar: step, epoch, model, world size, batch size, the
                         .pt file's size and sha256 (or each DCP file's size), when
                         it was written

Each file is written to a temporary file, fsynced and renamed over its name, the state
first and the sidecar last (by rank 0, once the whole checkpoint is durable), so a
sidecar only exists for a complete checkpoint: a rank killed during an asynchronous save
leaves a folder without one, never taken, and removed at the next start. `latest()` takes
the newest checkpoint that matches its sidecar (a .pt's size and sha256; each DCP file's
size, and the metadata present); a truncated or overwritten one is passed over with a
warning and the one before it is used. `save()` keeps the newest `keep` checkpoints (2 by
default), so there is always one to fall back to.

The folder must be shared by every node of a multi-node run, as in seed 001: all ranks
read the same checkpoint; rank 0 writes a .pt, each rank its part of a DCP one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchlib import atomic
from benchlib.distributed.env import DistEnv
from benchlib.distributed.group import gather_objects
from benchlib.errors import CheckpointError, UsageError

FORMAT = 1
_NAME = re.compile(r"^step-(\d{8})\.json$")
_STATE = re.compile(r"^step-(\d{8})$")  # a DCP checkpoint's folder
METADATA = ".metadata"  # what DCP's coordinator writes once every rank's part is written
BEST = "best.pt"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint found on disk: its .pt file and what its sidecar says."""

    path: Path
    meta: dict[str, Any]

    @property
    def step(self) -> int:
        return self.meta["step"]

    @property
    def kind(self) -> str:
        """torch_save (one .pt) or dcp (a folder of every rank's part)."""
        return "dcp" if self.path.is_dir() else "torch_save"


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(folder: Path) -> None:
    """Make the renames themselves durable (a power cut after a rename of an unsynced
    directory can bring the old name back)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_writable(folder: str | Path) -> Path:
    """Create `folder` and write a file in it, or say why not: before training starts,
    not at the first checkpoint an hour later. Where the disk is full, what a killed writer
    left (`clean_temporaries`: no complete checkpoint is touched) is removed first, once:
    every rank is at its start, so nobody writes."""
    folder = Path(folder)
    for attempt in (1, 2):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}"  # every rank checks: a name each
            with atomic.replacing(probe) as tmp:
                tmp.write_bytes(b"ok")
            probe.unlink()
            return folder
        except OSError as e:
            if attempt == 1 and e.errno in SPACE_ERRNOS and clean_temporaries(folder):
                continue
            raise UsageError(f"checkpoint_path: cannot write to {folder} "
                             f"({e.strerror or type(e).__name__}); give a writable folder") from e
    return folder


SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# what torch.save's zip writer and DCP say when a write comes up short
_SPACE_WORDS = ("No space left", "Disk quota exceeded", "unexpected pos")


def out_of_space(error: BaseException) -> bool:
    """The error, or one it wraps or names (DCP's CheckpointException carries each rank's
    failure as text), is a full disk or a quota."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in SPACE_ERRNOS:
            return True
        if any(w in str(seen) for w in _SPACE_WORDS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def failed_save(folder: Path, path: Path, step: int, needed_bytes: int,
                error: BaseException) -> CheckpointError:
    """What a failed save left at `path` removed (a DCP folder; a .pt's temporary file is
    gone already), and the one line that says why: for want of space, the bytes the save
    needed and those free."""
    _remove(path)
    free = shutil.disk_usage(folder).free
    kept = next((f"step {_step_of(p)}'s stays the newest, and a restart resumes from it"
                 for p in listed(folder)), "no earlier checkpoint is there")
    if out_of_space(error) or free < needed_bytes:
        why = (f"no space left: it needs about {needed_bytes / 2**20:,.1f} MiB, "
               f"{free / 2**20:,.1f} MiB are free there")
    else:
        why = " ".join(str(error).split())[:300] or type(error).__name__
    return CheckpointError(f"checkpoint_path: the checkpoint of step {step} to {path} failed "
                           f"({why}); the partial checkpoint was removed; {kept}")


def save(folder: Path, state: dict[str, Any], meta: dict[str, Any], keep: int = 2) -> Checkpoint:
    """Write `state` as the checkpoint of `meta["step"]`, then delete all but the newest
    `keep`. `meta` goes into the sidecar (and into the .pt, for anyone who has only that)."""
    folder = Path(folder)
    step = meta["step"]
    path = folder / f"step-{step:08d}.pt"
    with atomic.replacing(path, suffix=".pt") as tmp:
        with open(tmp, "wb") as f:
            torch.save({**state, "meta": meta}, f)
            f.flush()
            os.fsync(f.fileno())
        size, sha = tmp.stat().st_size, _sha256(tmp)
    return finish(folder, path, meta, keep, bytes=size, sha256=sha)


def finish(folder: Path, path: Path, meta: dict[str, Any], keep: int,
           **written: Any) -> Checkpoint:
    """The sidecar of the complete checkpoint at `path` (`written`: what `problem` checks
    it against), then all but the newest `keep` deleted."""
    sidecar = {**meta, "format": FORMAT, "file": path.name, **written, "saved_at": time.time()}
    other = path.with_suffix("") if path.suffix == ".pt" else path.with_suffix(".pt")
    _remove(other)  # the same step saved before in the other mode (a run resumed in another)
    atomic.write_json(folder / f"step-{meta['step']:08d}.json", sidecar)
    _fsync_dir(folder)
    # A later step than this one belongs to an abandoned attempt (damaged, or this run would
    # have resumed from it): it must not outrank this one, nor push it out of the newest `keep`.
    on_file = listed(folder)
    later = [p for p in on_file if _step_of(p) > meta["step"]]
    for old in later + [p for p in on_file if _step_of(p) <= meta["step"]][keep:]:
        (folder / f"{old.stem}.json").unlink(missing_ok=True)  # sidecar first: never dangling
        _remove(old)
    return Checkpoint(path, sidecar)


def dcp_files(path: Path) -> dict[str, int]:
    """Each file of a DCP checkpoint's folder and its size."""
    return {f.name: f.stat().st_size for f in sorted(path.iterdir()) if f.is_file()}


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _step_of(path: Path) -> int:
    return int(path.name.removeprefix("step-").removesuffix(".pt"))


def listed(folder: str | Path) -> list[Path]:
    """The checkpoints that have a sidecar (a .pt file, or a DCP folder), newest step
    first (not yet verified)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    steps = sorted((int(m[1]) for f in folder.iterdir() if (m := _NAME.match(f.name))), reverse=True)
    return [folder / f"step-{s:08d}" if (folder / f"step-{s:08d}").is_dir()
            else folder / f"step-{s:08d}.pt" for s in steps]


def problem(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(sidecar, None) when the checkpoint is what its sidecar says, else (None, why not)."""
    try:
        meta = json.loads((path.parent / f"step-{_step_of(path):08d}.json").read_text())
    except (OSError, ValueError) as e:
        return None, f"its sidecar is unreadable ({type(e).__name__}: {e})"
    if meta.get("format") != FORMAT:
        return None, f"its sidecar has format {meta.get('format')!r}, this benchlib reads {FORMAT}"
    if path.is_dir():
        return _dcp_problem(path, meta)
    if not path.exists():
        return None, "the .pt file is missing"
    size = path.stat().st_size
    if size != meta["bytes"]:
        return None, f"truncated or grown: {size} bytes, {meta['bytes']} written"
    if _sha256(path) != meta["sha256"]:
        return None, "its sha256 does not match the one written beside it"
    return meta, None


def _dcp_problem(path: Path, meta: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """A DCP folder is what its sidecar says when its metadata and every rank's file are
    there with the sizes written (sizes, not a hash: rank 0 reading every rank's bytes
    back would cost as much as the save)."""
    found = dcp_files(path)
    expected = meta.get("files") or {}
    if METADATA not in found or METADATA not in expected:
        return None, "its DCP metadata is missing: not every rank's part was written"
    for name, size in expected.items():
        if found.get(name) != size:
            return None, (f"{name} is missing" if name not in found else
                          f"{name} truncated or grown: {found[name]} bytes, {size} written")
    return meta, None


def latest(folder: str | Path, warn: Callable[[str], None] = _warn) -> Checkpoint | None:
    """The newest checkpoint that verifies; each newer one that does not is named in a
    warning, and the previous one is tried."""
    for path in listed(folder):
        meta, why = problem(path)
        if why is None:
            return Checkpoint(path, meta)
        warn(f"checkpoint {path} is corrupt ({why}); using the previous one")
    return None


def check_compatible(found: Checkpoint, **expected: Any) -> None:
    """Refuse a checkpoint written by a different run: another model, data set, seed
    (data order), world size or per-device batch size. A different world size is refused rather than remapped: the
    saved position in the epoch counts batches of DistributedSampler's per-rank share,
    and the RNG states are per rank; neither has a meaning for another world size."""
    for name, value in expected.items():
        if found.meta.get(name) != value:
            hint = ("resume with the same number of ranks, or start fresh in another "
                    "--checkpoint-path" if name == "world_size"
                    else "use another --checkpoint-path to start fresh")
            raise UsageError(f"resume: {found.path} was written with {name} "
                             f"{found.meta.get(name)!r}, this run has {name} {value!r}; {hint}")


def load(found: Checkpoint, map_location: Any = "cpu") -> dict[str, Any]:
    """The training state. weights_only: a checkpoint holds tensors and plain values,
    so loading one never runs code."""
    return torch.load(found.path, map_location=map_location, weights_only=True)


def save_best(folder: Path, model_state: dict[str, Any], meta: dict[str, Any]) -> Path:
    """The model with the best validation metric so far (seed 001's model_best)."""
    path = Path(folder) / BEST
    with atomic.replacing(path, suffix=".pt") as tmp:
        torch.save({"model": model_state, "meta": meta}, tmp)
    return path


def clean_temporaries(folder: Path) -> list[Path]:
    """Remove what a writer killed mid-write left behind: temporary files, and DCP folders
    without a sidecar (a save that never completed). Only call this while nobody writes:
    at the start of an attempt."""
    folder = Path(folder)
    stale = [f for f in folder.glob(".step-*") if f.is_file()]
    stale += [d for d in folder.iterdir() if d.is_dir() and _STATE.match(d.name)
              and not (folder / f"{d.name}.json").exists()]
    for f in stale:
        _remove(f)
    return stale


# ---------------------------------------------------------------- RNG states


def rng_state(device: torch.device) -> dict[str, Any]:
    """This process's random number generators: torch (CPU and its CUDA device), Python's
    `random` and numpy's global one, in types torch.load(weights_only=True) accepts."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": [kind, keys.tolist(), pos, has_gauss, gauss]}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device).cpu()
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"].cpu())
    random.setstate(_tuples(state["python"]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


def _tuples(value: Any) -> Any:
    """random.setstate wants tuples; a checkpoint may hand lists back."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def check_same_step(step: int | None, env: DistEnv) -> None:
    """Every rank must resume from the same step; a folder that is not shared by all
    nodes shows up here, not as a hang or a silently diverged model."""
    steps = gather_objects(step)
    if len(set(steps)) > 1:
        raise UsageError(f"checkpoint_path: the ranks found different checkpoints (steps by rank: "
                         f"{steps}); it must be one folder that every node shares")
