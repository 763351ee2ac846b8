from pathlib import Path

import pytest

from benchlib import envinfo

ROOT = Path(__file__).resolve().parents[1]
TRIVIAL = ROOT / "benchlib" / "resources" / "trivial.ipynb"


@pytest.fixture
def outputs(tmp_path, monkeypatch) -> Path:
    """A private outputs folder: `outputs/...` parameters resolve into it too."""
    out = tmp_path / "outputs"
    monkeypatch.setenv("BENCHLIB_OUTPUTS", str(out))
    return out


@pytest.fixture(autouse=True)
def fresh_env_capture():
    """envinfo.collect() caches per process; tests that change variables need a fresh one."""
    envinfo.collect.cache_clear()
    yield
    envinfo.collect.cache_clear()


def write_params(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def small_data(tmp_path_factory) -> Path:
    """All data sets, generated once for the session: 600 FashionMNIST, 300 MyDataSet,
    256 CIFAR-10."""
    from benchlib import data
    from benchlib.config import DataPrepConfig

    path = tmp_path_factory.mktemp("data")
    data.prepare(DataPrepConfig(path=str(path), size=300, fashion_size=600, cifar_size=256,
                                imagefolder_size=40,
                                offline=True))
    return path
