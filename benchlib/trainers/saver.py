"""How a trainer saves and restores its state in the mode `checkpoint` names
(benchlib.config.checkpoint), and what each save and restore cost.

    torch_save        rank 0 writes the whole state with torch.save (an FSDP2 model's full
                      state gathered to it first: get_state_dict, full_state_dict); the
                      others wait at a barrier
    dcp               torch.distributed.checkpoint.save: every rank writes its part (DDP's
                      replicated state spread over the ranks, FSDP2's shards as they are:
                      get_state_dict), blocking
    dcp_async         dcp.async_save: the state copied to CPU memory, then written by a
                      background thread over a gloo group of its own (async saves need a
                      CPU group, and never the training's, whose collectives run meanwhile)
    dcp_async_pinned  the same, copied into pinned memory by DCP's DefaultStager and kept
                      for the next save (the faster copy from a GPU; without CUDA torch
                      stages into ordinary memory, and the record says so)

Each save's `blocking_s` is what training waited: the whole save, or an asynchronous save's
staging plus any wait for the save before it, still in flight, and rank 0's sidecar. Its
`total_s` runs until the checkpoint can be resumed from (every file fsynced, DCP's metadata
and the sidecar written: for an asynchronous save, at the first step boundary after its
write finished), and it counts the bytes each rank wrote. The sidecar
(benchlib.trainers.checkpoint) is written by rank 0 only once the whole checkpoint is
durable, so a save that never completed is never resumed from. A restore's seconds are
kept alike.
"""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import time
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from benchlib.core.checkpoint_cost import ASYNC_MODES as ASYNC
from benchlib.errors import UsageError
from benchlib.trainers import checkpoint

_RANK_FILE = re.compile(r"^__(\d+)_\d+\.distcp$")  # FileSystemWriter: one file per rank


@dataclass
class Save:
    """One save as this rank saw it (`rank_bytes`: rank 0's count of every rank's bytes)."""

    step: int
    started: float  # time.perf_counter()
    blocking_s: float = 0.0
    staged_bytes: int = 0  # the state this rank handed over (what staging copies)
    done_at: float | None = None  # when it could be resumed from (its sidecar written)
    rank_bytes: list[int] | None = None

    def event(self) -> dict[str, Any]:
        """What the timeline and the record keep of it."""
        total = self.done_at - self.started if self.done_at is not None else None
        return {"step": self.step, "blocking_s": self.blocking_s, "total_s": total,
                "staged_bytes": self.staged_bytes, "rank_bytes": self.rank_bytes}


def plain(model: torch.nn.Module) -> torch.nn.Module:
    """The module a checkpoint holds: DDP's and DataParallel's `.module`, else the model."""
    return getattr(model, "module", model)


