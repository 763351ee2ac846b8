"""The study registry (benchlib/config/studies.py) as the one place a study is written
down: a built-in study added by docs/studies.md's "Adding a study", followed as written in
a copy of the repository, needs its five files (plus its parameter tables and docs) and
is then swept, analysed and published; and the smoke study has a row of every study."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from benchlib.config import CONFIGS, studies
from benchlib.config.training import TrainingConfig
from benchlib.errors import ConfigError
from benchlib.runs.params import load_plan

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "studies.md"
NAME, CLASS, NN = "coin_flip", "CoinFlipConfig", "61"
QUESTION = "How often does a fair coin come up heads?"


# ---------------------------------------------------------------- the name, written once

def test_a_config_class_and_an_analysis_module_read_their_study_from_the_registry():
    for entry in studies.STUDIES:
        cls = studies.config_class(entry)
        assert CONFIGS[entry.config] is cls and cls.study == entry.name
        assert studies.of_config(cls) is entry
        assert dataclasses.is_dataclass(cls) and "study" not in cls.field_names()
        if entry.analysis:
            assert __import__(entry.analysis, fromlist=["STUDY"]).STUDY == entry.name
    assert TrainingConfig.study == "" and studies.of_config(TrainingConfig) is None  # a piece
    with pytest.raises(ConfigError, match=r"^analysis: no study of the registry names "
                       r"benchlib\.analysis\.claims as its analysis module"):
        studies.of_analysis("benchlib.analysis.claims")


def test_no_study_name_is_written_beside_the_registry_as_a_constant():
    """No config sets a `study` of its own and no module keeps a STUDY string: each reads
    the registry's."""
    written = re.compile(r'^\s*(?:study\s*(?::\s*ClassVar\[str\])?|STUDY)\s*=\s*["\'](\w+)["\']',
                         re.M)
    names = {s.name for s in studies.STUDIES}
    found = [f"{p.relative_to(ROOT)}: {name}" for p in sorted((ROOT / "benchlib").rglob("*.py"))
             for name in written.findall(p.read_text()) if name in names]
    assert found == [], found


def test_an_entry_whose_config_module_lacks_its_class_is_one_line_naming_both():
    entry = studies.Study("no_such_study", "99_x.ipynb", "?")
    with pytest.raises(ConfigError, match=r"^config: study no_such_study: cannot find "
                       r"NoSuchStudyConfig in benchlib\.config\.no_such_study \("):
        studies.config_class(entry)


# ---------------------------------------------------------------- the smoke study

def test_the_smoke_study_has_a_row_of_every_study_with_a_module():
    """params/smoke_cpu.yaml, read as the sweep reads it (nothing run): a row of every
    study that has a study or an analysis module (notebooks 90 and 95 are the report's),
    each checked by its config."""
    rows = load_plan(ROOT / "params" / "smoke_cpu.yaml", read_notebooks=False)
    swept = {studies.of_notebook(r.notebook.name) for r in rows}
    assert {s.name for s in studies.registry() if s.module or s.analysis} <= swept
    assert all(r.config is not None and r.config.study == studies.of_notebook(r.notebook.name)
               for r in rows)
    [search] = [r.config for r in rows if r.config.study == "memory_and_batch"]
    assert (search.device, search.start_batch, search.max_batch, search.confirm) == ("cpu", 8, 8, 3)


# ---------------------------------------------------------------- a study added as the docs say

def adding_a_study() -> tuple[list[str], list[str]]:
    """docs/studies.md's "Adding a study" for NAME: the file of each numbered step, and
    the files named beside them (patterns: `params/<name>_*.yaml`)."""
    text = DOC.read_text()
    section = text[text.index("### Adding a study"):]
    section = section[:section.index("\nThe analysis module holds")]
    steps = re.findall(r"^\d+\. `([^`]+)`", section, re.M)
    beside = [p for item in re.findall(r"^- (.*(?:\n  .*)*)", section, re.M)
              for p in re.findall(r"`([\w<>*./-]+\.(?:py|yaml|md|ipynb))`", item)]

    def named(path: str) -> str:
        return path.replace("<name>", NAME).replace("NN_", f"{NN}_")
    return [named(p) for p in steps], [named(p) for p in beside]


