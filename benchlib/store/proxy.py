"""`python -m benchlib.store.proxy UPSTREAM --mibps N --latency-ms M`: the link between the
readers and an S3 endpoint, on 127.0.0.1, shaped and counted.

Every request waits `latency_ms` before it is forwarded (a store's time to first byte);
every byte of every response body passes one token bucket of `mibps` MiB/s shared by all
connections (the link's bandwidth, which the workers share as they would a NIC's); and
every request is counted: method, key, bytes each way. `GET /__benchlib__/counters` answers
the counts so far as JSON (not forwarded). The Host header is passed on as the client sent
it, so SigV4 signatures made for the proxy's address still verify at the server.
`tc netem` would shape the kernel's link instead, but needs privileges and a module that
not every kernel has; this works wherever Python does, per row.

It prints its port on its first line and serves until killed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

COUNTERS_PATH = "/__benchlib__/counters"
CHUNK = 64 * 1024
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te"}


class Bucket:
    """One link's bandwidth: each chunk takes the next free slot of len/rate seconds."""

    def __init__(self, mibps: float):
        self.rate = mibps * 2**20 if mibps > 0 else 0.0
        self.free_at = 0.0
        self.lock = threading.Lock()

    def take(self, n: int) -> None:
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            self.free_at = max(self.free_at, now) + n / self.rate
            until = self.free_at
        delay = until - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes_out = 0  # response bodies, to the readers
        self.bytes_in = 0  # request bodies (uploads)
        self.gets: dict[str, int] = {}  # GETs per key
        self.errors = 0  # upstream unreachable, or a 5xx

    def snapshot(self) -> dict:
        with self.lock:
            return {"requests": self.requests, "bytes_out": self.bytes_out,
                    "bytes_in": self.bytes_in, "gets": dict(self.gets), "errors": self.errors}


def handler(upstream: str, latency_s: float, bucket: Bucket, counts: Counts):
    target = urlsplit(upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet: the counters say what happened
            pass

        def _forward(self) -> None:
            if self.path == COUNTERS_PATH:
                body = json.dumps(counts.snapshot()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if latency_s:
                time.sleep(latency_s)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            try:
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            except OSError as e:
                with counts.lock:
                    counts.requests += 1
                    counts.errors += 1
                msg = f"store unreachable at {upstream}: {e}".encode()
                self.send_response(502)
                self.send_header("Content-Length", str(len(msg)))
                self.end_headers()
                self.wfile.write(msg)
                return
            sized = resp.getheader("Content-Length") is not None
            data = None if sized else resp.read()
            # counted before the client can see any of it: a reader that asks for the counts
            # once it has its bytes finds them there (counted after, they raced its question)
            with counts.lock:
                counts.requests += 1
                counts.bytes_in += length
                counts.errors += resp.status >= 500
                if self.command == "GET":
                    key = self.path.split("?")[0]
                    counts.gets[key] = counts.gets.get(key, 0) + 1
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            total = int(resp.getheader("Content-Length")) if sized else len(data)
            self.send_header("Content-Length", str(total))
            self.end_headers()
            sent = 0
            if self.command != "HEAD":
                while True:
                    chunk = resp.read(CHUNK) if sized else data[sent:sent + CHUNK]
                    if not chunk:
                        break
                    bucket.take(len(chunk))
                    with counts.lock:
                        counts.bytes_out += len(chunk)
                    self.wfile.write(chunk)
                    sent += len(chunk)
            conn.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    return Forward


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchlib.store.proxy", description=__doc__)
    parser.add_argument("upstream", help="the S3 endpoint, http://host:port")
    parser.add_argument("--mibps", type=float, default=0.0, help="bandwidth cap, MiB/s (0: none)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added per request")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(
        args.upstream, args.latency_ms / 1e3, Bucket(args.mibps), Counts()))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
