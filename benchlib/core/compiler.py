"""torch.compile as the training loops apply it, and what the compile did.

- The mode (`config/choices.COMPILE_MODES`): the whole model through `torch.compile` in
  its default, reduce-overhead or max-autotune mode, or `regional`: each block compiled on
  its own (`nn.Module.compile`, in place, so the state dict keeps its names), as torchtitan
  compiles transformer blocks.
- The cache: every compiled process gets an inductor cache folder of its own
  (`TORCHINDUCTOR_CACHE_DIR`, Triton's inside it), empty for a cold start or a copy of the
  folder an earlier process of the same work filled for a warm one, so that "cold" is
  never warmed by whatever an earlier run left in /tmp. The folder holds the FX graphs,
  AOTAutograd's graphs and the compiled kernels (C++ libraries on the CPU, Triton's on a
  GPU). The portable mega-cache (`torch.compiler.save_cache_artifacts`) is not used: on
  the CPU it holds the graphs but not the compiled C++, which a fresh process then builds
  again (a tiny MLP here: 22 CPU s loaded from the mega-cache, 1.6 s from the folder, 21
  cold; 2-core VM under load, one run each).
- What it did: graph breaks, each with its reason and the user's source line where it
  happened (`torch._dynamo.explain` over the model's forward on a batch of 2, after the
  timed window; for regional, the whole forward traced as plain code, so the breaks that
  count are those inside a block), and recompiles with their reasons
  (`torch._dynamo.utils.get_compilation_metrics`, over the whole run).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from benchlib.config.performance import compile_mode, compiled

CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
REASONS_KEPT = 10  # graph breaks and recompile reasons a record names (each once)


def whole(model: nn.Module, mode: str | bool) -> Callable[..., Any]:
    """What a step calls: the model compiled whole in `mode`'s torch.compile mode, or the
    model itself (off; regional, whose blocks `regions` compiled)."""
    mode = compile_mode(mode)
    if mode in ("off", "regional"):
        return model
    return torch.compile(model, mode=None if mode == "default" else mode)


def regions(blocks: nn.ModuleList) -> int:
    """Each block compiled on its own, in place; how many."""
    for block in blocks:
        block.compile()
    return len(blocks)


# a site's remote inductor caches (a shared FX-graph or autotune cache a cluster turns on
# for everyone): one would make a "cold" row warm, and a warm row warm from something else
REMOTE_CACHE_VARS = ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
                     "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE")
REMOTE_CACHE_CONFIG = ("fx_graph_remote_cache", "autotune_remote_cache",
                       "bundled_autotune_remote_cache")


def own_cache(warm_from: str = "") -> tuple[Path, dict[str, Any]]:
    """This process's own inductor cache folder, made now (before anything compiles) and
    removed at exit: empty (cold), or a copy of `warm_from`, the folder an earlier process
    kept (`keep_cache`). A warm start whose folder is gone or empty starts cold and says
    so; a site's remote caches are turned off either way, and named where one was on.
    (folder, the record's figures: `compile_cache_used`, `compile_cache_note`,
    `compile_remote_caches_off`)."""
    folder = Path(tempfile.mkdtemp(prefix="benchlib-compile-cache-"))
    atexit.register(shutil.rmtree, folder, True)
    figures: dict[str, Any] = {"compile_cache_used": "warm" if warm_from else "cold"}
    if warm_from:
        source = Path(warm_from)
        if source.is_dir() and any(source.iterdir()):
            shutil.copytree(source, folder, dirs_exist_ok=True)
        else:
            figures.update(compile_cache_used="cold", compile_cache_note=(
                f"warm start missed: the cache the priming launch filled ({source}) is gone "
                "or empty, so this launch compiled cold"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    figures["compile_remote_caches_off"] = ", ".join(_remote_caches_off()) or None
    return folder, figures


def _remote_caches_off() -> list[str]:
    """Turn inductor's remote caches off for this process; the ones that were on."""
    from torch._inductor import config

    were = [name for name, var in zip(REMOTE_CACHE_CONFIG, REMOTE_CACHE_VARS)
            if os.environ.get(var, "") not in ("", "0") or getattr(config, name, None)]
    for name, var in zip(REMOTE_CACHE_CONFIG, REMOTE_CACHE_VARS):
        os.environ[var] = "0"
        setattr(config, name, False)
    return were


def warm_missed(figures: dict[str, Any], cache: str) -> dict[str, Any]:
    """A warm launch that still missed its cache (filled by other work, another torch, a
    model since edited): 'warm start missed: N misses', as a note; nothing otherwise."""
    misses = figures.get("cache_misses") or 0
    if cache == "warm" and misses and "compile_cache_note" not in figures:
        return {"compile_cache_note": f"warm start missed: {misses} cache misses (its cache "
                "was filled by other work, another torch or an older model)"}
    return {}


