"""The fault_tolerance study (notebook 35): what a killed rank cost (restarts, steps
redone, recovery time) and whether the run came back to the same loss."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis.common import ok_runs

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

NOTEBOOK = "35_fault_tolerance.ipynb"


def runs(df: pd.DataFrame) -> pd.DataFrame:
    return ok_runs(df, NOTEBOOK, "fail_at_step", ("nproc_per_node", "checkpoint_every",
                                                        "fail_at_step", "restarts",
                                                        "steps_redone", "final_step"))


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
    return "\n".join(parts)


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


# ---------------------------------------------------------------- notebook 90's parts
# each takes the records and returns what its cell shows (sections.show runs it)

def part_table(records: Records) -> pd.DataFrame:
    return table(runs(records.df))


def part_conclusions(records: Records) -> str:
    return conclusions(runs(records.df))
