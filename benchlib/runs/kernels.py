"""The kernels a sweep starts, one per row, and what they leave behind.

Each kernel talks over Unix sockets (no TCP port opened on a shared node, no warning
about unencrypted TCP) in a folder of its own, `$TMPDIR/benchlib-kernel-<pid>-<random>/`,
which holds its connection file too; the folder is removed when the row ends, and the
next sweep removes the folder of a sweep that was killed (its pid no longer runs).
jupyter_client interrupts a kernel before every shutdown; the kernel logs that SIGINT as
"[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel" in the sweep's output, so the
kernels a sweep stops after their notebook ran are not interrupted (a cell that runs past
its timeout still is: nbclient interrupts it itself).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchlib.runs import warm_kernels

PREFIX = "benchlib-kernel-"


def manager_class(folder: Path, warm: bool = False):
    """An AsyncKernelManager whose sockets and connection file live in `folder`; `warm`:
    its kernel is forked by the sweep's warm-kernel server where one runs."""
    from jupyter_client.manager import AsyncKernelManager

    class SweepKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=str(folder / "kernel"),
                             connection_file=str(folder / "kernel.json"), **kwargs)

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
            # papermill runs the notebook from its folder by changing this process's
            cwd = kw.get("cwd") or os.getcwd()
            forked = warm_kernels.launch(kernel_cmd, kw.get("env") or dict(os.environ),
                                         cwd) if warm else None
            if forked is None:
                await super()._async_launch_kernel(kernel_cmd, **kw)
                return
            # what LocalProvisioner.launch_kernel sets for a kernel it started
            provisioner = self.provisioner
            provisioner.process, provisioner.pid = forked, forked.pid
            provisioner.pgid, provisioner.cwd = forked.pid, cwd
            self._reconcile_connection_info(provisioner.connection_info)

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:  # the notebook is done: nothing runs that needs a SIGINT
                return
            await super()._async_interrupt_kernel()

    return SweepKernelManager


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale(where: Path | None = None) -> list[Path]:
    """Remove the kernel folders of sweeps that no longer run; returns them."""
    removed = []
    for folder in Path(where or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        pid = folder.name[len(PREFIX):].split("-")[0]
        if folder.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@contextlib.contextmanager
def kernel_folder() -> Iterator[Path]:
    """A new folder for one kernel's files, removed afterwards (even on an exception)."""
    remove_stale()
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
