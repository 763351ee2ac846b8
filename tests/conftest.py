import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchlib.core import envinfo

ROOT = Path(__file__).resolve().parents[1]
TRIVIAL = ROOT / "benchlib" / "resources" / "trivial.ipynb"

# `make test` runs two pytest-xdist workers (most of the suite's time is waiting: on ranks
# joining, Slurm's queue, kernels starting). Each worker gets a TMPDIR of its own, so one
# worker's sweep never clears the kernel folders another's test is looking at.
# One thread a process: the suite runs several processes at once (xdist workers, the ranks
# and kernels they start) on two cores, where more threads only wait for each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# as `python -m benchlib` does (benchlib/__main__.py), for the commands the tests run in-process
sys.modules.setdefault("rfc3987_syntax", None)

if os.environ.get("PYTEST_XDIST_WORKER"):
    _tmp = Path("/tmp") / f"benchlib-tests-{os.environ['PYTEST_XDIST_WORKER']}"
    _tmp.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(_tmp)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


# Tests that must not run beside each other go to one worker: the two-node Slurm cluster
# is one (a test fills its nodes on purpose); and the tests that read a module-scoped
# fixture (a JupyterLab server, a run shared by a module's tests) go to one worker per
# module, so that the fixture is made once, not once on each worker that runs a reader
# (test_compile's run was launched twice so, 24 CPU s). A group a test names itself stands.
def _reads_a_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(defs and defs[-1].scope == "module"
                                    for defs in info.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into node ids
def pytest_collection_modifyitems(config, items):
    # pytest 9.2 with pytest-xdist 3.8 ignores these groups without a word (xdist issue
    # #1386): constraints.txt pins pytest 9.1, and test_packaging.py checks it
    for item in items:
        if "slurm_cluster" in item.fixturenames or item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.xdist_group("slurm"))
        elif item.get_closest_marker("xdist_group") is None and _reads_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and the children it has waited for."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With BENCHLIB_TEST_CPU=FILE, each test's CPU seconds (its setup, call and teardown,
    the processes it started included) appended to FILE as `seconds node-id`: where the
    suite's CPU goes (`sort -rn FILE | head`); a module fixture's launch counts in the
    test that set it up."""
    target = os.environ.get("BENCHLIB_TEST_CPU")
    start = _cpu_s() if target else 0.0
    yield
    if target:
        with open(target, "a") as f:
            f.write(f"{_cpu_s() - start:.2f} {item.nodeid}\n")


@pytest.fixture
def outputs(tmp_path, monkeypatch) -> Path:
    """A private outputs folder: `outputs/...` parameters resolve into it too."""
    out = tmp_path / "outputs"
    monkeypatch.setenv("BENCHLIB_OUTPUTS", str(out))
    return out


@pytest.fixture
def tmpdir_short(monkeypatch) -> Iterator[Path]:
    """A TMPDIR of its own for the sweeps and kernels a test starts (their folders go there),
    short enough for Unix socket paths (108 bytes)."""
    where = Path(tempfile.mkdtemp(prefix="bk", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(where))
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(autouse=True)
def fresh_env_capture():
    """envinfo.collect() caches per process; tests that change variables need a fresh one.
    And a command run in this process with --outputs sets BENCHLIB_OUTPUTS for the rest of
    the process (cli/common.outputs, as a command should): undone after each test, so that
    no later test on the same worker resolves `outputs/` into another test's folder."""
    envinfo.collect.cache_clear()
    before = os.environ.get("BENCHLIB_OUTPUTS")
    yield
    envinfo.collect.cache_clear()
    if before is None:  # monkeypatch.delenv would record nothing for a variable not set
        os.environ.pop("BENCHLIB_OUTPUTS", None)
    else:
        os.environ["BENCHLIB_OUTPUTS"] = before


@pytest.fixture(scope="module")
def headless_chromium():
    """One headless chromium for a module's browser tests (tests/browser.py)."""
    from browser import chromium_browser

    with chromium_browser() as browser:
        yield browser


