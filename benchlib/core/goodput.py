"""How often to save, and the goodput of a run that checkpoints, for failures that come
at random (exponentially distributed, mean `mtbf_s` M apart).

A run trains `interval_s` (tau) seconds, then a save costs it `cost_s` (C): the seconds
training loses to one save (a blocking save's stall; an asynchronous save's stall plus
the steps it slowed while it wrote, `effective_cost_s`). An asynchronous save becomes
durable `durable_s` (D) after training resumes; a failure before then rolls back to the
save before it. A failure costs `restart_s` (R) to come back (a failure during it starts
it again) and loses the work since the last durable save.

Daly (2006, "A higher order estimate of the optimum checkpoint interval for restart
dumps", FGCS 22) gives the expected wall time of such a run exactly; with D the same
renewal argument gives, per interval of training,

    wall = M e^(R/M) e^((tau + C + D)/M) (1 - e^(-(tau + C)/M))

(D = 0: Daly's M e^(R/M) (e^((tau + C)/M) - 1)), and goodput = tau / wall. D enters as
a constant factor, so the best interval does not move with it: Daly's higher-order
estimate tau = sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + (C / 2M) / 9) - C (tau = M once
C >= 2M), lengthened to D where it is shorter (a save must be durable before the next
starts). Young's (1974) sqrt(2 C M) and the first-order goodput tau / (tau + C) x
(1 - ((tau + C) / 2 + D + R) / M) stay beside it as a check: for exponential failures the
first-order form UNDERSTATES goodput (it charges the expected loss linearly where the
exact form's exponential discounts it), increasingly as a cycle grows against M.
`simulate` replays a run against failures at given times; the tests hold the exact form
to it across regimes, C near M included.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from benchlib.errors import ConfigError

# the first-order forms are within about 1% of the exact one while a cycle and a restart
# take less than this share of the MTBF (tests/test_goodput.py)
FIRST_ORDER_SHARE = 0.1


def check(name: str, value: float | None, *, zero: bool = False) -> float:
    """`value` as a float when it is finite and above 0 (or 0 where `zero` allows it);
    ConfigError naming `name` otherwise."""
    allowed = ">= 0" if zero else "> 0"
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise ConfigError(name, f"must be a finite number of seconds {allowed}, got {value!r}")
    return float(value)


def young_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Young's first-order interval: sqrt(2 C M) seconds of training between saves."""
    return math.sqrt(2 * cost_s * mtbf_s)


def daly_interval_s(cost_s: float, mtbf_s: float, durable_s: float = 0.0) -> float:
    """Daly's higher-order interval for cost C and MTBF M (M itself once C >= 2M),
    lengthened to the time until durable D where it is shorter."""
    if cost_s >= 2 * mtbf_s:
        best = mtbf_s
    else:
        x = cost_s / (2 * mtbf_s)
        best = math.sqrt(2 * cost_s * mtbf_s) * (1 + math.sqrt(x) / 3 + x / 9) - cost_s
    return max(best, durable_s)


def expected_wall_s(interval_s: float, cost_s: float, mtbf_s: float, restart_s: float = 0.0,
                    durable_s: float = 0.0) -> float:
    """The expected wall seconds one interval of training takes, failures, restarts and
    lost work included (the module docstring's exact form)."""
    return math.exp(_log_wall(interval_s, cost_s, mtbf_s, restart_s, durable_s))


def _log_wall(interval_s: float, cost_s: float, mtbf_s: float, restart_s: float,
              durable_s: float) -> float:
    """log of `expected_wall_s`, which overflows a float long before goodput reaches 0."""
    cycle = (interval_s + cost_s) / mtbf_s
    return (math.log(mtbf_s) + (restart_s + durable_s) / mtbf_s + cycle
            + math.log(-math.expm1(-cycle)))


