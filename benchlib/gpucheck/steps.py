"""The GPU check's steps (benchlib.gpucheck.check), read from its table, plan.yaml: each
row turned into a command line, a time box, parameters, a result file and the family of
figures read from it (gpucheck/figures.py: one function per family). Runs nothing.

A step of a study is the launch the study itself plans: a row of the study's parameter
table (read as its notebook reads it: `table_rows`) or the study's config from the row's
`params`, and of the launches its study module lists for that config (`launches(cfg)`) the
one the row names (`launch_of`): its run.json, or its flags for JAX's worker; a command of
benchlib's gets flags generated from the config (FLAGS). `plan(out)` lays the steps out
under one output folder.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from benchlib import paths
from benchlib.config import CONFIGS, studies
from benchlib.config.flags import config_argv
from benchlib.core.stats import MIN_TARGET_LAUNCHES
from benchlib.errors import ConfigError
from benchlib.gpucheck.figures import FIGURES, FROM_LOG, READS_NEEDED
from benchlib.launch.protocol import RUN_CONFIG
from benchlib.runs.params import load_plan
from benchlib.studies import launches as study_launches
from benchlib.studies.repeats import Launch

STUDY = "gpu-check"
PLAN = Path(__file__).with_name("plan.yaml")
# a launch's time box: three times its seconds, never under a minute (process starts took
# 1.3-1.6x as long on the slower of two H100 hosts of the same kind)
MIN_BOX_S = 60.0
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", "1"]

# a command's flags generated from its study's config
FLAGS: dict[str, Callable[[Any], list[str]]] = {"maxbatch": config_argv}


@dataclass
class Step:
    """`timeout_s`: each launch's own time box, about three times its seconds, never cut
    short by the budget. `expected_s`: its launches' planned seconds together, for planning
    (a step starts only when that much of the budget is left), `estimated_s` the part of
    them that is an estimate, not a measurement, and `timed` where each comes from."""
    name: str
    argv: list[str]
    timeout_s: float
    params: dict[str, Any]
    result: str | None = None  # the JSON file each launch writes (worker result or figures)
    figures: Callable[[dict[str, Any]], dict[str, Any]] = lambda r: r.get("metrics", {})
    expected_s: float = 10.0
    # (folder, worker, parameters) of the run.json that argv's `--config` names, written
    # anew before each launch (a dry run writes nothing)
    config: tuple[Path, str, dict[str, Any]] | None = None
    part: int = 1  # the call that runs it (`--part`); 0 for every part, first
    # the study config its command line was made from (None: a step of no study's); its
    # values are the record's `params`; `launch`, the study's launch of it (launch_of)
    source: Any = None
    launch: Launch | None = None
    # figures read from the step's own output (a CLI that prints `record: PATH`), where
    # it writes no result file
    from_log: Callable[[str], dict[str, Any]] | None = None
    family: str = "metrics"
    launches: int = 1  # fresh processes, each its own window
    target: dict[str, Any] | None = None  # judged over the launches (launches.judged)
    needs: list[str] = field(default_factory=list)
    estimated_s: float = 0.0
    timed: str = ""


def plan(out: Path, table: Path = PLAN) -> list[Step]:
    """Every step of `table` (default: plan.yaml) under the output folder `out`."""
    doc, tables = yaml.safe_load(table.read_text()), {}
    steps = [_step(row, out, tables) for row in doc["steps"]]
    names = [s.name for s in steps]
    if len(set(names)) < len(names):
        raise ConfigError("name", f"{table.name}: step names repeat")
    for s in steps:
        for needed in s.needs:
            if needed not in names:
                raise ConfigError("needs", f"{table.name}: {s.name} needs {needed}, no step's name")
    return steps


def parts(table: Path = PLAN) -> dict[int, str]:
    """Each part's number and what it runs."""
    return {int(k): v for k, v in yaml.safe_load(table.read_text())["parts"].items()}


def part_of(steps: list[Step], part: int | list[int]) -> list[Step]:
    """The steps one call runs: the part's (or each part's, in the order given), and
    those of every part, once, first."""
    chosen = [part] if isinstance(part, int) else part
    return [s for s in steps if s.part == 0] + [s for p in chosen for s in steps if s.part == p]


