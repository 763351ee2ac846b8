"""The trainer behind `benchlib.workers.{single,dp,ddp}` (seed 002's three scripts).

    single  one process, one device
    dp      one process, nn.DataParallel over the visible GPUs (on a machine without
            GPUs it runs on the CPU as one device, and the result says so)
    ddp     one process per rank, DistributedDataParallel, a DistributedSampler whose
            set_epoch() is called every epoch (seed 002 forgot it, and gave every
            spawned process the same rank)

`batch_size` is per device: DP's global batch is batch_size x devices, DDP's is
batch_size x world size. Each epoch's steady-state throughput (warm-up steps left
out) is one sample of the run's spread; global samples/s = the samples all ranks
processed over the slowest rank's step time.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

from benchlib import atomic, paths
from benchlib.config.choices import SYNTHETIC_STEPS
from benchlib.config.performance import check_compile_device, compile_mode, compiled
from benchlib.core import (
    compile_cost,
    compiler,
    delays,
    energy,
    envinfo,
    hostload,
    loops,
    memory,
    throughput,
)
from benchlib.distributed import comm_timer, fsdp
from benchlib.distributed.device import dp_device_ids
from benchlib.distributed.env import DistEnv
from benchlib.distributed.group import gather_objects
from benchlib.errors import InjectedFailure
from benchlib.trainers import fp8
from benchlib.trainers.ddp_checkpoints import Checkpoints
from benchlib.trainers.job import Job, build_job

TRACE_STEPS = 6  # traced after the timed epochs: one to warm the profiler up, five marked
STEPS_KEPT = 200  # the first epoch's step times a result keeps (a compile's first steps)


def _mean_loss(loss: torch.Tensor, env: DistEnv) -> float:
    """The loss averaged over ranks: what one process with the global batch computes."""
    value = loss.detach().clone()
    if env.world_size > 1:
        import torch.distributed as dist

        dist.all_reduce(value)
        value /= env.world_size
    return value.item()


def wrap(model: nn.Module, strategy: str, device: torch.device, dp_devices: int = 0,
         ac: str = "none", precision: str = "fp32", compile: str = "off") -> tuple[nn.Module, int]:
    """The model as the strategy runs it (its blocks checkpointed as `ac` says, each
    compiled on its own for `compile` regional), and how many devices it spans."""
    model = fsdp.checkpoint_blocks(model.to(device), ac)
    if compile_mode(compile) == "regional":  # after checkpointing, before FSDP2 shards
        compiler.regions(fsdp.require_blocks(model, "compile", "regional"))
    if strategy == "fsdp2":
        return fsdp.shard(model, precision), 1
    if strategy == "dp":
        if device.type != "cuda":
            return nn.DataParallel(model), 1  # without GPUs it runs the model as it is
        ids = dp_device_ids(dp_devices, torch.cuda.device_count())
        return nn.DataParallel(model, device_ids=ids), len(ids)
    if strategy == "ddp" and torch.distributed.is_initialized():  # a group of one too
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids), 1
    return model, 1


def _loader(args: argparse.Namespace, env: DistEnv, job: Job, batch: int, device: torch.device):
    """(loader, the DistributedSampler or None): synthetic batches made once on the device,
    or the data set, split across ranks for DDP (DataParallel splits each batch itself)."""
    dataset, collate = job.dataset, job.collate
    if dataset is None:
        return job.synthetic(batch, args.max_steps or SYNTHETIC_STEPS, device,
                             args.seed + env.rank), None
    if isinstance(dataset, IterableDataset):  # shards: the library splits them across ranks
        return loops.shard_loader(dataset, collate, batch, args.num_workers, device), None
    sampler = None
    if args.strategy in ("ddp", "fsdp2"):
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(dataset, num_replicas=env.world_size, rank=env.rank,
                                     shuffle=args.shuffle, seed=args.seed)
    return DataLoader(dataset, batch_size=batch, sampler=sampler,
                      shuffle=sampler is None and args.shuffle,
                      num_workers=args.num_workers, collate_fn=collate,
                      pin_memory=device.type == "cuda",
                      generator=torch.Generator().manual_seed(args.seed)), sampler


def _step_hook(args: argparse.Namespace, env: DistEnv, losses: list[float],
               comm: comm_timer.CommTimer | None = None, saves: Checkpoints | None = None):
    """What runs after every step: the first `record_losses` rank-averaged losses, the
    injected failure notebook 35 asks for, a log line every `log_interval` steps, and the
    checkpoints `checkpoint_every` asks for."""
    global_step = 0

    def on_step(loss: torch.Tensor) -> None:
        nonlocal global_step
        global_step += 1
        if comm is not None:
            comm.step_end()
        if global_step <= args.record_losses:
            losses.append(_mean_loss(loss, env))
        if args.fail_at_step and global_step == args.fail_at_step and env.rank == args.fail_rank:
            if args.fail_how == "kill":  # as the OOM killer does: no exception, no cleanup
                print(f"injected failure: rank {env.rank} kills itself", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            raise InjectedFailure(f"injected failure at step {global_step} on rank {env.rank}")
        if args.log_interval and global_step % args.log_interval == 0 and env.rank == 0:
            print(f"step {global_step}: loss {loss.item():.4f}", flush=True)
        if saves is not None:
            saves.after_step()

    return on_step


def _trace(args: argparse.Namespace, env: DistEnv, loader, sampler, step: loops.Stepper) -> str:
    """TRACE_STEPS more steps under torch.profiler, after the timed window: this rank's
    Kineto trace as `rank<R>.json` in the launch's log folder (`trace/`; by hand, without
    --log-dir: outputs/traces/<strategy>/), the folder HTA's TraceAnalysis reads."""
    log_dir = getattr(args, "log_dir", None)
    folder = Path(log_dir) / "trace" if log_dir else paths.outputs_dir() / "traces" / args.strategy
    if sampler is not None:
        sampler.set_epoch(args.epochs)  # every rank the same fresh order, past the timed ones
    loops.trace_steps(loader, step, TRACE_STEPS, folder / f"rank{env.rank}.json")
    return str(folder.resolve())


