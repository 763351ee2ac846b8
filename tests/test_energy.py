"""Energy and cost of a run (benchlib.core.energy): NVML's counters where a GPU has them,
"unknown" (None) where not, and cost per million samples only with a price set."""

import pytest

from benchlib.core import energy
from benchlib.errors import ConfigError


def test_two_ranks_energy_gpu_hours_and_cost_add_up(monkeypatch):
    monkeypatch.setenv(energy.PRICE_VARIABLE, "2.5")
    ranks = [{"energy_j": 3600.0, "gpus": 1, "window_s": 36.0},
             {"energy_j": 5400.0, "gpus": 1, "window_s": 36.0}]
    got = energy.run_figures(ranks, samples=9000)
    assert got["energy_j"] == 9000.0 and got["energy_j_per_sample"] == 1.0
    assert got["gpu_hours"] == pytest.approx(0.02)  # 2 GPUs x 36 s
    assert got["cost_per_million_samples"] == pytest.approx(2.5 * 0.02 / 9000 * 1e6)


def test_one_unreadable_counter_makes_the_energy_unknown_not_half(monkeypatch):
    monkeypatch.delenv(energy.PRICE_VARIABLE, raising=False)
    got = energy.run_figures([{"energy_j": 10.0, "gpus": 1, "window_s": 1.0},
                              {"energy_j": None, "gpus": 1, "window_s": 1.0}], samples=10)
    assert got["energy_j"] is None and got["energy_j_per_sample"] is None
    assert got["gpu_hours"] == pytest.approx(2 / 3600) and got["cost_per_million_samples"] is None


def test_on_a_cpu_every_figure_is_unknown(monkeypatch):
    monkeypatch.setenv(energy.PRICE_VARIABLE, "1")
    meter = energy.EnergyMeter([])  # a CPU rank watches no GPU
    meter.start()
    got = energy.run_figures([meter.stop()], samples=100)
    assert got == {"energy_j": None, "energy_j_per_sample": None, "gpu_hours": None,
                   "gpu_hour_price": 1.0, "cost_per_million_samples": None}


@pytest.mark.parametrize("price", ["cheap", "-1", "nan"])
def test_a_price_that_is_not_one_is_refused_naming_the_variable(monkeypatch, price):
    monkeypatch.setenv(energy.PRICE_VARIABLE, price)
    with pytest.raises(ConfigError, match=f"BENCHLIB_GPU_HOUR_PRICE: '{price}' is not a price"):
        energy.gpu_hour_price()
