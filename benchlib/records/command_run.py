"""A record of a measurement started from the shell (`benchlib io`, `maxbatch`,
`allreduce`, `doctor --health`), written the way a sweep writes a row's.

`start()` takes the id the run records under before it runs (its logs are named by it):
the id of its table, command name and parameters on this testbed (results.run_id_for,
the row identity a sweep's record has), made free of earlier ok records so that a rerun
adds to the history; its result set is `label` or the testbed's default one. `write()`
then makes the record (results.make_record) and writes it (results.write_record). The
command's name is one string, in the id and in the record alike: `benchlib io (CLI)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.records import results, testbed


def command_name(command: str) -> str:
    """The name a command's records carry, as `notebook` and in their id (the study
    registry names a study's commands so: config/studies.py)."""
    return f"benchlib {command} (CLI)"


@dataclass
class CommandRun:
    results_dir: Path
    table: str
    notebook: str
    params: dict[str, Any]
    run_id: str
    label: str
    testbed: dict[str, Any]
    started_at: str = field(default_factory=results.now)
    load_at_start: dict[str, Any] = field(default_factory=dict)

    def write(self, metrics: dict[str, Any], details: dict[str, Any],
              testbed_figures: dict[str, Any] | None = None) -> Path:
        """The ok record of this run, with the environment and host load now;
        `testbed_figures` adds to its testbed (doctor --health's per-device figures)."""
        from benchlib.core import envinfo, hostload

        record = results.make_record(
            run_id=self.run_id, table=self.table, notebook=self.notebook, params=self.params,
            env=envinfo.collect(), started_at=self.started_at, status="ok", metrics=metrics,
            details=details, label=self.label, testbed={**self.testbed, **(testbed_figures or {})},
            host_load=hostload.span(self.load_at_start, hostload.sample()))
        return results.write_record(self.results_dir, record)


def start(results_dir: Path, table: str, command: str, params: dict[str, Any],
          label: str | None = None) -> CommandRun:
    """A run of `benchlib <command>` about to measure: its free id, result set and
    testbed, its start time and the host's load then."""
    from benchlib.core import hostload

    bed = testbed.current()
    label = testbed.check_label(label) if label else \
        testbed.default_label(results.read_records(results_dir), bed)
    notebook = command_name(command)
    run_id = results.free_run_id(results_dir, table,
                                 results.run_id_for(table, notebook, params, bed["id"]), label)
    return CommandRun(results_dir, table, notebook, params, run_id, label, bed,
                      load_at_start=hostload.sample())
