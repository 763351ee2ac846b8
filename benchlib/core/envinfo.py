"""What machine and software a number came from; stored in every record.

Built on `torch.utils.collect_env` (torch, CUDA, cuDNN, driver, GPU models, pip
packages) plus what it lacks: CPU model and cores, memory, GPU memory, NCCL,
library versions, kernel, hostname, the memory allocator and the environment
variables that change performance (threads, visible devices, Slurm, NCCL).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from benchlib.core import allocator

# Variables that change what a benchmark measures; recorded when set.
ENV_PREFIXES = ("SLURM_", "NCCL_", "CUDA_", "OMP_", "MKL_", "KMP_", "TORCH_", "PYTORCH_",
                "MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD", "MASTER_", "WORLD_SIZE", "RANK",
                "LOCAL_RANK", "OPENBLAS_")
PACKAGES = ("torch", "torchvision", "lightning", "pytorch-lightning", "tensordict", "numpy",
            "pandas", "papermill", "benchlib")


def _package_versions() -> dict[str, str | None]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
        if match:
            return match.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: Any) -> str:
    """What a record calls the device a number was measured on: the GPU's model, or on a
    CPU the CPU's model (never just "cpu": two CPU hosts are two different machines)."""
    if getattr(device, "type", str(device)).startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(device)
    return cpu_model()


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    return _cpu_model()


def _os_name() -> str:
    try:
        text = Path("/etc/os-release").read_text()
        match = re.search(r'^PRETTY_NAME="?([^"\n]+)"?$', text, re.MULTILINE)
        if match:
            return match.group(1)
    except OSError:
        pass
    return platform.platform()


def _nvidia_driver() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
        return out.splitlines()[0].strip() if out.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def cuda_of_version_file(path: Path) -> tuple[bool, str | None]:
    """(found, `cuda`) as torch/version.py assigns it: '13.0', or None for a CPU build;
    (False, None) where the file says nothing literal about it."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return False, None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        if value is not None and any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets):
            try:
                cuda = ast.literal_eval(value)
            except ValueError:
                return False, None
            return (True, cuda) if cuda is None or isinstance(cuda, str) else (False, None)
    return False, None


def torch_cuda_build() -> str | None:
    """torch.version.cuda (the CUDA torch was built with; None for a CPU build), read from
    torch/version.py where torch is not imported yet: a Slurm sweep's login node names its
    testbed with it, and importing torch there cost 3 s a sweep here (far more from a
    cluster's shared filesystem). Imports torch only where that file cannot be read."""
    if "torch" not in sys.modules:
        spec = importlib.util.find_spec("torch")
        if spec is None:
            return None
        for folder in spec.submodule_search_locations or []:
            found, cuda = cuda_of_version_file(Path(folder) / "version.py")
            if found:
                return cuda
    import torch

    return torch.version.cuda


def build() -> dict[str, Any]:
    """The software of this interpreter that a Slurm testbed names (its array tasks run it):
    package versions, torch's CUDA build and the allocator, without importing torch.
    collect() has the same fields, and the host's hardware besides."""
    return {"packages": _package_versions(), "torch_cuda": torch_cuda_build(),
            "allocator": allocator.current()}


def _torch_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": None,
        "torch_threads": torch.get_num_threads(),
        "gpus": [],
    }
    if torch.cuda.is_available():
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError):
            pass
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            info["gpus"].append({
                "name": props.name,
                "memory_bytes": props.total_memory,
                "capability": f"{props.major}.{props.minor}",
                "multiprocessors": props.multi_processor_count,
            })
    return info


def _collect_env() -> dict[str, Any]:
    """torch's own report, minus the long package lists (versions are kept separately)."""
    from torch.utils import collect_env

    # Its `pip list` costs ~0.7 s a process and its output is dropped below: skip running it
    pip_list, collect_env.get_pip_packages = (collect_env.get_pip_packages,
                                              lambda run_lambda, patterns=None: ("pip3", ""))
    try:
        report = collect_env.get_env_info()._asdict()
    except Exception as e:  # collect_env shells out to many tools; never fail a run for it
        return {"error": f"{e.__class__.__name__}: {e}"}
    finally:
        collect_env.get_pip_packages = pip_list
    report.pop("pip_packages", None)
    report.pop("conda_packages", None)
    return report


def _memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@functools.lru_cache(maxsize=1)
def collect() -> dict[str, Any]:
    """The environment of this process, once per process (it does not change mid-run)."""
    uname = platform.uname()
    env = {
        "hostname": socket.gethostname(),
        "os": _os_name(),
        "kernel": uname.release,
        "machine": uname.machine,
        "python": platform.python_version(),
        "cpu_model": _cpu_model(),
        "cpu_logical": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": _memory_bytes(),
        "packages": _package_versions(),
        "allocator": allocator.current(),
        "env_vars": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "nvidia_driver": _nvidia_driver(),
    }
    env.update(_torch_info())
    env["collect_env"] = _collect_env()
    return env


def summary(env: dict[str, Any]) -> list[tuple[str, str]]:
    """The lines a person reads first, as (name, value) pairs."""
    gpus = ", ".join(f"{g['name']} ({g['memory_bytes'] / 2**30:.0f} GiB)" for g in env["gpus"])
    alloc = env["allocator"]
    return [
        ("host", env["hostname"]),
        ("os / kernel", f"{env['os']} / {env['kernel']}"),
        ("cpu", f"{env['cpu_model']} ({env['cpu_logical']} logical, {env['cpu_affinity']} usable)"),
        ("memory", f"{env['memory_bytes'] / 2**30:.1f} GiB" if env["memory_bytes"] else "unknown"),
        ("gpus", gpus or "none"),
        ("driver / cuda / cudnn / nccl",
         f"{env['nvidia_driver']} / {env['torch_cuda']} / {env['cudnn']} / {env['nccl']}"),
        ("torch / torchvision / lightning",
         " / ".join(str(env["packages"].get(p)) for p in ("torch", "torchvision", "lightning"))),
        ("python", env["python"]),
        ("torch threads", str(env["torch_threads"])),
        ("allocator", alloc["name"] + (f" (GLIBC_TUNABLES={alloc['glibc_tunables']})"
                                       if alloc["glibc_tunables"] else "")),
        ("env", " ".join(f"{k}={v}" for k, v in env["env_vars"].items()) or "(none set)"),
    ]