def goodput(interval_s: float, cost_s: float, mtbf_s: float, restart_s: float = 0.0,
            durable_s: float = 0.0) -> float:
    """The share of wall time that is training kept, saving every `interval_s` (exact
    for exponential failures)."""
    return math.exp(math.log(interval_s) - _log_wall(interval_s, cost_s, mtbf_s, restart_s,
                                                     durable_s))


def goodput_first_order(interval_s: float, cost_s: float, mtbf_s: float,
                        restart_s: float = 0.0, durable_s: float = 0.0) -> float:
    """The first-order goodput, tau / (tau + C) x (1 - ((tau + C) / 2 + D + R) / M), 0
    where it goes below: a check beside `goodput`, not the answer."""
    cycle = interval_s + cost_s
    return max(0.0, interval_s / cycle * (1 - (cycle / 2 + durable_s + restart_s) / mtbf_s))


def first_order_holds(interval_s: float, cost_s: float, mtbf_s: float,
                      restart_s: float = 0.0, durable_s: float = 0.0) -> bool:
    return interval_s + cost_s + durable_s + restart_s <= FIRST_ORDER_SHARE * mtbf_s


def effective_cost_s(blocking_s: float, own_interval_s: float | None = None,
                     rate_ratio: float | None = None) -> tuple[float, str]:
    """(C, how it was taken) of one save: the blocking seconds, or, where the run measured
    its training rate with checkpoints against without (`rate_ratio`, < 1) at its own
    interval, what that rate lost per save, tau x (1 / ratio - 1), when that is more: an
    asynchronous save's stall plus the steps it slowed while writing."""
    if own_interval_s and rate_ratio and 0 < rate_ratio < 1:
        lost = own_interval_s * (1 / rate_ratio - 1)
        if lost > blocking_s:
            return lost, (f"the rate with saves {rate_ratio:.2f}x the rate without at a save "
                          f"every {own_interval_s:.3g} s: {lost:.3g} s lost a save, the "
                          f"{blocking_s:.3g} s stall and the steps slowed beside the write")
    return blocking_s, "the stall a save caused"


def plan(cost_s: float, mtbf_s: float, restart_s: float = 0.0,
         own_interval_s: float | None = None, durable_s: float = 0.0) -> dict[str, Any]:
    """Daly's interval and the exact goodput at it and, where given, at a run's own
    interval (None there, with `own_interval_refused`, when a save could not be durable
    before the next began); Young's interval and the first-order goodput as the check."""
    cost_s, mtbf_s = check("checkpoint_s", cost_s), check("mtbf", mtbf_s)
    restart_s = check("restart_s", restart_s, zero=True)
    durable_s = check("durable_s", durable_s, zero=True)
    best = daly_interval_s(cost_s, mtbf_s, durable_s)
    out: dict[str, Any] = {
        "daly_interval_s": best, "goodput_at_daly": goodput(best, cost_s, mtbf_s, restart_s,
                                                            durable_s),
        "interval_lengthened_to_durable": durable_s > 0 and best == durable_s,
        "young_interval_s": young_interval_s(cost_s, mtbf_s),
        "goodput_first_order_at_daly": goodput_first_order(best, cost_s, mtbf_s, restart_s,
                                                           durable_s),
        "first_order_holds": first_order_holds(best, cost_s, mtbf_s, restart_s, durable_s),
        "checkpoint_durable_s": durable_s}
    if own_interval_s is not None:
        own = check("interval_s", own_interval_s)
        out["own_interval_s"] = own
        if own < durable_s:
            out.update(goodput_at_own_interval=None, own_interval_refused=(
                f"a save every {own:.3g} s of training is shorter than the {durable_s:.3g} s "
                "a save takes to become durable: saves would queue"))
        else:
            out["goodput_at_own_interval"] = goodput(own, cost_s, mtbf_s, restart_s, durable_s)
    return out


