"""How often a rule names a direction between two identical setups (issue 23 item 1):

    python scripts/false_directions.py LAUNCH_SIGMA EPOCH_SIGMA    # e.g. 0.05 0.02, or 0 0.05

Each launch of a setup is off by its own lognormal LAUNCH_SIGMA, each epoch inside it by
EPOCH_SIGMA; both sides are the same setup, so every direction named is false. The old
notebook-90 rule (one launch a side, a winner when the epoch ranges do not overlap)
against the one verdict rule (benchlib.core.stats: a 95% interval over launches
that excludes 1 and clears the threshold, from 5 launches a side), 400 seeded trials."""

from __future__ import annotations

import sys

import numpy as np

from benchlib.core.stats import direction_verdict, ratio_interval

TRIALS = 400


def main(launch_sigma: float, epoch_sigma: float) -> None:
    rng = np.random.default_rng(0)

    def side(n: int, epochs: int) -> list[list[float]]:
        return [list(100 * np.exp(rng.normal(0, launch_sigma) + rng.normal(0, epoch_sigma, epochs)))
                for _ in range(n)]

    print("old rule (1 launch a side, a winner when the epoch ranges do not overlap):")
    for epochs in (2, 3):
        hits = 0
        for _ in range(TRIALS):
            a, b = side(1, epochs)[0], side(1, epochs)[0]
            hits += max(a) < min(b) or max(b) < min(a)
        print(f"  {epochs} epochs: {hits / TRIALS:.1%} of trials name a winner")
    for threshold in (0.10, 0.02):
        print(f"one rule, threshold {threshold:.0%}, 3 epochs a launch: false directions")
        for n in (2, 3, 5, 10):
            hits = 0
            for _ in range(TRIALS):
                r = ratio_interval(side(n, 3), side(n, 3), 400)
                hits += direction_verdict(r.low, r.high, threshold, n) in ("faster", "slower")
            print(f"  {n} launches a side: {hits / TRIALS:.1%}")


if __name__ == "__main__":
    main(float(sys.argv[1]), float(sys.argv[2]))