def write_params(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def small_data(tmp_path_factory) -> Path:
    """All data sets, generated once for the session: 600 FashionMNIST, 300 MyDataSet,
    256 CIFAR-10, 20,000 token ids below gpt-tiny's vocabulary of 2,048."""
    from benchlib.config import DataPrepConfig
    from benchlib.data import prepare

    path = tmp_path_factory.mktemp("data")
    prepare.prepare(DataPrepConfig(path=str(path), size=300, fashion_size=600, cifar_size=256,
                                imagefolder_size=40, tokenfile_size=20_000,
                                tokenfile_vocab=2048, offline=True))
    return path


SLURM_SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"


def _slurm_env(slurm_dir: Path) -> dict[str, str]:
    """os.environ plus what the cluster's env file sets (SLURM_CONF, PATH with the shims)."""
    dumped = subprocess.run(["bash", "-c", 'set -a; . "$1"; env -0', "_", str(slurm_dir / "env")],
                            capture_output=True, check=True).stdout
    return dict(item.decode().split("=", 1) for item in dumped.split(b"\0") if item)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real two-node Slurm cluster (nodes n1, n2) from scripts/slurm-cluster.sh.

    Reuses a healthy cluster in $BENCHLIB_SLURM_DIR (and leaves it running); otherwise
    starts one and stops it at the end of the session. Yields the environment to pass as
    `env=` to subprocesses that call sbatch, srun, squeue or scontrol. Without root the
    tests are skipped, unless BENCHLIB_REQUIRE_SLURM=1 (CI), where they fail.
    """
    slurm_dir = Path(os.environ.get("BENCHLIB_SLURM_DIR", "/tmp/benchlib-slurm"))
    required = os.environ.get("BENCHLIB_REQUIRE_SLURM") == "1"
    status = subprocess.run([str(SLURM_SCRIPT), "status"], capture_output=True, text=True,
                            check=False)
    started = False
    if not ((slurm_dir / "env").exists() and status.returncode == 0):
        if os.geteuid() != 0 and not required:
            pytest.skip("the Slurm test cluster needs root (scripts/slurm-cluster.sh start)")
        start = subprocess.run([str(SLURM_SCRIPT), "start"], capture_output=True, text=True,
                               timeout=600, check=False)
        if start.returncode != 0:
            output = start.stdout + start.stderr
            subprocess.run([str(SLURM_SCRIPT), "stop"], capture_output=True, timeout=120,
                           check=False)
            if start.returncode == 77 and not required:  # the script's "needs root"
                pytest.skip(f"Slurm test cluster not started: {output.strip()}")
            pytest.fail(f"scripts/slurm-cluster.sh start failed:\n{output}", pytrace=False)
        started = True
    yield _slurm_env(slurm_dir)
    if started:
        subprocess.run([str(SLURM_SCRIPT), "stop"], capture_output=True, timeout=120,
                       check=False)


def write_wrong_shapes(results_dir: Path, good: dict) -> list[tuple[Path, str]]:
    """Three records of the wrong shape made from the record `good`, beside it: a list of
    params, a testbed without an id, a schema newer than this benchlib's. Returns each
    file with the reason it is skipped for."""
    from benchlib.records import results

    bed = {k: v for k, v in good["testbed"].items() if k != "id"}
    newer = results.SCHEMA_VERSION + 1
    shapes = {
        "params_list": ({**good, "params": [1, 2]}, "params is a list, not a mapping"),
        "testbed_without_id": ({**good, "testbed": bed}, "testbed has no id"),
        "from_the_future": ({**good, "schema_version": newer},
                            f"schema_version {newer} is newer than this benchlib reads "
                            f"({results.SCHEMA_VERSION}); update benchlib to read it"),
    }
    written = []
    for stem, (record, why) in shapes.items():
        path = results_dir / good["table"] / f"{stem}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**record, "run_id": stem}))
        written.append((path, why))
    return written
