"""The link a row reads its store through: the shaping, counting proxy
(`python -m benchlib.store.proxy`) started for the row in a process group of its own, and
its counts read per epoch (bytes, requests, the shards fetched)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass

from benchlib.errors import UsageError
from benchlib.store import server
from benchlib.store.proxy import COUNTERS_PATH


@dataclass
class Link:
    """A running proxy: the endpoint readers use, and what it forwards to."""

    endpoint: str
    upstream: str
    mibps: float
    latency_ms: float
    proc: subprocess.Popen

    def counts(self) -> dict:
        """Requests, bytes each way, GETs per key and errors so far."""
        with urllib.request.urlopen(self.endpoint + COUNTERS_PATH, timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start(upstream: str, mibps: float = 0.0, latency_ms: float = 0.0) -> Link:
    """A proxy to `upstream` on a free loopback port (no cap and no latency: it still counts)."""
    proc = subprocess.Popen([sys.executable, "-m", "benchlib.store.proxy", upstream,
                             "--mibps", str(mibps), "--latency-ms", str(latency_ms)],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True,
                            preexec_fn=server.die_with_parent)  # ends with the row
    line = proc.stdout.readline().strip()
    if not line.isdigit():
        proc.kill()
        raise UsageError(f"link: the proxy to {upstream} did not start ({line or 'no port'})")
    return Link(f"http://127.0.0.1:{line}", upstream, mibps, latency_ms, proc)


def delta(after: dict, before: dict) -> dict:
    """What passed between two counts: requests, bytes, errors, and the keys fetched."""
    gets = {k: n - before["gets"].get(k, 0) for k, n in after["gets"].items()
            if n > before["gets"].get(k, 0)}
    return {"requests": after["requests"] - before["requests"],
            "bytes_out": after["bytes_out"] - before["bytes_out"],
            "errors": after["errors"] - before["errors"], "gets": gets}
