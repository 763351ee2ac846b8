"""Holistic Trace Analysis over a run's traces (benchlib.diagnose.traces): what diagnose says
with HTA missing, with a trace of GPU kernels, and HTA's figures on a CUDA-shaped trace whose
answer is worked out by hand. The 2-rank CPU run that leaves the traces is in
tests/test_diagnose.py."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from benchlib.diagnose import rules, traces

GEMM, NCCL = "void gemm_kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def kineto_trace(folder, rank, kernels):
    """A Kineto trace as a CUDA rank leaves it, cut down to what HTA reads: three
    ProfilerStep marks of 1 ms (HTA leaves the last out), and for each (name, start_us,
    dur_us) a kernel on stream 7 with the cudaLaunchKernel that launched it."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
               "tid": 1, "ts": 1000.0 * i, "dur": 1000.0, "args": {}} for i in (1, 2, 3)]
    for n, (name, ts, dur) in enumerate(kernels):
        events += [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
                    "dur": dur, "args": {"device": 0, "stream": 7, "correlation": 100 + n}},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": 1, "ts": ts - 90.0, "dur": 10.0, "args": {"correlation": 100 + n}}]
    folder.mkdir(exist_ok=True)
    (folder / f"rank{rank}.json").write_text(json.dumps({
        "schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
        "traceEvents": events}, indent=1))


@pytest.fixture
def cuda_traces(tmp_path):
    """Rank 0: a 400 us GEMM, an all-reduce half under it, 400 us idle, the same again
    (span 1600 us: 25% idle, 50% computing, 25% the rest; 50% of the all-reduce hidden).
    Rank 1: each all-reduce starts as its GEMM ends (span 1800 us: 11% idle, 44% and
    44%; none hidden)."""
    folder = tmp_path / "trace"
    kineto_trace(folder, 0, [(GEMM, 1100, 400), (NCCL, 1300, 400), (GEMM, 2100, 400),
                             (NCCL, 2300, 400)])
    kineto_trace(folder, 1, [(GEMM, 1100, 400), (NCCL, 1500, 400), (GEMM, 2100, 400),
                             (NCCL, 2500, 400)])
    return folder


def test_hta_missing_is_one_line_with_the_extra_to_install(cuda_traces, tmp_path, monkeypatch):
    """HTA hidden from the path (a package of its name that does not import), installed
    or not."""
    (tmp_path / "shadow" / "hta").mkdir(parents=True)
    (tmp_path / "shadow" / "hta" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'hta'\")\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "shadow"), *sys.path]))
    [line] = traces.evidence(str(cuda_traces))
    assert line == (f"traces: 2 rank traces in {cuda_traces}; HTA is not installed (No module "
                    "named 'hta'): its temporal and overlap breakdowns come with "
                    "`pip install -c constraints.txt -e '.[traces]'`")


def test_a_folder_without_traces_is_one_line(tmp_path):
    assert traces.evidence(str(tmp_path / "gone")) == \
        [f"traces: none in {tmp_path / 'gone'} (moved or deleted?)"]


def test_htas_figures_per_rank_are_the_ones_worked_out_by_hand(cuda_traces):
    pytest.importorskip("hta", reason="the traces extra: pip install -e '.[traces]'")
    ranks = traces.breakdown_in_subprocess(cuda_traces)["ranks"]
    assert [(r["rank"], r["idle_pct"], r["compute_pct"], r["non_compute_pct"], r["overlap_pct"])
            for r in ranks] == [(0, 25.0, 50.0, 25.0, 50.0), (1, 11.11, 44.44, 44.44, 0.0)]
    temporal, overlap = traces.evidence(str(cuda_traces))
    assert "GPU idle 18% (11-25%), computing 47% (44-50%), communicating or copying 35% " \
        "(25-44%)" in temporal and "median of 2 ranks" in temporal
    assert overlap.startswith("HTA: computation overlapped 25% (0-50%) of the communication")


def test_hta_failing_on_a_trace_is_a_line_of_evidence_not_the_end(tmp_path):
    pytest.importorskip("hta", reason="the traces extra: pip install -e '.[traces]'")
    (tmp_path / "rank0.json").write_text('{"traceEvents": [{"cat": "kernel", "ph": "X"')
    record = {"run_id": "r", "metrics": {"data_s": 0.0, "compute_s": 0.1},
              "details": {"trace_dir": str(tmp_path)}}
    found = rules.diagnose(record)
    assert found.bottleneck == "compute-bound"
    [line] = [e for e in found.evidence if e.startswith("traces:")]
    assert line.startswith(f"traces: HTA failed on 1 rank trace in {tmp_path}: ")


def test_the_gpu_checks_hta_step_reads_rank_0s_figures_from_what_the_module_prints(cuda_traces):
    from benchlib.gpucheck.figures import hta_figures

    done = subprocess.run([sys.executable, "-m", "benchlib.diagnose.traces", str(cuda_traces)],
                          capture_output=True, text=True, timeout=120)
    figures = hta_figures(done.stderr + done.stdout)  # the step's log: both, merged
    if importlib.util.find_spec("hta"):
        assert figures == {"hta_idle_pct": 25.0, "hta_compute_pct": 50.0,
                           "hta_non_compute_pct": 25.0, "hta_overlap_pct": 50.0}
    else:
        assert figures == {"hta_missing": "No module named 'hta'"}
