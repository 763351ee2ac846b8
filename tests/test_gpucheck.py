"""scripts/gpu-check.sh: the plan, the refusal without CUDA, and how a step's outcome,
record and summary row are made (with real subprocesses; the GPU run itself is in
docs/gpu-check/)."""

import json
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

from benchlib.gpucheck import check as gpucheck
from benchlib.gpucheck import figures as gpu_figures
from benchlib.gpucheck import launches, steps, summary
from benchlib.records import results
from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})


def in_process(capsys, *args: str) -> subprocess.CompletedProcess:
    """gpu-check's main here, as the script runs it (no process of its own to start)."""
    code = gpucheck.main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def _names(stdout: str) -> list[str]:
    return [line.split()[0] for line in stdout.splitlines()[:-1] if not line.startswith(" ")]


def test_dry_run_lists_every_gpu_path_the_check_must_cover(tmp_path):
    done = script(str(tmp_path / "out"), "--dry-run")
    assert done.returncode == 0, done.stderr
    names = _names(done.stdout)
    assert names[:5] == ["env", "doctor_nccl", "allreduce_nccl", "calibrate_toynet",
                         "calibrate_resnet18"]
    for name in ("resnet50_fp32", "resnet50_tf32", "resnet50_amp_bf16", "resnet50_amp_bf16_cl",
                 "resnet50_amp_bf16_cl_compile", "ddp_nccl", "dp", "lightning",
                 "elastic_restart", "jax_resnet50"):
        assert name in names
    assert "--backend nccl --group-of-one" in done.stdout and "--max-restarts 1" in done.stdout
    # the ResNet-50 target's step: 3 launches, each with its own seconds and box
    assert f"{'resnet50_amp_bf16_cl':30} ~ 51 s (box  60 s a launch)" in done.stdout
    assert "seconds: 3 launches, each 17 s measured (H100 run 4)" in done.stdout
    assert done.stdout.splitlines()[-1] == (
        "15 steps (part 1 of 6), about 414 s: 414 s as measured, 0 s estimated "
        "(docs/gpus.md); a step starts only while its expected time fits in the 540 s budget")
    assert not (tmp_path / "out").exists()


def test_part_2_lists_the_language_model_and_the_outside_models(tmp_path, capsys):
    done = in_process(capsys, str(tmp_path / "out"), "--dry-run", "--part", "2")
    assert done.returncode == 0, done.stderr
    names = _names(done.stdout)
    assert names == ["env", "lm_single", "lm_fsdp2", "lm_single_ac_selective",
                     "lm_single_ac_full", "timm_resnet50", "hf_gpt2", "checkpoint_modes"]
    assert "--nproc-per-node 1 --max-restarts 0 -m benchlib.workers.fsdp2 --config" in done.stdout
    assert '"model": "timm:resnet50"' in done.stdout and '"model": "hf:gpt2"' in done.stdout
    # the MFU target's step: its first launch measured, the two after it an estimate
    assert f"{'lm_single':30} ~135 s (box 165 s a launch)" in done.stdout
    assert "seconds: 55 s measured (H200 run 5 and 5b: 44-53 s, a cold compile), then 2 x " \
        "40 s estimate (inductor's cache warm from the first launch;" in done.stdout
    assert done.stdout.splitlines()[-1].startswith(
        "8 steps (part 2 of 6), about 412 s: 102 s as measured, 310 s estimated")
    for bad in ("7", "2,2", "two"):
        assert in_process(capsys, str(tmp_path), "--dry-run", "--part", bad).stderr == (
            "gpu-check: part: must be 1 to 6, or several once each in the order to run them "
            f"(2,1), got {bad}\n")
    both = in_process(capsys, str(tmp_path / "out"), "--dry-run", "--part", "2,1")
    both_names = _names(both.stdout)
    assert both_names[:len(names)] == names and both_names[len(names)] == "doctor_nccl"
    assert both_names.count("env") == 1 and "resnet50_fp32" in both_names
    assert both.stdout.splitlines()[-1].startswith("22 steps (parts 2,1 in that order), about ")
    chosen = [s.name for s in gpucheck.select(gpucheck.plan(tmp_path), None, 2)]
    assert "data" not in chosen and "resnet50_fp32" not in chosen and chosen[0] == "env"


def test_part_3_lists_the_io_study_and_the_traces_and_part_5_the_largest_batch(tmp_path,
                                                                                capsys):
    done = in_process(capsys, str(tmp_path / "out"), "--dry-run", "--part", "3")
    assert done.returncode == 0, done.stderr
    assert _names(done.stdout) == ["env", "data", "io_raw", "io_ab", "ddp_trace",
                                   "hta_breakdown", "comm_hook_cost"]
    # raw's settings in one process; preload against preload_batched over 5 launches
    assert done.stdout.count("--modes train,traverse --workers 0,4") == 2
    assert "--variants preload,preload_batched --launches 5" in done.stdout
    assert "--group-of-one --log-dir" in done.stdout and '"export_trace": true' in done.stdout
    assert f"-m benchlib.diagnose.traces {tmp_path / 'out' / 'logs' / 'ddp_trace_ranks' / 'trace'}" \
        in done.stdout
    assert "seconds: 75 s estimate (5 launches of 8 settings" in done.stdout
    assert done.stdout.splitlines()[-1].startswith(
        "7 steps (part 3 of 6), about 215 s: 40 s as measured, 175 s estimated")
    # the search with its 3-process confirmations (420 s on an H200): a call of its own
    done = in_process(capsys, str(tmp_path / "out"), "--dry-run", "--part", "5")
    assert _names(done.stdout) == ["env", "maxbatch_resnet50"]
    assert "-m benchlib maxbatch --model resnet50 --model-args {} --depth 20 --alpha 48 " \
        "--dataset imagefolder --device gpu" in done.stdout
    assert "--start-batch 256 --max-batch 8192 --steps 4 --warmup-steps 1" in done.stdout
    assert "--confirm 3" in done.stdout
    assert done.stdout.splitlines()[-1].startswith(
        "2 steps (part 5 of 6), about 432 s: 432 s as measured, 0 s estimated")


