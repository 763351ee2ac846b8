"""Where things live: the project root and the outputs folder.

Relative paths in notebook parameters and parameter tables are resolved against the
project root, so a notebook finds the same files whether JupyterLab runs it from
notebooks/ or a sweep runs it from anywhere. BENCHLIB_OUTPUTS moves all outputs
(for example to a cluster's shared file system): a relative path that starts with
`outputs/` then lands there too.
"""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from benchlib.errors import UsageError


def project_root() -> Path:
    """BENCHLIB_ROOT, else the checkout this package sits in, else the working directory."""
    if os.environ.get("BENCHLIB_ROOT"):
        return Path(os.environ["BENCHLIB_ROOT"]).resolve()
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "notebooks").is_dir():
        return checkout
    return Path.cwd()


def outputs_dir() -> Path:
    custom = os.environ.get("BENCHLIB_OUTPUTS")
    return Path(custom).expanduser().resolve() if custom else project_root() / "outputs"


def checked_outputs(folder: Path) -> Path:
    """The outputs folder, unless a file is in its place."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"outputs: {folder} is a file, not a folder; give --outputs (or "
                         "BENCHLIB_OUTPUTS) a folder, new or one that holds outputs")
    return folder


def resolve(path: str | os.PathLike) -> Path:
    """An absolute path: absolute stays; `outputs/...` goes to outputs_dir(); any other
    relative path is taken from the project root."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    if p.parts and p.parts[0] == "outputs":
        return outputs_dir().joinpath(*p.parts[1:])
    return project_root() / p


def from_command_line(path: str | os.PathLike) -> Path:
    """An absolute path for a path given on the command line: a relative one is taken from
    the working directory, as in any shell command, except `outputs/...` while
    BENCHLIB_OUTPUTS is set, which lands there as it does for rows."""
    p = Path(path).expanduser()
    if not p.is_absolute() and p.parts[:1] == ("outputs",) and os.environ.get("BENCHLIB_OUTPUTS"):
        return resolve(p)
    return p.resolve()


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def extra_study_modules() -> list[str]:
    """The modules `BENCHLIB_STUDIES` names (comma-separated), whose STUDIES join the
    registry (benchlib.config.studies)."""
    return [m.strip() for m in os.environ.get("BENCHLIB_STUDIES", "").split(",") if m.strip()]


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in os.environ for a while (a kernel or a DataLoader worker started meanwhile
    copies them), then each variable back as it was."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
