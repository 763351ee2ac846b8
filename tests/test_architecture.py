"""benchlib's layers (docs/architecture.md): every module sits in one, imports point one
way only (down the list below, never up), and no import cycle, counting every `import`
wherever it is written (function-local imports included).

Run it alone to see every offending edge: `pytest -q tests/test_architecture.py`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "benchlib"

# Top to bottom: a module may import from its own layer and the layers above it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("benchlib", "benchlib.errors", "benchlib.paths", "benchlib.atomic",
              "benchlib.reference")),
    ("config", ("benchlib.config",)),
    ("core", ("benchlib.core",)),
    ("data", ("benchlib.data",)),
    ("store", ("benchlib.store",)),
    ("shards", ("benchlib.shards",)),
    ("distributed", ("benchlib.distributed",)),
    ("launch", ("benchlib.launch",)),
    ("slurm", ("benchlib.slurm",)),
    ("trainers", ("benchlib.trainers",)),
    ("workers", ("benchlib.workers",)),
    ("studies", ("benchlib.studies",)),
    ("records", ("benchlib.records",)),
    ("runs", ("benchlib.runs",)),
    ("projection", ("benchlib.projection",)),  # models of performance, below the analysis
    # diagnose's advice compares two setups as the analysis does (analysis.sides)
    ("analysis", ("benchlib.analysis",)),
    ("diagnose", ("benchlib.diagnose",)),
    ("compare", ("benchlib.compare",)),
    ("export", ("benchlib.export",)),  # reads records as compare opens them, writes elsewhere
    ("report", ("benchlib.report",)),
    ("cli", ("benchlib.cli", "benchlib.__main__")),
    ("gpucheck", ("benchlib.gpucheck",)),  # drives the CLIs, as a user would
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
# config is pure: it describes parameters and checks values, nothing else
CONFIG_MAY_NOT_IMPORT = ("torch", "torchvision", "lightning", "numpy", "pandas", "jax", "yaml",
                         "papermill", "subprocess", "socket", "shutil", "os", "pathlib")


def modules() -> dict[str, Path]:
    found = {}
    for f in PACKAGE.rglob("*.py"):
        rel = f.relative_to(PACKAGE.parent).with_suffix("")
        found[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = f
    return found


def imported_names(module: str, file: Path) -> set[str]:
    """Every module name an import statement anywhere in `file` names (relative resolved)."""
    base = module if file.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                b = base
                for _ in range(node.level - 1):
                    b = b.rpartition(".")[0]
                mod = f"{b}.{mod}" if mod else b
            names |= {mod, *(f"{mod}.{a.name}" for a in node.names)}
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the benchlib modules it imports (a name resolves to its longest module)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for name in imported_names(m, f):
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name and name != m:
                edges[m].add(name)
    return edges


def layer_of(module: str) -> str | None:
    best = None
    for name, prefixes in LAYERS:
        for p in prefixes:
            exact_only = p == "benchlib"  # the package itself, not everything under it
            if module == p or (not exact_only and module.startswith(p + ".")):
                if best is None or len(p) > len(best[1]):
                    best = (name, p)
    return best[0] if best else None


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def upward_edges(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            la, lb = layer_of(a), layer_of(b)
            if la and lb and RANK[lb] > RANK[la]:
                out.append(f"{a} imports {b}: {la} may not import {lb}")
    return out


def test_every_module_sits_in_a_layer():
    homeless = sorted(m for m in modules() if layer_of(m) is None)
    assert not homeless, ("modules in no layer (move them into one of "
                          f"{', '.join(RANK)}):\n" + "\n".join(homeless))


MAX_LINES = 350  # a module past this holds more than one idea (issue 37)


def test_no_module_is_longer_than_350_lines():
    long = sorted(f"{m}: {n} lines" for m, f in modules().items()
                  if (n := len(f.read_text().splitlines())) > MAX_LINES)
    assert not long, f"modules over {MAX_LINES} lines (split them by idea):\n" + "\n".join(long)


def test_imports_point_down_the_layers_only():
    bad = upward_edges(import_graph())
    assert not bad, f"{len(bad)} import(s) against the layers:\n" + "\n".join(bad)


def test_there_is_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_config_is_pure():
    bad = []
    for m, f in modules().items():
        if layer_of(m) == "config":
            for name in sorted(imported_names(m, f)):
                if name.split(".")[0] in CONFIG_MAY_NOT_IMPORT:
                    bad.append(f"{m} imports {name}: config may not import {name.split('.')[0]}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("edges, message", [
    ({"benchlib.config.x": {"benchlib.launch.y"}, "benchlib.launch.y": set()},
     "benchlib.config.x imports benchlib.launch.y: config may not import launch"),
])
def test_an_upward_import_is_named_with_both_layers(edges, message):
    assert upward_edges(edges) == [message]


def test_a_cycle_is_found_even_inside_one_layer():
    edges = {"benchlib.core.a": {"benchlib.core.b"}, "benchlib.core.b": {"benchlib.core.a"},
             "benchlib.core.c": {"benchlib.core.a"}}
    assert cycles(edges) == [["benchlib.core.a", "benchlib.core.b"]]


BUILTIN_RAISES = ("ValueError", "RuntimeError", "TypeError", "IndexError", "KeyError",
                  "AssertionError", "Exception")


def test_every_exception_class_lives_in_errors_py():
    from benchlib import errors

    ours = {name for name in dir(errors) if isinstance(getattr(errors, name), type)
            and issubclass(getattr(errors, name), BaseException)}
    elsewhere = []
    for m, f in modules().items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef) and m != "benchlib.errors":
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if bases & (ours | set(BUILTIN_RAISES) | {"BaseException"}):
                    elsewhere.append(f"{m}.{node.name}")
    assert not elsewhere, "exception classes outside benchlib/errors.py: " + ", ".join(elsewhere)


def test_no_plain_builtin_exception_is_raised():
    """A user gets one of errors.py's classes (with its one-line message), never a bare
    ValueError or RuntimeError."""
    plain = []
    for m, f in modules().items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if getattr(exc, "id", None) in BUILTIN_RAISES:
                    plain.append(f"{m}:{node.lineno} raises {exc.id}")
    assert not plain, "\n".join(plain)


# ---------------------------------------------------------------- names in prose

ROOT = PACKAGE.parent
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
# a file's extension after a dot ("studies.md"), not a module's attribute
EXTENSIONS = {"py", "md", "html", "zip", "json", "yaml", "yml", "ipynb", "png", "css", "txt",
              "csv", "j2", "toml", "log", "sh"}
# record fields written like a module's names ("testbed.hosts": the record's testbed)
RECORD_FIELDS = {"testbed", "env", "params"}
# the keys `benchlib export` gives MLflow's tags and metrics ("benchlib.run_id"): not modules
EXPORT_KEYS = {"run_id", "label", "study", "table", "testbed", "metric", "bounds"}
DOTTED = re.compile(r"(?<![\w./-])(benchlib|" + "|".join(SUBPACKAGES) + r")((?:\.[A-Za-z_]\w*)+)")
SHORT = re.compile(r"(?<![\w./-])([a-z_][a-z_0-9]*)\.([A-Za-z_]\w*)")
PATH = re.compile(r"(?<![\w/.-])((?:benchlib/)?(?:" + "|".join(SUBPACKAGES) + r")/[\w/]+\.py)\b")


def top_level_names(file: Path) -> set[str]:
    """What a module defines or imports at its top level (under an if or try too)."""
    names = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


class ModuleIndex:
    """benchlib's modules, by dotted name and by their own name, and what each defines
    (read on first use)."""

    def __init__(self) -> None:
        self.files = modules()
        self.by_own_name: dict[str, list[str]] = {}
        for m in self.files:
            self.by_own_name.setdefault(m.rpartition(".")[2], []).append(m)
        self.names: dict[str, set[str]] = {}

    def resolves(self, parts: list[str]) -> bool:
        """`parts` name a module of benchlib and, after it, at most a name it defines."""
        for i in range(len(parts), 0, -1):
            module = ".".join(parts[:i])
            if module in self.files:
                rest = parts[i:]
                if rest and module not in self.names:
                    self.names[module] = top_level_names(self.files[module])
                return not rest or rest[0] in self.names[module]
        return False


def stale_names(text: str, index: ModuleIndex) -> list[str]:
    """The module names in `text` that do not resolve: `benchlib.x.y`, `core.stats.f` (a
    subpackage first), `stats.f` (a module's own name first), `core/stats.py`."""
    stale = []
    for m in DOTTED.finditer(text):
        parts = [m.group(1), *m.group(2).strip(".").split(".")]
        if parts[-1] in EXTENSIONS or len(parts[-1]) == 1:  # a file, or benchlib.config.x
            continue
        if parts[0] == "benchlib" and parts[1] in EXPORT_KEYS:
            continue
        # `studies.x` may be the subpackage's or config/studies.py's (a module's own name)
        owners = [m.split(".") for m in index.by_own_name.get(parts[0], [])]
        if not index.resolves(parts if parts[0] == "benchlib" else ["benchlib", *parts]) and \
                not any(index.resolves([*owner, *parts[1:]]) for owner in owners):
            stale.append(m.group(0))
    for m in SHORT.finditer(text):
        own, attr = m.groups()
        mods = index.by_own_name.get(own, [])
        if mods and own not in {"benchlib", *SUBPACKAGES, *RECORD_FIELDS} and \
                attr not in EXTENSIONS and len(attr) > 1 and \
                not any(index.resolves([*mod.split("."), attr]) for mod in mods):
            stale.append(m.group(0))
    for m in PATH.finditer(text):
        path = m.group(1)
        if not (ROOT / path if path.startswith("benchlib/") else PACKAGE / path).exists():
            stale.append(path)
    return stale


COMMENT = re.compile(r"(?:^\s*|\s\s)#(.*)$")  # a comment line, or one after code (PEP 8's two spaces)
DEFINITIONS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def prose(file: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of what a reader reads: a Markdown file's lines; a module's comments
    and docstrings (of the module and of every class and function, nested too)."""
    text = file.read_text()
    if file.suffix != ".py":
        yield from enumerate(text.splitlines(), 1)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if "#" in line and (m := COMMENT.search(line)):
            yield n, m.group(1)
    statements = [ast.parse(text)]
    while statements:  # statements only: no expression holds a docstring
        node = statements.pop()
        body = getattr(node, "body", [])
        if isinstance(node, DEFINITIONS) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            for i, line in enumerate(body[0].value.value.splitlines()):
                yield body[0].lineno + i, line
        for field in ("body", "orelse", "finalbody", "handlers"):
            statements += [s for s in getattr(node, field, []) if isinstance(s, ast.AST)]


def test_every_module_the_docs_and_docstrings_name_exists():
    """Every module (and name in it) that docs/*.md, README.md or a docstring or comment of
    benchlib names resolves: a module renamed or gone leaves no pointer to it behind."""
    index = ModuleIndex()
    files = [*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "docs").glob("*.md")),
             ROOT / "README.md"]
    stale = [f"{f.relative_to(ROOT)}:{n}: {name}" for f in files for n, line in prose(f)
             for name in stale_names(line, index)]
    assert not stale, "names of modules that do not exist:\n" + "\n".join(stale)


@pytest.mark.parametrize("text, stale", [
    ("as in benchlib.trainer", ["benchlib.trainer"]),
    ("its sentence in `benchlib/analysis/headlines.py`", ["benchlib/analysis/headlines.py"]),
    ("the one rule (core.stats.verdict)", ["core.stats.verdict"]),
    ("rejects it (intervals.holm)", ["intervals.holm"]),
    ("by benchlib.records.results.METRICS_FILE_VAR, core.stats.direction_verdict, "
     "`core/intervals.py`, results.latest_ok, the record's testbed.hosts, benchlib.config.x",
     []),
])
def test_a_stale_module_name_is_found_and_a_live_one_is_not(text, stale):
    assert stale_names(text, ModuleIndex()) == stale
