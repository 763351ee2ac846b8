"""The fault_tolerance study (notebook 35): what a killed rank cost (restarts, steps
redone, recovery time) and whether the run came back to the same loss; what a save and a
restore cost in each checkpoint mode, and how often to save for the row's MTBF (Young/
Daly); its headline and notebook 90's section, from `runs()` (no figure: a table says it)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis.claims import Claim, Figure, metric, rows, value, work_text
from benchlib.analysis.common import ok_runs, with_columns
from benchlib.config import studies
from benchlib.core.stats import quantile

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("A rank killed on purpose, torchrun restarting the ranks, the resume from the last "
         "checkpoint: restarts, steps redone, recovery time, and the final loss against the "
         "same run without the failure; what a save and a restore cost in each checkpoint "
         "mode, and how often to save.")
SAME_WORK = ["model", "dataset", "batch_size", "nproc_per_node", "fail_at_step",
             "checkpoint_every", "checkpoint", "hardware"]
COSTS = ["model", "nproc_per_node", "checkpoint", "checkpoint_bytes", "checkpoint_blocking_s",
         "checkpoint_blocking_s_p10", "checkpoint_blocking_s_p90", "checkpoint_total_s",
         "checkpoint_total_s_p10", "checkpoint_total_s_p90", "checkpoint_blocking_s_n",
         "restore_s", "checkpoint_rate_ratio", "checkpoint_rate_ratio_low",
         "checkpoint_rate_ratio_high", "mtbf", "checkpoint_cost_s", "daly_interval_s",
         "goodput_at_daly", "goodput_at_own_interval"]


def runs(df: pd.DataFrame) -> pd.DataFrame:
    runs = ok_runs(df, STUDY, ("nproc_per_node", "checkpoint_every", "fail_at_step",
                               "restarts", "steps_redone", "final_step"))
    if runs.empty:
        return runs
    runs = with_columns(runs, [*SAME_WORK, *COSTS])
    runs["checkpoint"] = runs["checkpoint"].fillna("torch_save")  # before issue 41: all were
    return runs


def costs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run that measured its saves: the mode, the bytes, a save's stall and its
    time until durable (median, p10, p90 over the run's saves), a restore, the training rate
    with checkpoints over without (its interval over the run's checkpoint intervals), and
    how often to save for the row's MTBF."""
    if runs.empty or runs["checkpoint_blocking_s"].isna().all():
        return pd.DataFrame(columns=COSTS)
    return runs[runs["checkpoint_blocking_s"].notna()].reindex(columns=COSTS) \
        .sort_values(["model", "nproc_per_node", "checkpoint_blocking_s"]).reset_index(drop=True)


