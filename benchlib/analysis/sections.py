"""How notebook 90 shows each part of its sections: every computation runs through `show`,
so a part that cannot be computed from the records (a mix nobody foresaw, a bug) says why
in its own place, as one Markdown line, and every other part of the analysis still stands.

A part is a function of the records returning what a cell shows: a Markdown string, a
table (DataFrame), a matplotlib figure or seaborn grid, None (nothing), or a list or
generator of those (a generator's items before a failure are still shown)."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from benchlib.records import results


class Records:
    """What notebook 90 and the report's findings read, loaded once: every record as a frame
    (`all`: the overview and the failures), the newest ok record of each row on each
    testbed (`df`: every study's tables, headlines and figures; `results.latest_ok`) and,
    on first use, each kind of those records' per-item details (`details("repeats")`).
    From a results folder, from record dicts (`records`), or from frames built by hand;
    `every`: the records `all` holds where they are more than `records` (a testbed's
    figure whose inputs are runs of another, as the projection's)."""

    def __init__(self, results_dir: str | Path | None = None, *,
                 records: list[dict[str, Any]] | None = None, df: pd.DataFrame | None = None,
                 details: dict[str, pd.DataFrame] | None = None,
                 every: list[dict[str, Any]] | None = None):
        if records is None and results_dir is not None:
            from benchlib import paths

            records = results.read_records(paths.resolve(results_dir))
        self._ok = results.latest_ok(records) if records is not None else None
        self.all = results.frame(every if every is not None else records) \
            if records is not None else \
            (df if df is not None else pd.DataFrame())
        self.df = df if df is not None else results.frame(self._ok or [])
        self._details = dict(details or {})

    def details(self, kind: str) -> pd.DataFrame:
        if kind not in self._details:
            self._details[kind] = (results.details_frame(self._ok, kind)
                                   if self._ok is not None else pd.DataFrame())
        return self._details[kind]


@dataclass
class Part:
    """What a part gave before it stopped (`items`), and why it stopped (`error`, None when
    it ran through): one line naming the function and the exception."""

    items: list[Any] = field(default_factory=list)
    error: str | None = None
    details: str = ""  # the traceback, for whoever debugs it


def compute(part: Callable[..., Any], *args: Any, **kwargs: Any) -> Part:
    """Run one part of the analysis; never raises an Exception (an interrupt still stops)."""
    out = Part()
    figures = _open_figures()
    try:
        produced = part(*args, **kwargs)
        for item in _flat(produced):
            out.items.append(item)
    except Exception as exc:
        name = f"{getattr(part, '__module__', '?').rpartition('.')[2]}." \
               f"{getattr(part, '__name__', repr(part))}"
        why = " ".join(f"{type(exc).__name__}: {exc}".split())
        out.error = (f"This part of the analysis could not be computed from these records "
                     f"({name}: {why}); the other sections do not depend on it.")
        out.details = "".join(traceback.format_exception(exc))
        _close_new_figures(figures, keep=out.items)  # a half-drawn figure is not shown
    return out


def show(part: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Compute one part and display what it gave, then, if it stopped, why (Markdown, the
    traceback folded under it). Returns nothing, so a cell shows nothing more."""
    from IPython.display import Markdown

    out = compute(part, *args, **kwargs)
    for item in out.items:
        if isinstance(item, str):
            _display(Markdown(item))
        elif figure_of(item) is not None:
            _display(figure_of(item))
            _close(figure_of(item))
        else:
            _display(item)
    if out.error:
        _display(Markdown(f"**Not computed.** {out.error}\n\n<details><summary>traceback"
                          f"</summary>\n\n```\n{out.details}```\n</details>"))


def _display(item: Any) -> None:
    from IPython.display import display

    display(item)


def _flat(produced: Any):
    if produced is None:
        return
    if isinstance(produced, (list, tuple)) or hasattr(produced, "__next__"):
        for item in produced:
            if item is not None:
                yield item
    else:
        yield produced


def figure_of(item: Any):
    """The matplotlib figure of a figure, an axes or a seaborn grid; None for anything else."""
    if "matplotlib" not in sys.modules:
        return None
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    if isinstance(item, Figure):
        return item
    if isinstance(item, Axes):
        return item.figure
    figure = getattr(item, "figure", None)  # seaborn's FacetGrid, JointGrid
    return figure if isinstance(figure, Figure) else None


def _open_figures() -> set[int]:
    if "matplotlib.pyplot" not in sys.modules:
        return set()
    import matplotlib.pyplot as plt

    return set(plt.get_fignums())


def _close_new_figures(before: set[int], keep: list[Any]) -> None:
    """Close the pyplot figures opened since `before` that are not among `keep`'s."""
    if "matplotlib.pyplot" not in sys.modules:
        return
    import matplotlib.pyplot as plt

    kept = {id(figure_of(item)) for item in keep}
    for number in set(plt.get_fignums()) - before:
        figure = plt.figure(number)
        if id(figure) not in kept:
            plt.close(figure)


def _close(figure: Any) -> None:
    """Shown once: Jupyter's inline backend would show an open figure again at the end of
    the cell."""
    import matplotlib.pyplot as plt

    plt.close(figure)
