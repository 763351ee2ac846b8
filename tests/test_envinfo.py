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


def test_a_slurm_testbed_names_torchs_cuda_build_without_importing_torch(tmp_path):
    """The login node's side of a Slurm sweep reads torch.version.cuda from torch's
    version.py; a process that imports torch gets the same from collect()."""
    import subprocess
    import sys
    import textwrap

    probe = textwrap.dedent("""
        import json, sys
        from benchlib.core import envinfo
        from benchlib.records import testbed
        bed = testbed.slurm(None)  # no sinfo needed: what cannot be known stays None
        print(json.dumps({"imported": "torch" in sys.modules, "identity": bed["identity"]}))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    seen = json.loads(out)
    assert seen["imported"] is False
    env = envinfo.collect()
    assert seen["identity"]["cuda"] == env["torch_cuda"]
    assert seen["identity"]["torch"] == env["packages"]["torch"]
    # the file as torch writes it, a CPU build's, and one that says nothing literal
    version = tmp_path / "version.py"
    version.write_text("from typing import Optional\n__version__ = '2.14.1+cu130'\n"
                       "cuda: Optional[str] = '13.0'\n")
    assert envinfo.cuda_of_version_file(version) == (True, "13.0")
    version.write_text("cuda = None\nhip = None\n")
    assert envinfo.cuda_of_version_file(version) == (True, None)
    version.write_text("cuda = get_cuda()\n")
    assert envinfo.cuda_of_version_file(version) == (False, None)
    assert envinfo.cuda_of_version_file(tmp_path / "absent.py") == (False, None)


def test_benchlibs_commands_read_notebooks_without_rfc3987_syntax():
    """`python -m benchlib` goes without the IRI syntax check jsonschema would import with
    nbformat (its Lark grammars cost 1.5 to 2 CPU s a process here); notebooks still load."""
    import subprocess
    import sys
    import textwrap

    probe = textwrap.dedent("""
        import runpy, sys
        sys.argv = ["benchlib", "run", "10_single_device_io", "-p", "nosuch", "1"]
        try:
            runpy.run_module("benchlib", run_name="__main__")
        except SystemExit as e:
            print(e.code, "nbformat" in sys.modules, sys.modules.get("rfc3987_syntax", "absent"))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["2", "True", "None"]
    assert "nosuch: not a parameter of 10_single_device_io.ipynb" in done.stderr
