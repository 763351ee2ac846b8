"""Progress for long cells: one bar per loop, updated in place, never a line per update.

Where a bar goes depends on who is watching:
- a notebook in JupyterLab: tqdm's notebook widget, or, where ipywidgets is not
  installed, tqdm's plain text bar on stderr (JupyterLab redraws it in place, on `\\r`);
- a terminal: tqdm's text bar on stderr, only when stderr is a terminal (unless asked);
- a notebook that a sweep executes: none. Its outputs become a report page, where a
  bar would be a frozen widget or a pile of redraws.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Iterator

# Set by the sweep for every kernel it starts (benchlib.records.results.METRICS_FILE_VAR,
# RUN_ID_VAR); named here so that this module imports nothing from benchlib.
SWEEP_VARS = ("BENCHLIB_METRICS_FILE", "BENCHLIB_RUN_ID")
NOTEBOOK_MININTERVAL_S = 1.0  # the plain bar in a notebook redraws at most once a second


def where() -> str:
    """"sweep" (a kernel a sweep started), "notebook" (an interactive kernel) or "terminal"."""
    if any(os.environ.get(v) for v in SWEEP_VARS):
        return "sweep"
    shell = sys.modules.get("IPython")
    ipython = shell.get_ipython() if shell and hasattr(shell, "get_ipython") else None
    if ipython is not None and "ipykernel" in type(ipython).__module__:
        return "notebook"
    return "terminal"


def _widget_class():
    """tqdm's notebook bar when ipywidgets is installed, else None (tqdm would warn)."""
    try:
        from tqdm import notebook
    except ImportError:
        return None
    return notebook.tqdm if getattr(notebook, "IProgress", None) is not None else None


def bar(total: int | None = None, desc: str = "", unit: str = "it",
        enabled: bool | None = None, initial: int = 0):
    """A tqdm bar for `total` steps (None: a counter of elapsed time). `enabled`: None
    lets the place decide (shown in a notebook, in a terminal only on a tty); False hides
    it; True shows it also on a terminal that is not a tty. Never shown under a sweep."""
    from tqdm.std import tqdm

    place = where()
    if place == "sweep" or enabled is False:
        return tqdm(total=total, initial=initial, disable=True)
    if place == "notebook":
        widget = _widget_class()
        if widget is not None:
            return widget(total=total, initial=initial, desc=desc, unit=unit, leave=True)
        return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr,
                    leave=True, mininterval=NOTEBOOK_MININTERVAL_S, ncols=100, disable=False)
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr,
                disable=None if enabled is None else False)


def _last_line(log: Path, width: int = 60) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 4096, 0))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:width] if lines else ""


@contextlib.contextmanager
def waiting(desc: str, log: Path | None = None, every_s: float = 1.0) -> Iterator[None]:
    """A bar of elapsed time while subprocesses run (ranks, launchers), with the last line
    of `log` (rank 0's) beside it; redrawn every `every_s` by a thread of its own."""
    progress = bar(total=None, desc=desc, unit="s")
    if progress.disable:
        yield
        return
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every_s):
            if log is not None:
                progress.set_postfix_str(_last_line(log), refresh=False)
            progress.refresh()

    thread = threading.Thread(target=tick, name="benchlib-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        progress.close()