def test_without_cuda_it_says_so_in_one_line_exits_2_and_writes_nothing(tmp_path):
    done = script(str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr == ("gpu-check: device: no CUDA device here; the GPU check needs one "
                           "(--dry-run prints the plan anywhere)\n")
    assert not (tmp_path / "out").exists()


def test_only_names_an_unknown_step_and_keeps_env_and_the_steps_it_needs(tmp_path, capsys):
    done = in_process(capsys, str(tmp_path), "--only", "lightnin,bogus", "--dry-run")
    assert done.returncode == 2
    assert done.stderr.startswith("gpu-check: only: 'bogus' matches no step; steps are env, "
                                  "doctor_nccl,")
    plan = gpucheck.plan(tmp_path)  # a step another needs runs just before it
    chosen = [s.name for s in gpucheck.select(plan, "io_raw,lightning")]
    assert chosen == ["env", "lightning", "data", "io_raw"]
    assert [s.name for s in gpucheck.select(plan, "hta")] == ["env", "ddp_trace", "hta_breakdown"]
    assert [s.name for s in gpucheck.select(plan, "data,io_ab")] == ["env", "data", "io_ab"]


def _folders(out):
    for folder in ("logs", "work", "results"):
        (out / folder).mkdir(parents=True, exist_ok=True)


def test_a_step_that_fails_times_out_or_succeeds_is_reported_and_recorded(tmp_path):
    _folders(tmp_path)
    env: dict = {}
    ok = gpucheck.run_step(gpucheck.plan(tmp_path)[0], tmp_path, env)  # benchlib env --json
    assert ok["status"] == "ok" and ok["figures"]["torch"] == env["packages"]["torch"]
    failing = gpucheck.Step("broken", [sys.executable, "-c", "print('first'); raise SystemExit(3)"],
                            30, {"x": 1})
    failed = gpucheck.run_step(failing, tmp_path, env)
    assert failed["status"] == "failed" and failed["error"] == "exit 3: first"
    # a failed step whose figures cannot be read either keeps its own reason (run 5's
    # maxbatch said only "figures unreadable" where its CLI had exited 1)
    unread = gpucheck.Step("unread", [sys.executable, "-c", "print('why'); raise SystemExit(1)"],
                           30, {}, from_log=gpu_figures.maxbatch_figures)
    assert gpucheck.run_step(unread, tmp_path, env)["error"] == "exit 1: why"
    slow = gpucheck.Step("slow", [sys.executable, "-c", "import time; time.sleep(30)"], 1, {})
    timed_out = gpucheck.run_step(slow, tmp_path, env)  # its own box is the limit
    assert timed_out["status"] == "timeout" and timed_out["seconds"] < 10
    silent = gpucheck.Step("silent", [sys.executable, "-c", "pass"], 30, {},
                           str(tmp_path / "work" / "silent.json"))
    assert gpucheck.run_step(silent, tmp_path, env)["error"].startswith("exit 0 but no result")
    records = {r["params"]["step"]: r for r in map(results.read_record,
                                                   results.record_files(tmp_path / "results"))}
    assert {n: r["status"] for n, r in records.items()} == {
        "env": "ok", "broken": "failed", "unread": "failed", "slow": "failed", "silent": "failed"}
    assert records["broken"]["details"]["error"] == "exit 3: first"
    assert records["env"]["env"]["packages"]["torch"] == env["packages"]["torch"]
    table = summary.summary_markdown([ok, failed, timed_out], env)
    assert "| broken | failed |" in table and "exit 3: first" in table
    assert table.rstrip().endswith("1 of 3 steps ok.")


def test_resnet50_figures_hold_mfu_against_the_detected_devices_peak():
    step = next(s for s in steps.plan(ROOT / "outputs" / "gpu-check") if s.name == "resnet50_amp_bf16")
    figures = step.figures({"metrics": {"samples_per_s": 3000.0, "flops_per_sample": 24.6e9,
                                        "world_size": 1, "device_name": "NVIDIA H100 80GB HBM3"}})
    assert abs(figures["mfu"] - 3000 * 24.6e9 / 989.4e12) < 1e-9
    unknown = step.figures({"metrics": {"samples_per_s": 10.0, "flops_per_sample": 1e9,
                                        "device_name": "cpu"}})
    assert unknown["mfu"] is None and unknown["mfu_peak_source"] == "no published peak for cpu " \
        "at amp_bf16"
    json.dumps(figures)  # a record can hold it


def test_each_part_fits_its_default_budget_in_one_call_and_each_box_leaves_room():
    plan = steps.plan(ROOT / "outputs" / "gpu-check")
    for part in steps.parts():  # a call: 600 s; room left in each for a step or two more
        assert sum(s.expected_s for s in steps.part_of(plan, part)) <= gpucheck.BUDGET_S - 100
    assert gpucheck.BUDGET_S <= 540 and {s.part for s in plan} == {0, 1, 2, 3, 4, 5, 6}
    for s in plan:  # an honest box: each launch gets twice what it took, or more
        assert s.timeout_s >= 2 * s.expected_s / s.launches, s.name
    # a target is judged on 3 launches or more, each a fresh process
    assert {s.name: s.launches for s in plan if s.target} == {"resnet50_amp_bf16_cl": 3,
                                                             "lm_single": 3}


def test_a_step_that_does_not_fit_the_budget_is_skipped_not_started_and_cut(tmp_path):
    quick = gpucheck.Step("quick", [sys.executable, "-c", "pass"], 30, {}, expected_s=1)
    big = gpucheck.Step("big", [sys.executable, "-c", "raise SystemExit(9)"], 30, {},
                        expected_s=50)
    outcomes = gpucheck.run_plan([big, quick], tmp_path, budget_s=20)
    assert [(o["step"], o["status"]) for o in outcomes] == [("big", "skipped"), ("quick", "ok")]
    assert outcomes[0]["error"] == "out of time: needs about 50 s, 20 s of the 20 s budget left"
    assert not (tmp_path / "logs" / "big.log").exists()  # never started
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [o["status"] for o in summary["steps"]] == ["skipped", "ok"]


def test_a_step_whose_needed_step_was_skipped_or_failed_is_skipped_not_started(tmp_path):
    """The H200 run of 2026-11-28: compile_resnet50_warm started when the cold step that
    fills its cache had been skipped for time, and failed on the empty cache."""
    code = "import sys; raise SystemExit(int(sys.argv[1]))"
    step = lambda name, rc, expected_s=1, needs=(): gpucheck.Step(  # noqa: E731
        name, [sys.executable, "-c", code, str(rc)], 30, {}, expected_s=expected_s,
        needs=list(needs))
    outcomes = gpucheck.run_plan([step("eager", 0), step("cold", 0, 50, ["eager"]),
                                  step("warm", 0, 1, ["eager", "cold"]), step("bad", 3),
                                  step("after_bad", 0, 1, ["bad"]), step("free", 0)],
                                 tmp_path, budget_s=20)
    assert [(o["step"], o["status"]) for o in outcomes] == [
        ("eager", "ok"), ("cold", "skipped"), ("warm", "skipped"), ("bad", "failed"),
        ("after_bad", "skipped"), ("free", "ok")]
    assert outcomes[2]["error"] == "needs cold, which was skipped"
    assert outcomes[4]["error"] == "needs bad, which failed"
    assert not (tmp_path / "logs" / "warm.log").exists()


def test_a_failed_steps_line_says_the_exception_its_worker_raised_not_torchruns_report():
    """The H200 run of 2026-11-28: checkpoint_modes' line read "error_file: <N/A> |
    traceback : To enable traceback see: ... | =====", torchrun's report of a failed
    worker; the worker's own last line said why."""
    log = "\n".join([
        "rank 0/1 (local 0) on vm, from torchrun, master localhost:41577",
        "Traceback (most recent call last):",
        '  File "saver.py", line 193, in _dcp_save',
        "    y = self._deepcopy_dispatch[type](x, memo)",
        "KeyError: <class 'type'>",
        "E1128 16:13:42.110000 527 torch/distributed/elastic/multiprocessing/api.py:986] failed",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "=" * 60])
    assert gpucheck.why_failed(log) == "KeyError: <class 'type'>"
    assert gpucheck.why_failed("x\ntorch.OutOfMemoryError: CUDA out of memory. Tried\n") \
        == "torch.OutOfMemoryError: CUDA out of memory. Tried"
    # a crash that a retry got past, then a refusal: the refusal is the reason
    assert gpucheck.why_failed("RuntimeError: rank 1 crashed while joining\nretrying once\n"
                               "joined\nstep 1\nbenchlib.workers.single: path: /x: no such "
                               "folder\n") == "joined | step 1 | benchlib.workers.single: " \
        "path: /x: no such folder"
    # a refusal with no exception: its own last lines, as it printed them
    assert gpucheck.why_failed("rank 0/1\nbenchlib.workers.single: compile_cache_from: /x "
                               "is not a cache folder\n") == \
        "rank 0/1 | benchlib.workers.single: compile_cache_from: /x is not a cache folder"


def test_a_compile_steps_line_shows_its_speedup_compile_seconds_and_break_even():
    figures = {"samples_per_s": 395.7, "eager_samples_per_s": 231.0, "speedup": 1.713,
               "compile_s": 22.16, "first_steps_s": 23.98, "peak_alloc_bytes": 15087393280,
               "break_even": "pays off after 768 steps (n=1 launch a side: an interval needs 5)"}
    assert summary.headline("compile_gpt2_124m_cold", figures) == (
        "samples_per_s 395.7, eager_samples_per_s 231.0, speedup 1.713, compile_s 22.16, "
        "first_steps_s 23.98, break_even pays off after 768 steps (n=1 launch a side: an "
        "interval needs 5), peak_alloc 14.05 GiB")


def _on_cpu(step, out, small_data) -> list[str]:
    """The step's io_grid arguments, on this machine's CPU and the small data set."""
    args = step.argv[step.argv.index("benchlib.gpucheck.io_grid") + 1:]
    return [str(small_data) if a == str(out / "data") else "cpu" if a == "gpu" else
            "0" if a == "0,4" else a for a in args]


def test_an_io_step_measures_each_setting_in_one_process_and_reads_a_figure_for_each(
        tmp_path, small_data):
    from benchlib.gpucheck import io_grid

    out = tmp_path / "out"
    step = next(s for s in steps.plan(out) if s.name == "io_raw")
    log = tmp_path / "log"
    with open(log, "w") as f, redirect_stdout(f):
        assert io_grid.main(_on_cpu(step, out, small_data)) == 0
    figures = gpu_figures.io_figures(log.read_text())
    assert figures["train_w0_samples_per_s"] > 0 and figures["traverse_w0_samples_per_s"] > 0
    assert (figures["traverse_w0_samples_per_s_p10"] <= figures["traverse_w0_samples_per_s"]
            <= figures["traverse_w0_samples_per_s_p90"])
    headline = summary.headline("io_raw", figures)
    assert headline.startswith("train_w0 ") and "; traverse_w0 " in headline
    records = [results.read_record(p) for p in results.record_files(out / "results")]
    assert sorted((r["params"]["mode"], r["params"]["variant"]) for r in records) == [
        ("train", "raw"), ("traverse", "raw")]


def test_the_io_ab_interleaves_five_launches_and_gives_each_ratio_an_interval(
        tmp_path, small_data):
    """Five processes, each every setting once in a rotated order; the ratio of the two
    variants over launches, with the verdict rule's interval."""
    out = tmp_path / "out"
    step = next(s for s in steps.plan(out) if s.name == "io_ab")
    args = [a for a in _on_cpu(step, out, small_data) if a != "train,traverse"]
    args[args.index("--modes") + 1:args.index("--modes") + 1] = ["traverse"]
    done = subprocess.run([sys.executable, "-m", "benchlib.gpucheck.io_grid", *args,
                           "--warmup-steps", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    records = [results.read_record(p) for p in results.record_files(out / "results")]
    firsts = [r["params"]["variant"] for r in sorted(records, key=lambda r: r["started_at"])][::2]
    assert firsts == ["preload", "preload_batched"] * 2 + ["preload"]  # rotated each launch
    figures = step.figures(json.loads((out / "work" / "io_ab.json").read_text()))
    key = "ab_preload_batched_over_preload_traverse_w0"
    assert figures["preload_traverse_w0_samples_per_s_n"] == 5
    assert figures[key + "_low"] <= figures[key] <= figures[key + "_high"]
    assert figures[key + "_verdict"] in ("faster", "slower", "no change", "inconclusive")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("A/B "))
    assert line.startswith("A/B preload_batched / preload, traverse_w0: ") and "5 launches" in line


def test_the_ab_summary_finds_a_real_difference_and_none_in_identical_launches():
    from benchlib.gpucheck import io_grid

    def launch(a: float, b: float) -> list[dict]:
        return [{"params": {"variant": v, "mode": "train", "num_workers": 0},
                 "metrics": {"samples_per_s": x}} for v, x in (("preload", a), ("batched", b))]

    noise = [1.0, 1.03, 0.98, 1.02, 0.99]
    faster = io_grid.summary([launch(100 * n, 150 * n) for n in noise])["ab"]
    assert [(a["new"], a["setting"], a["verdict"]) for a in faster] == [
        ("batched", "train_w0", "faster")]
    assert 1.4 < faster[0]["low"] <= faster[0]["ratio"] == 1.5 <= faster[0]["high"] < 1.6
    same = io_grid.summary([launch(100 * n, 100 * n) for n in noise])["ab"][0]
    assert same["verdict"] != "faster" and same["low"] <= 1.0 <= same["high"]
    two = io_grid.summary([launch(100, 150), launch(101, 151)])["ab"][0]
    assert two["low"] is None and two["verdict"] == "inconclusive"  # 2 launches: no interval


def test_the_resnet50_steps_are_notebook_40s_gpu_rows_with_the_settings_the_h100_ran(tmp_path):
    """The check reads params/framework_comparison_gpu.yaml through notebook 40's own
    parameter functions; these are the values runs 1-4 on an H100 ran with (docs/gpus.md)."""
    plan = {s.name: s for s in steps.plan(tmp_path)}
    windows = {"fp32": 15, "tf32": 20, "amp_bf16": 30, "amp_bf16_cl": 30, "amp_bf16_cl_compile": 30}
    for variant, max_steps in windows.items():
        _, worker, params = plan[f"resnet50_{variant}"].config
        assert worker == "single"
        assert {k: params[k] for k in ("model", "dataset", "image_size", "batch_size", "lr",
                                       "device", "epochs", "max_steps", "warmup_steps",
                                       "log_interval")} == {
            "model": "resnet50", "dataset": "synthetic", "image_size": 224, "batch_size": 256,
            "lr": 0.256, "device": "gpu", "epochs": 2, "max_steps": max_steps,
            "warmup_steps": 10, "log_interval": 0}, variant  # momentum: the trainer's 0.9
        assert (params["channels_last"], params["compile"]) == (
            "_cl" in variant, "default" if "compile" in variant else "off")
    jax = plan["jax_resnet50"].argv
    assert jax[jax.index("--precision") + 1] == "amp_bf16"
    assert jax[jax.index("--lr") + 1] == "0.256" and jax[jax.index("--repeats") + 1] == "2"


def test_a_steps_launch_is_the_one_its_study_plans_and_a_worker_it_does_not_start_is_refused(
        tmp_path):
    """A step of a study runs the launch the study's own `launches` gives for its config,
    the one of the row's worker (and role: notebook 55's sides); its checkpoints where the
    row puts them; a worker the study would not start for that config is one line naming
    the launches it would."""
    from benchlib.config import DpVsDdpConfig
    from benchlib.errors import ConfigError

    plan = {s.name: s for s in steps.plan(tmp_path)}
    assert (plan["compile_resnet50_eager"].launch.role, plan["compile_resnet50_warm"].launch.role) \
        == ("eager", "compiled")
    assert plan["lightning"].launch.options["srun_torchrun"] is False
    elastic = plan["elastic_restart"]
    assert elastic.launch.role == "interrupted" and elastic.config[2]["checkpoint_path"] == \
        str(tmp_path / "work" / "elastic_restart" / "checkpoints")
    assert "--max-restarts 1" in " ".join(elastic.argv)
    with pytest.raises(ConfigError, match=r"^worker: plan.yaml: x: its study launches no "
                                          r"lightning for this config; its launches: "
                                          r"ddp \(train\), allreduce \(allreduce\)$"):
        steps.launch_of(DpVsDdpConfig(strategy="ddp", nproc_per_node=2, allreduce=True),
                        {"name": "x", "worker": "lightning"})


def test_a_resnet50_steps_run_json_is_one_the_worker_accepts(tmp_path):
    """benchlib.workers.single reads the row's run.json as its parameters, and a parameter
    it does not have is refused (the same parse the worker makes, in this process)."""
    import pytest

    from benchlib.errors import ConfigError
    from benchlib.launch import protocol
    from benchlib.trainers.ddp_flags import parser
    from benchlib.workers.bootstrap import Plain, parse

    step = next(s for s in steps.plan(tmp_path) if s.name == "resnet50_amp_bf16_cl_compile")
    _, worker, params = step.config
    config = protocol.write_run_config(tmp_path, worker, params)
    worker_parser = lambda: Plain(None, parser(worker)).parser()  # noqa: E731 - as `single` builds it
    args = parse(worker_parser(), ["--config", str(config)])
    assert (args.model, args.batch_size, args.lr, args.momentum, args.precision,
            args.channels_last, args.compile) == ("resnet50", 256, 0.256, 0.9, "amp_bf16", True,
                                                  "default")
    protocol.write_run_config(tmp_path, worker, {**params, "no_such_parameter": 1})
    with pytest.raises(ConfigError, match="'no_such_parameter' is not a parameter of"):
        parse(worker_parser(), ["--config", str(config)])


def _copy_params(tmp_path, monkeypatch, **edits):
    """The project's parameter tables under a root of their own (its notebooks beside
    them, which the sweep's reader checks each row against), each `file=(old, new)`
    replaced once."""
    (tmp_path / "params").mkdir()
    (tmp_path / "notebooks").symlink_to(ROOT / "notebooks")
    for table in (ROOT / "params").glob("*.yaml"):
        (tmp_path / "params" / table.name).write_text(table.read_text())
    for name, (old, new) in edits.items():
        file = tmp_path / "params" / f"{name}.yaml"
        assert file.read_text().count(old) == 1, old
        file.write_text(file.read_text().replace(old, new))
    monkeypatch.setenv("BENCHLIB_ROOT", str(tmp_path))


def test_a_misspelt_name_in_the_gpu_table_is_refused_as_a_sweep_refuses_it(tmp_path, monkeypatch):
    """The check reads a parameter table with the sweep's own reader: a name the notebook
    does not take is refused, naming the row, not dropped."""
    import pytest

    from benchlib.errors import UsageError

    _copy_params(tmp_path, monkeypatch,
                 framework_comparison_gpu=("timed_steps: 5}", "timed_step: 5}"))
    with pytest.raises(UsageError, match=r"framework_comparison_gpu.yaml: studies\[1\]: row 1: "
                                         r"timed_step: not a parameter of "
                                         r"40_framework_comparison.ipynb"):
        steps.plan(tmp_path / "out")


def test_a_step_whose_match_picks_no_row_or_two_is_refused(tmp_path, monkeypatch):
    import pytest

    from benchlib.errors import ConfigError

    _copy_params(tmp_path, monkeypatch,
                 framework_comparison_gpu=("{precision: fp32,", "{precision: tf32,"))
    with pytest.raises(ConfigError, match=r"^match: plan.yaml: resnet50_fp32 matches 0 rows of "
                                          r"params/framework_comparison_gpu.yaml"):
        steps.plan(tmp_path / "out")


def test_every_row_of_the_gpu_tables_is_a_steps_source(tmp_path):
    """A row added to a GPU table without a step in plan.yaml would never run: each row of
    notebook 40's and 50's GPU tables is the source of a step (in the check's window)."""
    sources = [s.source for s in steps.plan(tmp_path) if s.source is not None]
    window = {"warmup_steps", "max_steps"}

    def same(a, b) -> bool:
        return type(a) is type(b) and all(getattr(a, k) == getattr(b, k)
                                           for k in a.field_names() if k not in window)

    for table in ("params/framework_comparison_gpu.yaml", "params/transformer_training_gpu.yaml",
                  "params/framework_comparison_own_model_gpu.yaml"):
        for row in steps.table_rows(table):
            assert any(same(row, s) for s in sources), (table, row)


def test_part_2s_commands_are_built_from_the_tables_so_a_changed_row_changes_them(
        tmp_path, monkeypatch):
    """The language model rows are notebook 50's, in the check's short window; the timm
    and hf rows notebook 40's; the largest batch notebook 15's ResNet-50 row."""
    plan = {s.name: s for s in steps.plan(tmp_path / "out")}
    _, worker, lm = plan["lm_single"].config
    assert worker == "single" and {k: lm[k] for k in (
        "model", "dataset", "seq_len", "batch_size", "precision", "compile", "ac", "epochs",
        "warmup_steps", "max_steps")} == {
        "model": "gpt2-124m", "dataset": "tokens", "seq_len": 1024, "batch_size": 16,
        "precision": "amp_bf16", "compile": "default", "ac": "none", "epochs": 2,
        "warmup_steps": 10, "max_steps": 20}
    assert plan["lm_fsdp2"].config[1] == "fsdp2"
    assert [plan[f"lm_single_ac_{m}"].config[2]["ac"] for m in ("selective", "full")] == [
        "selective", "full"]

    _copy_params(tmp_path, monkeypatch,
                 transformer_training_gpu=("seq_len: 1024", "seq_len: 512"),
                 framework_comparison_own_model_gpu=("batch_size: 8}", "batch_size: 4}"),
                 memory_and_batch_gpu=("max_batch: 8192", "max_batch: 2048"))
    changed = {s.name: s for s in steps.plan(tmp_path / "out")}
    assert {changed[n].config[2]["seq_len"] for n in changed if n.startswith("lm_")} == {512}
    assert changed["hf_gpt2"].config[2]["batch_size"] == 4
    argv = changed["maxbatch_resnet50"].argv
    assert argv[argv.index("--max-batch") + 1] == "2048"


def test_part_2s_run_jsons_are_ones_their_workers_accept(tmp_path):
    """Each language model, outside model and traced step's run.json, read by its worker's
    own parse (as benchlib.workers.single, .ddp and .fsdp2 build it), in this process."""
    from benchlib.launch import protocol
    from benchlib.trainers.ddp_flags import parser
    from benchlib.workers.bootstrap import Plain, parse

    for step in (s for s in steps.plan(tmp_path) if s.part == 2 and s.config):
        folder, worker, params = step.config
        args = parse(Plain(None, parser(worker)).parser(),
                     ["--config", str(protocol.write_run_config(folder, worker, params))])
        assert (args.model, args.precision, args.strategy) == (
            params["model"], "fp32" if step.name == "ddp_trace" else "amp_bf16", worker), step.name


H100 = "NVIDIA H100 80GB HBM3"


def _judged(step, rates, device=H100, extra=None):
    """The step's target judged on launches at `rates` samples/s: each launch's figures,
    and the combined ones at their median, as the runner makes them."""
    import statistics

    def launch(rate):
        return step.figures({"metrics": {**(extra or {}), "samples_per_s": rate, "world_size": 1,
                                         "device_name": device}})

    return launches.judged(step.target, [launch(r) for r in rates],
                           launch(statistics.median(rates)), step.source.precision, step.launches)


def test_the_lm_target_is_mfu_by_the_analytic_count_judged_over_three_launches(tmp_path):
    plan = steps.plan(tmp_path)
    step = next(s for s in plan if s.name == "lm_single")
    flops = 6 * 85e6 + 12 * 12 * 768 * 1024
    lm = {"tokens_per_sample": 1024, "flops_per_token_analytic": flops}
    figures = step.figures({"metrics": {**lm, "samples_per_s": 700.0, "world_size": 1,
                                        "device_name": H100}})
    assert abs(figures["mfu"] - 700 * 1024 * flops / 989.4e12) < 1e-12
    assert figures["mfu_peak_flops"] == 989.4e12 and "target" not in figures
    passed = _judged(step, [700.0, 690.0, 710.0], extra=lm)
    assert passed["target_met"] is True and passed["target"].startswith(
        "PASS: MFU 45.2% median (range 44.5%-45.8%, n=3 launches) >= 40% target in every "
        "launch; gpt2-124m, 1,024 tokens, amp_bf16, compiled, one GPU (issue 25), on NVIDIA "
        "H100 80GB HBM3: 716,800 tokens/s x 623,246,208 FLOPs per token by 6N + 12·L·H·Q·T "
        "FLOPs per token (PaLM, appendix B), over the dense amp_bf16 peak 989.4 TFLOP/s")
    assert (passed["target_n"], passed["target_at_least"]) == (3, 0.40)
    failed = _judged(step, [300.0, 310.0, 320.0], extra=lm)
    assert failed["target_met"] is False and failed["target"].startswith(
        "FAIL: MFU 20.0% median (range 19.4%-20.6%, n=3 launches) < 40% target in every launch")
    split = _judged(step, [560.0, 640.0, 700.0], extra=lm)  # 36.1%, 41.3%, 45.2%
    assert split["target_met"] is None and split["target"].startswith(
        "NOT JUDGED: launches disagree: MFU 41.3% median (range 36.1%-45.2%, n=3 launches) "
        "against the 40% target")
    short = _judged(step, [700.0, 710.0], extra=lm)  # a launch failed: 2 of 3
    assert short["target_met"] is None and short["target"].startswith(
        "NOT JUDGED: 2 of 3 launches gave a figure, the rule needs 3: MFU 45.5% median")
    cpu = _judged(step, [700.0] * 3, device="cpu", extra=lm)
    assert cpu["target"].startswith("NOT JUDGED: MFU unknown (no published peak for cpu at "
                                    "amp_bf16)")
    assert [s.name for s in plan if s.name.startswith("lm_") and s.target] == ["lm_single"]
    json.dumps(passed)  # a record can hold it


def test_the_resnet50_target_is_judged_on_an_h100_only_over_three_launches(tmp_path):
    step = next(s for s in steps.plan(tmp_path) if s.name == "resnet50_amp_bf16_cl")
    assert (step.source.precision, step.source.channels_last, step.source.compile) == (
        "amp_bf16", True, "off")
    per_sample = {"flops_per_sample": 24.6e9}
    passed = _judged(step, [3995.0, 3988.0, 3998.0], extra=per_sample)
    assert passed["target_met"] is True and passed["target"] == (
        "PASS: images/s 3,995 median (range 3,988-3,998, n=3 launches) >= 2,800 target in "
        "every launch; ResNet-50, batch 256, amp_bf16 + channels_last, no compile (issue 15), "
        "on NVIDIA H100 80GB HBM3")
    h200 = _judged(step, [4706.0, 4705.0, 4707.0], device="NVIDIA H200", extra=per_sample)
    assert h200["target_met"] is None and h200["target"].startswith(
        "NOT JUDGED: the target is for one H100, this is NVIDIA H200: images/s 4,706 median")


def test_the_lm_step_runs_three_launches_here_and_its_figures_hold_tokens_and_flop_counts(
        tmp_path):
    """lm_single's own command on this CPU, its run.json changed to a model that fits
    here: three launches, each a fresh process with its own window; tokens/s over them,
    the two FLOP counts within 5%, its record, and the target not judged without a peak."""
    from benchlib.launch import protocol

    _folders(tmp_path)
    step = next(s for s in steps.plan(tmp_path) if s.name == "lm_single")
    folder, worker, params = step.config
    protocol.write_run_config(folder, worker, {
        **params, "device": "cpu", "model": "gpt-tiny", "seq_len": 32, "batch_size": 2,
        "compile": "off", "precision": "fp32", "warmup_steps": 1, "max_steps": 3})
    step.config = None  # the run.json written above, not the GPU row's
    outcome = gpucheck.run_step(step, tmp_path, {})
    assert outcome["status"] == "ok", outcome.get("error")
    log = (tmp_path / "logs" / "lm_single.log").read_text()
    assert [ln for ln in log.splitlines() if ln.startswith("== launch")] == [
        f"== launch {n} of 3 ==" for n in (1, 2, 3)]
    f = outcome["figures"]
    assert f["launches"] == f["samples_per_s_n"] == 3
    assert f["samples_per_s_min"] <= f["samples_per_s"] <= f["samples_per_s_max"]
    assert f["tokens_per_s"] == f["samples_per_s"] * 32 > 0
    assert abs(f["flop_count_ratio"] - 1) < 0.05 and f["mfu"] is None
    assert f["target"].startswith("NOT JUDGED: MFU unknown") and f["target_met"] is None
    assert f["energy_j_per_sample"] is None
    [record] = [results.read_record(p) for p in results.record_files(tmp_path / "results")]
    per_launch = record["details"]["launches_samples_per_s"]
    assert len(per_launch) == 3 and sorted(per_launch)[1] == f["samples_per_s"]
    assert record["notebook"] == "gpu-check lm_single" and record["run_id"] == \
        results.run_id_for("gpu-check", "gpu-check lm_single", record["params"])


def test_the_maxbatch_step_is_the_rows_config_and_reads_the_record_the_cli_prints(tmp_path):
    """`benchlib maxbatch`'s own parser turns the step's flags back into notebook 15's
    row (from 256); its figures are the metrics of the record the CLI names."""
    from benchlib.cli.flags import config_from
    from benchlib.cli.main import build_parser
    from benchlib.config import MemoryAndBatchConfig

    step = next(s for s in steps.plan(tmp_path) if s.name == "maxbatch_resnet50")
    args = build_parser().parse_args(step.argv[step.argv.index("maxbatch"):])
    assert config_from(args, MemoryAndBatchConfig).as_dict() == step.params
    assert (step.params["model"], step.params["device"], step.params["start_batch"]) == (
        "resnet50", "gpu", 256)
    assert args.table == "gpu-check-maxbatch" and args.outputs == str(tmp_path)
    metrics = {"largest_batch": 612, "smallest_batch_not_fitting": 613, "batches_tried": 12,
               "boundary": "The largest batch that trains is 612 (820.0 samples/s, peak 78 GiB)"}
    record = results.make_record(run_id="r1", table="gpu-check-maxbatch", notebook="maxbatch",
                                 params=step.params, env={}, started_at=results.now(),
                                 status="ok", metrics=metrics, details={})
    path = results.write_record(tmp_path / "results", record)
    figures = step.from_log(f"   256  yes ...\nrecord: {path}\n")
    assert {k: figures[k] for k in metrics} == metrics
    assert summary.headline(step.name, figures) == f"boundary {metrics['boundary']}, " \
        "batches_tried 12"


def test_the_headline_shows_energy_per_sample_or_says_it_is_unknown_and_lists_targets():
    figures = {"samples_per_s": 5600.0, "mfu": 0.138, "energy_j_per_sample": 0.061,
               "peak_mem_bytes": 3 * 2**30}
    assert summary.headline("resnet50_amp_bf16", figures) == (
        "samples_per_s 5,600.0, mfu 0.138, energy_j_per_sample 0.061, peak_mem 3.00 GiB")
    unknown = summary.headline("resnet50_fp32", {**figures, "energy_j_per_sample": None})
    assert "energy_j_per_sample unknown (no NVML energy counter read)" in unknown
    table = summary.summary_markdown([{"step": "lm_single", "status": "ok", "seconds": 50,
                                        "figures": {"target": "PASS: MFU 41.0% >= 40%"}}], {})
    assert table.rstrip().endswith("Targets:\n- lm_single: PASS: MFU 41.0% >= 40%")


def test_the_checkpoint_step_runs_every_mode_on_one_gpu_with_flags_its_worker_accepts(tmp_path):
    """The checkpoint step's command line, read by benchlib.workers.checkpoint_bench's own
    parser: every mode, on the GPU, NCCL as a group of one, its result where the check
    reads it; the same worker saves and restores on two gloo ranks in
    tests/test_checkpoint_modes.py."""
    from benchlib.config.choices import CHECKPOINT_MODES
    from benchlib.workers import checkpoint_bench
    from benchlib.workers.bootstrap import Plain, parse

    [step] = [s for s in steps.plan(tmp_path) if s.name == "checkpoint_modes"]
    argv = step.argv[step.argv.index("benchlib.workers.checkpoint_bench") + 1:]
    args = parse(Plain(None, checkpoint_bench.parser()).parser(), argv)
    assert (args.modes, args.device, args.backend, args.group_of_one) == (
        list(CHECKPOINT_MODES), "gpu", "nccl", True)
    assert (args.model, args.saves, args.restores) == ("gpt2-124m", 2, 2)
    assert args.result == step.result and step.part == 2
    assert step.timeout_s == 3 * step.expected_s and "checkpoints" in args.checkpoint_path


def test_part_4_runs_notebook_55_eager_cold_then_warm_on_one_cache(tmp_path):
    """Each model of params/compile_gpu.yaml: eager (compile off in its run.json), compiled
    into an empty cache it keeps, then compiled from that cache; the compiled steps' figures
    read against their model's eager result (the compile's seconds, speedup, break-even)."""
    part = [s for s in steps.plan(tmp_path) if s.part == 4]
    assert [s.name for s in part] == [f"compile_{m}_{side}" for m in ("resnet50", "gpt2_124m")
                                      for side in ("eager", "cold", "warm")]
    by = {s.name: s for s in part}
    eager, cold, warm = (by[f"compile_resnet50_{x}"].config[2] for x in ("eager", "cold", "warm"))
    assert (eager["compile"], cold["compile"], warm["compile"]) == ("off", "default", "default")
    assert cold["compile_cache_to"] == warm["compile_cache_from"] == \
        str(tmp_path / "work" / "compile-cache-resnet50")
    assert by["compile_resnet50_eager"].params["side"] == "eager"
    assert all(s.needs[0].endswith("_eager") for s in part if s.family == "compile")

    def result(first, rate):  # 3 warm-up steps, then steady at `rate` samples/s
        return {"metrics": {"samples_per_s": rate, "global_batch": 128},
                "details": {"steps_s": [first / 3] * 3 + [128 / rate] * 27}}
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "compile_resnet50_eager.json").write_text(json.dumps(result(1.5, 1000.0)))
    figures = by["compile_resnet50_cold"].figures(result(41.5, 1280.0))
    # 40 s of compile over (0.128 - 0.1) s saved a step: 1,429 steps
    assert figures["compile_s"] == pytest.approx(40.0) and figures["speedup"] == pytest.approx(1.28)
    assert figures["break_even_steps"] == pytest.approx(40 / (0.128 - 0.1))
    # one launch a side: no verdict, so no direction, only the point at the medians
    assert figures["break_even"] == ("not settled: 1,429 steps at the medians, but n=1 launch a "
                                     "side: an interval needs 5")
    json.dumps(figures)


def test_part_3_measures_the_comm_hooks_cost_on_cuda_from_the_scripts_own_lines(tmp_path):
    """Issue 38 item 7's GPU step: scripts/comm_hook_ab.py on CUDA, its figures read from
    the lines it prints (these from a run of it on this CPU, 1 launch of 10 steps)."""
    step = next(s for s in steps.plan(tmp_path) if s.name == "comm_hook_cost")
    assert step.part == 3 and step.argv[1:4] == ["-m", "scripts.comm_hook_ab", "--launches"]
    assert "--device cuda" in " ".join(step.argv) and step.from_log is not None
    log = ("load before: 3.58 on 2 cores\n"
           "launch 1: median step without the hook 9.347 ms, with 12.799 ms; paired ratio "
           "with/without 1.490\nload after: 4.20\n"
           "steps/s with/without the hook, medians: 0.730 (range 0.730-0.730, n=1 launches); "
           "verdict at a 2% threshold: inconclusive\n"
           "paired, with/without: 0.671 (range 0.671-0.671, n=1 launches); verdict at a 2% "
           "threshold: inconclusive\n")
    assert step.from_log(log) == {
        "plain_step_ms": [9.347], "hooked_step_ms": [12.799], "paired_speed_ratio": 0.671,
        "paired_low": 0.671, "paired_high": 0.671, "launches": 1, "verdict": "inconclusive"}


def test_the_plan_is_made_without_the_notebook_tooling(tmp_path):
    """The GPU image has neither nbformat nor papermill: the first call of 2026-11-28
    stopped at `import nbformat` before any step ran. The plan's tables are read from the
    registry's configs."""
    code = ("import sys\nfor m in ('nbformat', 'papermill', 'nbclient'): sys.modules[m] = None\n"
            "from benchlib.gpucheck import check\n"
            f"raise SystemExit(check.main([{str(tmp_path)!r}, '--part', '4', '--dry-run']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "compile_resnet50_warm" in done.stdout and "(part 4 of 6)" in done.stdout


def test_part_6_measures_fp8s_per_layer_tables_then_notebook_50s_ab_as_the_notebook_runs_it(
        tmp_path):
    """Issue 54 item 6: `benchlib fp8-layers` for gpt2-124m and gpt2-350m at 8 x 1,024
    tokens, then the float8 row of params/transformer_training_fp8_gpu.yaml (fp8_tensorwise,
    auto) through the study's own run, 3 launches a side; its figures read from what each
    writes (a table and an A/B here as they would be)."""
    part = [s for s in steps.plan(tmp_path) if s.part == 6]
    assert [s.name for s in part] == ["fp8_layers_gpt2_124m", "fp8_layers_gpt2_350m",
                                      "fp8_ab_gpt2_350m"]
    layers, ab = part[0], part[2]
    assert layers.argv[3:6] == ["fp8-layers", "gpt2-124m", "--batch-size"]
    assert ab.argv[1:6] == ["-m", "benchlib.gpucheck.fp8_ab",
                            "params/transformer_training_fp8_gpu.yaml", "fp8_tensorwise", "auto"]
    assert (ab.source.precision, ab.source.fp8_filter, ab.source.repeats) == (
        "fp8_tensorwise", "auto", 3)
    assert ab.params["model"] == "gpt2-350m" and ab.params["compile"] == "regional"
    row = {"shape": "8192x768x2304", "speedup": 1.3, "low": 1.2, "high": 1.4, "pays": True,
           "decision": "fp8", "torchao": True, "differs": False}
    table = {"model": "gpt2-124m", "batch_size": 8, "seq_len": 1024, "device_name": "H200",
             "precision": "fp8_tensorwise", "fp8": "native",
             "rows": [row, {**row, "shape": "8192x768x768", "speedup": 0.9, "low": 0.85,
                            "high": 0.95, "pays": False, "decision": "keep in bf16",
                            "torchao": True, "differs": True}]}
    figures = layers.figures(table)
    assert (figures["pay"], figures["differ"]) == (["8192x768x2304"], ["8192x768x768"])
    assert figures["8192x768x768_decision"] == "keep in bf16"
    assert summary.headline("fp8_layers_gpt2_124m", figures) == (
        "shapes 2, pay ['8192x768x2304'], differ ['8192x768x768'], fp8 native")
    said = ab.figures({"metrics": {"answer": "fp8_tensorwise x1.18 (range ...)",
                                   "fp8_speedup": 1.18, "compile_s": 21.0, "bf16_compile_s": 18.0}})
    assert said["fp8_speedup"] == 1.18 and said["mfu_fp8_weighted"] is None
    assert summary.headline("fp8_ab_gpt2_350m", said) == (
        "answer fp8_tensorwise x1.18 (range ...), compile_s 21, bf16_compile_s 18")
