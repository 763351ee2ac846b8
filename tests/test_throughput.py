"""benchlib.core.throughput: the one aggregation the DDP/DataParallel and Lightning
trainers share, on hand-made step times."""

import pytest

from benchlib.core import throughput
from benchlib.errors import ConfigError


def share(step_s: float, samples: int = 8, steps: int = 4, warmup: int = 1, loss: float = 1.0):
    """A rank whose every step takes `step_s` (a quarter loading, the rest computing)."""
    return throughput.rank_share([samples] * steps, [step_s / 4] * steps, [3 * step_s / 4] * steps,
                                 epoch_s=step_s * steps + 0.5, loss_last=loss, warmup_steps=warmup)


def test_a_rank_share_leaves_the_warm_up_out():
    mine = throughput.rank_share([8, 8, 8], [1.0, 0.1, 0.1], [9.0, 0.3, 0.5], epoch_s=11.0,
                                 loss_last=2.0, warmup_steps=1)
    assert mine["samples"] == 16 and mine["step_s"] == pytest.approx(1.0)
    assert mine["data_s"] == pytest.approx(0.1) and mine["compute_s"] == pytest.approx(0.4)
    assert mine["batch_s"] == pytest.approx(0.6) and mine["steps"] == 3  # median of 0.4, 0.6


def test_throughput_is_all_samples_over_the_slowest_rank():
    epoch = throughput.across_ranks([share(0.1, loss=1.0), share(0.2, loss=3.0)])
    # 2 ranks x 3 timed steps x 8 samples, over the slow rank's 3 x 0.2 s
    assert epoch["samples_per_s"] == pytest.approx(48 / 0.6)
    assert epoch["slowest_rank"] == 1 and epoch["loss_last"] == pytest.approx(2.0)
    assert epoch["epoch_s"] == pytest.approx(0.2 * 4 + 0.5)
    assert epoch["batch_s"] == pytest.approx(0.1)  # rank 0's own steps


def test_a_warm_up_that_leaves_no_timed_step_is_refused():
    with pytest.raises(ConfigError, match="warmup_steps: 4 leaves no timed step of the 4 this epoch had"):
        share(0.1, warmup=4)


def test_a_run_is_summarized_over_its_epochs():
    epochs = [throughput.across_ranks([share(s)]) for s in (0.1, 0.2, 0.4)]
    run = throughput.run_figures(epochs)
    assert run["samples_per_s"] == pytest.approx(24 / 0.6)  # the median epoch
    assert run["batch_s"] == pytest.approx(0.2) and run["loss_last"] == 1.0
    assert run["samples_per_s_n"] == 3


def test_the_warm_up_reaches_past_the_batches_prefetched_at_start_up():
    """2 workers fetch 4 batches while the loop starts: they arrive for free, so the timed
    window starts after them where the epoch has a step left."""
    mine = throughput.rank_share([8] * 6, [2.0, 0.0, 0.0, 0.0, 0.3, 0.3], [0.1] * 6, epoch_s=3.2,
                                 loss_last=1.0, warmup_steps=1, prefetched=4)
    assert mine["warmup_excluded"] == 4 and mine["timed_steps"] == 2
    assert mine["data_s"] == pytest.approx(0.3) and not mine["prefetched_only"]


def test_a_window_of_prefetched_batches_only_says_so():
    """12 steps, 8 workers: all 12 batches were prefetched at start-up (the issue's
    dp_vs_ddp rows): the warm-up stays as asked and the epoch says what its window held."""
    mine = throughput.rank_share([8] * 12, [1.0] + [0.0] * 11, [0.1] * 12, epoch_s=2.2,
                                 loss_last=1.0, warmup_steps=2, prefetched=16)
    assert mine["warmup_excluded"] == 2 and mine["prefetched_only"]
    epoch = throughput.across_ranks([mine])
    assert epoch["prefetched_only"]
    assert throughput.run_figures([epoch])["window_prefetched_only"] is True


def test_start_up_is_a_figure_beside_the_steady_rate():
    """A first batch that waited 10 s, then 9 steps of 0.1 s: the steady rate is 80
    samples/s; the whole epoch ran 80 samples in 10.9 s, 7.3 samples/s: the steady rate
    hides the start-up, and the record says so."""
    mine = throughput.rank_share([8] * 10, [10.0] + [0.02] * 9, [0.0] + [0.08] * 9,
                                 epoch_s=10.9, loss_last=1.0, warmup_steps=1)
    run = throughput.run_figures([throughput.across_ranks([mine])])
    assert run["samples_per_s"] == pytest.approx(80)
    assert run["first_batch_s"] == pytest.approx(10.0) and run["warmup_s"] == pytest.approx(10.0)
    assert run["epoch_samples_per_s"] == pytest.approx(80 / 10.9)
    assert run["startup_gap"] == pytest.approx(10.9) and run["startup_hidden"] is True
    assert run["startup_note"] == throughput.startup_text(run) == (
        "start-up hidden by the steady rate: 80 samples/s steady (9 steps, 72 samples timed "
        "an epoch), 7 over the whole epoch of 80 samples (10.9x); the first batch came after "
        "10 s, the warm-up left out 10 s")
    quick = throughput.rank_share([8] * 10, [0.1] + [0.02] * 9, [0.08] * 10, epoch_s=1.0,
                                  loss_last=1.0, warmup_steps=1)
    run = throughput.run_figures([throughput.across_ranks([quick])])
    assert run["startup_hidden"] is False and throughput.startup_text(run) == ""
    assert "startup_note" not in run