def _fill(value: Any, where: dict[str, str]) -> Any:
    return value.format(**where) if isinstance(value, str) else value


def _arguments(args: list | dict | None, where: dict[str, str]) -> list[str]:
    """A row's `args`: a list as it is, or a mapping as flags (true: a bare flag)."""
    if isinstance(args, list):
        return [str(_fill(a, where)) for a in args]
    argv: list[str] = []
    for name, value in (args or {}).items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(_fill(value, where))]
    return argv


def _seconds(row: dict[str, Any]) -> tuple[float, float, float, str]:
    """(a launch's time box, all launches' seconds, the part of them estimated, where they
    come from) of a row's `seconds`; each later launch's as the first's unless given."""
    first, n = row["seconds"], row.get("launches", 1)
    later = first.get("later", first)
    each = [first, *[later] * (n - 1)]

    def said(t: dict[str, Any]) -> str:
        kind = "measured" if "measured" in t else "estimate"
        return f"{t['s']:.0f} s {kind} ({' '.join(str(t[kind]).split())})"

    timed = said(first) if n == 1 else f"{n} launches, each {said(first)}" if later is first \
        else f"{said(first)}, then {n - 1} x {said(later)}"
    estimated = sum(t["s"] for t in each if "measured" not in t)
    box = max(MIN_BOX_S, 3 * max(t["s"] for t in each))
    return box, sum(t["s"] for t in each), estimated, timed


ROW_KEYS = {"name", "part", "seconds", "table", "match", "overrides", "study", "params", "cli",
            "worker", "module", "args", "torchrun", "figures", "needs", "launches", "target",
            "run_json", "launch"}


def _refused(row: dict[str, Any]) -> str | None:
    """Why plan.yaml's row cannot be a step (a key or family misspelt, a target on too few
    launches), or None."""
    unknown, family = sorted(set(row) - ROW_KEYS), row.get("figures", "metrics")
    if unknown:
        return f"{unknown[0]!r} is not one of {', '.join(sorted(ROW_KEYS))}"
    if family not in {*FIGURES, *FROM_LOG, "env"}:
        return f"figures: {family!r} is not one of {', '.join(sorted({*FIGURES, *FROM_LOG}))}, env"
    if row.get("target") and row.get("launches", 1) < MIN_TARGET_LAUNCHES:
        return f"a target needs {MIN_TARGET_LAUNCHES} launches or more"
    if family in READS_NEEDED and not row.get("needs"):
        return f"figures {family} read the result of a step it needs; give `needs`"
    return None


def _step(row: dict[str, Any], out: Path, tables: dict[str, list[Any]]) -> Step:
    name, why = row["name"], _refused(row)
    if why:
        raise ConfigError("steps", f"{PLAN.name}: {name}: {why}")
    work, result = out / "work" / name, str(out / "work" / f"{name}.json")
    where = {"out": str(out), "work": str(work), "result": result}
    args = _arguments(row.get("args"), where)
    box, expected, estimated, timed = _seconds(row)
    source = _config(row, tables)
    family = row.get("figures", "metrics")
    read = {"needed": [str(out / "work" / f"{n}.json") for n in row.get("needs", [])]} \
        if family in READS_NEEDED else {}
    kw: dict[str, Any] = dict(
        expected_s=expected, part=row["part"], source=source, family=family,
        launches=row.get("launches", 1), target=row.get("target"), needs=row.get("needs", []),
        estimated_s=estimated, timed=timed, from_log=FROM_LOG.get(family),
        figures=partial(FIGURES.get(family, FIGURES["metrics"]), cfg=source, **read))
    extra = row.get("params", {}) if "table" in row else {}  # a row's own, beside its config's
    params = {**(source.as_dict() if source is not None else _given(row.get("args"))), **extra}
    writes = result if "{result}" in str(row.get("args")) else None
    if "cli" in row:  # a benchlib command: its flags from the config, then the row's args
        argv = _cli(*row["cli"], *(FLAGS[row["cli"][0]](source) if source else []), *args)
        return Step(name, argv, box, params, writes, **kw)
    if "module" in row:
        argv = [sys.executable, "-m", *_arguments(row["module"], where), *args]
        return Step(name, argv, box, params, writes, **kw)
    worker, restarts = row["worker"], 0
    if source is not None:
        planned = kw["launch"] = launch_of(source, row)
        restarts = planned.options.get("max_restarts", 0)
        if isinstance(planned.params, dict):  # its run.json, written before it starts
            kw["config"] = (work, worker, {**planned.params, **{
                k: _fill(v, where) for k, v in row.get("run_json", {}).items()}})
            args = ["--config", str(work / RUN_CONFIG), *args]
        else:
            args = [*planned.params, *args]
    argv = _worker(worker, [*args, "--result", result], row.get("torchrun", False), restarts)
    return Step(name, argv, box, params, result, **kw)


