"""Every command the README and docs/ print is one that exists as written: each
`python -m benchlib...` command's flags are flags of that command (read from its own
`--help`), each what-if name is one the projection takes, each `make` target is in the
Makefile and each script is there. A real run of most of them takes minutes; their
flags are what a reader copies, and what went stale before (`--what-if inter_busbw_gbps=2x`
exited 2: the name is `inter_bw`)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest

from benchlib.projection.scaling import WHAT_IF
from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?:\.venv/bin/)?python -m (benchlib(?:\.[\w.]+)?)\b(.*)$")


def _lines(text: str) -> list[str]:
    """Commands in fenced blocks (continuation lines joined) and in inline code."""
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        block = re.sub(r"\n\s+(?=[-\[])", " ", block)  # an indented line continues the one above
        out += [line.split("  #")[0].strip() for line in block.splitlines()]
    out += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [line for line in out if re.match(r"(?:\.venv/bin/)?python -m benchlib|make |scripts/",
                                             line)]


def documented() -> list[tuple[str, str]]:
    return sorted({(doc.name, line) for doc in DOCS for line in _lines(doc.read_text())})


def _program(module: str, rest: str) -> tuple[str, ...] | None:
    """The command whose --help lists the flags: the module, and the subcommand of
    `python -m benchlib`. None for a placeholder (`benchlib.workers.<name>`, `{a,b}`)."""
    if module.endswith(".") or (rest and not rest[0].isspace()):  # benchlib.workers.<name>
        return None
    if module != "benchlib":
        return (module,)
    if not rest.strip() or rest.strip()[0] in "<{.":
        return None
    first = rest.split()[0]
    if first.startswith("-"):  # a global option first: --allocator NAME SUBCOMMAND
        words = rest.split()
        first = words[2] if len(words) > 2 and words[0] == "--allocator" else None
    return (module, first) if first and re.fullmatch(r"[a-z][a-z-]*", first) else None


def _flags(rest: str) -> list[str]:
    """The --flags a command line names, leaving out what is quoted for another program
    (`--worker-args "--path DATA ..."`) and the placeholders' alternatives (`[--a | --b]`)."""
    try:
        words = shlex.split(rest.replace("[", " ").replace("]", " ").replace("|", " "))
    except ValueError:  # an apostrophe in prose
        words = rest.split()
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w == "--worker-args":  # its value is the worker's flags, checked as the worker's
            out.append(w)
            skip = True
            continue
        if w.startswith("--") and len(w) > 2:
            out.append(w.split("=")[0])
    return out


@cache
def help_text(program: tuple[str, ...]) -> str:
    """`--help` of the program: benchlib's own parsers in this process, a worker's from
    its process (each worker builds its parser on its own imports)."""
    if program[0] == "benchlib":
        import argparse

        from benchlib.cli import project
        from benchlib.cli.main import build_parser

        if program[1:] == ("project",):  # it parses its own options
            return project.build_parser().format_help()
        parser = build_parser()
        if len(program) == 1:
            return parser.format_help()
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert program[1] in sub.choices, f"benchlib has no subcommand {program[1]!r}"
        return sub.choices[program[1]].format_help()
    done = subprocess.run([sys.executable, "-m", *program, "--help"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, f"{' '.join(program)} --help: {done.stderr[-500:]}"
    return done.stdout


def _checked() -> list[tuple[str, str, tuple[str, ...], list[str]]]:
    rows = []
    for doc, line in documented():
        m = COMMAND.match(line)
        if m and (program := _program(m.group(1), m.group(2))):
            rest = m.group(2)
            if program[0] == "benchlib" and rest.split()[0] == "--allocator":  # a global option
                rows.append((doc, line, ("benchlib",), ["--allocator"]))
                rest = " ".join(rest.split()[2:])
            rows.append((doc, line, program, _flags(rest)))
    return rows


def test_the_docs_print_commands_of_every_kind_this_test_reads():
    """The reader of the docs is not empty: if the patterns stop matching, this fails."""
    rows = _checked()
    programs = {r[2] for r in rows}
    assert len(rows) >= 60
    for sub in ("data", "io", "sweep", "run", "report", "compare", "project", "slurm-script",
                "doctor", "allreduce", "calibrate"):
        assert ("benchlib", sub) in programs, sub
    assert any(p[0].startswith("benchlib.workers.") for p in programs)


def test_every_flag_of_every_documented_benchlib_command_is_one_it_takes():
    rows = _checked()
    workers = sorted({r[2] for r in rows if r[2][0] != "benchlib"})
    with ThreadPoolExecutor(4) as pool:  # one --help per worker, a process each
        list(pool.map(help_text, workers))
    stale = [f"{doc}: `{line}`: {flag} is not a flag of {' '.join(program)}"
             for doc, line, program, flags in rows for flag in flags
             if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text(program))]
    assert not stale, "\n".join(stale)


def test_every_documented_what_if_is_a_name_the_projection_takes():
    names = [(doc, m) for doc, line in documented() for m in re.findall(r"--what-if (\w+)=", line)]
    assert names, "the docs show no --what-if"
    assert [(doc, n) for doc, n in names if n not in WHAT_IF] == []


@pytest.mark.parametrize("kind", ["make", "scripts"])
def test_every_documented_make_target_and_script_exists(kind):
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    missing = []
    for doc, line in documented():
        if kind == "make" and line.startswith("make "):
            target = line.split()[1]
            if "=" not in target and target not in targets:
                missing.append(f"{doc}: `{line}`")
        if kind == "scripts" and re.match(r"scripts/\S+\.(sh|py)\b", line):
            script = ROOT / line.split()[0]
            if not (script.is_file() and script.stat().st_mode & 0o111):
                missing.append(f"{doc}: `{line}`")
    assert not missing, "\n".join(missing)
