"""Code of the user's own, named by entry point: `pkg.module:function`, as setuptools
names console scripts. A model, data set, collate or loss function is imported where a
rank runs, so the module must be importable there: installed, on PYTHONPATH, or under
the project root (benchlib looks there too, so `examples.custom_model:build` works from
any folder of a checkout).

Every failure is a ConfigError naming the parameter and the value: one line, exit 2."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any, Callable

from benchlib.config.choices import is_entry_point
from benchlib.errors import ConfigError


def import_module(field: str, value: str, module_name: str):
    """The module of an entry point; the project root and the working directory are
    tried after sys.path."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as first:
        from benchlib import paths

        extra = [str(p) for p in (paths.project_root(), Path.cwd()) if str(p) not in sys.path]
        sys.path.extend(extra)
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError:
            for p in extra:
                sys.path.remove(p)
            raise ConfigError(field, f"{value!r}: module {module_name} is not importable here "
                              f"({first}); install it, put its folder on PYTHONPATH, or keep it "
                              "under the project root") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed while importing
        raise ConfigError(field, f"{value!r}: importing {module_name} failed: "
                          f"{type(e).__name__}: {e}") from None


def load(field: str, value: str) -> Callable[..., Any]:
    """The callable `pkg.module:function` names (a dotted attribute path after the colon
    is allowed: `pkg.module:Class.build`)."""
    if not is_entry_point(value):
        raise ConfigError(field, f"{value!r} is not an entry point: write pkg.module:function")
    module_name, _, attr = value.partition(":")
    obj: Any = import_module(field, value, module_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(field, f"{value!r}: {module_name} has no {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(field, f"{value!r} is a {type(obj).__name__}, not callable: name a "
                          "function that returns it")
    return obj


def call(field: str, value: str, fn: Callable[..., Any], kwargs: dict[str, Any],
         args_field: str = "model_args") -> Any:
    """fn(**kwargs), its failure one line naming the parameter (`args_field` when the
    arguments do not fit the function)."""
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as e:  # the arguments do not fit the function: the user's model_args
        raise ConfigError(args_field, f"{value!r} does not take these arguments "
                          f"{sorted(kwargs)}: {e}") from None
    except ValueError:  # a builtin without a signature: let the call say
        pass
    try:
        return fn(**kwargs)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code failed
        raise ConfigError(field, f"{value!r} failed: {type(e).__name__}: {e}") from None


# torch runs the model: it is part of the stack (the testbed names its version), so a torch
# upgrade reads as "stack changed", never as the model's; every other library a model's
# classes come from (timm, transformers, torchvision) defines it, by name and version
FRAMEWORK = ("torch",)


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    """Where installed libraries and the standard library live: a class defined under one
    of these is a library's, any other (the user's files, a checkout) is hashed."""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    roots.update(site.getsitepackages())
    return tuple(str(Path(r).resolve()) + os.sep for r in roots if r)


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def library(module_name: str, path: str | None) -> str | None:
    """`name version` of the installed library a class's module belongs to; None for code
    of the user's (a file outside the installed libraries)."""
    if path and not str(Path(path).resolve()).startswith(_library_roots()):
        return None
    import importlib.metadata

    top = module_name.partition(".")[0]
    try:  # most libraries are installed under their module's name (torch, timm, ...): a
        # look-up of one, where the map of every installed file costs 0.25-1 CPU s a process
        found = importlib.metadata.distribution(top)
    except importlib.metadata.PackageNotFoundError:
        found = None
    if found is None or top not in (_top_level(found) or [top]):
        dist = (_distributions().get(top) or [top])[0]
        try:
            found = importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:  # the standard library, a vendored copy
            return f"{top} (python {sys.version.split()[0]})"
    name = found.metadata["Name"]
    return f"{name} {importlib.metadata.version(name)}"


def _top_level(dist) -> list[str] | None:
    """The modules a distribution says it installs (top_level.txt), None where it does not
    say: then its name is taken to be its module's."""
    text = dist.read_text("top_level.txt")
    return text.split() if text else None


def _source_file(obj: Any) -> str | None:
    try:
        return inspect.getsourcefile(obj)
    except TypeError:  # a builtin: no source file
        return None


def model_identity(name: str, model: Any, model_args: dict | None = None) -> dict[str, Any]:
    """What a model is, for `compare`'s "model changed": a hash (`model_source_sha`) of the
    name, `model_args`, the source of the definitions the model is made of (the builder,
    `pkg.module:function`, and the model's own classes, with what they name: helpers and
    constants of their file, and the user's own modules they import, followed as far as
    they go, installed libraries and the standard library excepted), and the name and
    version of each library its other classes come from (timm, transformers, torchvision;
    torch's classes are the stack's, not the model's); `model_source` lists the files read.
    An edit to the builder, the user's class or a helper module it imports changes the
    hash; an edit to another model in the same file, or a torch upgrade, does not."""
    seeds: list[tuple[str, str | None]] = []
    libraries: set[str] = set()
    prefix = name.partition(":")[0]
    if is_entry_point(name):
        builder = getattr(load("model", name), "__wrapped__", None) or load("model", name)
        seeds.append((builder.__module__, builder.__qualname__.partition(".")[0]))
    elif ":" in name:  # timm:NAME, hf:NAME: the library that builds it
        from benchlib.config.choices import MODEL_LIBRARIES

        lib = library(MODEL_LIBRARIES.get(prefix, prefix), None)
        if lib:
            libraries.add(lib)
    for cls in {type(m) for m in getattr(model, "modules", lambda: [model])()}:
        path = _source_file(cls)
        lib = library(cls.__module__, path)
        if lib is None and path:
            seeds.append((cls.__module__, cls.__qualname__.partition(".")[0]))
        elif lib and lib.partition(" ")[0] not in FRAMEWORK:
            libraries.add(lib)
    digest = hashlib.sha256(json.dumps({"model": name, "model_args": model_args or {},
                                        "libraries": sorted(libraries)},
                                       sort_keys=True, default=str).encode())
    root, shown = _project_root(), []
    read = _used_source(seeds)
    for path in sorted(read):
        for text in read[path]:
            digest.update(text.encode())
        shown.append(os.path.relpath(path, root) if path.startswith(str(root)) else path)
    return {"model_source_sha": digest.hexdigest()[:16],
            "model_source": "; ".join([*shown, *sorted(libraries), "model_args"])}


def _own_file(module_name: str) -> str | None:
    """The file of an imported module of the user's own (outside the installed libraries
    and the standard library), or None."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    return path if path and path.endswith(".py") and library(module_name, path) is None \
        else None


@functools.lru_cache(maxsize=64)
def _parsed(path: str, mtime: float) -> tuple[str, dict[str, ast.AST], dict[str, tuple]]:
    """A file's text, its top-level definitions by name (functions, classes, assignments)
    and its imports by the local name they bind: (module, attribute or None)."""
    text = Path(path).read_text()
    tree = ast.parse(text)
    defined: dict[str, ast.AST] = {}
    imports: dict[str, tuple[str, str | None]] = {}
    package = _package_of(path)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        defined[n.id] = node
        elif isinstance(node, ast.Import):
            for a in node.names:
                imports[a.asname or a.name.partition(".")[0]] = (
                    a.name if a.asname else a.name.partition(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            for a in node.names:
                imports[a.asname or a.name] = (base, a.name)
    return text, defined, imports


def _package_of(path: str) -> str:
    """The package a file's relative imports resolve in (its module's, as imported)."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == path:
            return name if path.endswith("__init__.py") else name.rpartition(".")[0]
    return ""


