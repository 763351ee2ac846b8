"""Training checkpoints that a crash can never leave half-written as the latest one.

One checkpoint is two files in the checkpoints folder:

    step-00000012.pt     torch.save of the training state (model, optimizer, LR
                         scheduler, gradient scaler, epoch and batch position, every
                         rank's RNG states, best metric)
    step-00000012.json   its sidecar: step, epoch, model, world size, batch size, the
                         .pt file's size and sha256, when it was written

Each is written to a temporary file, fsynced and renamed over its name, the .pt first
and the sidecar last, so a sidecar only exists for a complete .pt. `latest()` takes
the newest checkpoint whose .pt matches its sidecar (size and sha256); a truncated or
overwritten one is passed over with a warning and the one before it is used. `save()`
keeps the newest `keep` checkpoints (2 by default), so there is always one to fall back to.

The folder must be shared by every node of a multi-node run, as in seed 001: all ranks
read the same checkpoint; only rank 0 writes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
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
from benchlib.errors import UsageError

FORMAT = 1
_NAME = re.compile(r"^step-(\d{8})\.json$")
BEST = "best.pt"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint found on disk: its .pt file and what its sidecar says."""

    path: Path
    meta: dict[str, Any]

    @property
    def step(self) -> int:
        return self.meta["step"]


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
    not at the first checkpoint an hour later."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"  # every rank checks: a name each
        with atomic.replacing(probe) as tmp:
            tmp.write_bytes(b"ok")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"checkpoints_path: cannot write to {folder} "
                         f"({e.strerror or type(e).__name__}); give a writable folder") from e
    return folder


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
    sidecar = {**meta, "format": FORMAT, "file": path.name, "bytes": size, "sha256": sha,
               "saved_at": time.time()}
    atomic.write_json(path.with_suffix(".json"), sidecar)
    _fsync_dir(folder)
    # A later step than this one belongs to an abandoned attempt (damaged, or this run would
    # have resumed from it): it must not outrank this one, nor push it out of the newest `keep`.
    on_file = listed(folder)
    later = [p for p in on_file if _step_of(p) > step]
    for old in later + [p for p in on_file if _step_of(p) <= step][keep:]:
        old.with_suffix(".json").unlink(missing_ok=True)  # sidecar first: never a dangling one
        old.unlink(missing_ok=True)
    return Checkpoint(path, sidecar)


def _step_of(path: Path) -> int:
    return int(path.stem.removeprefix("step-"))


def listed(folder: str | Path) -> list[Path]:
    """The .pt files that have a sidecar, newest step first (not yet verified)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    steps = sorted((int(m[1]) for f in folder.iterdir() if (m := _NAME.match(f.name))), reverse=True)
    return [folder / f"step-{s:08d}.pt" for s in steps]


def problem(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(sidecar, None) when the .pt is what its sidecar says, else (None, why not)."""
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError) as e:
        return None, f"its sidecar is unreadable ({type(e).__name__}: {e})"
    if meta.get("format") != FORMAT:
        return None, f"its sidecar has format {meta.get('format')!r}, this benchlib reads {FORMAT}"
    if not path.exists():
        return None, "the .pt file is missing"
    size = path.stat().st_size
    if size != meta["bytes"]:
        return None, f"truncated or grown: {size} bytes, {meta['bytes']} written"
    if _sha256(path) != meta["sha256"]:
        return None, "its sha256 does not match the one written beside it"
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
                    "--checkpoints-path" if name == "world_size"
                    else "use another --checkpoints-path to start fresh")
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
    """Remove the temporary files a writer killed mid-write left behind (only call this
    while nobody writes: at the start of an attempt)."""
    stale = [f for f in Path(folder).glob(".step-*") if f.is_file()]
    for f in stale:
        f.unlink(missing_ok=True)
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
        raise UsageError(f"checkpoints_path: the ranks found different checkpoints (steps by rank: "
                         f"{steps}); it must be one folder that every node shares")
