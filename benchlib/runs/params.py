"""Parameter tables: a YAML file of studies, expanded into rows and checked before anything runs.

One study per file:

    name: data_prep                       # the table's name: outputs/results/<name>/
    notebook: notebooks/00_data_prep.ipynb
    defaults: {path: outputs/data}        # applied to every row
    table:                                # one row per item, like the seeds' tables
      - {dataset: fashion-mnist}
      - {dataset: mydataset, size: 6000}
    # or grid: {num_workers: [0, 1, 2], dataset: [fashion-mnist, mydataset]}  (cartesian)

or several under `studies:` (a list of the above). `study:` is the older spelling of
`name:`, still read; a record's own `study` is the study its notebook belongs to.
Every row is checked against the parameters the notebook declares (names and types, read
by papermill) and against the study's config class (ranges and choices): the one its
registry entry names (benchlib.config.studies), or for a notebook of one's own the one its
metadata names (`benchlib: {config: ...}`). A row's parameters are the values its config
holds, an old name or value (`StudyConfig.renamed`, `old_values`) read as now: what its
kernel receives, what its record stores and what makes its identity; the table's row as
written is kept beside them (`Row.raw`) for the record, where the two differ.
"""

from __future__ import annotations

import ast
import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchlib import paths
from benchlib.config import CONFIGS, studies
from benchlib.config.base import StudyConfig, check_type
from benchlib.errors import ConfigError, UsageError
from benchlib.records.results import run_id_for

STUDY_KEYS = ("name", "notebook", "description", "defaults", "table", "grid", "execution_timeout")
OLD_NAME_KEY = "study"  # what `name` was called before records named their study
FILE_KEYS = ("studies", "description")


@dataclass(frozen=True)
class NotebookSpec:
    """What a notebook declares: its parameters (name -> (type, default)) and config class."""

    path: Path
    parameters: dict[str, tuple[str, Any]]
    config: str | None

    @classmethod
    def read(cls, path: Path) -> NotebookSpec:
        import nbformat
        from papermill.translators import PythonTranslator

        # read as the sweep runs it, with Python's translator and kernel, whatever kernel
        # its metadata names: a notebook written without a kernelspec (nbformat's own)
        # runs too, where papermill's inspect_notebook would stop at "No kernel name found"
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        declared = {}
        for p in PythonTranslator.inspect(cells[0]) if cells else []:
            try:
                default = ast.literal_eval(p.default)
            except (ValueError, SyntaxError) as e:
                raise UsageError(f"{path.name}: parameter {p.name} = {p.default} is not a plain "
                                 "value; the parameters cell holds literals only") from e
            declared[p.name] = (p.inferred_type_name, default)
        if not declared:
            raise UsageError(f"{path.name}: " + ("its cell tagged 'parameters' assigns no value"
                                                 if cells else "no cell tagged 'parameters'"))
        # a study of the registry: its entry names the config; a notebook of one's own may
        # name one in its metadata (`benchlib: {config: ...}`)
        entry = studies.of_notebook_entry(path.name)
        config = entry.config.rpartition(":")[2] if entry else \
            nb.metadata.get("benchlib", {}).get("config")
        return cls(path, declared, config)

    @classmethod
    def of_config(cls, path: Path) -> NotebookSpec:
        """A registry study's notebook as its config class declares it, without reading the
        notebook: where nbformat and papermill are not installed (the GPU check on a bare
        GPU image). The same spec as `read` gives: tests/test_parameters.py holds every
        committed notebook's parameters cell to its config's names, types and defaults."""
        import dataclasses
        import typing

        entry = studies.of_notebook_entry(path.name)
        if entry is None:
            raise UsageError(f"{path.name}: not a study of the registry, so its parameters "
                             "are only in the notebook (install papermill to read it)")
        name = entry.config.rpartition(":")[2]
        hints = typing.get_type_hints(CONFIGS[name])
        return cls(path, {f.name: (hints[f.name].__name__, f.default_factory()
                                   if f.default_factory is not dataclasses.MISSING else f.default)
                          for f in dataclasses.fields(CONFIGS[name])}, name)

    def defaults(self) -> dict[str, Any]:
        return {name: default for name, (_, default) in self.parameters.items()}


