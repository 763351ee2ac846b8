"""The manifest of a data folder (`manifest.json`): per data set whether it is real or
generated, its samples, files, bytes, sha256 and the parameters it was made with. A
study asks `describe()` before it reads a data set; a prepared one is reused only when
its files are all there with the recorded size."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchlib import atomic, paths
from benchlib.errors import UsageError

MANIFEST = "manifest.json"


def log(message: str) -> None:
    print(f"benchlib data: {message}", file=sys.stderr, flush=True)


def prepare_hint(root: Path) -> str:
    """The command that prepares data under `root`, ready to paste into a shell."""
    return f"run `python -m benchlib data --path {shlex.quote(str(root))} --offline` first"


def check_folder(root: Path) -> Path:
    """`root` if it is a folder or not there yet; a file there is refused."""
    if root.exists() and not root.is_dir():
        raise UsageError(f"path: {root} is a file, not a folder; give the folder that holds "
                         "(or is to hold) the data sets")
    return root


def read_manifest(path: str | Path) -> dict[str, Any]:
    file = check_folder(paths.resolve(path)) / MANIFEST
    if not file.exists():
        return {}
    try:
        manifest = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"path: {file} is not valid JSON ({e}); remove it and "
                         f"{prepare_hint(file.parent)}") from None
    if not isinstance(manifest, dict):
        raise UsageError(f"path: {file} is not a manifest (a mapping of data set to entry); "
                         f"remove it and {prepare_hint(file.parent)}")
    return manifest


def record_in_manifest(root: Path, name: str, entry: dict[str, Any]) -> None:
    manifest = read_manifest(root)
    manifest[name] = entry
    atomic.write_json(root / MANIFEST, manifest)


def describe(path: str | Path, dataset: str) -> dict[str, Any]:
    """The manifest entry of `dataset` under `path`; a clear error if it was never prepared."""
    root = paths.resolve(path)
    entry = read_manifest(root).get(dataset)
    if entry is None or not all((root / f).exists() for f in entry["files"]):
        raise UsageError(f"path: {root} has no {dataset} data; {prepare_hint(root)}")
    return entry


def _sha256(root: Path, files: list[str]) -> str:
    digest = hashlib.sha256()
    for name in files:
        with open(root / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def entry(root: Path, source: str, files: list[str], samples: dict, params: dict, prep_s: float):
    return {
        "source": source,
        "samples": samples,
        "files": files,
        "bytes": sum((root / f).stat().st_size for f in files),
        "sha256": _sha256(root, files),
        "params": params,
        "prep_s": round(prep_s, 3),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def reused(root: Path, name: str, params: dict) -> dict[str, Any] | None:
    """The manifest entry of `name` if it can be reused as it is (see `_reusable`)."""
    old = read_manifest(root).get(name)
    if not _reusable(root, old, params):
        return None
    log(f"{name}: reusing {old['source']} data in {root}")
    return old


def _reusable(root: Path, entry: dict[str, Any] | None, params: dict) -> bool:
    """An entry is reused when its files are all there with the recorded size, and it is
    real data or was generated with the same parameters."""
    if not entry or not all((root / f).exists() for f in entry["files"]):
        return False
    if sum((root / f).stat().st_size for f in entry["files"]) != entry["bytes"]:
        return False
    return entry["source"] == "real" or entry["params"] == params


def prep_metrics(manifest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A data-prep run's metrics: per data set its source, samples and bytes; total time."""
    metrics: dict[str, Any] = {"prep_s": sum(e["prep_s"] for e in manifest.values())}
    for name, entry in manifest.items():
        key = name.replace("-", "_")
        metrics[f"{key}_source"] = entry["source"]
        metrics[f"{key}_samples"] = sum(entry["samples"].values())
        metrics[f"{key}_bytes"] = entry["bytes"]
    return metrics
