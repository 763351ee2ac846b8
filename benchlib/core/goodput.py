"""How often to save: Young's interval and the goodput of a run that checkpoints.

A run trains for `interval_s` seconds, then a checkpoint stalls it `cost_s` (C: the
measured blocking seconds of a save), and so on. A failure loses the work since the last
completed checkpoint, on average half a cycle, (interval + C) / 2, and costs `restart_s`
(R: detection, restart, restore, the first step) to come back. With failures every `mtbf_s`
(M) of wall time on average, the goodput (the training kept over the wall time) is

    goodput = interval / (interval + C) x (1 - ((interval + C) / 2 + R) / M)

and the interval that maximises it to first order is Young's (1974), sqrt(2 C M): it
balances the saves' cost C / interval against the expected loss interval / 2M. Daly (2006)
refines both for C not small against M; the first-order forms hold while interval + C + R
stays small against M (`first_order_holds`), and `simulate` replays a run against failures
at given times, which the tests check the formula against.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

# the first-order forms are within about 1% of a simulated run while a cycle and a
# restart take less than this share of the MTBF (tests/test_goodput.py)
FIRST_ORDER_SHARE = 0.1


def young_daly_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Seconds of training between checkpoints that maximise goodput: sqrt(2 C M)."""
    return math.sqrt(2 * cost_s * mtbf_s)


def goodput(interval_s: float, cost_s: float, mtbf_s: float, restart_s: float = 0.0) -> float:
    """The share of wall time that is training kept, checkpointing every `interval_s`
    (the formula above; 0 where failures undo everything)."""
    cycle = interval_s + cost_s
    return max(0.0, interval_s / cycle * (1 - (cycle / 2 + restart_s) / mtbf_s))


def first_order_holds(interval_s: float, cost_s: float, mtbf_s: float,
                      restart_s: float = 0.0) -> bool:
    return interval_s + cost_s + restart_s <= FIRST_ORDER_SHARE * mtbf_s


def plan(cost_s: float, mtbf_s: float, restart_s: float = 0.0,
         own_interval_s: float | None = None) -> dict[str, Any]:
    """Young's interval and the goodput at it and, where given, at a run's own interval."""
    best = young_daly_interval_s(cost_s, mtbf_s)
    out: dict[str, Any] = {"young_daly_interval_s": best,
                           "goodput_at_young_daly": goodput(best, cost_s, mtbf_s, restart_s),
                           "first_order_holds": first_order_holds(best, cost_s, mtbf_s, restart_s)}
    if own_interval_s:
        out.update(own_interval_s=own_interval_s,
                   goodput_at_own_interval=goodput(own_interval_s, cost_s, mtbf_s, restart_s))
    return out


def simulate(work_s: float, interval_s: float, cost_s: float, restart_s: float,
             failures: Iterable[float]) -> dict[str, float]:
    """A run of `work_s` seconds of training, saving after every `interval_s` of it (the
    last stretch unsaved: the run ends), against failures at the given wall-clock times:
    each loses what was trained since the last completed checkpoint (a checkpoint cut
    short included) and costs `restart_s`, during which a further failure starts the
    restart again. Its wall time and goodput (work over wall time), and the failures it met."""
    times = iter(sorted(failures))
    failure = next(times, math.inf)
    now, done, met = 0.0, 0.0, 0
    while done < work_s:
        stretch = min(interval_s, work_s - done)
        needed = stretch + (cost_s if done + stretch < work_s else 0.0)
        if now + needed <= failure:
            now, done = now + needed, done + stretch
            continue
        now = failure + restart_s  # back at the last checkpoint once restarted
        met += 1
        failure = next(times, math.inf)
        while failure < now:  # failed again while restarting
            now, met, failure = failure + restart_s, met + 1, next(times, math.inf)
    return {"wall_s": now, "goodput": work_s / now if now else 1.0, "failures": met}
