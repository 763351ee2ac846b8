"""scripts/gpu-check.sh: the plan, the refusal without CUDA, and how a step's outcome,
record and summary row are made (with real subprocesses; the GPU run itself is in
docs/gpu-check/)."""

import json
import subprocess
import sys
from contextlib import redirect_stdout

from benchlib.gpucheck import check as gpucheck
from benchlib.gpucheck import steps
from benchlib.records import results
from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})


def test_dry_run_lists_every_gpu_path_the_check_must_cover(tmp_path):
    done = script(str(tmp_path / "out"), "--dry-run")
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()[:-1]
             if not line.startswith(" ")]
    assert names[:4] == ["env", "data", "doctor_nccl", "allreduce_nccl"]
    for name in ("calibrate_toynet", "calibrate_resnet18", "resnet50_fp32", "resnet50_tf32",
                 "resnet50_amp_bf16", "resnet50_amp_bf16_cl", "resnet50_amp_bf16_cl_compile",
                 "ddp_nccl", "dp", "lightning", "elastic_restart", "jax_resnet50"):
        assert name in names
    # raw's settings in one process; preload against preload_batched over 5 launches
    assert [n for n in names if n.startswith("io_")] == ["io_raw", "io_ab"]
    assert done.stdout.count("--modes train,traverse --workers 0,4") == 2
    assert "--variants preload,preload_batched --launches 5" in done.stdout
    assert "--backend nccl --group-of-one" in done.stdout and "--max-restarts 1" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("18 steps (part 1 of 3), about ")
    assert done.stdout.splitlines()[-1].endswith("fits in the 540 s budget")
    assert not (tmp_path / "out").exists()


def test_part_2_lists_the_language_model_the_outside_models_and_the_largest_batch(tmp_path):
    done = script(str(tmp_path / "out"), "--dry-run", "--part", "2")
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()[:-1]
             if not line.startswith(" ")]
    assert names == ["env", "lm_single", "lm_fsdp2", "lm_single_ac_selective",
                     "lm_single_ac_full", "timm_resnet50", "hf_gpt2", "ddp_trace",
                     "hta_breakdown", "maxbatch_resnet50"]
    assert "--nproc-per-node 1 --max-restarts 0 -m benchlib.workers.fsdp2 --config" in done.stdout
    assert "-m benchlib maxbatch --model resnet50 --model-args {} --depth 20 --alpha 48 " \
        "--dataset imagefolder --device gpu" in done.stdout
    assert "--start-batch 256 --max-batch 8192 --steps 4 --warmup-steps 1" in done.stdout
    assert '"model": "timm:resnet50"' in done.stdout and '"model": "hf:gpt2"' in done.stdout
    assert "--group-of-one --log-dir" in done.stdout and '"export_trace": true' in done.stdout
    assert f"-m benchlib.diagnose.traces {tmp_path / 'out' / 'logs' / 'ddp_trace_ranks' / 'trace'}" \
        in done.stdout
    assert done.stdout.splitlines()[-1].startswith("10 steps (part 2 of 3), about ")
    for bad in ("4", "2,2", "two"):
        assert script(str(tmp_path), "--dry-run", "--part", bad).stderr == (
            "gpu-check: part: must be 1 to 3, or several once each in the order to run them "
            f"(2,1), got {bad}\n")
    both = script(str(tmp_path / "out"), "--dry-run", "--part", "2,1")
    both_names = [line.split()[0] for line in both.stdout.splitlines()[:-1]
                  if not line.startswith(" ")]
    assert both_names[:len(names)] == names and both_names[len(names)] == "data"
    assert both_names.count("env") == 1 and "resnet50_fp32" in both_names
    assert both.stdout.splitlines()[-1].startswith("27 steps (parts 2,1 in that order), about ")
    chosen = [s.name for s in gpucheck.select(gpucheck.plan(tmp_path), None, 2)]
    assert "data" not in chosen and "resnet50_fp32" not in chosen and chosen[0] == "env"


