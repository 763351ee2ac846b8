"""What diagnose says of torch.compile for a compute-bound run: the break-even the compile
study (notebook 55) measured on the same testbed for the same work, with its interval;
where no row of the same work has one, "not measured here" and the command that measures
it. A run that compiles already gets no compile advice.

The same work is the one-knob rule's (benchlib.diagnose.advice.differs), across the two
studies: every parameter of either record equal, but the compile knobs and what says how a
row was run or kept (advice.NOT_WORK); a knob only one of the two studies has (the
performance settings, injected faults, checkpoints) is read as off for the other
(`channels_last` False, `ac` none, no delay, no checkpoint), anything else only one of
them has (a schedule a study derives itself: notebook 40's lr and window) is left out;
the sequence or image size is compared where both records say one. Notebook 55 times one
process: a run of several ranks, or of a wrapper (DataParallel, DDP, FSDP2), is never
told its single-process break-even (a DDP step holds an all-reduce that compiling does not
shorten)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pandas as pd

from benchlib.config.checkpoint import CheckpointConfig
from benchlib.config.compile import CompileConfig
from benchlib.config.fault_injection import FaultInjectionConfig
from benchlib.config.performance import PerformanceConfig, compile_mode, compiled
from benchlib.core.compile_cost import break_even_text
from benchlib.diagnose.advice import NOT_WORK, differs, param_names, work_of

STUDY = CompileConfig.study  # notebook 55's study, by the registry's name for it
KNOBS = ("compile", "compile_cache")  # what notebook 55 turns
SHOWN = ("model", "dataset", "batch_size", "precision")  # named in its command, always
IF_BOTH = ("seq_len", "image_size")  # the same where both records say one
# how a run's ranks start: notebook 55 starts one process, checked as such (`ranks`)
LAUNCH = ("strategy", "nproc_per_node", "nnodes", "launcher", "dp_devices", "trainer",
          "join_timeout_s", "max_restarts")
COMPILE_FIELDS = frozenset(f.name for f in dataclasses.fields(CompileConfig))
# knobs a study without them runs off: a run of the other study is read at their default
KNOB_PIECES = (PerformanceConfig, FaultInjectionConfig, CheckpointConfig)


def ranks(record: dict[str, Any]) -> str:
    """'' for a run of one process without a wrapper, else what it ran ('ddp on 2 ranks')."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    world = m.get("world_size") or int(p.get("nnodes") or 1) * int(p.get("nproc_per_node") or 1)
    strategy = p.get("strategy")
    if world == 1 and strategy in (None, "single"):
        return ""
    return f"{strategy or 'a run'} on {world} rank{'s' if world != 1 else ''}"


def knob_default(name: str) -> tuple[bool, Any]:
    """(whether `name` is a knob a study without it runs off, its off value): a field of
    the performance settings, the injected faults or the checkpoints (KNOB_PIECES), at the
    piece's own default."""
    for piece in KNOB_PIECES:
        found = {f.name: f for f in dataclasses.fields(piece)}.get(name)
        if found is not None:
            return True, found.default
    return False, None


def _sides(record: dict[str, Any], row: pd.Series) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the record's work, the compile row's): a knob only one of the two studies has read
    as off for the other; anything else only one study has (a schedule it derives itself:
    notebook 40's lr and window) left out."""
    p, study = record.get("params") or {}, record.get("study")
    mine = {k: v for k, v in p.items() if v is not None and k not in LAUNCH}
    theirs = work_of(row, COMPILE_FIELDS | set(mine))
    lacks = {"mine": set(theirs) - set(mine) - param_names(study or "-"),
             "theirs": set(mine) - set(theirs) - COMPILE_FIELDS}
    for side, names in ((mine, lacks["mine"]), (theirs, lacks["theirs"])):
        for k in names:
            knob, off = knob_default(k)
            if knob:
                side[k] = off
            else:
                mine.pop(k, None)
                theirs.pop(k, None)
    for name in IF_BOTH:  # the same only where both say one
        if not (mine.get(name) and theirs.get(name)):
            mine.pop(name, None)
            theirs.pop(name, None)
    return mine, theirs


def _same_work(record: dict[str, Any], rows: pd.DataFrame | None) -> pd.DataFrame:
    """The compile study's ok rows of the run's work (`rows`: records of one testbed)."""
    if rows is None or rows.empty or "study" not in rows:
        return pd.DataFrame()
    found = rows[(rows["study"] == STUDY) & (rows["status"] == "ok")]
    keep = [i for i, row in found.iterrows() if not differs(*_sides(record, row), KNOBS)]
    return found.loc[keep]


def command(record: dict[str, Any]) -> str:
    """The compile study's run of the same work (its default mode, cold): the model, data,
    batch and precision, and every other parameter notebook 55 has where the run's differs
    from notebook 55's default."""
    p, study = record.get("params") or {}, record.get("study")
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(CompileConfig)}
    args = []
    first = (*SHOWN, *IF_BOTH, "device")
    for name in (*first, *sorted(COMPILE_FIELDS - set(first))):
        if name in (*KNOBS, *NOT_WORK):
            continue
        value = p.get(name) if name in p or name in param_names(study or "-") \
            else knob_default(name)[1]
        if value in (None, "") or (name not in SHOWN and value == defaults[name]):
            continue
        args.append(f"-p {name} " + (f"'{json.dumps(value)}'" if isinstance(value, dict) else
                                     str(value)))
    return "python -m benchlib run 55_compile " + " ".join(args)


def sentence(record: dict[str, Any], same_testbed: pd.DataFrame | None) -> str:
    """'; torch.compile on this testbed for the same work: default, cold: pays off after
    ... (run X)' for each row of notebook 55, or '; torch.compile: not measured here for
    this work (`python -m benchlib run 55_compile ...`)'; '' for a compiled run."""
    from benchlib.studies.compile import break_even_of

    p = record.get("params") or {}
    if compiled(p.get("compile")):
        return ""
    several = ranks(record)
    if several:
        return (f"; torch.compile: not measured here for this run ({several}): notebook 55 "
                "times one process, whose break-even is not this run's")
    found = _same_work(record, same_testbed)
    if found.empty:
        return (f"; torch.compile: not measured here for this work (`{command(record)}` "
                "measures after how many steps it pays off, cold and warm)")
    said = []
    for _, row in found.sort_values("started_at").iterrows():
        steps, low, high, n = break_even_of(row.to_dict())
        said.append(f"{compile_mode(row.get('compile'))}, {row.get('compile_cache')}: "
                    f"{break_even_text(steps, low, high, n, row.get('speedup_verdict') or 'inconclusive')}"
                    f" (run {row['run_id']})")
    return "; torch.compile on this testbed for the same work: " + "; ".join(said)
