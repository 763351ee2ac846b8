"""resolve maps an environment to (rank, local rank, world size, master): plain dicts in."""

import pytest

from benchlib.config import DpVsDdpConfig
from benchlib.distributed.device import choose_backend, dp_device_ids, gpu_index
from benchlib.distributed.env import DistEnv, from_tcp, resolve
from benchlib.errors import ConfigError, UsageError
from benchlib.studies import dp_vs_ddp


def test_torchrun_variables():
    env = resolve({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                   "GROUP_RANK": "1", "MASTER_ADDR": "n1", "MASTER_PORT": "29400",
                   "TORCHELASTIC_RUN_ID": "job"})
    assert env == DistEnv(3, 1, 4, 2, 1, "n1", 29400, "torchrun")
    assert env.init_method == "env://"


def test_slurm_tasks_take_the_first_host_of_the_allocation():
    seen = []

    def hostnames(nodelist):
        seen.append(nodelist)
        return ["n7", "n8"]

    env = resolve({"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
                   "SLURM_NODEID": "1", "SLURM_NTASKS_PER_NODE": "2(x2)",
                   "SLURM_NODELIST": "n[7-8]", "SLURM_JOB_ID": "1234"}, hostnames=hostnames)
    assert seen == ["n[7-8]"]
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size, env.node_rank) == (3, 1, 4, 2, 1)
    assert env.master_addr == "n7" and env.master_port == 20000 + 1234 and env.source == "slurm"
    assert env.as_environ()["RANK"] == "3" and env.as_environ()["MASTER_ADDR"] == "n7"


def test_slurm_master_port_can_be_given():
    env = resolve({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NODELIST": "n1",
                   "MASTER_PORT": "23456"}, hostnames=lambda _: ["n1"])
    assert env.master_port == 23456


def test_platform_variables_are_per_node_and_give_global_ranks():
    # seed 001's SenseCore: RANK is the node's rank, WORLD_SIZE the number of nodes
    environ = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "23000", "RANK": "1", "WORLD_SIZE": "3"}
    env = resolve(environ, nproc_per_node=4, local_rank=2)
    assert (env.rank, env.local_rank, env.world_size, env.node_rank) == (6, 2, 12, 1)
    assert env.source == "platform" and env.master_addr == "10.0.0.1"


def test_nothing_set_is_one_process():
    assert resolve({}) == DistEnv(0, 0, 1, 1, 0, "127.0.0.1", 29500, "single")


def test_tcp_init_needs_host_port_and_a_rank_inside_the_world():
    env = from_tcp("tcp://192.168.31.150:22000", 1, 2)
    assert env.init_method == "tcp://192.168.31.150:22000" and env.rank == 1
    with pytest.raises(UsageError, match=r"rank: must be in \[0, 2\), got 2"):
        from_tcp("tcp://h:22000", 2, 2)
    with pytest.raises(UsageError, match="world_size: must be >= 1, got 0"):
        from_tcp("tcp://h:22000", 0, 0)
    with pytest.raises(UsageError, match="init_method: expected tcp://HOST:PORT"):
        from_tcp("h:22000", 0, 1)
    with pytest.raises(UsageError, match="port: must be in 1024-65535, got 80"):
        from_tcp("tcp://h:80", 0, 1)