def keep_cache(folder: Path, to: str) -> None:
    """The cache folder copied to `to` whole or not at all (a copy beside it, renamed
    into place): a warm start never reads half a cache."""
    target = Path(to)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(folder, partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def graph_breaks(model: nn.Module, x: torch.Tensor, forward: Callable[..., Any] | None = None
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, details): the graph breaks torch._dynamo finds in the model's forward on
    `x` (each place it stopped tracing, with its reason) and the graphs it made, and each
    break's reason (its first line) with the file, line and code of the user's frame it
    happened in (the innermost outside torch). `forward(model, x)` calls the model as the
    step does (default: `model(x)`)."""
    call = forward or (lambda m, batch: m(batch))
    # blocks compiled on their own (regional) are traced as plain code here, as the whole
    # model would be: their breaks are the ones that split a compiled region
    regional = [m for m in model.modules() if getattr(m, "_compiled_call_impl", None) is not None]
    kept = [m._compiled_call_impl for m in regional]
    for m in regional:
        m._compiled_call_impl = None
    try:
        explained = torch._dynamo.explain(lambda batch: call(model, batch))(x)
    finally:
        for m, impl in zip(regional, kept):
            m._compiled_call_impl = impl
    found: dict[tuple, dict[str, Any]] = {}
    for reason in explained.break_reasons:
        frame = _user_frame(reason.user_stack or [])
        text = str(reason.reason).strip().splitlines()[0] if reason.reason else "unknown"
        where = {"reason": text, "file": frame.filename if frame else None,
                 "line": frame.lineno if frame else None,
                 "code": (frame.line or "").strip() if frame else None}
        found.setdefault((where["file"], where["line"], text), where)
    reasons = list(found.values())
    # a break is where dynamo stopped tracing (one reason each); the graphs it left can be
    # more than breaks + 1 (a break inside a call also splits the caller's graph)
    return ({"graph_breaks": len(explained.break_reasons), "graphs": explained.graph_count},
            {"graph_break_reasons": reasons[:REASONS_KEPT]})


def _user_frame(stack: list[Any]) -> Any:
    """The innermost frame of the user's code (not torch's, not this module's)."""
    torch_dir = os.path.dirname(torch.__file__)
    mine = [f for f in stack if not f.filename.startswith(torch_dir) and f.filename != __file__]
    return (mine or stack or [None])[-1]


def recompiles(window_start: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, details): the frames this process compiled, how many of those compiles
    were recompiles (a guard failed: a new shape, a new value) and their reasons, and the
    compile caches' hits and misses (FX graphs, AOTAutograd): a warm start hits, a cold
    one misses. With `window_start` (time.time() where the timed steps began): whether
    every compile finished before it (`compiled_in_warmup`), and those that did not, with
    their seconds and reasons: inside the window, they are in its steady figure."""
    from torch._dynamo.utils import counters, get_compilation_metrics

    done = list(get_compilation_metrics())
    reasons = [m.recompile_reason for m in done if m.recompile_reason]
    cache = {name: sum(n for group in ("inductor", "aot_autograd")
                       for key, n in counters[group].items() if key.endswith(suffix))
             for name, suffix in (("cache_hits", "cache_hit"), ("cache_misses", "cache_miss"))}
    metrics = {"compiled_frames": len(done), "recompiles": len(reasons), **cache}
    details = {"recompile_reasons": list(dict.fromkeys(reasons))[:REASONS_KEPT]}
    if window_start is not None:
        late = [m for m in done if (m.start_time or 0) >= window_start]
        metrics.update(compiled_in_warmup=not late, compiles_in_window=len(late),
                       compile_in_window_s=sum(_seconds(m) for m in late))
        details["compiles_in_window"] = list(dict.fromkeys(
            m.recompile_reason or "a first compile" for m in late))[:REASONS_KEPT]
    return metrics, details


def _seconds(m: Any) -> float:
    """A compile's own seconds (its start to its end, as dynamo timed it)."""
    if getattr(m, "end_time_us", None) and getattr(m, "start_time_us", None):
        return (m.end_time_us - m.start_time_us) / 1e6
    return float(getattr(m, "entire_frame_compile_time_s", None) or 0.0)


def figures(model: nn.Module, x: torch.Tensor, mode: str,
            forward: Callable[..., Any] | None = None,
            window_start: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A compiled run's recompiles (and whether any fell inside the timed window that
    began at `window_start`), then its graph breaks (explain resets dynamo, so it comes
    after the timed window and after the recompiles are read); nothing when off."""
    if not compiled(mode):
        return {}, {}
    metrics, details = recompiles(window_start)
    breaks, where = graph_breaks(model, x, forward)
    return {**metrics, **breaks}, {**details, **where}