def _compile_figures(args: argparse.Namespace, env: DistEnv, job: Job, model: nn.Module,
                     device: torch.device, cache: tuple[Path, dict] | None,
                     steps_s: list[float], window_start: float | None) -> tuple[dict, dict]:
    """A compiled run's cache kept for a warm start (rank 0, `--compile-cache-to`), what
    its compile cost by itself (`compile_s`, from the first epoch's steps: core.
    compile_cost.in_launch) from a cold or warm cache (and whether a warm one was found
    and hit), whether every compile finished before the timed window (`window_start`),
    its recompiles and its forward's graph breaks with their reasons and lines (every
    rank traces, as FSDP2's forward gathers on all of them); nothing for an eager run."""
    if cache is None:
        return {}, {}
    cache, used = cache
    if args.compile_cache_to and env.rank == 0:
        compiler.keep_cache(cache, args.compile_cache_to)
    x, y = (t.to(device) for t in job.sample(args.seed))
    plain = model.module if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)) \
        else model
    metrics, details = compiler.figures(plain, x, args.compile, lambda m, b: m(b, labels=y)
                                        if job.objective.labels_kw else m(b), window_start)
    figures = {**compile_cost.in_launch(steps_s, args.warmup_steps),
               "compile_cache": args.compile_cache, **used, **metrics}
    return {**figures, **compiler.warm_missed(figures, used["compile_cache_used"])}, details


def _steps_an_epoch(loader, max_steps: int | None) -> float:
    """The steps an epoch will take: the loader's length, capped by `max_steps` (a loader
    without a length: unknown, inf)."""
    try:
        steps = float(len(loader))
    except TypeError:
        steps = float("inf")
    return min(steps, max_steps) if max_steps else steps


def _data_set_epoch(loader, sampler, job: Job) -> tuple[int | None, int | None]:
    """(steps, samples) of this rank's epoch of the data set, whatever `max_steps` cut:
    what a run that stopped short projects its whole epoch from; (None, None) for
    synthetic batches (their epoch is the window) or a loader without a length."""
    if job.dataset is None:
        return None, None
    try:
        return len(loader), len(sampler if sampler is not None else job.dataset)
    except TypeError:
        return None, None


