"""The allowed values and named defaults of the study parameters, in one place: the
configs check against these, and the modules that implement them import them."""

DEVICES = ("cpu", "gpu", "auto")  # gpu: an error without CUDA; auto: a GPU if there is one
BACKENDS = ("auto", "gloo", "nccl")  # auto: nccl on CUDA, gloo on CPU
DEFAULT_PORT = 29500  # the rendezvous port torchrun and Slurm scripts use unless told
SYNTHETIC_STEPS = 100  # steps in an epoch of synthetic data (made on the device, no IO)
# the scaling projection's bounds: nodes, and devices (or CPU ranks) per node
PROJECTION_MAX_NODES = 1024
PROJECTION_MAX_DEVICES_PER_NODE = 1024

DATASETS_PREPARED = ("fashion-mnist", "mydataset", "cifar10", "imagefolder")
IO_DATASETS = ("fashion-mnist", "mydataset")
GRAY_28 = ("fashion-mnist", "mydataset")  # 1x28x28 inputs
TRAIN_DATASETS = ("cifar10", "fashion-mnist", "mydataset", "synthetic", "imagefolder")
ELASTIC_DATASETS = ("fashion-mnist", "mydataset", "cifar10", "imagefolder", "dummy")
FRAMEWORK_DATASETS = ("synthetic", "imagefolder")

VARIANTS = ("raw", "preload", "preload_batched", "tensorclass", "tensorclass_memmap", "np_memmap")
MODES = ("traverse", "train")
MODELS = ("toynet", "simplecnn", "pyramidnet", "resnet18", "resnet50")
IO_MODELS = ("toynet", "simplecnn", "pyramidnet")  # 1x28x28 inputs
ARCHS = ("resnet18", "resnet50")
PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16")

STRATEGIES = ("single", "dp", "ddp")
LAUNCHERS = ("torchrun", "mp_spawn", "tcp")  # how DDP ranks start on one host
MULTINODE_TRAINERS = ("lightning", "ddp")
MULTINODE_LAUNCHERS = ("torchrun", "lightning", "srun")

# what one sample of a run's spread is: an epoch inside one launch (all of them pooled
# over the launches), or a whole launch (a fresh process per repeat: its median over its
# epochs), which also sees start-up, placement and whatever else differs between runs
REPEAT_MODES = ("epoch", "process")
