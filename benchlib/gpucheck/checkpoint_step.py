"""The GPU check's checkpoint step (issue 41): every checkpoint mode on one GPU, in one
launch of benchlib.workers.checkpoint_bench as a group of one (torchrun, NCCL; the
asynchronous saves write over a gloo group of their own). gpt2-124m's weights and SGD
momentum, about 1 GB on the GPU, saved and restored twice in each mode: blocking, total
and restore seconds, and the asynchronous modes' GPU-to-CPU staging rate, pageable
(dcp_async) against pinned (dcp_async_pinned). A step of its own, apart from the others,
so that the steps' table (benchlib.gpucheck.steps) takes it in one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.config.choices import CHECKPOINT_MODES

NAME = "checkpoint_modes"
MODEL = "gpt2-124m"
SAVES = RESTORES = 2
# an estimate, never measured on a GPU yet: a process and CUDA start (~10 s), the model
# built, 4 modes x (2 saves + 2 restores) of ~1 GB at 1-2 GB/s to a local disk (~25-35 s)
EXPECTED_S = 60


def checkpoint_step(out: Path, res: Callable[[str], str], torchrun: list[str]) -> dict[str, Any]:
    """The step's fields (benchlib.gpucheck.steps.Step): its command line under `torchrun`,
    time box (three times EXPECTED_S), parameters and result file."""
    argv = [*torchrun, "--max-restarts", "0", "-m", "benchlib.workers.checkpoint_bench",
            "--model", MODEL, "--modes", ",".join(CHECKPOINT_MODES), "--saves", str(SAVES),
            "--restores", str(RESTORES), "--device", "gpu", "--backend", "nccl",
            "--group-of-one", "--checkpoint-path", str(out / "work" / NAME / "checkpoints"),
            "--result", res(NAME)]
    params = {"model": MODEL, "modes": list(CHECKPOINT_MODES), "saves": SAVES,
              "restores": RESTORES, "strategy": "ddp", "expected_s_is": "an estimate"}
    return {"name": NAME, "argv": argv, "timeout_s": 3 * EXPECTED_S, "params": params,
            "result": res(NAME), "expected_s": EXPECTED_S, "part": 2}