def first_order_caveat(p: dict[str, Any]) -> str:
    """Where the first-order check parts from the exact form by more than half a point,
    the sentence saying which way ("" otherwise); computed, so it flips with the figures."""
    exact, first = p["goodput_at_daly"], p["goodput_first_order_at_daly"]
    if abs(exact - first) < 0.005:
        return ""
    way = "understates" if first < exact else "overstates"
    why = "" if p["first_order_holds"] else (": a cycle and a restart are not small against "
                                             "the MTBF")
    return (f"the first-order formula (Young 1974) {way} goodput here ({first:.2%} against "
            f"the exact {exact:.2%} at {p['daly_interval_s']:,.0f} s){why}")


def simulate(work_s: float, interval_s: float, cost_s: float, restart_s: float,
             failures: Iterable[float], durable_s: float = 0.0) -> dict[str, float]:
    """A run of `work_s` seconds of training, saving after every `interval_s` of it (the
    last stretch unsaved: the run ends), against failures at the given wall-clock times.
    A save is durable `durable_s` after training resumes from it; a failure loses what was
    trained since the last durable save (one cut short, or still being written, is no
    save) and costs `restart_s`, during which a further failure starts the restart again.
    Its wall time and goodput (work over wall time), and the failures it met."""
    times = iter(sorted(failures))
    failure = next(times, math.inf)
    now, done, met = 0.0, 0.0, 0
    pending: tuple[float, float] | None = None  # (work saved, wall time it is durable)
    durable = 0.0  # work held by the last durable save
    while done < work_s:
        stretch = min(interval_s, work_s - done)
        needed = stretch + (cost_s if done + stretch < work_s else 0.0)
        if pending and pending[1] <= min(now + needed, failure):
            durable, pending = pending[0], None
        if now + needed <= failure:
            now, done = now + needed, done + stretch
            if done < work_s:
                if durable_s > 0:
                    pending = (done, now + durable_s)
                else:
                    durable = done
            continue
        now, done, pending = failure + restart_s, durable, None
        met += 1
        failure = next(times, math.inf)
        while failure < now:  # failed again while restarting
            now, met, failure = failure + restart_s, met + 1, next(times, math.inf)
    return {"wall_s": now, "goodput": work_s / now if now else 1.0, "failures": met}


ASYNC_MODES = ("dcp_async", "dcp_async_pinned")
RESTART_MEASURED = ("recovery per restart measured in this run: a rank killed on its own host "
                    "and restarted by torchrun (on a cluster, a node's replacement and the "
                    "job's requeue come on top)")


def record_inputs(m: dict[str, Any], checkpoint_every: int | None) -> dict[str, tuple[Any, str]]:
    """What a record measured for the plan, each (value, where it comes from): C (the
    stall, or what the rate lost per save where that is more), R (its recovery per
    restart), D (an asynchronous save's time from resuming to durable), and its own
    interval (checkpoint_every x step_s); a value it lacks is None."""
    mode = m.get("checkpoint_mode")
    step, blocking = m.get("step_s"), m.get("checkpoint_blocking_s")
    own = checkpoint_every * step if checkpoint_every and step else None
    n = m.get("checkpoint_blocking_s_n")
    cost, how = (None, "")
    if blocking:
        cost, how = effective_cost_s(blocking, own, m.get("checkpoint_rate_ratio")
                                     if mode in ASYNC_MODES else None)
        how += (f" (median of {n} saves, p10-p90 {m.get('checkpoint_blocking_s_p10', 0):.3g}-"
                f"{m.get('checkpoint_blocking_s_p90', 0):.3g} s stalled)" if n else "")
    durable = None
    if mode in ASYNC_MODES and m.get("checkpoint_total_s") is not None and blocking:
        durable = max(0.0, m["checkpoint_total_s"] - blocking)
    restart = m["recovery_s"] / m["restarts"] if m.get("restarts") and m.get("recovery_s") else None
    return {"cost": (cost, how), "restart": (restart, RESTART_MEASURED),
            "durable": (durable, "an asynchronous save's median time from resuming to durable"),
            "own": (own, f"every {checkpoint_every} steps of {step or 0:.3g} s")}