def launch_of(source: Any, row: dict[str, Any]) -> Launch:
    """The launch of the row's `worker` that the study plans for `source`, the first in
    the row's `launch` role (default: the first that is not a warm cache's priming)."""
    role, planned = row.get("launch"), study_launches(source, f"gpu-check-{row['name']}")
    found = [x for x in planned if x.worker == row["worker"]
             and (x.role == role if role else x.role != "prime")]
    if not found:
        has = ", ".join(dict.fromkeys(f"{x.worker} ({x.role})" for x in planned)) or "none"
        raise ConfigError("worker", f"{PLAN.name}: {row['name']}: its study launches no "
                          f"{row['worker']}{f' as {role}' if role else ''} for this config; "
                          f"its launches: {has}")
    return found[0]


def _given(args: list | dict | None) -> dict[str, Any]:
    """A command's parameters for its record: its flags, less the paths of this check."""
    return {k: v for k, v in (args or {}).items() if "{" not in str(v)} \
        if isinstance(args, dict) else {}


def _worker(module: str, args: list[str], torchrun: bool = False,
            max_restarts: int = 0) -> list[str]:
    if torchrun:
        return [*TORCHRUN, "--max-restarts", str(max_restarts), "-m", f"benchlib.workers.{module}",
                *args]
    return [sys.executable, "-m", f"benchlib.workers.{module}", *args]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchlib", *args]


def _config(row: dict[str, Any], tables: dict[str, list[Any]]) -> Any:
    """The study config a row's step is made from: the one row of its `table` that
    `match` picks, with the check's `overrides`; or the `study`'s config of `params`;
    None for a command. `tables`: the tables read so far, each read once."""
    if "study" in row:
        return _checked(CONFIGS[studies.named(row["study"]).config], row["params"],
                        f"{PLAN.name}: {row['name']}'s params")
    if "table" not in row:
        return None
    if row["table"] not in tables:
        tables[row["table"]] = table_rows(row["table"])
    found = [c for c in tables[row["table"]] if all(getattr(c, k) == v
                                                   for k, v in row["match"].items())]
    if len(found) != 1:
        raise ConfigError("match", f"{PLAN.name}: {row['name']} matches {len(found)} rows of "
                          f"{row['table']} ({row['match']}); it must pick one")
    return _checked(type(found[0]), {**found[0].as_dict(), **row.get("overrides", {})},
                    f"{PLAN.name}'s overrides of {row['table']}")


def table_rows(table: str) -> list[Any]:
    """A parameter table's rows as a sweep reads them (runs.params.load_plan: every row
    checked against its study's parameters), each the config the row builds. The
    parameters come from the registry's config classes, not the notebooks: a GPU image
    need not have nbformat or papermill."""
    return [row.config for row in load_plan(paths.project_root() / table, read_notebooks=False)]


def _checked(config: type, values: dict[str, Any], where: str) -> Any:
    """`config` of `values`, a name it does not have refused (from_params would drop it)."""
    known = set(config.field_names())
    if set(values) - known:
        raise ConfigError(sorted(set(values) - known)[0], f"not a parameter of {where}; it "
                          f"takes {', '.join(sorted(known))}")
    return config.from_params(values)