@dataclass(frozen=True)
class Row:
    """One run: a notebook with its parameters."""

    table: str  # the parameter table's name: its records' folder and part of their run id
    notebook: Path
    # everything the notebook runs with, its own defaults included, each as the row's config
    # holds it (an old name or value read as now): what the kernel receives and the record stores
    params: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)  # what the table sets, read as now
    source: str = ""  # where the row came from, for messages: "params/x.yaml: row 2"
    timeout_s: float | None = None
    testbed: dict[str, Any] | None = None  # where it runs (benchlib.records.testbed); None: here
    label: str = ""  # the result set its record joins; "" until the sweep assigns one
    # the study config built from `params` when the row was checked (None: a notebook
    # without one), carried to the preflight, the Slurm plan and the kernel: built once
    config: StudyConfig | None = field(default=None, compare=False)
    # what the table sets as it is written (its defaults and the row's own), before an old
    # name or value was read as now: not the row's identity, which is `params`
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def params_raw(self) -> dict[str, Any] | None:
        """The table's row as written, where it says something `params` does not (an old
        name, an old value): what the record keeps beside its params; None where they
        agree."""
        differs = any(name not in self.params or self.params[name] != value
                      for name, value in self.raw.items())
        return dict(self.raw) if differs else None

    @property
    def row_id(self) -> str:
        """The row on any testbed: table, notebook and parameters."""
        return run_id_for(self.table, self.notebook.stem, self.params)

    @property
    def run_id(self) -> str:
        """The row on its testbed: a sweep on another testbed runs it again."""
        from benchlib.records import testbed

        bed = self.testbed or testbed.current()
        return run_id_for(self.table, self.notebook.stem, self.params, bed["id"])


def find_notebook(name: str, where: str) -> Path:
    """`notebooks/00_data_prep.ipynb`, `00_data_prep.ipynb` or `00_data_prep`."""
    candidates = [paths.resolve(name)]
    if not name.endswith(".ipynb"):
        candidates.append(paths.resolve(name + ".ipynb"))
    candidates += [paths.notebooks_dir() / c.name for c in list(candidates)]
    for c in candidates:
        if c.is_file():
            return c
    known = sorted(p.stem for p in paths.notebooks_dir().glob("*.ipynb"))
    raise UsageError(f"{where}: notebook: {name!r} not found; known: {', '.join(known)}")


def check_row(spec: NotebookSpec, overrides: dict[str, Any],
              where: str) -> tuple[dict[str, Any], StudyConfig | None]:
    """The row's full parameters and the config built from them (None for a notebook
    without one), or a UsageError naming the row, parameter and what is allowed. The
    parameters are the notebook's names, each with the value the config holds (what the
    kernel's config is built from). Values only: what needs the machine is `preflight`,
    where the row runs."""
    for name, value in overrides.items():
        if name not in spec.parameters:
            raise UsageError(f"{where}: {name}: not a parameter of {spec.path.name}; "
                             f"allowed: {', '.join(spec.parameters)}")
        try:
            check_type(name, value, spec.parameters[name][0])
        except ConfigError as e:
            raise UsageError(f"{where}: {e}") from e
    params = {**spec.defaults(), **overrides}
    if not spec.config:
        return params, None
    if spec.config not in CONFIGS:
        raise UsageError(f"{spec.path.name}: metadata names config {spec.config!r}; "
                         f"known: {', '.join(CONFIGS)}")
    try:
        cfg = CONFIGS[spec.config].from_params(params)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from e
    built = cfg.as_dict()
    return {name: built.get(name, value) for name, value in params.items()}, cfg