def test_each_share_of_a_step_carries_its_spread_over_steps_and_ranks():
    """Rank 0 waits 30 ms of every 100 ms step; rank 1 alternates 10 and 50 ms: the data
    share is the ranks' median, its spread reaches from the lowest rank's low to the
    highest's high; the all-reduce each rank waited is its comm share."""
    steps = 20
    r0 = throughput.rank_share([8] * steps, [0.03] * steps, [0.07] * steps, 2.0, 1.0, 0,
                               waits=[0.02] * steps)
    r1 = throughput.rank_share([8] * steps, [0.01, 0.05] * (steps // 2), [0.07] * steps, 2.0,
                               1.0, 0, waits=[0.02] * steps)
    epoch = throughput.across_ranks([r0, r1])
    # both ranks: 0.6 s of data in 2.0 s of steps; rank 1's steps vary, so its interval is wide
    assert epoch["data_share"] == pytest.approx(0.3)
    assert epoch["data_share_low"] < 0.27 and 0.33 < epoch["data_share_high"] < 0.5
    assert epoch["comm_share"] == pytest.approx(0.2, rel=0.01)
    assert epoch["compute_share"] == pytest.approx(0.5, rel=0.01)
    assert epoch["rank_skew"] == pytest.approx(1.0, abs=0.01)  # equal own work on average


def test_a_slowed_rank_shows_as_skew_with_its_interval():
    """Rank 1 computes 0.3 s a step, rank 0 0.1 s and waits 0.2 s for it in the all-reduce:
    rank 1's own work is 3x rank 0's, and every resample of the steps says so."""
    r0 = throughput.rank_share([8] * 8, [0.0] * 8, [0.3] * 8, 2.4, 1.0, 0, waits=[0.2] * 8)
    r1 = throughput.rank_share([8] * 8, [0.0] * 8, [0.3] * 8, 2.4, 1.0, 0, waits=[0.0] * 8)
    epoch = throughput.across_ranks([r0, r1])
    assert epoch["skew_rank"] == 1 and epoch["rank_skew"] == pytest.approx(3.0)
    assert epoch["rank_skew_low"] == pytest.approx(3.0) and epoch["rank_own_s"] == \
        pytest.approx([0.1, 0.3])


def slow_start(steps=30, full_steps=None, full_samples=None, start_s=10.0):
    """`start_s` of start-up before the first batch, then steps of 0.1 s, 32 samples each."""
    return throughput.rank_share([32] * steps, [start_s] + [0.0] * (steps - 1), [0.1] * steps,
                                 epoch_s=start_s + 0.1 * steps, loss_last=1.0, warmup_steps=1,
                                 full_steps=full_steps, full_samples=full_samples)


def test_a_run_cut_by_max_steps_judges_its_start_up_on_a_whole_epoch_of_its_data_set():
    """The issue's case: 10 s of start-up and 0.1 s steps. Over the 30 steps run the steady
    rate is 4.3x the epoch's; over a 50,000-sample epoch (1,563 steps of 32) the same
    start-up is 1.06x: no note, and the window each figure is of is named."""
    run = throughput.run_figures([throughput.across_ranks([slow_start(30, 1563, 50_000)])])
    assert run["window_steps"] == 29 and run["window_samples"] == 928
    assert run["epoch_steps"] == 30 and run["epoch_samples"] == 960
    assert run["full_epoch_steps"] == 1563 and run["full_epoch_samples"] == 50_000
    # the epoch as run, then the 1,533 steps it did not run at the 0.1 s steady step
    assert run["full_epoch_samples_per_s"] == pytest.approx(50_000 / (13.0 + 1533 * 0.1))
    assert run["window_startup_gap"] == pytest.approx(4.33, abs=0.01)
    assert run["startup_gap"] == pytest.approx(1.06, abs=0.01) and run["startup_projected"]
    assert run["startup_hidden"] is False and "startup_note" not in run
    # a start-up that a whole epoch still feels: the note names the projected epoch
    slow = throughput.run_figures([throughput.across_ranks([slow_start(30, 1563, 50_000, 400)])])
    assert slow["startup_hidden"] is True
    assert slow["startup_note"].startswith(
        "start-up hidden by the steady rate: 320 samples/s steady (29 steps, 928 samples "
        "timed an epoch), 90 over a whole epoch of 50,000 samples, projected from the 30 steps "
        "run and 1,533 more at the steady step (3.6x; the 30 steps run: 134.3x)")


def test_a_run_whose_epoch_ran_whole_projects_nothing():
    """Synthetic batches, or a loader whose every step ran: the epoch as run is the data
    set's."""
    for mine in (slow_start(30), slow_start(30, 30, 960)):
        run = throughput.run_figures([throughput.across_ranks([mine])])
        assert "full_epoch_samples_per_s" not in run and "startup_projected" not in run
        assert run["startup_gap"] == pytest.approx(4.33, abs=0.01) and run["startup_hidden"]


def test_the_start_up_gap_and_the_whole_epoch_rate_carry_their_spread_and_n():
    """Three epochs whose start-up took 1, 3 and 10 s: the gap's spread is the epochs'
    lowest and highest gap, the whole-epoch rate keeps its p10, p90 and n."""
    epochs = [throughput.across_ranks([slow_start(30, start_s=s)]) for s in (1.0, 3.0, 10.0)]
    run = throughput.run_figures(epochs)
    gaps = [320 / (960 / (s + 3.0)) for s in (1.0, 3.0, 10.0)]
    assert run["startup_gap_low"] == pytest.approx(gaps[0])
    assert run["startup_gap_high"] == pytest.approx(gaps[2]) and run["startup_gap_n"] == 3
    assert run["epoch_samples_per_s_n"] == 3
    assert run["epoch_samples_per_s_p10"] < run["epoch_samples_per_s"] < \
        run["epoch_samples_per_s_p90"]