def notebook() -> str:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}})
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {NN} · Coin flips\n\n{QUESTION}"),
        nbformat.v4.new_code_cell("flips: int = 100  # coin flips\nseed: int = 0  # the coin's seed",
                                  metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            f"from benchlib.config.{NAME} import {CLASS}\nfrom benchlib.records import results\n"
            f"from benchlib.studies import {NAME}\n\ncfg = {CLASS}.from_params(globals())\n"
            f"results.publish({NAME}.run(cfg))"),
        nbformat.v4.new_markdown_cell("Read `90_analysis`: every study's records side by side."),
    ]
    for i, cell in enumerate(nb.cells):
        cell.id = str(i)
    return nbformat.writes(nb)


# what each file of the recipe holds for the coin-flip study (or adds to it: a line)
FILES = {
    "benchlib/config/studies.py": ("insert", '    Study("analysis",',
                                   f'    Study("{NAME}", "{NN}_{NAME}.ipynb", "{QUESTION}", '
                                   'preflight=False),\n'),
    f"benchlib/config/{NAME}.py": ("write", f'''"""Coin flips (notebook {NN})."""

import dataclasses

from benchlib.config.base import StudyConfig, require_min


@dataclasses.dataclass
class {CLASS}(StudyConfig):
    """How many flips of a fair coin, from which seed."""

    flips: int = 100
    """Coin flips."""
    seed: int = 0
    """The coin's seed."""

    def validate(self) -> None:
        super().validate()
        require_min("flips", self.flips, 1)
'''),
    f"benchlib/studies/{NAME}.py": ("write", f'''"""Coin flips: counted in the kernel, nothing launched."""

import random

from benchlib.config.{NAME} import {CLASS}


def run(cfg: {CLASS}, run_id: str = "interactive") -> dict:
    coin = random.Random(cfg.seed)
    heads = sum(coin.random() < 0.5 for _ in range(cfg.flips))
    return {{"heads": heads, "heads_share": heads / cfg.flips}}
'''),
    f"benchlib/analysis/{NAME}.py": ("write", '''"""Coin flips: the share of heads per row."""

import pandas as pd

from benchlib.analysis.claims import Claim, Figure, rows, value
from benchlib.config import studies

STUDY = studies.of_analysis(__name__).name
ABOUT = "The share of heads, per number of flips."


def runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["study"] == STUDY) & (df["status"] == "ok")] if "study" in df else df


def headline(runs: pd.DataFrame):
    return [Claim(f"{value(r, 'flips')} flips", Figure(f"{value(r, 'heads_share'):.0%}", "heads",
                                                       sources=[("", r["run_id"])]))
            for r in rows(runs.sort_values("flips"))], ""


def figure(records):
    import matplotlib.pyplot as plt

    flips = runs(records.df).sort_values("flips")
    fig, ax = plt.subplots()
    ax.plot(flips["flips"], flips["heads_share"], "o")
    ax.set(title="Share of heads", xlabel="flips", ylabel="heads / flips", xscale="log")
    return fig


def section(records):
    yield runs(records.df)[["flips", "heads", "heads_share"]].reset_index(drop=True)
    yield "The coin-flip study's section, computed by its own module."
'''),
    f"notebooks/{NN}_{NAME}.ipynb": ("write", notebook()),
    f"params/{NAME}_cpu.yaml": ("write", f"name: {NAME}_cpu\nnotebook: notebooks/{NN}_{NAME}.ipynb\n"
                                          "table:\n  - {flips: 10}\n  - {flips: 1000, seed: 1}\n"),
    "params/smoke_cpu.yaml": ("append", f"\n  - name: {NAME}\n    notebook: notebooks/{NN}_{NAME}.ipynb\n"
                                        "    table:\n      - {flips: 100}\n"),
    "docs/studies.md": ("insert", "| `analysis` | `90_analysis` |",
                        f"| `{NAME}` | `{NN}_{NAME}` | `{NAME}_cpu.yaml`, `smoke_cpu.yaml` | `{CLASS}` "
                        f"| `studies/{NAME}.py` | `analysis/{NAME}.py` | none |\n"),
    "docs/architecture.md": ("insert", "- `config/analysis.py`:",
                             f"- `config/{NAME}.py`: `{CLASS}` (notebook {NN}).\n"),
}
ARCHITECTURE_MORE = [("- `studies/compile.py`", f"- `studies/{NAME}.py`: notebook {NN}: coin flips.\n"),
                     ("- `analysis/scaling_projection.py`",
                      f"- `analysis/{NAME}.py`: notebook {NN}: the share of heads.\n")]