def test_without_cuda_it_says_so_in_one_line_exits_2_and_writes_nothing(tmp_path):
    done = script(str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr == ("gpu-check: device: no CUDA device here; the GPU check needs one "
                           "(--dry-run prints the plan anywhere)\n")
    assert not (tmp_path / "out").exists()


def test_only_names_an_unknown_step_and_keeps_env_and_data_when_needed(tmp_path):
    done = script(str(tmp_path), "--only", "lightnin,bogus", "--dry-run")
    assert done.returncode == 2
    assert done.stderr.startswith("gpu-check: only: 'bogus' matches no step; steps are env, data,")
    chosen = [s.name for s in gpucheck.select(gpucheck.plan(tmp_path), "io_raw,lightning")]
    assert chosen == ["env", "data", "lightning", "io_raw"]


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
                           30, {}, from_log=steps.maxbatch_figures)
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
    table = gpucheck.summary_markdown([ok, failed, timed_out], env)
    assert "| broken | failed |" in table and "exit 3: first" in table
    assert table.rstrip().endswith("1 of 3 steps ok.")


def test_resnet50_figures_hold_mfu_against_the_detected_devices_peak_and_the_target():
    figures = steps._resnet50_figures("amp_bf16")(
        {"metrics": {"samples_per_s": 3000.0, "flops_per_sample": 24.6e9,
                     "device_name": "NVIDIA H100 80GB HBM3"}})
    assert abs(figures["mfu"] - 3000 * 24.6e9 / 989.4e12) < 1e-9
    assert figures["target_met"] is True and figures["target_samples_per_s"] == 2800.0
    unknown = steps._resnet50_figures("amp_bf16")(
        {"metrics": {"samples_per_s": 10.0, "flops_per_sample": 1e9, "device_name": "cpu"}})
    assert unknown["mfu"] is None and "target_met" not in unknown
    json.dumps(figures)  # a record can hold it


def test_each_part_fits_its_default_budget_in_one_call_and_each_box_leaves_room():
    plan = steps.plan(ROOT / "outputs" / "gpu-check")
    for part in range(1, steps.PARTS + 1):  # a call: 600 s
        assert sum(s.expected_s for s in steps.part_of(plan, part)) <= gpucheck.BUDGET_S <= 540
    assert {s.part for s in plan} == {0, 1, 2, 3}
    for s in plan:
        assert s.timeout_s >= 2 * s.expected_s, s.name  # an honest box: twice what it took


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
    figures = gpucheck._io_figures(log.read_text())
    assert figures["train_w0_samples_per_s"] > 0 and figures["traverse_w0_samples_per_s"] > 0
    assert (figures["traverse_w0_samples_per_s_p10"] <= figures["traverse_w0_samples_per_s"]
            <= figures["traverse_w0_samples_per_s_p90"])
    headline = gpucheck._headline("io_raw", figures)
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


def test_a_misspelt_name_in_the_gpu_table_is_refused_not_dropped(tmp_path, monkeypatch):
    import pytest

    from benchlib.errors import ConfigError

    table = (ROOT / steps.GPU_TABLE).read_text().replace("timed_steps: 5}", "timed_step: 5}")
    (tmp_path / "params").mkdir()
    (tmp_path / steps.GPU_TABLE).write_text(table)
    monkeypatch.setenv("BENCHLIB_ROOT", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^timed_step: not a parameter of notebook 40 "
                                          r"\(params/framework_comparison_gpu.yaml, row 1\)"):
        steps.gpu_rows()