def cost_lines(runs: pd.DataFrame) -> list[str]:
    """Per run: what a save stalled, until durable, a restore, and the interval to save at."""
    lines = []
    for r in costs(runs).itertuples():
        line = (f"- {r.checkpoint}, {r.nproc_per_node} ranks, {r.checkpoint_bytes / 1e6:,.1f} MB "
                f"a checkpoint: a save stalled training **{r.checkpoint_blocking_s:.3g} s** (p10-p90 "
                f"{r.checkpoint_blocking_s_p10:.3g}-{r.checkpoint_blocking_s_p90:.3g}, "
                f"{r.checkpoint_blocking_s_n:.0f} saves), durable after {r.checkpoint_total_s:.3g} s")
        if pd.notna(r.restore_s):
            line += f", restored in {r.restore_s:.3g} s"
        if pd.notna(r.daly_interval_s):  # records before the exact form have none
            charged = (f", charged {r.checkpoint_cost_s:.3g} s a save with the steps its write "
                       "slowed" if r.checkpoint_cost_s > r.checkpoint_blocking_s * 1.01 else "")
            line += (f"; for an MTBF of {r.mtbf}, save every {r.daly_interval_s:,.0f} s of "
                     f"training (Daly){charged}: goodput {r.goodput_at_daly:.2%}")
            if pd.notna(r.goodput_at_own_interval):
                line += f", against {r.goodput_at_own_interval:.2%} at this run's interval"
        lines.append(line + ".")
    return lines


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the failure, what it cost, and whether the run came back to the
    same loss as the uninterrupted one."""
    cols = ["model", "dataset", "nproc_per_node", "checkpoint_every", "fail_at_step",
            "restarts", "steps_redone", "recovery_s", "redo_s", "checkpoint_s", "final_step",
            "loss_last", "loss_last_uninterrupted", "loss_diff", "samples_per_s"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(["fail_at_step", "checkpoint_every"]) \
        .reset_index(drop=True)


def conclusions(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "No fault-tolerance runs yet (notebook 35)."
    parts = []
    for r in table(runs).itertuples():
        if not r.restarts:
            parts.append(f"- No restart ({r.nproc_per_node} ranks, fail_at_step "
                         f"{r.fail_at_step}): {r.samples_per_s:,.0f} samples/s.")
            continue
        line = (f"- {r.nproc_per_node} ranks, a rank killed after step {r.fail_at_step} with a "
                f"checkpoint every {r.checkpoint_every} steps: **{r.restarts} restart(s), "
                f"{r.steps_redone} step(s) redone, back to training in {r.recovery_s:.1f} s** "
                f"(a checkpoint took {r.checkpoint_s * 1e3:.0f} ms)")
        if pd.notna(r.loss_diff):
            same = "the same" if r.loss_diff <= 1e-6 * max(abs(r.loss_last), 1) else "a different"
            line += (f"; it ended at {same} loss as the uninterrupted run "
                     f"({r.loss_last:.6f} vs {r.loss_last_uninterrupted:.6f})")
        parts.append(line + ".")
    parts += [line for line in (redone_against_bound(runs), recovery_split(runs)) if line]
    return "\n".join(parts + cost_lines(runs))


def redone_against_bound(runs: pd.DataFrame) -> str | None:
    """Whether the steps redone stayed within `restarts x (checkpoint_every - 1)`, the most
    a resume from the newest checkpoint can lose, in the runs that restarted."""
    restarted = runs[runs["restarts"] > 0]
    if restarted.empty:
        return None
    bound = restarted["restarts"] * (restarted["checkpoint_every"] - 1)
    over = restarted[restarted["steps_redone"] > bound]
    if over.empty:
        return (f"- Steps redone stayed within restarts x (checkpoint_every - 1) in all "
                f"{len(restarted)} run(s) that restarted (at most "
                f"{int(restarted['steps_redone'].max())} redone).")
    which = ", ".join(f"{int(r.steps_redone)} redone with a checkpoint every "
                      f"{int(r.checkpoint_every)} and {int(r.restarts)} restart(s)"
                      for r in over.itertuples())
    return (f"- **More steps redone than a resume from the newest checkpoint should lose** in "
            f"{len(over)} of {len(restarted)} run(s): {which}; a checkpoint was missing or "
            "not the newest.")


def recovery_split(runs: pd.DataFrame) -> str | None:
    """Where the recovery time went, from the records that split it (`restart_s`: until
    the resumed attempt started; the rest: its first step)."""
    if "restart_s" not in runs:
        return None
    split = runs[(runs["restarts"] > 0) & runs["restart_s"].notna() & (runs["recovery_s"] > 0)]
    if split.empty:
        return None
    total, restart = split["recovery_s"].sum(), split["restart_s"].sum()
    return (f"- Of {total:.1f} s of recovery ({len(split)} run(s)), {restart:.1f} s "
            f"({restart / total:.0%}) passed before the restarted ranks were ready (failure "
            f"detection, new processes, imports, rendezvous, loading the checkpoint) and "
            f"{total - restart:.1f} s on the first step after the resume.")


def headline(runs: pd.DataFrame) -> tuple[list[Claim], str]:
    """Per setup (SAME_WORK): the time back to training after the failure, median over the
    runs that restarted, the steps redone and whether the loss came back the same."""
    claims = []
    if runs.empty:
        return claims, ""
    for _, group in runs.groupby(SAME_WORK, sort=False, dropna=False):
        first = rows(group)[0]
        subject = (f"{value(first, 'nproc_per_node')} ranks, a rank killed after step "
                   f"{value(first, 'fail_at_step')}, a {value(first, 'checkpoint')} checkpoint "
                   f"every {value(first, 'checkpoint_every')}, {work_text(first)}")
        recovered = [r for r in rows(group) if (metric(r, "restarts") or 0) > 0
                     and metric(r, "recovery_s") is not None]
        if not recovered:
            claims.append(Claim(subject, note="no restart happened, so no recovery time"))
            continue
        times = sorted(metric(r, "recovery_s") for r in recovered)
        spread = (f"{quantile(times, 0.1):.1f} s", f"{quantile(times, 0.9):.1f} s") \
            if len(times) > 1 else None
        figure = Figure(f"{statistics.median(times):.1f} s", "back to training", spread,
                        f"n={len(times)} failure{'s' if len(times) > 1 else ''}",
                        [("", r["run_id"]) for r in recovered])
        redone = sorted({int(metric(r, "steps_redone") or 0) for r in recovered})
        notes = [f"{'/'.join(map(str, redone))} step(s) redone"]
        diffs = [(metric(r, "loss_diff"), metric(r, "loss_last")) for r in recovered]
        if all(d is not None and last is not None for d, last in diffs):
            same = all(d <= 1e-6 * max(abs(last), 1) for d, last in diffs)
            notes.append("final loss equal to the uninterrupted run's" if same else
                         "final loss differs from the uninterrupted run's")
        claims.append(Claim(subject, figure, ", ".join(notes)))
    return claims, ""


def section(records: Records):
    ft = runs(records.df)
    yield table(ft)
    yield costs(ft)
    yield conclusions(ft)
