"""Which malloc a process uses, and how to start one with another.

On CPU, training allocates and frees the same large buffers every step. glibc returns
blocks above its mmap threshold to the kernel at once, so every step page-faults them
back in; on the test machine that moves training throughput by up to 30%. `tuned` keeps
them (GLIBC_TUNABLES); `jemalloc` and `tcmalloc` are preloaded where installed
(Debian: libjemalloc2, libtcmalloc-minimal4). Allocator settings must exist before the
process starts, so the CLI re-executes itself with them (`python -m benchlib --allocator
tuned ...`); every record's environment says which allocator ran.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from benchlib.errors import UsageError

ALLOCATORS = ("default", "tuned", "jemalloc", "tcmalloc")
LIBRARIES = ("jemalloc", "tcmalloc", "mimalloc")
# Keep freed blocks up to 32 MiB (glibc's largest mmap threshold on 64-bit) in the heap,
# and never trim it back: no per-step munmap/mmap, no page faults.
TUNED = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184"
_PRELOAD_GLOBS = {
    "jemalloc": ["/usr/lib/*/libjemalloc.so*", "/usr/lib/libjemalloc.so*", "/usr/local/lib/libjemalloc.so*"],
    "tcmalloc": ["/usr/lib/*/libtcmalloc*.so*", "/usr/lib/libtcmalloc*.so*", "/usr/local/lib/libtcmalloc*.so*"],
}
_INSTALL_HINT = {"jemalloc": "apt-get install libjemalloc2",
                 "tcmalloc": "apt-get install libtcmalloc-minimal4"}


def current() -> dict[str, Any]:
    """The allocator of this process: a preloaded library seen in its memory map, else glibc."""
    loaded = []
    try:
        maps = Path("/proc/self/maps").read_text()
        loaded = sorted({lib for lib in LIBRARIES if f"lib{lib}" in maps})
    except OSError:
        pass
    return {
        "name": loaded[0] if loaded else "glibc",
        "ld_preload": os.environ.get("LD_PRELOAD", ""),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "malloc_env": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
    }


def environment_for(name: str) -> dict[str, str]:
    """The variables that start a process with allocator `name`."""
    if name not in ALLOCATORS:
        raise UsageError(f"allocator: {name!r} is not one of {', '.join(ALLOCATORS)}")
    if name == "default":
        return {}
    if name == "tuned":
        return {"GLIBC_TUNABLES": TUNED}
    found = sorted(p for pattern in _PRELOAD_GLOBS[name] for p in glob.glob(pattern))
    if not found:
        raise UsageError(f"allocator: {name} is not installed here ({_INSTALL_HINT[name]})")
    return {"LD_PRELOAD": found[0]}
