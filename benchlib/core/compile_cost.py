"""What a compile costs and whether it pays (notebook 55, the GPU check's part 4): the
break-even steps with their bootstrap interval over launches, the loss after the same
steps against eager's on the same seed (within LOSS_TOLERANCE), and the sentence for a
break-even, which names a direction only where the speedup's verdict does. Statistics of one
figure, built on core.stats' bootstrap and its minimum of launches for an interval.

A compiled launch of any study also says what its compile cost by itself, without an
eager launch beside it (`in_launch`); a row with no eager launch of the same work has no
break-even, and its record says why (`no_eager_row`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from benchlib.core.stats import MIN_LAUNCHES, RESAMPLES


@dataclass
class BreakEven:
    """After how many steps a compile pays for itself: `steps` = compile seconds / (eager
    step - compiled step), inf where the compiled step is not faster (it never pays off),
    0 where the compile cost nothing. `low`-`high`: its 95% bootstrap interval over
    launches (MIN_LAUNCHES or more a side; `high` inf where some resamples never pay off),
    None with fewer."""

    steps: float
    low: float | None
    high: float | None
    compile_s: float  # the compiled launches' first steps less eager's (medians)
    saved_s: float  # what a steady step saves: eager step less compiled step (medians)
    n: int  # launches on the side with fewest


def _break_even(compile_s, saved_s):
    """steps = compile_s / saved_s, elementwise: inf where nothing is saved, 0 where the
    compile cost nothing."""
    import numpy as np

    compile_s, saved_s = np.asarray(compile_s, dtype=float), np.asarray(saved_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.where(saved_s > 0, np.maximum(compile_s, 0) / saved_s, np.inf)
    return steps


def break_even(compiled: list[tuple[float, float]], eager: list[tuple[float, float]],
               batch: float, resamples: int = RESAMPLES, seed: int = 0) -> BreakEven:
    """`compiled`, `eager`: per launch (its first steps' seconds, its steady samples/s).
    The compile's seconds are the compiled launches' first steps less eager's (medians
    over launches); a steady step is `batch` over the median samples/s, so the saving has
    the sign of the speedup of those medians. Launches are resampled whole (a launch's two
    figures together), each side on its own."""
    import numpy as np

    c, e = np.asarray(compiled, dtype=float), np.asarray(eager, dtype=float)
    compile_s = float(np.median(c[:, 0]) - np.median(e[:, 0]))
    saved_s = float(batch / np.median(e[:, 1]) - batch / np.median(c[:, 1]))
    steps = float(_break_even(compile_s, saved_s))
    n = min(len(c), len(e))
    if n < MIN_LAUNCHES:
        return BreakEven(steps, None, None, compile_s, saved_s, n)
    rng = np.random.default_rng(seed)
    pick_c = rng.integers(0, len(c), (resamples, len(c)))
    pick_e = rng.integers(0, len(e), (resamples, len(e)))
    med = lambda side, pick, col: np.median(side[pick, col], axis=1)  # noqa: E731
    boot = _break_even(med(c, pick_c, 0) - med(e, pick_e, 0),
                       batch / med(e, pick_e, 1) - batch / med(c, pick_c, 1))
    # no interpolation between resamples: two that never pay off must give inf, not NaN
    low, high = (float(q) for q in np.percentile(boot, [2.5, 97.5], method="nearest"))
    return BreakEven(steps, low, high, compile_s, saved_s, n)


NO_EAGER_ROW = "no eager row of the same work in this row"


def in_launch(steps_s: list[float], warmup_steps: int) -> dict[str, Any]:
    """A compiled launch's compile seconds by itself (`compile_s`): its first
    `warmup_steps` steps (at least one: where torch.compile compiles) less as many of its
    steady steps (the median of those after them). Whatever else makes a first step slow
    (the allocator's first requests, the loader's first batch) counts as compile too, so
    it is at most that much above the compile's own time; notebook 55 takes eager
    launches' first steps off instead. None where no step follows the first ones."""
    first = max(warmup_steps, 1)
    steady = steps_s[first:]
    how = f"the first {first} step(s) less {first} x the median step after them"
    if not steady:
        return {"compile_s": None, "compile_s_of": f"not measured: no step after the first {first}"}
    return {"compile_s": sum(steps_s[:first]) - first * statistics.median(steady),
            "compile_s_of": how}