def test_bad_rank_in_the_environment_is_named():
    with pytest.raises(UsageError, match=r"rank: must be in \[0, 2\), got 5"):
        resolve({"RANK": "5", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    with pytest.raises(UsageError, match="SLURM_PROCID: must be an integer, got 'x'"):
        resolve({"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}, hostnames=lambda _: ["n"])


def test_backend_choice():
    assert choose_backend("cpu") == "gloo" and choose_backend("cuda") == "nccl"
    assert choose_backend("cuda", "gloo") == "gloo"
    with pytest.raises(UsageError, match="backend: nccl needs CUDA devices; use gloo on CPU"):
        choose_backend("cpu", "nccl")


def test_cpu_ranks_are_launched_without_torch_in_the_launcher():
    """`benchlib doctor --device cpu` and its kind decide the backend without importing
    torch (2.3 to 3.5 CPU s here, beside ranks that are starting); auto must ask CUDA."""
    import subprocess
    import sys

    probe = ("import sys; from benchlib.distributed.device import uses_cuda; "
             "print(uses_cuda('cpu'), 'torch' in sys.modules, uses_cuda('auto') in (True, False), "
             "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "True", "True"]


@pytest.mark.parametrize("kw, message", [
    ({"nproc_per_node": 0}, "nproc_per_node: must be >= 1, got 0"),
    ({"strategy": "single", "nproc_per_node": 2}, "nproc_per_node: single runs one process"),
    ({"strategy": "fsdp"}, "strategy: 'fsdp' is not one of single, dp, ddp"),
    ({"launcher": "mpirun"}, "launcher: 'mpirun' is not one of torchrun, mp_spawn, tcp"),
    ({"depth": 21}, "depth: PyramidNet depth must be 6n + 2"),
    ({"model": "toynet"}, "model: toynet takes 1x28x28 inputs"),
    ({"max_steps": 3, "warmup_steps": 3}, "warmup_steps: 3 leaves no timed step"),
])
def test_dist_config_refuses_impossible_settings(kw, message):
    with pytest.raises(ConfigError) as info:
        DpVsDdpConfig(**kw)
    assert message in str(info.value)


def test_nccl_on_a_cpu_only_machine_is_refused_before_launch(small_data):
    with pytest.raises(UsageError, match="backend: nccl needs CUDA"):
        dp_vs_ddp.preflight(DpVsDdpConfig(path=str(small_data), device="cpu", backend="nccl"))


@pytest.mark.parametrize("kw, message", [
    ({"model": "resnet18", "dataset": "fashion-mnist"}, "model: resnet18 takes 3-channel images"),
    ({"model": "toynet", "dataset": "imagefolder"}, "model: toynet takes 1x28x28 inputs"),
])
def test_models_and_data_of_other_shapes_are_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        DpVsDdpConfig(**kw)


def test_warmup_covering_a_whole_epoch_is_refused_before_launch(small_data):
    cfg = DpVsDdpConfig(path=str(small_data), device="cpu", dataset="mydataset", model="toynet",
                     batch_size=64, nproc_per_node=2, warmup_steps=3)
    with pytest.raises(ConfigError, match="warmup_steps: 3 leaves no timed step: an epoch here "
                                          "has 3 steps"):
        dp_vs_ddp.preflight(cfg)  # 300 samples / (64 x 2) = 3 steps
    with pytest.raises(ConfigError, match="warmup_steps: 100 leaves no timed step"):
        dp_vs_ddp.preflight(DpVsDdpConfig(device="cpu", dataset="synthetic", strategy="single",
                                      nproc_per_node=1, warmup_steps=100))


def test_more_ranks_than_cores_is_refused(small_data):
    with pytest.raises(ConfigError, match="nproc_per_node: 64 ranks asked for on this host, but only"):
        dp_vs_ddp.preflight(DpVsDdpConfig(path=str(small_data), device="cpu", nproc_per_node=64))


# ------------------------------------------------ rank -> GPU on a K-GPU host (no GPU here)

K = 4  # ranks on one node of K GPUs


def _gpus(envs: list[DistEnv]) -> list[int]:
    return [gpu_index(e.local_rank, K) for e in envs]


def test_every_launcher_gives_k_ranks_on_a_k_gpu_host_k_distinct_gpus():
    torchrun = [resolve({"RANK": str(r), "WORLD_SIZE": str(K), "LOCAL_RANK": str(r),
                              "LOCAL_WORLD_SIZE": str(K), "TORCHELASTIC_RUN_ID": "j"})
                for r in range(K)]
    srun = [resolve({"SLURM_PROCID": str(r), "SLURM_NTASKS": str(K), "SLURM_LOCALID": str(r),
                          "SLURM_NTASKS_PER_NODE": str(K), "MASTER_ADDR": "n1",
                          "MASTER_PORT": "29400"}) for r in range(K)]
    platform = [resolve({"MASTER_ADDR": "n1", "MASTER_PORT": "29400", "RANK": "0",
                              "WORLD_SIZE": "1"}, nproc_per_node=K, local_rank=r) for r in range(K)]
    tcp = [from_tcp("tcp://127.0.0.1:29400", r, K, local_rank=r) for r in range(K)]
    for name, envs in {"torchrun": torchrun, "srun": srun, "platform": platform, "tcp": tcp}.items():
        assert _gpus(envs) == list(range(K)), name


def test_lightning_layouts_give_each_rank_its_own_local_rank():
    from benchlib.distributed.lightning_env import layout

    torchrun = [layout({"RANK": str(r), "WORLD_SIZE": str(K), "LOCAL_RANK": str(r),
                        "LOCAL_WORLD_SIZE": str(K), "TORCHELASTIC_RUN_ID": "j",
                        "MASTER_ADDR": "n1", "MASTER_PORT": "29400"}, None, None) for r in range(K)]
    assert [gpu_index(w.local_rank, K) for w in torchrun] == list(range(K))
    assert {w.devices for w in torchrun} == {K}  # Lightning is given K devices per node


def test_more_ranks_than_gpus_on_a_node_is_refused_not_shared():
    with pytest.raises(UsageError, match="local_rank: 4 needs at least 5 GPUs on this node, 4 "
                                         "visible; start at most 4 ranks per node"):
        gpu_index(4, K)


def test_data_parallel_spans_exactly_the_devices_asked_for():
    assert dp_device_ids(2, 8) == [0, 1]
    assert dp_device_ids(0, 3) == [0, 1, 2]  # 0: every visible one
    with pytest.raises(UsageError, match="dp_devices: 4 asked for, 2 GPUs visible"):
        dp_device_ids(4, 2)
    with pytest.raises(UsageError, match="dp_devices: must be >= 0"):
        dp_device_ids(-1, 2)


def test_the_dp_study_passes_its_device_count_to_the_worker(tmp_path):
    from benchlib.studies import dp_vs_ddp

    cfg = DpVsDdpConfig(strategy="dp", nproc_per_node=2, path=str(tmp_path), dataset="synthetic",
                        model="simplecnn")
    [dp] = dp_vs_ddp.launches(cfg)
    assert (dp.worker, dp.launcher, dp.nproc, dp.params["dp_devices"]) == ("dp", "single", 1, 2)
    [ddp] = dp_vs_ddp.launches(
        DpVsDdpConfig(strategy="ddp", nproc_per_node=2, path=str(tmp_path), dataset="synthetic",
                      model="simplecnn"))
    assert "dp_devices" not in ddp.params and (ddp.worker, ddp.nproc) == ("ddp", 2)


def test_a_port_past_65535_in_a_tcp_init_method_is_one_clear_line():
    with pytest.raises(UsageError, match="init_method: expected tcp://HOST:PORT with PORT in "
                                         "1024-65535, got 'tcp://127.0.0.1:70000'"):
        from_tcp("tcp://127.0.0.1:70000", 0, 2)
