"""`python -m benchlib.workers.jax_resnet`: ResNet training throughput in JAX, timed the
DLPerf way as notebook 40 times PyTorch (benchlib.studies.framework_comparison), on the
same machine.

One synthetic batch is made once on the device (NHWC, uniform in [0, 1), labels 0..9).
Each repeat runs `skip_steps`, then `warmup_steps` more, neither timed, then
`timed_steps` timed as one window, as PyTorch's are (benchlib.core.timing.WINDOW): the
device is waited for before the window, nothing inside it, and once at its end (one
block_until_ready), so the host keeps queuing steps as PyTorch's does; the repeat's
throughput is batch x timed_steps / the window's time, and the median over repeats is
reported. step_s is the window's time over its steps.
SGD momentum 0.9, lr = batch / 1000 (DLPerf), no weight decay, as the PyTorch side.
`compile_s` is the first step's time: tracing, XLA compilation and one step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchlib import atomic
from benchlib.config.flags import add_config_flags
from benchlib.config.framework_comparison import JAX_FIELDS, FrameworkComparisonConfig
from benchlib.config.training import ScheduleConfig
from benchlib.core.stats import summarize
from benchlib.core.timing import WINDOW
from benchlib.errors import BenchlibError, ConfigError, UsageError

PROG = "benchlib.workers.jax_resnet"
ARCHS = ("resnet18", "resnet50")
PRECISIONS = {"fp32": "fp32", "bf16": "bf16", "amp_bf16": "bf16"}  # amp_bf16: PyTorch's name
NOT_INSTALLED = "jax: not installed here; pip install jax jaxlib (or 'benchlib[jax]')"


def parser() -> argparse.ArgumentParser:
    """Notebook 40's fields of the row (benchlib.config.framework_comparison.JAX_FIELDS) and
    SGD's momentum, generated from the configs (`--arch`, notebook 40's old name for
    --model, still read); then this worker's own."""
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_flags(p, FrameworkComparisonConfig, only=JAX_FIELDS,
                     choices={"precision": list(PRECISIONS)}, aliases={"model": ("--arch",)})
    add_config_flags(p, ScheduleConfig, only=("momentum",))
    p.add_argument("--repeats", type=int, default=3, help="windows, each one sample")
    p.add_argument("--lr", type=float, help="default: batch size / 1000 (DLPerf)")
    p.add_argument("--result", help="write the result here (JSON)")
    p.add_argument("--log-dir", help="write the output to <log-dir>/rank0.log")
    return p


def check(args: argparse.Namespace) -> None:
    if args.model not in ARCHS:
        raise ConfigError("model", f"{args.model!r} is not one of {', '.join(ARCHS)}")
    for name in ("batch_size", "timed_steps", "repeats"):
        if getattr(args, name) < 1:
            raise ConfigError(name, f"must be at least 1, got {getattr(args, name)}")
    for name in ("skip_steps", "warmup_steps"):
        if getattr(args, name) < 0:
            raise ConfigError(name, f"must be at least 0, got {getattr(args, name)}")
    if args.image_size < 32:
        raise ConfigError("image_size", f"must be at least 32, got {args.image_size}")
    if args.lr is not None and not args.lr > 0:
        raise ConfigError("lr", f"must be greater than 0, got {args.lr}")


def threads() -> dict:
    """What decides XLA's CPU threads: it starts one per CPU this process may use,
    unless XLA_FLAGS say otherwise; it does not read OMP_NUM_THREADS."""
    return {"cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def timed_window(step, state, x, y, steps: int, pending):
    """(state, loss, seconds) of `steps` steps timed as one window: what was queued before
    (`pending`, the last untimed step's loss) is waited for first, then the steps are
    queued without waiting and the clock is read after one block_until_ready at the end."""
    pending.block_until_ready()
    start = time.perf_counter()
    for _ in range(steps):
        state, loss = step(state, x, y)
    loss.block_until_ready()
    return state, loss, time.perf_counter() - start


def measure(args: argparse.Namespace) -> dict:
    try:
        import jax
    except ImportError:
        raise UsageError(NOT_INSTALLED) from None
    from benchlib.core import jaxresnet

    lr = args.lr if args.lr is not None else args.batch_size / 1000
    key_model, key_data = jax.random.split(jax.random.key(args.seed))
    state = jaxresnet.init_state(args.model, key_model)
    model_params = jaxresnet.param_count(state[0])
    x, y = jaxresnet.synthetic_batch(key_data, args.batch_size, args.image_size)
    x.block_until_ready()
    step = jaxresnet.make_train_step(args.model, lr, args.momentum, PRECISIONS[args.precision])

    start = time.perf_counter()
    state, loss = step(state, x, y)
    loss.block_until_ready()
    compile_s = time.perf_counter() - start
    loss_first = float(loss)
    print(f"first step (compile): {compile_s:.2f} s, loss {loss_first:.4f}", flush=True)

    repeats = []
    for r in range(args.repeats):
        for _ in range(args.skip_steps + args.warmup_steps):
            state, loss = step(state, x, y)
        state, loss, window_s = timed_window(step, state, x, y, args.timed_steps, loss)
        repeats.append({"repeat": r, "samples_per_s": args.batch_size * args.timed_steps / window_s,
                        "step_s": window_s / args.timed_steps, "window_s": window_s,
                        "loss_last": float(loss)})
        print(f"repeat {r}: {repeats[-1]['samples_per_s']:.2f} samples/s, "
              f"step {repeats[-1]['step_s'] * 1e3:.1f} ms, loss {float(loss):.4f}", flush=True)

    metrics = {
        **summarize([r["samples_per_s"] for r in repeats], "samples_per_s", independent=False),
        "step_s": statistics.median(r["step_s"] for r in repeats),
        "compile_s": compile_s,
        "timing": WINDOW,
        "framework": "jax",
        "jax_version": jax.__version__,
        "jaxlib_version": _jaxlib_version(),
        "jax_backend": jax.default_backend(),
        "device_name": jax.devices()[0].device_kind,
        "world_size": 1,
        "global_batch": args.batch_size,
        "lr": lr,
        "model_params": model_params,
        "loss_first": loss_first,
        "loss_last": repeats[-1]["loss_last"],
        **{f"threads_{k}": v for k, v in threads().items()},
    }
    params = {k: v for k, v in vars(args).items() if k != "result"}
    return {"metrics": metrics, "details": {"repeats": repeats, "params": {**params, "lr": lr}}}


def _jaxlib_version() -> str | None:
    try:
        import jaxlib

        return jaxlib.__version__
    except (ImportError, AttributeError):
        return None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from benchlib.launch.protocol import redirect_output

    redirect_output(args.log_dir, 0)
    try:
        check(args)
        result = measure(args)
    except BenchlibError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return e.status()
    if args.result:
        atomic.write_json(Path(args.result), result)
    m = result["metrics"]
    print(f"{args.model} batch {args.batch_size} {args.image_size}px {args.precision} on "
          f"{m['jax_backend']} ({m['device_name']}): {m['samples_per_s']:.2f} samples/s, "
          f"compile {m['compile_s']:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
