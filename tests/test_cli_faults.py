"""Bad input and faults from the command line (issue 17): one line naming the parameter,
exit 2, nothing half-written; nothing the user asked for silently ignored."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def benchlib(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "benchlib", *args], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


def fake_sbatch(tmp_path) -> dict[str, str]:
    """PATH with an sbatch that prints job id 42 (--parsable) and submits nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 42\n")
    (bin_dir / "sbatch").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "BENCHLIB_OUTPUTS": str(tmp_path / "out")}


def slurm_script(*args, env=None):
    return benchlib("slurm-script", *args, "--no-capacity-check", env=env)


def test_an_unbalanced_quote_in_worker_args_is_one_line_and_writes_nothing(tmp_path):
    done = slurm_script("ddp", "--nodes", "2", "--devices", "1", "--worker-args",
                        "--path 'my data --model toynet", "--submit", env=fake_sbatch(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("benchlib slurm-script: worker_args: cannot split \"--path 'my data "
                           "--model toynet\" into arguments (no closing quotation); balance "
                           "its quotes\n")
    assert not (tmp_path / "out").exists()


def test_a_lightning_device_count_in_worker_args_that_contradicts_devices_is_refused(tmp_path):
    done = slurm_script("lightning", "--nodes", "2", "--devices", "4", "--worker-args",
                        "--gpus 2 --model toynet")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("benchlib slurm-script: worker_args: --gpus 2 conflicts with "
                           "--devices 4: the script passes the worker --devices and --nnodes "
                           "from slurm-script's --devices and --nodes; give the count there "
                           "only\n")
    done = slurm_script("lightning", "--nodes", "2", "--devices", "4",
                        "--worker-args=--nnodes=3 --model toynet")
    assert done.returncode == 2 and "--nnodes 3 conflicts with --nodes 2" in done.stderr
    same = slurm_script("lightning", "--nodes", "2", "--devices", "4", "--worker-args",
                        "--gpus 4 --model toynet")
    assert same.returncode == 0, same.stderr
    assert "--gpus 4 --model toynet --devices 4 --nnodes 2" in same.stdout


def test_a_rank_layout_in_torchrun_worker_args_is_refused(tmp_path):
    done = slurm_script("ddp", "--nodes", "2", "--devices", "4", "--worker-args",
                        "--world-size 8")
    assert done.returncode == 2
    assert done.stderr == ("benchlib slurm-script: worker_args: --world-size is set by "
                           "torchrun's layout in the script (--nodes x --devices ranks); "
                           "leave it out\n")


def test_submitted_scripts_each_get_a_name_of_their_own_under_the_outputs_folder(tmp_path):
    env = fake_sbatch(tmp_path)
    kept = []
    for _ in range(2):
        done = slurm_script("ddp", "--nodes", "2", "--devices", "1", "--submit", env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "42\n"
        kept.append(Path(done.stderr.split("script: ")[1].split("\n")[0]))
    assert kept[0] != kept[1]
    assert sorted(kept) == sorted((tmp_path / "out" / "slurm").glob("benchlib-ddp-*.sbatch"))
    log = tmp_path / "out" / "slurm" / "%x-%j.log"
    assert all(f"#SBATCH --output={log}\n" in s.read_text() for s in kept)


def test_doctor_refuses_a_rank_or_world_size_without_an_init_method():
    line = ("--rank and --world-size only mean something with --init-method tcp://HOST:PORT "
            "(this process as one rank); without it doctor starts --nproc ranks here\n")
    for args, name in ((["--world-size", "2", "--rank", "2"], "rank"),
                       (["--world-size", "0"], "world_size"), (["--rank", "9"], "rank")):
        done = benchlib("doctor", "--device", "cpu", *args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == f"benchlib doctor: {name}: {line}"


def test_doctor_with_an_init_method_checks_its_rank_and_refuses_local_launch_flags():
    tcp = ["doctor", "--device", "cpu", "--init-method", "tcp://127.0.0.1:29999"]
    done = benchlib(*tcp, "--rank", "9")
    assert done.returncode == 2
    assert done.stderr == "benchlib doctor: rank: must be in [0, 2), got 9\n"
    done = benchlib(*tcp, "--world-size", "0")
    assert done.returncode == 2
    assert done.stderr == "benchlib doctor: world_size: must be >= 1, got 0\n"
    done = benchlib(*tcp, "--nproc", "4")
    assert done.returncode == 2
    assert done.stderr == ("benchlib doctor: nproc: --nproc is for the ranks doctor starts "
                           "here; with --init-method this process is one rank (--rank, "
                           "--world-size, the port in the init method)\n")


def test_a_rank_count_below_one_names_nproc():
    done = benchlib("allreduce", "--device", "cpu", "--nproc", "0")
    assert done.returncode == 2
    assert done.stderr == "benchlib allreduce: nproc: must be >= 1, got 0\n"


def test_doctors_node_count_is_checked_and_srun_wants_a_slurm_job(tmp_path):
    done = benchlib("doctor", "--device", "cpu", "--health", "--nnodes", "0")
    assert (done.returncode, done.stderr) == (2, "benchlib doctor: nnodes: must be >= 1, got 0\n")
    done = benchlib("doctor", "--device", "cpu", "--init-method", "tcp://127.0.0.1:29999",
                    "--nnodes", "2")
    assert done.returncode == 2 and done.stderr.startswith(
        "benchlib doctor: nnodes: --nnodes is for the ranks doctor starts here; ")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run([sys.executable, "-m", "benchlib", "doctor", "--device", "cpu",
                           "--health", "--launcher", "srun", "--outputs", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith(
        "benchlib doctor: launcher: srun needs a Slurm allocation")
    assert list(tmp_path.iterdir()) == []  # no record, no log folder


def test_a_data_path_that_is_a_file_is_called_a_file(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("not data\n")
    said = f"path: {file} is a file, not a folder; give the folder that holds (or is to hold) " \
           "the data sets\n"
    for command in (["io", "1", "cpu", "--dataset", "fashion-mnist"],
                    ["data", "--dataset", "mydataset", "--size", "10", "--offline"],
                    ["calibrate", "--steps", "1", "--rounds", "1"]):
        done = benchlib(*command, "--path", str(file))
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == f"benchlib {command[0]}: {said}"
    assert file.read_text() == "not data\n"


def test_the_data_hint_is_shell_quoted(tmp_path):
    folder = tmp_path / "my data"
    done = benchlib("io", "1", "cpu", "--dataset", "fashion-mnist", "--path", str(folder),
                    env={"BENCHLIB_OUTPUTS": str(tmp_path / "out")})
    assert done.returncode == 2
    assert done.stderr == (f"benchlib io: path: {folder} has no fashion-mnist data; run "
                           f"`python -m benchlib data --path '{folder}' --offline` first\n")


def test_a_damaged_manifest_is_named_not_a_traceback(tmp_path):
    (tmp_path / "manifest.json").write_text('{"fashion-mnist": ')
    done = benchlib("io", "1", "cpu", "--dataset", "fashion-mnist", "--path", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"benchlib io: path: {tmp_path / 'manifest.json'} is not "
                                  "valid JSON (")
    assert done.stderr.endswith(f"; remove it and run `python -m benchlib data --path "
                                f"{tmp_path} --offline` first\n")


def test_slurm_script_refuses_a_port_or_restart_count_torchrun_would_fail_on():
    done = slurm_script("ddp", "--nodes", "1", "--devices", "1", "--port", "70000")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "benchlib slurm-script: port: must be in 1024-65535, got 70000\n"
    done = slurm_script("elastic", "--nodes", "1", "--devices", "1", "--max-restarts", "-1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "benchlib slurm-script: max_restarts: must be >= 0, got -1\n"


def test_overhead_with_no_rows_is_one_line():
    done = benchlib("overhead", "--rows", "0")
    assert done.returncode == 2
    assert done.stderr == "benchlib overhead: rows: must be >= 1, got 0\n"


def test_a_launch_that_times_out_exits_1_not_0(tmp_path):
    done = benchlib("doctor", "--device", "cpu", "--timeout", "1",
                    env={"BENCHLIB_OUTPUTS": str(tmp_path / "out")})
    assert done.returncode == 1
    assert done.stderr == (f"benchlib doctor: timed out after 1 s; stopped all ranks; logs: "
                           f"{tmp_path / 'out' / 'logs' / 'doctor'}\n")


def test_a_launch_error_ends_a_command_with_75_only_for_preemption():
    from benchlib.errors import LaunchError

    assert LaunchError("preempted", 0, "h", 75).status() == 75
    assert [LaunchError("x", 0, "h", code).status() for code in (None, 0, -9, 1)] == [1] * 4


def test_an_outputs_folder_that_is_a_file_is_called_a_file(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("x\n")
    plan = tmp_path / "p.yaml"
    plan.write_text(f"name: t\nnotebook: {ROOT / 'benchlib' / 'resources' / 'trivial.ipynb'}\n")
    said = (f"outputs: {file} is a file, not a folder; give --outputs (or BENCHLIB_OUTPUTS) a "
            "folder, new or one that holds outputs\n")
    for command in (["sweep", str(plan), "--dry-run", "--outputs", str(file)],
                    ["report", "--no-analysis", "--outputs", str(file)]):
        done = benchlib(*command)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == f"benchlib {command[0]}: {said}"
    done = benchlib("slurm-script", "ddp", "--nodes", "1", "--devices", "1",
                    "--no-capacity-check", "--submit", env={"BENCHLIB_OUTPUTS": str(file)})
    assert done.returncode == 2 and done.stderr == f"benchlib slurm-script: {said}"
    assert file.read_text() == "x\n"


def test_slurm_task_with_a_file_that_is_not_a_plan_is_one_line(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text("name: t\n")
    done = benchlib("slurm-task", str(plan), "0", "--outputs", str(tmp_path / "out"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"benchlib slurm-task: plan: {plan} is not a Slurm sweep's "
                                  "plan.json (JSONDecodeError: ")
    done = benchlib("slurm-task", str(tmp_path / "none.json"), "0")
    assert done.returncode == 2
    assert done.stderr == (f"benchlib slurm-task: plan: cannot read {tmp_path / 'none.json'} "
                           "(No such file or directory)\n")


def test_options_nothing_would_use_are_refused_not_dropped(tmp_path):
    done = slurm_script("lightning", "--nodes", "2", "--devices", "2", "--max-restarts", "3")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("benchlib slurm-script: max_restarts: only torchrun restarts ranks "
                           "(trainers ddp, elastic); lightning runs a task per device under "
                           "srun, which restarts nothing\n")
    done = benchlib("run", str(ROOT / "benchlib" / "resources" / "trivial.ipynb"), "-p", "x", "1",
                    "-p", "x", "2", env={"BENCHLIB_OUTPUTS": str(tmp_path / "out")})
    assert done.returncode == 2 and not (tmp_path / "out").exists()
    assert done.stderr == "benchlib run: param: x given more than once; give each parameter once\n"


def test_an_empty_node_list_is_refused_not_taken_for_the_default():
    base = ["project", "--samples-per-s", "100", "--batch-size", "32", "--model", "resnet50",
            "--intra-busbw", "100", "--inter-busbw", "10", "--devices-per-node", "8",
            "--input-ceiling", "none"]
    for nodes in ("", "1,,2"):
        done = benchlib(*base, "--nodes", nodes)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (f"benchlib project: nodes: {nodes!r} is not a comma-separated "
                               "list of counts\n")


def test_a_relative_data_path_is_the_working_directorys_for_data_and_io_alike(tmp_path):
    """`data --path d` wrote under the checkout while `io --path d` read ./d."""
    run = lambda *args: subprocess.run([sys.executable, "-m", "benchlib", *args],  # noqa: E731
                                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    made = run("data", "--path", "d", "--offline", "--dataset", "fashion-mnist",
               "--fashion-size", "200")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "d" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte").exists()
    assert f"manifest: {tmp_path / 'd'}" in made.stdout
    read = run("io", "1", "cpu", "--path", "d", "--dataset", "fashion-mnist", "--mode",
               "traverse", "--repeats", "1", "--warmup-steps", "1", "--outputs", "out")
    assert read.returncode == 0, read.stderr
    assert (tmp_path / "out" / "results" / "io").is_dir()