def sharded(model: torch.nn.Module) -> bool:
    """An FSDP2 model: its parameters are DTensors, each rank holding a shard."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def tensor_bytes(obj: Any) -> int:
    """The bytes of every tensor in a state (this rank's shard of a DTensor)."""
    if isinstance(obj, torch.Tensor):
        local = obj.to_local() if hasattr(obj, "to_local") else obj
        return local.numel() * local.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def _pack(extra: dict[str, Any]) -> io.BytesIO:
    """The state that is not the model's or the optimizer's (position, schedule, RNG
    states) as one blob: DCP stores it whole, where it would flatten a nested one."""
    blob = io.BytesIO()
    torch.save(extra, blob)
    blob.seek(0)
    return blob


def _stager(pinned: bool = True):
    """DCP's stager into host memory, pinned (pageable where there is no CUDA) unless told."""
    try:
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
    except ImportError:
        raise UsageError(f"checkpoint: dcp_async_pinned needs DCP's DefaultStager, which "
                         f"torch {torch.__version__} lacks; use dcp_async") from None
    return DefaultStager(StagingOptions(use_pinned_memory=pinned, use_shared_memory=False,
                                        use_async_staging=False, use_non_blocking_copy=False))


def _stager_reusable() -> bool:
    """Whether this torch's DefaultStager stages more than once. torch 2.11's closes its
    copier after every stage, so that a second save through it fails with `KeyError:
    <class 'type'>` (the H200 run of 2026-11-28); later ones keep it, and their pinned
    buffers, for the next save. Found by staging a small dict twice."""
    probe = _stager(pinned=False)
    try:
        for _ in range(2):
            probe.stage({"probe": torch.zeros(1), "step": 1})
        return True
    except KeyError:
        return False
    finally:
        probe.close()


def _dying_writer(path: Path, step: int):
    """Fault injection (`fail_at_step` at a step that saves asynchronously): a writer whose
    rank dies inside its background write, its file begun and never finished, as a node
    lost mid-save."""
    from torch.distributed.checkpoint import FileSystemWriter

    class Dying(FileSystemWriter):
        def write_data(self, plan, planner):
            rank = dist.get_rank()
            print(f"injected failure: rank {rank} killed during the asynchronous save of "
                  f"step {step}", flush=True)
            (path / f"__{rank}_0.distcp").write_bytes(b"partial")
            os.kill(os.getpid(), signal.SIGKILL)

    return Dying(path)


class Saver:
    """Saves and restores one run's state in one mode, into `folder`, keeping the newest
    `keep` checkpoints; `saves` and `restores` are what they cost."""

    def __init__(self, mode: str, folder: Path, keep: int = 2, timeout_s: float = 600,
                 warn=lambda m: print(f"warning: {m}", file=sys.stderr, flush=True)):
        self.mode, self.folder, self.keep, self.warn = mode, Path(folder), keep, warn
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self.saves: list[Save] = []  # completed
        self.restores: list[float] = []
        self.pending: tuple[Save, Future, dict[str, Any]] | None = None
        self.reported = 0
        self.group, self.stager, self._sharded = None, None, False
        if mode in ASYNC and dist.is_initialized():  # every rank at once: a collective
            self.group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
        # with a stager: whether one, its pinned buffers kept, serves every save (else None)
        self.stager_reused = None
        if mode == "dcp_async_pinned":
            self.stager = _stager()
            self.stager_reused = _stager_reusable()
        self.pinned = mode == "dcp_async_pinned" and torch.cuda.is_available()

    # ------------------------------------------------------------ saving

    def save(self, step: int, model: torch.nn.Module, optimizer, extra: dict[str, Any],
             meta: dict[str, Any], die_in_write: bool = False,
             started: float | None = None) -> Save:
        """Save the state after `step`; returns when training may go on (an asynchronous
        save still writing; `poll` and `wait` complete it). `started`: when the trainer
        began it (gathering what it saves), if before this call."""
        save = Save(step, started or time.perf_counter())
        self.wait()  # one save in flight at a time: the wait is this save's stall
        model = plain(model)
        try:
            if self.mode == "torch_save":
                self._torch_save(save, model, optimizer, extra, meta)
            else:
                self._dcp_save(save, model, optimizer, extra, meta, die_in_write)
        except BaseException as e:  # DCP's CheckpointException is a BaseException
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise self._failed(save, e) from e  # a full disk, a quota: said in one line
        save.blocking_s = time.perf_counter() - save.started
        return save

    def _failed(self, save: Save, error: BaseException) -> Exception:
        """The save's partial checkpoint removed, and the error that says why."""
        path = self.folder / (f"step-{save.step:08d}.pt" if self.mode == "torch_save"
                              else f"step-{save.step:08d}")
        # the whole checkpoint's bytes: this rank's state, each rank's shard where sharded
        needed = save.staged_bytes * (self.world if self._sharded else 1)
        return checkpoint.failed_save(self.folder, path, save.step, needed, error)

    def _torch_save(self, save: Save, model, optimizer, extra, meta) -> None:
        if sharded(model):  # every rank gathers; rank 0 keeps the full state
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

            model_state, optim_state = get_state_dict(model, optimizer, options=StateDictOptions(
                full_state_dict=True, cpu_offload=True))
        else:
            model_state, optim_state = model.state_dict(), optimizer.state_dict()
        state = {"model": model_state, "optimizer": optim_state, **extra}
        save.staged_bytes = tensor_bytes(state) if self.rank == 0 else 0
        if self.rank == 0:
            found = checkpoint.save(self.folder, state, meta, self.keep)
            save.rank_bytes = [found.meta["bytes"]] + [0] * (self.world - 1)
        if self.world > 1:
            dist.barrier()  # nobody runs ahead of a checkpoint that is not complete yet
        save.done_at = time.perf_counter()
        self.saves.append(save)

    def _dcp_save(self, save: Save, model, optimizer, extra, meta, die_in_write: bool) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemWriter
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optim_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optim": optim_state, "extra": _pack(extra)}
        save.staged_bytes = tensor_bytes(state)
        self._sharded = sharded(model)
        path = self.folder / f"step-{save.step:08d}"
        writer = _dying_writer(path, save.step) if die_in_write else FileSystemWriter(path)
        if self.mode in ASYNC:
            if self.stager_reused is False and self.saves:
                self.stager.close()  # spent by the save before: a new one, pinned anew
                self.stager = _stager()
            self.pending = (save, dcp.async_save(state, storage_writer=writer,
                                                 process_group=self.group,
                                                 async_stager=self.stager), meta)
            return
        dcp.save(state, storage_writer=writer)  # returns once the coordinator wrote .metadata
        self._complete(save, meta)

    def _complete(self, save: Save, meta: dict[str, Any]) -> None:
        """A DCP save is durable on every rank: rank 0 counts the bytes and writes the
        sidecar, after which the checkpoint can be resumed from (`done_at`: an asynchronous
        one's at the first step boundary after its write finished)."""
        if self.rank == 0:
            path = self.folder / f"step-{save.step:08d}"
            files = checkpoint.dcp_files(path)
            save.rank_bytes = [0] * self.world
            for name, size in files.items():
                if (m := _RANK_FILE.match(name)) and int(m[1]) < self.world:
                    save.rank_bytes[int(m[1])] += size
            checkpoint.finish(self.folder, path, meta, self.keep, files=files)
        save.done_at = time.perf_counter()
        self.saves.append(save)

    def poll(self) -> list[Save]:
        """The saves completed since the last poll (an asynchronous one is settled here,
        at a step boundary, once its background write is done)."""
        if self.pending is not None and self.pending[1].done():
            self._settle()
        new, self.reported = self.saves[self.reported:], len(self.saves)
        return new

    def in_flight(self) -> bool:
        """An asynchronous save not yet settled: the step that ends now ran beside its
        write, for some of its time at least (it is settled at the next `poll`)."""
        return self.pending is not None

    def wait(self) -> None:
        """Until the save in flight, if any, is durable (or failed)."""
        if self.pending is not None:
            self.pending[1].exception()  # waits; a failure is said in _settle
            self._settle()

    def _settle(self) -> None:
        save, future, meta = self.pending
        self.pending = None
        if future.exception() is not None:
            error = self._failed(save, future.exception())
            if checkpoint.out_of_space(future.exception()):
                raise error  # the next save would fail alike: stop where a restart resumes
            self.warn(str(error))
            return
        settling = time.perf_counter()
        self._complete(save, meta)  # rank 0's sidecar: training waits for it too
        save.blocking_s += time.perf_counter() - settling

    def close(self) -> None:
        self.wait()
        if self.stager is not None:
            self.stager.close()

    # ------------------------------------------------------------ restoring

    def restore(self, found: checkpoint.Checkpoint, model: torch.nn.Module,
                optimizer) -> dict[str, Any]:
        """Load `found` (either kind, whatever this run's mode) into the model and the
        optimizer; returns the rest of the state (position, schedule, RNG states)."""
        start = time.perf_counter()
        model = plain(model)
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_state_dict,
            set_state_dict,
        )

        if found.kind == "dcp":
            import torch.distributed.checkpoint as dcp

            model_state, optim_state = get_state_dict(model, optimizer)
            state = {"model": model_state, "optim": optim_state, "extra": io.BytesIO()}
            dcp.load(state, checkpoint_id=found.path)
            set_state_dict(model, optimizer, model_state_dict=state["model"],
                           optim_state_dict=state["optim"])
            state["extra"].seek(0)
            extra = torch.load(state["extra"], weights_only=True)
        else:
            state = checkpoint.load(found)
            if sharded(model):
                set_state_dict(model, optimizer, model_state_dict=state["model"],
                               optim_state_dict=state["optimizer"],
                               options=StateDictOptions(full_state_dict=True))
            else:
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
            extra = {k: v for k, v in state.items() if k not in ("model", "optimizer", "meta")}
        self.restores.append(time.perf_counter() - start)
        return extra
