"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchlib.errors import RecordError


@contextlib.contextmanager
def replacing(path: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed over `path`.

    On any error (or KeyboardInterrupt) the temporary file is removed and `path` is
    left as it was. Temporary names start with a dot, so globs like `*.json` skip them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide records from the group
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
        _fsync_dir(path.parent)  # the rename itself survives a crash
    finally:
        Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere reading it means setting it for a moment
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes) -> Path:
    """Write to a temporary file in the same folder, fsync, then rename over `path`."""
    with replacing(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    return Path(path)


def write_text(path: Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def to_jsonable(value: Any) -> Any:
    """Plain JSON types: numpy/torch scalars become numbers, NaN and inf become None."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()  # numpy or torch scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise RecordError(f"cannot store {type(value).__name__} in a JSON record: {value!r}")


def write_json(path: Path, obj: Any) -> Path:
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=True, allow_nan=False)
    return write_text(path, text + "\n")