def expand(study: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """A study's rows as the table or grid gives them (before defaults and checks)."""
    if "table" in study and "grid" in study:
        raise UsageError(f"{where}: give either table or grid, not both")
    if "grid" in study:
        grid = study["grid"]
        if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
            raise UsageError(f"{where}: grid: must map each parameter to a non-empty list")
        return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    table = study.get("table", [{}])
    if not isinstance(table, list) or not all(isinstance(r, dict) for r in table):
        raise UsageError(f"{where}: table: must be a list of mappings (one per row)")
    if not table:
        raise UsageError(f"{where}: table: empty, so nothing would run; give one mapping per "
                         "row, or leave table out to run the defaults once")
    return table


def study_rows(study: Any, where: str, notebooks: dict[Path, NotebookSpec],
               read_notebooks: bool = True) -> list[Row]:
    if not isinstance(study, dict):
        raise UsageError(f"{where}: a study must be a mapping with name and notebook")
    if OLD_NAME_KEY in study:
        if "name" in study:
            raise UsageError(f"{where}: give name, not both name and study (its older spelling)")
        study = {("name" if k == OLD_NAME_KEY else k): v for k, v in study.items()}
    unknown = sorted(set(study) - set(STUDY_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(STUDY_KEYS)}")
    for key in ("name", "notebook"):
        if not isinstance(study.get(key), str) or not study[key]:
            raise UsageError(f"{where}: {key}: required (a name)")
    if not study["name"].replace("_", "").replace("-", "").isalnum():
        raise UsageError(f"{where}: name: {study['name']!r} must be letters, digits, - and _")
    path = find_notebook(study["notebook"], where)
    spec = notebooks.get(path) or notebooks.setdefault(
        path, NotebookSpec.read(path) if read_notebooks else NotebookSpec.of_config(path))
    defaults = study.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise UsageError(f"{where}: defaults: must be a mapping of parameter to value")
    timeout = study.get("execution_timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise UsageError(f"{where}: execution_timeout: must be a positive number of seconds")
    rows, config, notes = [], CONFIGS.get(spec.config or ""), {}
    for i, row in enumerate(expand(study, where), start=1):
        row_where, raw = f"{where}: row {i}", {**defaults, **row}
        overrides = read_old_names(config, raw, row_where, notes)
        params, cfg = check_row(spec, overrides, row_where)
        rows.append(Row(study["name"], path, params, overrides, row_where, timeout, config=cfg,
                        raw=raw))
    say_notes(notes, where)
    return rows


def read_old_names(config: type[StudyConfig] | None, row: dict[str, Any], where: str,
                   notes: dict[str, None]) -> dict[str, Any]:
    """`row` with its config's old parameter names (`StudyConfig.renamed`: notebook 40's
    `arch`) read as the new ones, a note for each added to `notes`; an old name beside
    its new one is a UsageError naming both."""
    if config is None:
        return row
    try:
        row, found = config.read_old_names(row)
    except ConfigError as e:
        raise UsageError(f"{where}: {e}") from e
    notes.update(dict.fromkeys(found))
    return row


def say_notes(notes: dict[str, None], where: str) -> None:
    """Each note once, a line on stderr: the table still runs as it did."""
    for note in notes:
        print(f"note: {where}: {note}", file=sys.stderr)


def load_plan(file: str | Path, read_notebooks: bool = True) -> list[Row]:
    """Every row of a parameter file, all checked; raises UsageError on the first problem.
    `read_notebooks=False`: a registry study's parameters from its config class
    (`NotebookSpec.of_config`), for a machine without the notebook tooling."""
    file = Path(file)
    name = str(file)
    if not file.is_file():
        raise UsageError(f"{name}: no such parameter file")
    try:
        doc = yaml.safe_load(file.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UsageError(f"{name}: not valid YAML{at}: {getattr(e, 'problem', e)}") from e
    if not isinstance(doc, dict):
        raise UsageError(f"{name}: must be a mapping with name and notebook, or studies")
    notebooks: dict[Path, NotebookSpec] = {}
    if "studies" in doc:
        unknown = sorted(set(doc) - set(FILE_KEYS))
        if unknown:
            raise UsageError(f"{name}: unknown key {unknown[0]!r} beside studies; "
                             f"allowed: {', '.join(FILE_KEYS)}")
        if not isinstance(doc["studies"], list) or not doc["studies"]:
            raise UsageError(f"{name}: studies: must be a non-empty list")
        rows = [r for i, s in enumerate(doc["studies"], start=1)
                for r in study_rows(s, f"{name}: studies[{i}]", notebooks, read_notebooks)]
    else:
        rows = study_rows(doc, name, notebooks, read_notebooks)
    seen: dict[str, str] = {}
    for r in rows:
        if r.row_id in seen:
            raise UsageError(f"{r.source}: same table and parameters as {seen[r.row_id]}")
        seen[r.row_id] = r.source
    return rows


def preflight(rows: list[Row]) -> None:
    """Each row's study preflight on the config the row carries, run on this machine
    before any row runs here (a local sweep or `benchlib run`): a GPU that is not there,
    data not prepared, more ranks than devices end here with the row named. A Slurm sweep
    leaves them to its array tasks."""
    from benchlib import studies

    for row in rows:
        if row.config is None:
            continue
        try:
            studies.preflight(row.config)
        except UsageError as e:
            raise UsageError(f"{row.source}: {e}") from e


def single_row(notebook: str, overrides: dict[str, Any], table: str | None = None) -> Row:
    """One run of one notebook (`python -m benchlib run`), checked like a table row."""
    path = find_notebook(notebook, "run")
    spec, notes, raw = NotebookSpec.read(path), {}, dict(overrides)
    overrides = read_old_names(CONFIGS.get(spec.config or ""), overrides, "run", notes)
    say_notes(notes, "run")
    params, cfg = check_row(spec, overrides, "run")
    return Row(table or path.stem, path, params, overrides, f"run {path.name}", config=cfg,
               raw=raw)
