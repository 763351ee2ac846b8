import math
import time

import numpy as np
import pytest

from benchlib.core.stats import median_order_interval, quantile, summarize
from benchlib.core.timing import StepClock, StepMarks


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_quantile_matches_numpy(q):
    values = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3])
    assert quantile(values, q) == pytest.approx(np.quantile(values, q))


def test_summary_is_median_with_spread_and_an_interval_around_it():
    values = [10.0, 11.0, 9.0, 10.5, 30.0, 9.5, 10.2]  # one outlier
    s = summarize(values, "samples_per_s")
    assert s["samples_per_s"] == 10.2  # the median ignores the outlier; a mean would not
    assert s["samples_per_s_p10"] <= s["samples_per_s"] <= s["samples_per_s_p90"]
    assert s["samples_per_s_n"] == 7
    # 7 values: only min-max covers 95% (98.4%); x(2)-x(6) would cover 87.5%
    assert (s["samples_per_s_ci95_low"], s["samples_per_s_ci95_high"]) == (9.0, 30.0)
    assert s["samples_per_s_ci95_coverage"] == pytest.approx(1 - 2 / 2**7)
    twelve = summarize(list(range(12)), "x")  # x(3)-x(10): 96.1%
    assert (twelve["x_ci95_low"], twelve["x_ci95_high"]) == (2, 9)


@pytest.mark.parametrize("n", range(5, 13))
def test_the_median_interval_covers_what_it_says_at_every_n_it_is_used_with(n):
    """Where the truth is known: 2,000 seeded samples of n values from a skewed
    distribution (lognormal, as step times are) whose median is 100. Each interval covers
    it at least 95% of the time (within 3 standard errors of the simulation), as its
    stated coverage says; at n = 5 there is none, and the coverage it states for min-max,
    93.75%, is what min-max does cover. (The percentile bootstrap before it covered 88-93%
    at n = 7-12, and at n = 5 was min-max called a 95% interval.)"""
    rng = np.random.default_rng(n)
    trials, covered, stated = 2000, 0, None
    for _ in range(trials):
        values = sorted(100.0 * np.exp(rng.normal(0.0, 1.0, n)))
        low, high, stated = median_order_interval(values)
        if n == 5:
            low, high = values[0], values[-1]  # what the record shows instead: the range
        covered += low <= 100.0 <= high
    rate, error = covered / trials, 3 * math.sqrt(stated * (1 - stated) / trials)
    assert abs(rate - stated) <= error
    assert (stated >= 0.95) == (n >= 6)
    if n == 5:
        assert math.isnan(median_order_interval(list(range(5)))[0]) and stated == 0.9375


def test_interval_is_undefined_for_one_value():
    assert all(math.isnan(v) for v in median_order_interval([1.0]))


def test_cpu_clock_is_the_plain_monotonic_clock_and_a_cuda_one_is_synchronized():
    # on CPU nothing to wait for: the bare clock, not a wrapper that costs a call per read
    assert StepClock("cpu").now is time.perf_counter and StepClock(None).now is time.perf_counter
    # a CUDA device gets the synchronizing reader (built, not called: no GPU needed)
    assert StepClock("cuda:1").now is not time.perf_counter
    assert StepMarks("cpu").cuda is False and StepMarks("cuda").cuda is True


def test_step_marks_read_seconds_that_an_independent_clock_agrees_with():
    """50 ms measured by the marks, inside the same 50 ms as seen by the system's
    real-time clock (a different clock from perf_counter): seconds, not ms or ns, and
    never less than the sleep."""
    marks = StepMarks("cpu")
    outer_start = time.time()
    a = marks.mark()
    time.sleep(0.05)
    b = marks.mark()
    outer_s = time.time() - outer_start
    marks.wait()
    assert 0.05 <= marks.seconds(a, b) <= outer_s + 0.001  # 1 ms for time.time's resolution


def test_fewer_than_six_values_get_their_range_and_what_it_covers_not_a_95_percent_interval():
    from benchlib.core.stats import spread_text

    few = summarize([10.0, 12.0, 11.0], "x")
    assert math.isnan(few["x_ci95_low"]) and math.isnan(few["x_ci95_high"])
    assert (few["x_min"], few["x_max"], few["x_n"]) == (10.0, 12.0, 3)
    five = summarize([10.0, 12.0, 11.0, 10.5, 11.5], "x")
    assert math.isnan(five["x_ci95_low"])
    assert spread_text(five, "x", ".1f") == ("range 10.0-12.0, n=5: too few for a 95% interval "
                                             "(min-max covers the median 93.8%)")
    six = summarize([10.0, 12.0, 11.0, 10.5, 11.5, 10.8], "x")
    assert spread_text(six, "x", ".1f") == "95% CI 10.0-12.0, n=6"


def test_values_from_inside_one_process_get_no_95_percent_interval():
    """Epochs or repeats of one launch share its luck: however many, no bootstrap
    interval is claimed for them; the same values from separate launches get one."""
    from benchlib.core import throughput
    from benchlib.core.stats import spread_text

    values = [10.0, 12.0, 11.0, 10.5, 11.5, 10.8]
    inside = summarize(values, "x", independent=False)
    assert math.isnan(inside["x_ci95_low"]) and inside["x_n"] == 6
    assert spread_text(inside, "x", ".1f") == "range 10.0-12.0, n=6"
    assert spread_text(summarize(values, "x"), "x", ".1f").startswith("95% CI ")
    epochs = [{"samples_per_s": v, "epoch_s": 1.0, "batch_s": 0.1, "data_s": 0.01,
               "compute_s": 0.09, "loss_last": 1.0} for v in values]
    assert math.isnan(throughput.run_figures(epochs)["samples_per_s_ci95_low"])