STACK = "benchlib."  # benchlib's own modules are the stack's (the record's commit), not the model's


def _used_source(seeds: list[tuple[str, str | None]]) -> dict[str, list[str]]:
    """The source each file of the user's own contributes: from each (module, top-level
    name) seed, its definition and every top-level name it uses, in its file and through
    the imports of the user's own modules (a module imported whole: its whole file;
    benchlib's own modules are not followed), followed until nothing new is named.
    {path: [source segments, in file order]}."""
    todo, seen, found = list(seeds), set(), {}
    while todo:
        module_name, name = todo.pop()
        if name is not None and f"{module_name}.{name}" in sys.modules:  # from pkg import sub
            module_name, name = f"{module_name}.{name}", None
        path = _own_file(module_name)
        if path is None or (path, name) in seen or (path, None) in seen:
            continue
        seen.add((path, name))
        text, defined, imports = _parsed(path, os.path.getmtime(path))
        node = defined.get(name) if name is not None else None
        if node is None:  # the whole module (or a name it does not define at top level)
            found[path] = {0: text}
            todo += [(m, a) for m, a in imports.values() if not m.startswith(STACK)]
            continue
        found.setdefault(path, {})[node.lineno] = ast.get_source_segment(text, node) or ""
        for used in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - {name}:
            if used in defined:
                todo.append((module_name, used))
            elif used in imports and not imports[used][0].startswith(STACK):
                todo.append(imports[used])
    return {path: [seg for _, seg in sorted(parts.items())] for path, parts in found.items()}


def _project_root() -> Path:
    from benchlib import paths

    return paths.project_root()


def check_importable(pairs: list[str]) -> int:
    """`python -m benchlib.core.entrypoints model=pkg.mod:fn dataset=...`: what a rendered
    Slurm script runs on every node before the ranks start. Each named callable (or the
    library of a timm:/hf: model) imports here; else one line naming the parameter, exit 2."""
    from benchlib.config.choices import MODEL_LIBRARIES

    for pair in pairs:
        field, _, value = pair.partition("=")
        prefix = value.partition(":")[0]
        try:
            if prefix in MODEL_LIBRARIES:
                import_module(field, value, MODEL_LIBRARIES[prefix])
            else:
                load(field, value)
        except ConfigError as e:
            import socket

            print(f"benchlib on {socket.gethostname()}: {e}", file=sys.stderr, flush=True)
            return e.status()
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchlib.core.entrypoints",
        description="Check that each model, data set, collate or loss of your own imports "
        "here (what a rendered Slurm script runs on every node before the ranks start); "
        "one line naming the parameter and exit 2 when one does not.")
    parser.add_argument("pairs", nargs="+", metavar="FIELD=VALUE",
                        help="e.g. model=examples.custom_model:build dataset=... model=timm:resnet18")
    return check_importable(parser.parse_args(argv).pairs)


if __name__ == "__main__":
    raise SystemExit(main())
