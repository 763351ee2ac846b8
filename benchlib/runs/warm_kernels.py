"""Warm kernels: a sweep's rows start their kernels by fork from one process that has
imported, once, what every row's kernel imports (ipykernel, torch, pandas, seaborn,
benchlib's studies), instead of starting a fresh interpreter per row.

A fresh kernel pays its interpreter's start and its notebook's imports cell before the
row's first figure: about 0.6 s and 1.7-4 s a row on a 2-core VM (scripts/row_times.py,
"kernel" and "imports" columns), most of it seaborn's scipy.stats and torch. A forked
kernel has them already. The server starts before the first row and idles while rows run.
Only the studies whose timed work runs in the processes their rows launch (ranks, trial
processes: exec'd fresh, as before) fork their kernels (config.studies.Study.kernel):
a loop timed inside a forked kernel, the IO study's, measured 0.92x a fresh kernel's
(docs/sweeps.md). In `ps` a forked kernel shows the server's command line.

The kernel is the server's child, not the sweep's; the sweep holds a pidfd to it (Linux
5.3), which says when it exits and takes its signals. Its exit status is the server's to
reap, so `poll()` says 0 once it has gone. Where no server can run (no pidfd, a kernel
spec that is not this interpreter's ipykernel, BENCHLIB_WARM_KERNELS=0), kernels start
as jupyter_client starts them.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator
from typing import Any

from benchlib.errors import BenchlibError

# 0: every kernel a fresh interpreter; all: every row's, the IO study's and your own
# notebooks' too (config.studies.Study.kernel says which rows are, by default)
ENV_VAR = "BENCHLIB_WARM_KERNELS"
# what the study notebooks' imports cells and their first calls import; a module that does
# not import is left to the kernel
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "torch", "pandas", "seaborn",
           "benchlib.config", "benchlib.records.results", "benchlib.studies.single_device_io",
           "benchlib.studies.dp_vs_ddp", "benchlib.studies.framework_comparison",
           "benchlib.studies.multinode_lightning", "benchlib.studies.transformer_training",
           "benchlib.analysis.overview")
INLINE = "module://matplotlib_inline.backend_inline"  # what ipykernel sets for its kernels

_server: Server | None = None


class ForkedKernel:
    """The part of subprocess.Popen that jupyter_client's LocalProvisioner uses, for a
    kernel forked by the server."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._fd: int | None = os.pidfd_open(pid)

    def poll(self) -> int | None:
        return self.wait(timeout=0)

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None and self._fd is not None:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                if timeout:
                    raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
                return None
            os.close(self._fd)
            self._fd, self.returncode = None, 0
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._fd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Server:
    """The process that forks kernels: started once, asked over a pipe, a JSON line per
    kernel; it exits when the pipe closes."""

    def __init__(self) -> None:
        requests_r, self._requests = os.pipe()
        self._replies, replies_w = os.pipe()
        env = {**os.environ, "MPLBACKEND": os.environ.get("MPLBACKEND") or INLINE}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchlib.runs.warm_kernels", str(requests_r),
             str(replies_w)], pass_fds=(requests_r, replies_w), stdin=subprocess.DEVNULL,
            env=env)
        os.close(requests_r)
        os.close(replies_w)
        self._reader = os.fdopen(self._replies, "r")
        self._reader.readline()  # its imports are done: the first row's clock is not charged

    def spawn(self, cmd: list[str], env: dict[str, str], cwd: str | None) -> ForkedKernel:
        os.write(self._requests, (json.dumps({"argv": cmd, "env": env, "cwd": cwd}) + "\n")
                 .encode())
        reply = json.loads(self._reader.readline() or '{"error": "the server exited"}')
        if "pid" not in reply:
            raise BenchlibError(f"warm kernels: {reply['error']}")
        return ForkedKernel(reply["pid"])

    def close(self) -> None:
        os.close(self._requests)
        self._reader.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wanted(study_allows: bool) -> bool:
    """Whether a row's kernel is to be forked: its study allows it (or ENV_VAR=all), ENV_VAR
    is not 0, and this OS has pidfds."""
    setting = os.environ.get(ENV_VAR, "1")
    return (setting != "0" and (study_allows or setting == "all")
            and hasattr(os, "pidfd_open"))


@contextlib.contextmanager
def serving() -> Iterator[Server | None]:
    """Start the server for the rows run inside (or use the one running); stop it after."""
    global _server
    if _server is not None:
        yield _server
        return
    server = _server = Server()
    try:
        yield server
    finally:
        _server = None
        server.close()


def is_ipykernel(cmd: list[str]) -> bool:
    """The kernel command is this interpreter running ipykernel: what the server can fork."""
    return (len(cmd) >= 3 and cmd[1:3] == ["-m", "ipykernel_launcher"]
            # a venv's python links to the system's: the link itself says which venv
            and os.path.abspath(cmd[0]) == os.path.abspath(sys.executable))


def launch(cmd: list[str], env: dict[str, str], cwd: str | None) -> ForkedKernel | None:
    """A forked kernel for `cmd`, or None: start it the usual way."""
    global _server
    if _server is None or not is_ipykernel(cmd):
        return None
    try:
        return _server.spawn(cmd, env, cwd)
    except (BenchlibError, OSError) as e:  # the rows go on, in fresh kernels
        print(f"{e}; the sweep's next kernels start fresh", file=sys.stderr)
        _server.process.kill()
        _server = None
        return None


# ---- the server process ------------------------------------------------------------


def _kernel(request: dict[str, Any]) -> None:
    """In the forked child: become the kernel `request` asks for; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the kernel waits for its children
        os.setsid()  # a process group of its own, as jupyter_client gives a kernel
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # one collection writes to every object's header: the pages shared with the server
        # are copied now, before the row's clock starts, not on first touch inside its
        # timed window
        gc.collect()
        from ipykernel import kernelapp

        # its parent is this server (which exits when the sweep does): the kernel follows
        # it, as a kernel started by the sweep follows the sweep
        sys.argv = ["ipykernel_launcher", *request["argv"][3:],
                    f"--IPKernelApp.parent_handle={os.getppid()}"]
        kernelapp.launch_new_instance()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(requests_fd: int, replies_fd: int) -> None:
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    # no gc.freeze(): it spares a fork's pages the collector's writes, but made indexing a
    # tensor 1.9x slower in the forked child here (2.7 against 1.4 us an item), as the IO
    # study's traverse rows measured it (preload: 131k against 243k samples/s)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # kernels that exit are reaped at once
    os.write(replies_fd, b"{}\n")  # ready
    requests = os.fdopen(requests_fd, "r")
    for line in requests:
        request = json.loads(line)
        try:
            pid = os.fork()
        except OSError as e:
            reply = {"error": f"fork failed: {e}"}
        else:
            if pid == 0:
                os.close(requests_fd)
                os.close(replies_fd)
                _kernel(request)
            reply = {"pid": pid}
        os.write(replies_fd, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
