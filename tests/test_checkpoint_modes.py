"""Checkpoint modes with real processes on CPU (issue 41): two gloo ranks save and restore a
model with its optimizer state (some tens of MB) in each mode, FSDP2's shards included;
the ddp worker's record of a run that checkpoints asynchronously; and a partial DCP
checkpoint, never taken for a resume. One launch per fixture, shared by the tests; the
ranks start the tcp:// way (one process per rank, no torchrun agent): how they start is
not what these tests are about."""

import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchlib.config.choices import CHECKPOINT_MODES
from benchlib.launch.launcher import launch
from benchlib.trainers import checkpoint

pytestmark = pytest.mark.distributed

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
# 3.7 million parameters: 15 MB of fp32 weights and 15 MB of SGD momentum
MODEL = ["--model", "gpt-tiny", "--model-args", '{"n_layer": 4, "n_embd": 256}']
STATE_MB = 30.0


def two_ranks(module: str, args: list[str], out: Path) -> dict:
    """Rank 0's result of `module` on 2 ranks over tcp://, logs in `out`."""
    return launch(module, args, out, "tcp", nproc=2, timeout_s=300, env=ENV).result


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> tuple[dict, Path]:
    """Every mode on FSDP2's shards: 2 saves, 2 restores each, one launch."""
    out = tmp_path_factory.mktemp("bench")
    result = two_ranks("checkpoint_bench", [*MODEL, "--strategy", "fsdp2", "--device", "cpu",
                                            "--saves", "2", "--restores", "2",
                                            "--checkpoint-path", str(out / "ckpt")], out)
    return result, out / "ckpt"


@pytest.mark.parametrize("mode", CHECKPOINT_MODES)
def test_each_mode_saves_and_restores_the_sharded_state_with_its_costs(bench, mode):
    result, _ = bench
    m = result["details"]["modes"][mode]
    assert m["restore_matches"] is True  # every parameter and momentum buffer came back
    assert m["checkpoints_written"] == 2 and m["restore_s_n"] == 2
    assert m["checkpoint_bytes"] / 1e6 == pytest.approx(STATE_MB, rel=0.1)
    if mode == "torch_save":  # rank 0 gathers the full state and writes it alone
        assert m["checkpoint_bytes_rank_min"] == 0
        assert [s["rank_bytes"][1] for s in m["saves"]] == [0, 0]
    else:  # each rank writes its own shard: about half each
        assert m["checkpoint_bytes_rank_min"] / m["checkpoint_bytes"] > 0.4
    assert 0 < m["checkpoint_blocking_s_p10"] <= m["checkpoint_blocking_s"] \
        <= m["checkpoint_blocking_s_p90"]
    assert m["restore_s"] > 0 and m["checkpoint_mb_per_s"] > 0
    if mode.startswith("dcp_async"):  # staged, then written while training could go on
        assert m["checkpoint_total_s"] > m["checkpoint_blocking_s"]
        assert m["checkpoint_staging_gbps"] > 0
        assert m["checkpoint_pinned"] is False  # no CUDA here: staged into ordinary memory
    assert result["metrics"][f"{mode}_checkpoint_total_s"] == m["checkpoint_total_s"]


