"""The testbed a number was measured on, and the result set (label) it belongs to.

Two numbers are the same measurement only on the same testbed: the same device model
and count, CPU model, host (or Slurm partition), torch / CUDA / cuDNN / NCCL, benchlib
version and git commit, and memory allocator. Those fields are hashed into the
testbed's `id`, which is part of every row's identity: a sweep on another testbed runs
the row again, on the same one it skips it.

On Slurm the sweep decides which rows to submit on the login node, before any compute
node is known, so there the partition stands for the host: cluster, partition and the
hardware of its nodes (CPUs and GRES from sinfo). Two partitions sharing one outputs
folder are two testbeds and never mix. Where a row actually ran (its hosts, driver,
GPU model as the node saw it) is in the record's `env` and `testbed.hosts`.

A result set is a label on records (`--label NAME`); by default the testbed's name and
id and the date it was first used (`myhost-3f9a1c-20261126`), reused by later sweeps on
the same testbed, so `make run` twice adds to one set.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import socket
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

from benchlib.errors import UsageError

# What makes two testbeds the same (hashed into the id), per kind.
LOCAL_FIELDS = ("kind", "host", "cpu_model", "devices", "torch", "cuda", "cudnn", "nccl",
                "benchlib", "commit", "allocator")
SLURM_FIELDS = ("kind", "cluster", "partition", "nodes_hardware", "torch", "cuda",
                "benchlib", "commit", "allocator")
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_label(label: str) -> str:
    if not LABEL_RE.fullmatch(label or ""):
        raise UsageError(f"label: {label!r} must be 1-100 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return label


def _git(package: Path, *argv: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(package), *argv], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the benchlib checkout in use; None outside a git checkout.

    Git finds the repository from the package's own folder (whatever subpackage this
    module sits in, and in a worktree too), and the package must be tracked there: a copy
    installed into a virtualenv that happens to lie inside some repository is not it."""
    package = Path(__file__).resolve().parents[1]  # benchlib/
    if _git(package, "ls-files", "--error-unmatch", "--", "__init__.py") is None:
        return None
    commit = _git(package, "rev-parse", "--verify", "HEAD")
    return commit if commit and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def allocator_name(alloc: dict[str, Any] | None) -> str:
    """glibc, glibc (tuned), glibc (GLIBC_TUNABLES=...), jemalloc, tcmalloc, ..."""
    from benchlib.core import allocator

    alloc = alloc or {}
    name = alloc.get("name") or "unknown"
    tunables = alloc.get("glibc_tunables") or ""
    if name == "glibc" and tunables:
        return "glibc (tuned)" if tunables == allocator.TUNED else f"glibc ({tunables})"
    return name


def devices(env: dict[str, Any]) -> str:
    """`2 x NVIDIA H100 80GB HBM3`, or `cpu` where the process saw no GPU."""
    names = [g.get("name", "?") for g in env.get("gpus") or []]
    if not names:
        return "cpu"
    return ", ".join(f"{names.count(n)} x {n}" for n in sorted(set(names)))


def _finish(identity: dict[str, Any], name: str, hosts: str | None) -> dict[str, Any]:
    key = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return {"id": hashlib.sha256(key.encode()).hexdigest()[:12], "name": name,
            "identity": identity, "hosts": hosts}


def from_env(env: dict[str, Any], commit: str | None = None) -> dict[str, Any]:
    """A local testbed from a record's `env` (what envinfo.collect() stores): the
    testbed of this process, and of records written before testbeds existed."""
    packages = env.get("packages") or {}
    identity = {
        "kind": "local",
        "host": env.get("hostname"),
        "cpu_model": env.get("cpu_model"),
        "devices": devices(env),
        "torch": packages.get("torch"),
        "cuda": env.get("torch_cuda"),
        "cudnn": env.get("cudnn"),
        "nccl": env.get("nccl"),
        "benchlib": packages.get("benchlib"),
        "commit": commit,
        "allocator": allocator_name(env.get("allocator")),
    }
    return _finish(identity, str(env.get("hostname") or "unknown"), env.get("hostname"))


def current() -> dict[str, Any]:
    """This process's testbed (a local sweep's rows run on it)."""
    from benchlib.core import envinfo

    return from_env(envinfo.collect(), git_commit())


def _slurm_query(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def partition_hardware(partition: str | None) -> tuple[str | None, str | None]:
    """(partition, its nodes' hardware) from sinfo: the default partition when none is
    named; the hardware as `2 x cpus=64 gres=gpu:h100:4` per distinct node kind. None
    for what cannot be known here (no sinfo, or no such partition: sbatch says so)."""
    out = _slurm_query(["sinfo", "-N", "-h", "-o", "%N %P %c %G %m"])
    if out is None:
        return partition, None
    kinds: dict[str, set[str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 5:
            continue
        node, part, cpus, gres, memory = parts[:5]
        if (partition is None and part.endswith("*")) or part.rstrip("*") == partition:
            partition = part.rstrip("*")
            kinds.setdefault(f"cpus={cpus} gres={gres} memory_mb={memory}", set()).add(node)
    if not kinds:
        return partition, None
    return partition, "; ".join(f"{len(nodes)} x {kind}" for kind, nodes in sorted(kinds.items()))


def slurm(partition: str | None) -> dict[str, Any]:
    """The testbed of a Slurm sweep to `partition` (the default one when None), decided on
    the submitting host: cluster, partition, node hardware, and this interpreter's
    torch / CUDA build, benchlib commit and allocator (the array tasks run it)."""
    from benchlib.core import envinfo

    config = _slurm_query(["scontrol", "show", "config"]) or ""
    match = re.search(r"^ClusterName\s*=\s*(\S+)", config, re.MULTILINE)
    partition, hardware = partition_hardware(partition)
    local = from_env(envinfo.build(), git_commit())["identity"]  # torch is not imported
    identity = {"kind": "slurm", "cluster": match.group(1) if match else None,
                "partition": partition, "nodes_hardware": hardware,
                **{k: local[k] for k in ("torch", "cuda", "benchlib", "commit", "allocator")}}
    name = f"{identity['cluster'] or 'slurm'}-{partition or 'default'}"
    return _finish(identity, name, None)


def where_it_ran(testbed: dict[str, Any]) -> dict[str, Any]:
    """The testbed as stored in a record: the planned one plus the hosts this process
    ran on (a Slurm job's node list, else this host)."""
    hosts = os.environ.get("SLURM_JOB_NODELIST") or socket.gethostname()
    return {**testbed, "hosts": hosts}


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._") or "testbed"


def default_label(records: list[dict[str, Any]], testbed: dict[str, Any],
                  today: date | None = None) -> str:
    """`<name>-<id[:6]>-<YYYYMMDD>`: the newest such label this testbed already has in
    `records` (later sweeps add to the same set), else a new one dated today."""
    prefix = f"{slug(testbed['name'])}-{testbed['id'][:6]}-"
    mine = [r for r in records if r.get("testbed", {}).get("id") == testbed["id"]
            and str(r.get("label", "")).startswith(prefix)]
    if mine:
        return max(mine, key=lambda r: r["finished_at"])["label"]
    return prefix + (today or date.today()).strftime("%Y%m%d")


def upgrade_v1(record: dict[str, Any]) -> dict[str, Any]:
    """A version 1 record (before testbeds) as a version 2 one: its testbed derived from
    its env (commit unknown), in the result set `<name>-<id[:6]>-v1`, one per testbed."""
    bed = from_env(record.get("env") or {})
    return {**record, "schema_version": 2, "testbed": bed,
            "label": f"{slug(bed['name'])}-{bed['id'][:6]}-v1"}
