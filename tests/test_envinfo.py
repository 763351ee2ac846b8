import json
import os
import platform
import socket

from benchlib.cli import main
from benchlib.core import envinfo


def test_collect_reports_machine_software_and_torch(monkeypatch):
    env = envinfo.collect()
    assert env["hostname"] == socket.gethostname()
    assert env["kernel"] == platform.uname().release
    assert env["cpu_logical"] == os.cpu_count() and env["memory_bytes"] > 2**30
    assert env["packages"]["torch"] and env["packages"]["torchvision"]
    assert env["collect_env"]["torch_version"].startswith(env["packages"]["torch"])
    assert "pip_packages" not in env["collect_env"]
    import torch

    assert env["cuda_available"] is torch.cuda.is_available()
    assert len(env["gpus"]) == torch.cuda.device_count()
    assert env["torch_threads"] >= 1


def test_performance_variables_are_recorded(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    env = envinfo.collect()
    assert env["env_vars"]["SLURM_JOB_ID"] == "4242" and env["env_vars"]["OMP_NUM_THREADS"] == "1"
    assert "UNRELATED_VARIABLE" not in env["env_vars"]
    assert env["allocator"]["glibc_tunables"] == "glibc.malloc.trim_threshold=1"
    assert env["allocator"]["name"] == "glibc"  # nothing preloaded in the test process


def test_cli_env_prints_a_summary_and_json(capsys):
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["host", socket.gethostname()]
    assert "allocator" in out and "torch / torchvision / lightning" in out
    assert main(["env", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hostname"] == socket.gethostname()


def test_device_name_is_the_cpu_model_on_a_cpu_not_cpu():
    import re
    from pathlib import Path

    import torch

    name = envinfo.device_name(torch.device("cpu"))
    listed = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    assert name == (listed.group(1).strip() if listed else platform.processor() or platform.machine())
    assert name != "cpu" and envinfo.device_name("cpu") == name