def test_a_dcp_checkpoint_holds_the_same_state_as_the_torch_save_one(bench, tmp_path):
    """Read outside the run: DCP's shards put together (format_utils) equal the full state
    rank 0 wrote with torch.save, weight for weight."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    _, folder = bench
    dcp_to_torch_save(folder / "dcp_async" / "step-00000002", tmp_path / "whole.pt")
    sharded = torch.load(tmp_path / "whole.pt", weights_only=False)  # its blob of the rest
    full = checkpoint.load(checkpoint.latest(folder / "torch_save"))
    assert set(sharded["model"]) == set(full["model"])
    for name, tensor in full["model"].items():
        assert torch.equal(sharded["model"][name], tensor), name
    assert checkpoint.latest(folder / "dcp_async").kind == "dcp"


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> dict:
    """The ddp worker on 2 ranks, synthetic tokens, an asynchronous save every 4 steps
    (and the last step's at the end, for the restores)."""
    out = tmp_path_factory.mktemp("ddp")
    return two_ranks("ddp", [*MODEL, "--dataset", "tokens", "--seq-len", "32", "--batch-size",
                             "4", "--epochs", "1", "--max-steps", "14", "--warmup-steps", "2",
                             "--device", "cpu", "--checkpoint", "dcp_async",
                             "--checkpoint-every", "4", "--checkpoint-path", str(out / "ckpt"),
                             "--log-interval", "0"], out)


def test_the_ddp_records_say_what_the_saves_and_restores_cost(ddp_run):
    m, details = ddp_run["metrics"], ddp_run["details"]
    assert m["checkpoint_mode"] == "dcp_async" and m["checkpoints_written"] == 4  # 4, 8, 12, 14
    for name in ("checkpoint_blocking_s", "checkpoint_total_s", "checkpoint_mb_per_s"):
        assert m[f"{name}_n"] == 4 and m[f"{name}_p10"] <= m[name] <= m[f"{name}_p90"]
    assert all(not isinstance(v, (list, dict)) for v in m.values())  # what a record takes
    for save in details["checkpoints"]:  # DDP's replicated state, spread over the ranks by DCP
        assert min(save["rank_bytes"]) > 0.4 * sum(save["rank_bytes"])
    assert m["checkpoint_bytes"] == statistics.median(sum(s["rank_bytes"])
                                                      for s in details["checkpoints"])
    assert m["restore_matches"] is True and m["restored_step"] == 14 and m["restore_s_n"] == 3
    assert m["checkpoint_stall_s"] >= 4 * m["checkpoint_blocking_s_p10"]


def test_a_save_stall_is_not_counted_as_waiting_for_data(ddp_run):
    """The step loop would put the time between two steps in the next one's data wait:
    a run that checkpoints would read as input-bound. Synthetic tokens wait for nothing."""
    m = ddp_run["metrics"]
    assert m["data_s"] < 0.1 * m["checkpoint_blocking_s_p10"]
    # the intervals ending at steps 4, 8 and 12; step 3 at least ran with no save after it
    # or beside it (the rate without; a write that outlasts a step leaves fewer such steps)
    assert m["checkpoint_rate_ratio_n"] == 3 and m["checkpoint_rate_ratio"] > 0
    assert 0 < m["samples_per_s_with_checkpoints"] < m["samples_per_s"] * 1.1


# ---------------------------------------------------------------- a partial checkpoint


def _dcp_checkpoints(folder: Path, steps: tuple[int, ...]) -> None:
    """Real DCP checkpoints of a small model, one process (no group), with sidecars."""
    code = (
        "import sys, torch; from pathlib import Path; from benchlib.trainers.saver import Saver\n"
        "model = torch.nn.Linear(64, 64); opt = torch.optim.SGD(model.parameters(), lr=0.1, "
        "momentum=0.9)\nsaver = Saver('dcp', Path(sys.argv[1]), keep=3)\n"
        "for step in map(int, sys.argv[2:]):\n"
        "    saver.save(step, model, opt, {'position': {'step': step}}, {'step': step})\n")
    done = subprocess.run([sys.executable, "-c", code, str(folder), *map(str, steps)],
                          env=ENV, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def dcp_pair(tmp_path_factory) -> Path:
    """DCP checkpoints of steps 4 and 8, written once; each test damages its own copy."""
    folder = tmp_path_factory.mktemp("dcp_pair")
    _dcp_checkpoints(folder, (4, 8))
    return folder


@pytest.mark.parametrize("damage", ["no sidecar", "a rank's file cut short", "no metadata"])
def test_a_partial_dcp_checkpoint_is_never_taken(dcp_pair, tmp_path, damage):
    shutil.copytree(dcp_pair, tmp_path, dirs_exist_ok=True)
    newest = tmp_path / "step-00000008"
    if damage == "no sidecar":  # a save whose ranks never all finished: rank 0 wrote none
        (tmp_path / "step-00000008.json").unlink()
    elif damage == "a rank's file cut short":
        part = newest / "__0_0.distcp"
        part.write_bytes(part.read_bytes()[:100])
    else:
        (newest / checkpoint.METADATA).unlink()
    warnings = []
    assert checkpoint.latest(tmp_path, warn=warnings.append).step == 4
    if damage == "no sidecar":
        assert not warnings
        assert checkpoint.clean_temporaries(tmp_path) == [newest] and not newest.exists()
    else:
        [warning] = warnings
        assert str(newest) in warning and ("truncated" in warning or "metadata" in warning)


# expected here: no CUDA to pin into, no process group (DCP saves as one process)
@pytest.mark.filterwarnings("ignore:Ignoring pin_memory flag:UserWarning")
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
def test_pinned_saves_go_on_where_torchs_stager_serves_one_save(tmp_path, monkeypatch):
    """torch 2.11's DefaultStager closes its copier after each stage, so the second pinned
    save through one stager failed (`KeyError: <class 'type'>`, the H200 run of
    2026-11-28). Such a stager, as 2.11 wrote it, is found by its probe and replaced for
    each save; this torch's keeps one for the whole run."""
    from torch.distributed.checkpoint import staging

    from benchlib.trainers import saver

    assert saver._stager_reusable() is True  # this torch: one stager, its buffers kept

    class OneStage(staging.DefaultStager):  # torch 2.11's _stage, its last line kept
        def _stage(self, state_dict, **kwargs):
            staged = super()._stage(state_dict, **kwargs)
            self._state_dict_stager.close()
            return staged

    monkeypatch.setattr(staging, "DefaultStager", OneStage)
    assert saver._stager_reusable() is False
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    s = saver.Saver("dcp_async_pinned", tmp_path)
    for step in (1, 2, 3):
        with torch.no_grad():
            model.weight.fill_(step)
        s.save(step, model, opt, {"position": {"step": step}}, {"step": step})
        s.wait()
    assert [x.step for x in s.saves] == [1, 2, 3] and s.stager_reused is False
    plain = saver.Saver("dcp_async", tmp_path / "plain")  # no stager: nothing to say
    assert plain.stager_reused is None
    plain.close()
    found = checkpoint.latest(tmp_path)
    with torch.no_grad():
        model.weight.zero_()
    assert found.step == 3 and s.restore(found, model, opt) == {"position": {"step": 3}}
    assert torch.all(model.weight == 3)
    s.close()


# ---------------------------------------------------------------- a disk that fills


@pytest.fixture
def small_disk(tmp_path):
    """A 12 MiB tmpfs: room for one 8 MiB checkpoint, not for two. Mounting needs root
    (CI and this project's machines run the tests as root)."""
    if os.geteuid() != 0:
        pytest.skip("a small filesystem that fills needs root to mount (tmpfs)")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _trained(weight: float):
    """A 1024x1024 layer after one SGD step with momentum: 8 MiB of state."""
    model = torch.nn.Linear(1024, 1024, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(2, 1024)).sum().backward()
    opt.step()
    with torch.no_grad():
        model.weight.fill_(weight)
    return model, opt


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
@pytest.mark.parametrize("mode", ["torch_save", "dcp", "dcp_async"])
def test_a_save_that_fills_the_disk_says_why_and_leaves_the_last_complete_one(small_disk, mode):
    """The second 8 MiB save into 12 MiB: one line naming the path, the bytes the save
    needed and those free; its partial checkpoint removed, so the first is still the
    newest, restores, and the folder takes a new start (before: torch.save's `[enforce
    fail at inline_container.cc:672] unexpected pos`, DCP's CheckpointException, and a
    half folder that made the next start refuse with "No space left on device")."""
    from benchlib.errors import CheckpointError
    from benchlib.trainers.saver import Saver

    model, opt = _trained(1.0)
    s = Saver(mode, small_disk)
    s.save(1, model, opt, {"position": {"step": 1}}, {"step": 1})
    s.wait()
    with torch.no_grad():
        model.weight.fill_(2.0)
    with pytest.raises(CheckpointError) as failed:
        s.save(2, model, opt, {"position": {"step": 2}}, {"step": 2})
        s.wait()  # an asynchronous save fails where it is settled
    message = str(failed.value)
    assert "\n" not in message and f"step 2 to {small_disk}/step-00000002" in message
    assert "no space left: it needs about 8.0 MiB" in message and "MiB are free there" in message
    assert "step 1's stays the newest" in message
    assert [p.name for p in small_disk.iterdir() if "00000002" in p.name or
            p.name.startswith(".step-")] == []
    found = checkpoint.latest(small_disk)
    assert found.step == 1
    s.restore(found, model, opt)
    assert model.weight.eq(1.0).all()
    assert checkpoint.check_writable(small_disk) == small_disk


def test_a_start_on_a_disk_filled_by_a_killed_save_removes_it_and_goes_on(small_disk):
    """A save killed mid-write (no sidecar) that filled the disk: the next start's write
    check removes it (never a complete checkpoint) instead of refusing the folder."""
    partial = small_disk / "step-00000006"
    partial.mkdir()
    with open(partial / "__0_0.distcp", "wb") as f:
        with pytest.raises(OSError):
            f.write(b"\0" * (13 << 20))
            f.flush()
    assert checkpoint.check_writable(small_disk) == small_disk and not partial.exists()