def _copy_params(tmp_path, monkeypatch, **edits):
    """The project's parameter tables under a root of their own, each `file=(old, new)`
    replaced once."""
    (tmp_path / "params").mkdir()
    for table in (ROOT / "params").glob("*.yaml"):
        (tmp_path / "params" / table.name).write_text(table.read_text())
    for name, (old, new) in edits.items():
        file = tmp_path / "params" / f"{name}.yaml"
        assert file.read_text().count(old) == 1, old
        file.write_text(file.read_text().replace(old, new))
    monkeypatch.setenv("BENCHLIB_ROOT", str(tmp_path))


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


def test_the_lm_target_row_states_mfu_by_the_analytic_count_the_peak_and_pass_or_fail(
        tmp_path):
    cfg = next(c for c in steps.lm_rows() if steps._is_lm_target(c))
    step = next(s for s in steps.plan(tmp_path) if s.name == "lm_single")
    flops = 6 * 85e6 + 12 * 12 * 768 * 1024
    metrics = {"samples_per_s": 700.0, "tokens_per_sample": 1024, "world_size": 1,
               "flops_per_token_analytic": flops, "device_name": "NVIDIA H100 80GB HBM3"}
    figures = step.figures({"metrics": metrics})
    assert abs(figures["mfu"] - 700 * 1024 * flops / 989.4e12) < 1e-12
    assert figures["mfu_peak_flops"] == 989.4e12 and figures["target_mfu"] == 0.40
    assert figures["target_met"] is True and figures["target"].startswith("PASS: MFU 45.2% >= 40%")
    assert "by 6N + 12·L·H·Q·T FLOPs per token" in figures["target"]
    assert "dense amp_bf16 peak 989.4 TFLOP/s" in figures["target"]
    slow = step.figures({"metrics": {**metrics, "samples_per_s": 300.0}})
    assert slow["target_met"] is False and slow["target"].startswith("FAIL: MFU 19.4% < 40%")
    cpu = step.figures({"metrics": {**metrics, "device_name": "cpu"}})
    assert cpu["mfu"] is None and cpu["target"].startswith("NOT JUDGED: MFU unknown")
    others = [s for s in steps.plan(tmp_path) if s.name.startswith("lm_") and s.name != step.name]
    assert others and all("target" not in s.figures({"metrics": metrics}) for s in others)
    assert cfg.seq_len == 1024 and cfg.precision == "amp_bf16" and cfg.compile == "default"
    json.dumps(figures)  # a record can hold it


def test_the_lm_step_trains_here_and_its_figures_hold_tokens_and_both_flop_counts(tmp_path):
    """lm_single's own command on this CPU, its run.json changed to a model that fits
    here: tokens/s from the worker's result, and the two FLOP counts within 5%."""
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
    f = outcome["figures"]
    assert f["tokens_per_s"] == f["samples_per_s"] * 32 > 0
    assert abs(f["flop_count_ratio"] - 1) < 0.05 and f["mfu"] is None
    assert f["target"].startswith("NOT JUDGED") and f["energy_j_per_sample"] is None


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
    assert gpucheck._headline(step.name, figures) == f"boundary {metrics['boundary']}, " \
        "batches_tried 12"


def test_the_headline_shows_energy_per_sample_or_says_it_is_unknown_and_lists_targets():
    figures = {"samples_per_s": 5600.0, "mfu": 0.138, "energy_j_per_sample": 0.061,
               "peak_mem_bytes": 3 * 2**30}
    assert gpucheck._headline("resnet50_amp_bf16", figures) == (
        "samples_per_s 5,600.0, mfu 0.138, energy_j_per_sample 0.061, peak_mem 3.00 GiB")
    unknown = gpucheck._headline("resnet50_fp32", {**figures, "energy_j_per_sample": None})
    assert "energy_j_per_sample unknown (no NVML energy counter read)" in unknown
    table = gpucheck.summary_markdown([{"step": "lm_single", "status": "ok", "seconds": 50,
                                        "figures": {"target": "PASS: MFU 41.0% >= 40%"}}], {})
    assert table.rstrip().endswith("Targets:\n- lm_single: PASS: MFU 41.0% >= 40%")