def train(args: argparse.Namespace, env: DistEnv, device: torch.device, backend: str) -> dict:
    if device.type != "cuda":  # libraries' code loaded on first use: not the model's bytes
        memory.warm_kernels()
    torch.manual_seed(args.seed)
    check_compile_device(args.compile, device.type)  # device auto: known only now
    cache = compiler.own_cache(args.compile_cache_from) if compiled(args.compile) else None
    job = build_job(args)
    if job.own:  # a model that does not fit the labels: one line, exit 2
        job.check(args.model)
    flops = job.flop_figures()
    float8 = fp8.for_job(args, job, device)  # its linears swapped, before any wrapping
    model, devices = wrap(job.model, args.strategy, device, args.dp_devices, args.ac,
                          args.precision, args.compile)
    batch = args.batch_size * devices  # DataParallel splits one batch over its devices
    loader, sampler = _loader(args, env, job, batch, device)
    step = loops.Stepper("train", device, model, lr=args.lr, momentum=args.momentum,
                         precision=args.precision, channels_last=args.channels_last,
                         compile=args.compile,
                         delay=delays.StepDelay.of_rank(
                             args.inject_step_delay_ms, device, args.inject_delay_pattern,
                             args.warmup_steps, args.delay_rank, env.rank, env.world_size),
                         objective=job.objective)
    losses: list[float] = []
    # DDP's all-reduce per step, and what backward hides (unless turned off: its cost,
    # docs/diagnose.md)
    comm = None if not args.comm_timer else \
        comm_timer.attach(model, args.inject_comm_delay_ms / 1e3)
    saves = Checkpoints(args, env.world_size, model, step.optimizer) \
        if args.checkpoint_every else None
    # the batches the DataLoader's workers fetch while the loop starts: the warm-up reaches
    # past them (throughput.rank_share)
    prefetched = loops.PREFETCH_FACTOR * args.num_workers if job.dataset is not None else 0
    on_step = _step_hook(args, env, losses, comm, saves)

    # each rank's GPUs (DataParallel's process: all it uses), found in NVML by UUID; rank 0
    # also samples their utilisation. Energy and utilisation are of the timed steps: the
    # meter's edges are the first timed step and the end of each epoch, synchronized
    my_gpus = (model.device_ids if args.strategy == "dp" else [device.index]) \
        if device.type == "cuda" else []
    uuids = energy.device_uuids(my_gpus)
    meter = energy.EnergyMeter(uuids, lambda: [torch.cuda.synchronize(i) for i in my_gpus])
    utilisation_thread = energy.UtilisationSampler(uuids if env.rank == 0 else [], meter)
    utilisation_thread.start()
    # what else ran on this host's cores meanwhile (rank 0's host, the run's own left out)
    contention = hostload.Contention(lambda: meter.in_timed) if env.rank == 0 else None
    if contention is not None:
        contention.start()
    # the training window's peak, and where it went; the model's own bytes are above what
    # the process held before the model was built (on the CPU: the interpreter, the data)
    peak = memory.PeakMemory(device, job.rss_before_model if device.type != "cuda" else 0)
    peak.reset()
    meter.start()
    cpu_start = time.process_time()  # this rank's CPU seconds: a figure that holds under load
    epochs, window_samples, steps_s = [], 0, []
    # the energy window opens where samples/s's does: past the prefetched batches too
    timed_from = throughput.window_start(args.warmup_steps, prefetched,
                                         _steps_an_epoch(loader, args.max_steps))
    full = _data_set_epoch(loader, sampler, job)
    window_start: list[float] = []  # when the first epoch's timed steps began (wall clock)

    def on_timed() -> None:  # the energy meter's edge, and where a compile should be done
        window_start.append(time.time())
        meter.timed()
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        times = loops.run_epoch(loader, step, timed_from, max_steps=args.max_steps or None,
                                on_step=on_step, on_timed=on_timed)
        meter.untimed()  # the window's energy ends with its last step, before any save
        waits = comm.epoch_waits(len(times.samples)) if comm is not None else None
        if saves is not None:
            saves.end_epoch(times, args.warmup_steps)
        mine = throughput.rank_share(times.samples, times.data_s, times.compute_s,
                                     times.epoch_s, times.loss_last, args.warmup_steps,
                                     waits, prefetched, times.forward_s, times.backward_s,
                                     *full)
        epochs.append({"epoch": epoch, **throughput.across_ranks(gather_objects(mine), env.rank)})
        window_samples += sum(times.timed()[2])  # the samples the energy window saw
        if epoch == 0:  # every step, the warm-up ones too: where a compile's time goes
            steps_s = [d + c for d, c in zip(times.data_s, times.compute_s)][:STEPS_KEPT]
    metered = meter.stop()
    cpu_s = time.process_time() - cpu_start
    peaks = peak.read()
    saved = saves.finish() if saves is not None else {}  # the saves, then the restores
    utilisation = utilisation_thread.stop()
    shared = contention.stop() if contention is not None else {}
    own = comm.figures(args.warmup_steps) if comm is not None else {}
    compile_metrics, compile_details = _compile_figures(args, env, job, model, device, cache,
                                                         steps_s, (window_start or [None])[0])
    traced = {"trace_dir": _trace(args, env, loader, sampler, step)} if args.export_trace else {}
    ranks = gather_objects({**metered, "samples": window_samples,
                            "comm_exposed_s": own.get("comm_exposed_s")})
    if args.save_model and env.rank == 0:
        plain = model.module if hasattr(model, "module") else model
        with atomic.replacing(Path(args.train_dir) / "model.pt", suffix=".pt") as tmp:
            torch.save(plain.state_dict(), tmp)
    metrics = {
        **throughput.run_figures(epochs),
        "world_size": env.world_size,
        "devices": devices if args.strategy == "dp" else env.world_size,
        "global_batch": batch * env.world_size,
        "backend_used": backend if torch.distributed.is_initialized() else None,
        "device_name": envinfo.device_name(device),
        "device_type": device.type,
        # peak allocated and reserved (CUDA), peak RSS, retries and OOMs (CUDA), and the
        # parameters', gradients', optimizer state's and the rest's share of the peak
        **memory.record_figures(peaks, job.model, step.optimizer),
        **job.described,  # model_params, model_class, model_source_sha, tokens_per_sample
        "threads_per_rank": torch.get_num_threads(),
        **flops,  # flops_per_sample; for tokens per token, and the two counts' ratio
        **utilisation,
        **shared,  # other tasks runnable on rank 0's cores during the timed steps
        **energy.run_figures(ranks, sum(r["samples"] for r in ranks)),
        # the samples the energy and utilisation window saw: samples/s's window's own
        "energy_window_samples": sum(r["samples"] for r in ranks),
        **own,  # rank 0's all-reduce per step, and the part of it nothing hid
        **saved,  # what the checkpoints cost: benchlib.core.checkpoint_cost
        **comm_timer.unknown(args.strategy, env.world_size, comm),
        # rank 0's process CPU seconds a step (its threads, not its DataLoader workers')
        "cpu_s_per_step": cpu_s / max(1, sum(e["steps"] for e in epochs)),
        **compile_metrics,  # its compile's seconds, cache, graph breaks and recompiles
        # float8: native or emulated, the linears converted and kept, its share of FLOPs
        **(float8.figures(flops["flops_per_sample"] * args.batch_size) if float8 else {}),
    }
    if args.strategy == "dp" and device.type != "cuda":
        metrics["note"] = "DataParallel without GPUs: ran as one CPU device"
    if args.inject_step_delay_ms:  # a ground truth's run: its figures are not the model's
        metrics["injected_step_delay_ms"] = args.inject_step_delay_ms
        metrics["injected_delay_rank"] = args.delay_rank
        metrics["injected_delay_pattern"] = args.inject_delay_pattern
    if args.inject_comm_delay_ms:
        metrics["injected_comm_delay_ms"] = args.inject_comm_delay_ms
    # each rank's all-reduce time nothing hid: a fast rank waits there for a slow one, what
    # tells a straggler in synchronous DDP (a list: details, not a metric)
    waits = {"rank_comm_exposed_s": [r["comm_exposed_s"] for r in ranks]} if own else {}
    saved_details = {"checkpoints": saves.events()} if saves is not None else {}
    return {"metrics": metrics, "details": {"epochs": epochs, "losses": losses, **waits,
                                            **traced, **saved_details, "steps_s": steps_s,
                                            **compile_details,
                                            **(float8.details() if float8 else {})}}
