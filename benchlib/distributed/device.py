"""Which device a rank trains on and with which backend: cpu, gpu or auto; `gpu` without
CUDA is an error, never a silent fall back to the CPU; nccl on CUDA, gloo on CPU."""

from __future__ import annotations

from benchlib.config.choices import BACKENDS, FP8_RECIPES, PRECISIONS
from benchlib.errors import ConfigError, UsageError


def check_device(device: str) -> None:
    """`gpu` without CUDA is an error, never a silent fall back to the CPU."""
    if device == "gpu":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device", f"gpu asked for, but torch {torch.__version__} sees no "
                              "CUDA device; use cpu (or auto to take a GPU when there is one)")


def uses_cuda(device: str) -> bool:
    """Whether `device` (cpu, gpu or auto) runs on CUDA here; gpu without CUDA raises.
    Only gpu and auto import torch to find out: a launcher that starts CPU ranks need not."""
    check_device(device)
    if device != "auto":
        return device == "gpu"
    import torch

    return torch.cuda.is_available()


def check_precision(precision: str, device_type: str) -> None:
    """Refuse a precision the device cannot run, before anything launches."""
    from benchlib.config.base import require_choice

    require_choice("precision", precision, PRECISIONS)
    if precision in ("tf32", "amp_fp16") and device_type != "cuda":
        raise ConfigError("precision", f"{precision} needs a CUDA GPU; on CPU use fp32 or amp_bf16")
    if precision in ("tf32", "amp_bf16") and device_type == "cuda":
        import torch

        if torch.cuda.get_device_capability()[0] < 8:
            raise ConfigError("precision", f"{precision} needs an Ampere or newer GPU "
                              f"(this one is sm_{''.join(map(str, torch.cuda.get_device_capability()))})")


FP8_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (sm_89) and Hopper (sm_90) on


def fp8_emulated(precision: str, device_type: str) -> str | None:
    """Why a float8 precision runs only emulated here (torchao's `emulate`: the FP8 GEMMs
    as float32 matmuls of FP8-rounded values, a check of the arithmetic and never a
    speed), or None where the device has FP8 tensor cores (or the precision is not FP8)."""
    if precision not in FP8_RECIPES:
        return None
    if device_type != "cuda":
        return (f"{precision} emulated: the {device_type.upper()} has no FP8 GEMMs, so no "
                "speed, MFU or verdict is drawn from this run")
    import torch

    capability = torch.cuda.get_device_capability()
    if capability < FP8_CAPABILITY:
        return (f"{precision} emulated: sm_{''.join(map(str, capability))} has no FP8 tensor "
                "cores (sm_89 and on), so no speed, MFU or verdict is drawn from this run")
    return None


def gpu_index(local_rank: int, device_count: int) -> int:
    """The GPU a rank uses: its local rank. More ranks on a node than GPUs is refused
    here, not left to NCCL (which fails later on two ranks sharing a device)."""
    if not 0 <= local_rank < device_count:
        raise UsageError(f"local_rank: {local_rank} needs at least {local_rank + 1} GPUs on this "
                         f"node, {device_count} visible; start at most {device_count} ranks per node")
    return local_rank


def dp_device_ids(requested: int, device_count: int) -> list[int]:
    """DataParallel's devices: exactly `requested` of them (0 = every visible one)."""
    if requested < 0:
        raise UsageError(f"dp_devices: must be >= 0 (0 = every visible GPU), got {requested}")
    if requested > device_count:
        raise UsageError(f"dp_devices: {requested} asked for, {device_count} GPUs visible")
    return list(range(requested or device_count))


def device_for(name: str, local_rank: int = 0):
    """cpu, gpu or auto -> this rank's torch.device (GPU local_rank, made current).
    `gpu` without CUDA raises; it never falls back to the CPU."""
    import torch

    check_device(name)
    if name == "gpu" or (name == "auto" and torch.cuda.is_available()):
        index = gpu_index(local_rank, torch.cuda.device_count())
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def choose_backend(device_type: str, requested: str = "auto") -> str:
    """nccl on CUDA, gloo on CPU; nccl without CUDA is refused before anything starts."""
    if requested not in BACKENDS:
        raise UsageError(f"backend: {requested!r} is not one of {', '.join(BACKENDS)}")
    if requested == "auto":
        return "nccl" if device_type == "cuda" else "gloo"
    if requested == "nccl" and device_type != "cuda":
        raise UsageError("backend: nccl needs CUDA devices; use gloo on CPU")
    return requested