def no_eager_row() -> dict[str, Any]:
    """A compiled row with no eager launch of the same work: no break-even, and why."""
    return {"break_even_steps": None, "break_even_why": NO_EAGER_ROW}


# The compiled loss after the same steps on the same seed and data may differ from eager's
# by float rounding that fusions reorder, a few parts in 1e5 a step here; a real change
# (a wrong graph, a dropped op) moves it by far more. Judged pair by pair, relative to
# eager's loss: a fixed bound, not eager's spread over seeds (which, for a small CNN, let a
# 14% change read "same").
LOSS_TOLERANCE = 0.01


def loss_parity(eager: list[float], compiled: list[float],
                tolerance: float = LOSS_TOLERANCE) -> dict[str, Any]:
    """The loss after the same steps, compiled against eager, launch r of each side on the
    same seed and data: `same` when every pair's difference is within `tolerance` of
    eager's loss, `differs` otherwise (the worst pair named); `not judged` with no pair."""
    pairs = [(e, c) for e, c in zip(eager, compiled) if math.isfinite(e) and math.isfinite(c)]
    out: dict[str, Any] = {"loss_pairs": len(pairs), "loss_tolerance": tolerance}
    if not pairs:
        return {**out, "loss_parity": "not judged"}
    deltas = [c - e for e, c in pairs]
    relative = [abs(c - e) / max(abs(e), 1e-12) for e, c in pairs]
    worst = max(range(len(pairs)), key=relative.__getitem__)
    out.update(loss_delta=statistics.median(deltas), loss_delta_max=deltas[worst],
               loss_delta_relative_max=relative[worst],
               loss_spread_eager=max(e for e, _ in pairs) - min(e for e, _ in pairs)
               if len(pairs) > 1 else None)
    return {**out, "loss_parity": "same" if relative[worst] <= tolerance else "differs"}


def break_even_text(steps: float | None, low: float | None, high: float | None, n: int,
                    verdict: str) -> str:
    """The break-even in words, its direction only where the speedup's `verdict` (the one
    rule, core.stats.direction_verdict) names one: 'pays off after 195 steps (95% CI 175
    to 216, n=5 launches a side)' where the compiled step is faster; 'never pays off: the
    compiled step is slower' or 'does not pay off: the compiled step is no faster' where
    it is not; otherwise 'not settled: 243 steps to never (...)', the range the launches
    allow, with too few launches n and no interval."""
    if steps is None or math.isnan(steps):
        return "not measured"

    def count(v: float) -> str:
        return "never" if math.isinf(v) else f"{v:,.0f}"
    launches = f"n={n} launch{'es' if n != 1 else ''} a side"
    if low is None or high is None or math.isnan(low):
        spread = f"{launches}: an interval needs {MIN_LAUNCHES}"
    else:
        spread = f"95% CI {count(low)} to {count(high)}, {launches}"
    if verdict == "faster" and math.isfinite(steps):
        return f"pays off after {count(steps)} steps ({spread})"
    if verdict == "slower":
        return f"never pays off: the compiled step is slower ({launches})"
    if verdict == "no change":
        return f"does not pay off: the compiled step is no faster, within the threshold ({launches})"
    if low is None or high is None or math.isnan(low):
        return f"not settled: {count(steps)} steps at the medians, but {spread}"
    return f"not settled: {count(low)} steps to {count(high)} ({spread}; the speedup's verdict " \
           "names no direction)"
