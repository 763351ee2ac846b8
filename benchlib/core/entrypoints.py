"""Code of the user's own, named by entry point: `pkg.module:function`, as setuptools
names console scripts. A model, data set, collate or loss function is imported where a
rank runs, so the module must be importable there: installed, on PYTHONPATH, or under
the project root (benchlib looks there too, so `examples.custom_model:build` works from
any folder of a checkout).

Every failure is a ConfigError naming the parameter and the value: one line, exit 2."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
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


def source_hash(*objects: Any) -> str | None:
    """A short hash of the source files that define `objects` (a model's class, its
    builder): what `compare` reads to tell "model changed" from "stack changed"."""
    digest, seen = hashlib.sha256(), set()
    for obj in objects:
        target = obj if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isfunction(obj) \
            else type(obj)
        try:
            path = inspect.getsourcefile(target)
        except TypeError:  # a builtin: no source file
            path = None
        if path and path not in seen:
            seen.add(path)
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16] if seen else None


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
