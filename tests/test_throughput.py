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
