"""The one verdict rule (core.stats.direction_verdict), as notebook 90's sentences use it:
simulated launches of identical setups rarely get a direction at any n, and a real 20%
difference gets the right one in most trials at 5 launches a side (issue 23); Holm's
correction for comparisons judged together changes nothing for one (issue 23 item 4)."""

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.sides import Side, faster, side
from benchlib.core.stats import (
    MIN_TARGET_LAUNCHES,
    against_target,
    direction_p,
    direction_verdict,
    holm,
    resamples_for,
)
from benchlib.records import results

TRIALS = 400


def launch_figures(rng, n, level=100.0, launch_sigma=0.05, epoch_sigma=0.02, epochs=3):
    """n launches' figures: each the median of its epochs, with lognormal launch-to-launch
    noise and noise between the epochs inside one launch."""
    return [float(np.median(level * np.exp(rng.normal(0, launch_sigma))
                            * np.exp(rng.normal(0, epoch_sigma, epochs)))) for _ in range(n)]


def launches_side(name, values):
    return Side(name, float(np.median(values)), min(values), max(values), len(values),
                "launches", tuple(values))


@pytest.mark.parametrize("n", [2, 3, 5, 10])
@pytest.mark.parametrize("threshold", [0.0, 0.10])
def test_identical_setups_get_a_direction_in_at_most_5_percent_of_trials(n, threshold):
    # measured (seed 100 + n): 0 at n = 2 and 3 (no interval below 5 launches), 0.030 at 5
    # and 0.035 at 10 with no threshold, 0 with the 10% one; the old rule gave 0.315,
    # 0.075, 0.030, 0.035 from n launches and 0.775-0.347 from one launch of n epochs
    rng = np.random.default_rng(100 + n)
    directions = sum(
        faster(launches_side("A", launch_figures(rng, n)),
               launches_side("B", launch_figures(rng, n)), threshold=threshold) is not None
        for _ in range(TRIALS))
    assert directions / TRIALS <= 0.05


def test_a_real_20_percent_difference_is_found_in_most_trials_at_5_launches():
    # measured: 0.90 of trials name A at the 10% threshold with 3% launch-to-launch noise
    # (0.55 with 5% noise; 1.00 and 0.99 with no threshold); never B
    rng = np.random.default_rng(7)
    named = [faster(launches_side("A", launch_figures(rng, 5, 120.0, launch_sigma=0.03)),
                    launches_side("B", launch_figures(rng, 5, launch_sigma=0.03)))
             for _ in range(TRIALS)]
    assert named.count("A") / TRIALS >= 0.8 and "B" not in named


def test_one_launch_a_side_never_gets_a_direction_however_far_apart():
    a = Side("A", 200.0, 199.0, 201.0, 1, "epochs", (200.0,), 10)
    b = Side("B", 100.0, 99.0, 101.0, 1, "epochs", (100.0,), 10)
    assert faster(a, b) is None


def test_a_side_counts_each_launch_a_record_keeps():
    runs = pd.DataFrame([{"samples_per_s": 100.0, "samples_per_s_n": 6.0,
                          "samples_per_s_launches": (98.0, 99.0, 100.0, 101.0, 102.0, 103.0)},
                         {"samples_per_s": 110.0, "samples_per_s_launches": None}])
    s = side("A", runs)
    assert s.n == 7 and s.unit == "launches" and s.values[-1] == 110.0
    record = {"details": {"launches": [{"samples_per_s": 1.0}, {"samples_per_s": 2.0},
                                       {"samples_per_s": float("nan")}]}}
    assert results.launch_values(record) == (1.0, 2.0)
    assert results.launch_values({"details": {}}) is None


def test_holm_steps_down_from_the_smallest_p_and_stops_at_the_first_that_fails():
    # levels 0.05/4, 0.05/3, 0.05/2, 0.05: 0.005 and 0.01 pass, 0.03 > 0.025 stops it
    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
    assert holm([0.05]) == [True] and holm([0.0501]) == [False]  # a family of one: p <= alpha
    assert holm([0.012] * 4) == [True] * 4 and holm([0.013] * 4) == [False] * 4
    assert holm([]) == []


@pytest.mark.parametrize("resamples", [400, 2000])
def test_a_family_of_one_keeps_every_direction_its_95_percent_interval_gives(resamples):
    """Notebook 90 judges one comparison at a time: Holm must change nothing there, so a
    percentile interval that clears the bound always has p <= 0.05, edges included."""
    rng = np.random.default_rng(4)
    cleared = 0
    for _ in range(2000):
        # speeds around either bound, on a coarse grid so that resamples tie with it
        centre = rng.uniform(0.80, 0.93) ** rng.choice([1, -1])
        speed = np.round(rng.normal(centre, 0.03, resamples), 3)
        low, high = np.percentile(speed, [2.5, 97.5])
        if direction_verdict(low, high, 0.1) in ("slower", "faster"):
            cleared += 1
            assert holm([direction_p(speed, 0.1)]) == [True], (low, high)
    # measured: 889 and 925 cleared, of which 21 and 5 sit at p = 0.05 exactly
    assert cleared > 500


def test_enough_resamples_that_p_can_pass_holms_strictest_level_without_being_0():
    assert resamples_for(10) == 2000 and resamples_for(50) == 2000
    assert resamples_for(51) == 4000 and resamples_for(10, 400) == 400
    for tests in (1, 10, 50, 51, 180):
        assert 2 / resamples_for(tests) <= 0.05 / tests