def edit(copy: Path, path: str) -> None:
    how, *what = FILES[path]
    target = copy / path
    if how == "write":
        target.write_text(what[0])
        return
    text = target.read_text()
    if how == "append":
        target.write_text(text + what[0])
        return
    inserts = [tuple(what)] + (ARCHITECTURE_MORE if path == "docs/architecture.md" else [])
    for before, line in inserts:
        at = text.index(before)
        text = text[:at] + line + text[at:]
    target.write_text(text)


def snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.notebook
def test_a_built_in_study_added_as_the_docs_say_is_five_files_then_swept_analysed_published(
        tmp_path):
    """A copy of benchlib, its notebooks, parameter tables and docs; the coin-flip study
    added by docs/studies.md's steps, each file of its list written, nothing else; then
    in the copy its table swept, the smoke study's table read with its new row, and the
    report built (notebook 90 included)."""
    steps, beside = adding_a_study()
    assert len(steps) == 5 and all(p.endswith((".py", ".ipynb")) for p in steps), steps
    copy = tmp_path / "repo"
    for part in ("benchlib", "notebooks", "params"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "docs").mkdir()
    for doc in ("studies.md", "architecture.md"):
        shutil.copy2(ROOT / "docs" / doc, copy / "docs" / doc)
    before = snapshot(copy)

    for pattern in [*steps, *beside]:
        [path] = [p for p in FILES if fnmatch.fnmatchcase(p, pattern)]
        edit(copy, path)

    after = snapshot(copy)
    changed = sorted(p for p in after if before.get(p) != after[p])
    assert set(before) <= set(after)
    assert changed == sorted(FILES)  # the files the recipe names, and no other
    assert all(any(fnmatch.fnmatchcase(p, pat) for pat in [*steps, *beside]) for p in changed)
    code = [p for p in changed if p.endswith((".py", ".ipynb"))]
    assert len(code) == 5, code

    outputs = tmp_path / "outputs"
    env = {**os.environ, "PYTHONPATH": str(copy), "BENCHLIB_ROOT": str(copy),
           "BENCHLIB_OUTPUTS": str(outputs)}
    env.pop("BENCHLIB_STUDIES", None)

    def python(*args: str) -> str:
        done = subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, f"python {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    python("-m", "benchlib", "sweep", f"params/{NAME}_cpu.yaml", "--no-progress")
    smoke = python("-c", "from benchlib.runs.params import load_plan\n"
                   "for r in load_plan('params/smoke_cpu.yaml', read_notebooks=False):\n"
                   "    print(r.table, type(r.config).__name__, r.config.study)")
    assert f"{NAME} {CLASS} {NAME}" in smoke.splitlines()
    python("-m", "benchlib", "report")

    records = [json.loads(p.read_text()) for p in (outputs / "results").rglob("*.json")]
    assert sorted((r["study"], r["table"], r["status"], r["params"]["flips"]) for r in records) \
        == [(NAME, f"{NAME}_cpu", "ok", 10), (NAME, f"{NAME}_cpu", "ok", 1000)]
    assert all(0 <= r["metrics"]["heads"] <= r["params"]["flips"] for r in records)
    page = (outputs / "report" / "index.html").read_text()
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    share = {r["params"]["flips"]: r["metrics"]["heads_share"] for r in records}
    assert f"{NAME} {QUESTION} 10 flips: {share[10]:.0%} heads" in text
    assert f"1000 flips: {share[1000]:.0%} heads" in text
    assert (outputs / "report" / "figures" / f"{NAME}-T1.png").read_bytes()[:4] == b"\x89PNG"
    analysis = html.unescape((outputs / "report" / "analysis.html").read_text())
    assert f'id="study-{NAME}"' in analysis and f"{NAME}: {QUESTION} (notebook {NN})" in analysis
    assert "The coin-flip study's section, computed by its own module." in analysis
