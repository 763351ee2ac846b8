"""What benchlib reads of a data set of the user's before it trains: a batch of its first
two items (the model check's and the FLOP count's), the largest label of its first 256
and, for token ids, the largest id of its first 64.

They are read from an instance of their own, built and read in a forked process of its
own, never from the instance the DataLoader's workers will use. A data set that sets
itself up on first access (an h5py file, an LMDB environment, an S3 client opened in the
first `__getitem__`) then sets up in each worker, as it would without benchlib: its
start-up is in `first_batch_s`, and no handle opened in the rank process is shared by the
workers it forks (issue 52: a 4 s set-up per worker was recorded as a 0.24 s first batch).
"""

from __future__ import annotations

import multiprocessing
import pickle
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch

from benchlib.errors import ConfigError

LABELS_READ, IDS_READ = 256, 64  # items whose labels, or token ids, size the model's outputs


@dataclass
class Probe:
    """The first two items batched, and the largest label and token id seen."""

    x: Any  # a tensor, or what the user's collate makes of the inputs
    y: Any
    largest_label: int
    largest_id: int | None  # integer inputs (token ids): the largest of the first IDS_READ


def item(dataset: Any, i: int, name: str) -> Any:
    """`dataset[i]`; an item that raises is the data's error, named as such (not the
    model's): `dataset: item 17 of 'pkg.mod:fn' raised ValueError: ...`."""
    try:
        return dataset[i]
    except Exception as e:  # noqa: BLE001 - the user's data set
        raise ConfigError("dataset", f"item {i} of {name!r} raised {type(e).__name__}: "
                          f"{(str(e).splitlines() or [''])[0]}") from None


def check_item(first: Any, name: str) -> None:
    """Without a collate function, an item is (input, label), tensors or numbers."""
    ok = isinstance(first, (tuple, list)) and len(first) == 2 and all(
        isinstance(v, (torch.Tensor, int, float)) for v in first)
    if not ok:
        what = type(first).__name__ if not isinstance(first, (tuple, list)) else \
            "(" + ", ".join(type(v).__name__ for v in first) + ")"
        raise ConfigError("dataset", f"item 0 of {name!r} is {what}; each item must be "
                          "(input, label), tensors or numbers, or name a collate function")


def read(dataset: Any, name: str, collate: Callable, checked: bool) -> Probe:
    """The probe's figures, read from `dataset` in this process (`checked`: each item must
    be (input, label), as default_collate takes it)."""
    first = item(dataset, 0, name)
    if checked:
        check_item(first, name)
    x, y = collate([first, item(dataset, 1, name)])
    n = len(dataset)
    labels = [item(dataset, i, name) for i in range(min(n, LABELS_READ))]
    labels = [v[1] for v in labels if isinstance(v, (tuple, list)) and len(v) == 2]
    largest = max((int(torch.as_tensor(v).max()) for v in labels), default=0)
    largest_id = None
    if isinstance(x, torch.Tensor) and not torch.is_floating_point(x) and x.dim() == 2:
        largest_id = int(collate([item(dataset, i, name) for i in range(min(n, IDS_READ))])[0].max())
    return Probe(x, y, largest, largest_id)


def _child(build: Callable[[], Any], name: str, collate: Callable, checked: bool, conn) -> None:
    # plain pickle, not multiprocessing's: torch's reducers would hand the tensors over as
    # shared-memory file descriptors, which die with this process
    try:
        answer: tuple = ("ok", read(build(), name, collate, checked))
    except ConfigError as e:
        answer = ("config", e.field, str(e).removeprefix(f"{e.field}: "))
    except BaseException as e:  # noqa: BLE001 - anything else the user's code raised
        answer = ("error", f"{type(e).__name__}: {e}", traceback.format_exc(limit=3))
    try:
        conn.send_bytes(pickle.dumps(answer))
    except Exception as e:  # noqa: BLE001 - items pickle cannot hold
        conn.send_bytes(pickle.dumps(("error", f"its first items cannot be pickled: {e}", "")))
    finally:
        conn.close()


def apart(build: Callable[[], Any], name: str, collate: Callable, checked: bool) -> Probe:
    """The probe read from `build()`'s instance in a forked process (the rank's own
    instance, the one its DataLoader workers fork with, is not touched)."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(build, name, collate, checked, send), daemon=True)
    proc.start()
    send.close()
    try:
        answer = pickle.loads(receive.recv_bytes())
    except EOFError:
        answer = None
    proc.join()
    if answer is None:
        raise ConfigError("dataset", f"{name!r}: reading its first items in a process of "
                          f"their own ended it (exit code {proc.exitcode})")
    if answer[0] == "config":
        raise ConfigError(answer[1], answer[2])
    if answer[0] == "error":
        raise ConfigError("dataset", f"{name!r}: {answer[1].splitlines()[0]}")
    return answer[1]
