"""benchlib's layers (docs/architecture.md): every module sits in one, imports point one
way only (down the list below, never up), and no import cycle, counting every `import`
wherever it is written (function-local imports included).

Run it alone to see every offending edge: `pytest -q tests/test_architecture.py`.
"""

from __future__ import annotations

import ast
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