@pytest.mark.parametrize("n", [5, 30])
@pytest.mark.parametrize("true_speed, wrong", [(1.10, "faster"), (1 / 1.10, "slower")])
def test_a_true_ratio_at_the_threshold_gets_a_direction_no_more_often_than_5_percent(
        n, true_speed, wrong):
    """The case that decides the threshold (issue 43): a true speed exactly at the rule's
    bound, 1.10 against a 10% threshold, or 1/1.10 (the bound below, the same distance in
    log scale; 0.90 is 1% past it), is named a direction in at most the rule's stated 5% of
    trials, at 5 launches a side and at 30. Measured (400 trials, 5% launch noise):
    1.2%-2.8% at 1.10 and about 2% at 1/1.10."""
    rng = np.random.default_rng(round(1000 * true_speed) + n)
    named = 0
    for trial in range(200):
        base = launches_side("base", launch_figures(rng, n))
        new = launches_side("new", launch_figures(rng, n, level=100.0 * true_speed))
        named += faster(new, base, threshold=0.10) is not None
    assert named / 200 <= 0.05


def test_a_target_passes_only_when_every_launch_reaches_it_and_fails_only_when_none_does():
    assert MIN_TARGET_LAUNCHES == 3
    assert against_target([0.41, 0.43, 0.40], 0.40) == "pass"  # at the target reaches it
    assert against_target([0.35, 0.39, 0.3999], 0.40) == "fail"
    assert against_target([0.39, 0.41, 0.45], 0.40) == "launches disagree"
    assert against_target([0.45, 0.46], 0.40) == "too few launches"  # one launch short
    assert against_target([0.45, 0.46, float("nan"), None], 0.40) == "too few launches"


@pytest.mark.parametrize("truth, passes, fails", [(1.00, (0.08, 0.17), (0.08, 0.17)),
                                                  (0.95, (0.0, 0.01), (0.97, 1.0)),
                                                  (1.05, (0.97, 1.0), (0.0, 0.01))])
def test_three_launches_at_the_target_pass_or_fail_about_one_time_in_eight(truth, passes, fails):
    """Launches whose true median sits exactly at the target land all above (or all
    below) it 1/8 of the time each: the rule's worst case, which docs/gpus.md states; a
    truth 5% off the target, with 1% noise between launches and 2% between a launch's
    windows (a compiled GPU row's two H200 launches were 0.05% apart), is judged right in
    97% of trials or more."""
    rng = np.random.default_rng(5)
    said = [against_target(launch_figures(rng, 3, level=100 * truth, launch_sigma=0.01), 100.0)
            for _ in range(TRIALS)]
    rates = {v: said.count(v) / TRIALS for v in ("pass", "fail")}
    assert passes[0] <= rates["pass"] <= passes[1] and fails[0] <= rates["fail"] <= fails[1]


@pytest.mark.parametrize("factor", [1.165, 1.17, 1.175])
def test_a_verdict_near_its_threshold_is_the_same_at_every_bootstrap_seed(factor):
    """6 launches a side, the new one about `factor` x the base: its interval's lower bound
    lands within a hair of the 10% threshold. With 2,000 draws a side the seed decided the
    verdict (faster at some seeds, inconclusive at others: checked below); the bootstrap
    now draws more while the threshold lies within 3 Monte-Carlo errors of a bound, and
    says "at the boundary" where 64,000 do not settle it, so every seed gives one verdict."""
    from benchlib.core.stats import MAX_RESAMPLES, ratio_interval

    rng = np.random.default_rng(5)
    base = [[v] for v in 100 * np.exp(rng.normal(0, 0.05, 6))]
    new = [[v] for v in 100 * factor * np.exp(rng.normal(0, 0.05, 6))]
    verdicts, fixed = set(), set()
    for seed in range(20):
        r = ratio_interval(base, new, seed=seed)
        verdicts.add(direction_verdict(r.low, r.high, 0.10, 6, at_boundary=r.at_boundary))
        assert 2000 <= r.mc.resamples <= MAX_RESAMPLES and r.mc.mc_error >= 0
        low, high = np.percentile(r.boot[:2000], [2.5, 97.5])  # the draws before: 2,000
        fixed.add(direction_verdict(low, high, 0.10, 6))
    assert len(verdicts) == 1
    if factor == 1.17:
        assert len(fixed) == 2  # the case that shows it: the seed chose before
        assert ratio_interval(base, new, seed=0).at_boundary


def test_a_bound_far_from_the_threshold_takes_the_draws_it_always_took():
    from benchlib.core.stats import RESAMPLES, ratio_interval

    rng = np.random.default_rng(1)
    base = [[v] for v in 100 * np.exp(rng.normal(0, 0.05, 8))]
    new = [[v] for v in 150 * np.exp(rng.normal(0, 0.05, 8))]
    r = ratio_interval(base, new)
    assert r.mc.resamples == RESAMPLES and not r.at_boundary
    assert direction_verdict(r.low, r.high, 0.10, 8) == "faster"


@pytest.mark.parametrize("n", [5, 8])
def test_the_ratio_interval_covers_the_true_ratio_at_the_launches_it_is_used_with(n):
    """Two sides of n launches each (lognormal launch noise, the same true median): the
    bootstrap interval of their ratio takes in 1 at least 95% of the time, within 3
    standard errors of 300 trials (docs/method.md quotes 95-98% at 5-12 launches)."""
    from benchlib.core.stats import ratio_interval

    rng = np.random.default_rng(n)
    trials, covered = 300, 0
    for t in range(trials):
        a, b = (100 * np.exp(rng.normal(0, 0.1, n)) for _ in range(2))
        r = ratio_interval([[v] for v in a], [[v] for v in b], seed=t)
        covered += r.low <= 1.0 <= r.high
    assert covered / trials >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / trials)
