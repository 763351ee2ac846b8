"""One synchronisation policy for the figures set side by side: JAX's window is timed as
PyTorch's (nothing synchronized inside it, one wait at its end), and every record says
how its samples/s was timed (`timing`), the elastic trainer's per-step figure included."""

import pytest

from benchlib.core import throughput
from benchlib.core.timing import PER_STEP, WINDOW
from benchlib.trainers.elastic_timeline import summarize_run
from benchlib.workers.jax_resnet import timed_window


class Trace:
    """A fake JAX step and arrays that log what is queued and what is waited for."""

    def __init__(self):
        self.log = []

    def array(self, name):
        trace = self

        class Array:
            def block_until_ready(self):
                trace.log.append(f"wait {name}")
                return self
        return Array()

    def step(self, state, x, y):
        self.log.append("step")
        return state + 1, self.array(f"loss{state + 1}")


def test_the_jax_window_waits_once_before_and_once_at_its_end_never_inside():
    trace = Trace()
    state, loss, seconds = timed_window(trace.step, 0, None, None, 4, trace.array("warm-up"))
    assert trace.log == ["wait warm-up", "step", "step", "step", "step", "wait loss4"]
    assert state == 4 and seconds >= 0


def _share(step_s):
    return throughput.rank_share([8] * 4, [0.0] * 4, [step_s] * 4, 4 * step_s, 1.0, 1)


def test_the_pytorch_trainers_and_the_elastic_one_name_their_timing():
    epochs = [throughput.across_ranks([_share(0.1)]), throughput.across_ranks([_share(0.2)])]
    assert throughput.run_figures(epochs)["timing"] == WINDOW == "window"
    events = [{"event": "start", "attempt": 0, "t": 0.0}] + [
        {"event": "step", "attempt": 0, "step": s, "samples": 8, "step_s": 0.1, "data_s": 0.01,
         "loss": 1.0, "t": 0.1 * s} for s in range(1, 5)] + [{"event": "end", "attempt": 0,
                                                               "step": 4, "t": 0.5}]
    metrics, _ = summarize_run(events, warmup_steps=1)
    assert metrics["timing"] == PER_STEP == "per_step"
    assert metrics["samples_per_s"] == pytest.approx(80.0)


def test_framework_conclusions_flag_rows_whose_jax_figure_was_timed_another_way():
    from test_analysis import records

    from benchlib.analysis import framework_comparison

    def fw(**over):
        return {"notebook": "40_framework_comparison.ipynb", "table": "f", "arch": "resnet18",
                "dataset": "synthetic", "image_size": 64.0, "batch_size": 8.0,
                "nproc_per_node": 1.0, "precision": "fp32", "channels_last": False,
                "compile": False, "samples_per_s": 10.0, "mfu": None, "device_name": "cpu",
                "jax_samples_per_s": 12.0, "jax_over_pytorch": 1.2, "jax_version": "0.10",
                "jax_compile_s": 5.0, **over}
    same = framework_comparison.conclusions(framework_comparison.runs(records(
        [fw(timing="window", jax_timing="window")])))
    assert "JAX 0.10 on the same machine" in same and "waited after every step" not in same
    old = framework_comparison.conclusions(framework_comparison.runs(records([fw()])))
    assert "In 1 of these row(s) JAX waited after every step" in old
