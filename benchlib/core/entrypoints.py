"""Code of the user's own, named by entry point: `pkg.module:function`, as setuptools
names console scripts. A model, data set, collate or loss function is imported where a
rank runs, so the module must be importable there: installed, on PYTHONPATH, or under
the project root (benchlib looks there too, so `examples.custom_model:build` works from
any folder of a checkout).

Every failure is a ConfigError naming the parameter and the value: one line, exit 2."""

from __future__ import annotations

import functools
import hashlib
import importlib
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
    name, `model_args`, the source files of the builder (`pkg.module:function`) and of the
    model's own classes, and the name and version of each library its other classes come
    from (timm, transformers, torchvision; torch's classes are the stack's, not the
    model's); `model_source` lists what was hashed. An edit to the builder or to the
    user's class changes the hash; a torch upgrade does not."""
    files: set[str] = set()
    libraries: set[str] = set()
    prefix = name.partition(":")[0]
    if is_entry_point(name):
        builder = load("model", name)
        path = _source_file(getattr(builder, "__wrapped__", builder))
        if path:
            files.add(path)
    elif ":" in name:  # timm:NAME, hf:NAME: the library that builds it
        from benchlib.config.choices import MODEL_LIBRARIES

        lib = library(MODEL_LIBRARIES.get(prefix, prefix), None)
        if lib:
            libraries.add(lib)
    for cls in {type(m) for m in getattr(model, "modules", lambda: [model])()}:
        path = _source_file(cls)
        lib = library(cls.__module__, path)
        if lib is None and path:
            files.add(path)
        elif lib and lib.partition(" ")[0] not in FRAMEWORK:
            libraries.add(lib)
    digest = hashlib.sha256(json.dumps({"model": name, "model_args": model_args or {},
                                        "libraries": sorted(libraries)},
                                       sort_keys=True, default=str).encode())
    root = _project_root()
    shown = []
    for path in sorted(files):
        digest.update(Path(path).read_bytes())
        shown.append(os.path.relpath(path, root) if path.startswith(str(root)) else path)
    return {"model_source_sha": digest.hexdigest()[:16],
            "model_source": "; ".join([*shown, *sorted(libraries), "model_args"])}


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
