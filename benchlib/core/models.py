"""The models the studies train: by name (the seeds' models; torchvision's get
weights=None, no download), or the user's own by entry point (`pkg.module:function`),
or a model of timm (`timm:NAME`) or transformers (`hf:NAME`), built from its config
only: no weights are downloaded, so it runs offline."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from benchlib.config.choices import GPT_MODELS, MODEL_FORMS, MODEL_LIBRARIES, MODELS, model_kind
from benchlib.core import entrypoints
from benchlib.errors import ConfigError


class ToyNet(nn.Module):
    """Seed 000's model: an MLP 784-512-512-10 with ReLU (the PyTorch quickstart network)."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(28 * 28, 512), nn.ReLU(),
            nn.Linear(512, 512), nn.ReLU(),
            nn.Linear(512, num_classes),
        )

    def forward(self, x):
        return self.net(x)


class SimpleCNN(nn.Module):
    """Two conv blocks and a linear head, for any CxHxW input (H and W divisible by 4)."""

    def __init__(self, num_classes: int = 10, in_shape: tuple[int, int, int] = (1, 28, 28)):
        super().__init__()
        c, h, w = in_shape
        self.net = nn.Sequential(
            nn.Conv2d(c, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * (h // 4) * (w // 4), num_classes),
        )

    def forward(self, x):
        return self.net(x)


class _PyramidBlock(nn.Module):
    """Pre-activation basic block whose output has more channels than its input; the
    shortcut is zero-padded to match (PyramidNet, Han et al., CVPR 2017)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.stride = stride

    def forward(self, x):
        out = self.conv1(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(out)))
        out = self.bn3(out)
        shortcut = F.avg_pool2d(x, 2) if self.stride == 2 else x
        pad = out.shape[1] - shortcut.shape[1]
        if pad:
            shortcut = F.pad(shortcut, (0, 0, 0, 0, 0, pad))
        return out + shortcut


class PyramidNet(nn.Module):
    """PyramidNet for CIFAR (seed 002's model): `depth` = 6n + 2 layers of basic blocks in
    three stages, the width growing by `alpha` in total, one step per block. The paper's
    CIFAR configuration is depth 110, alpha 270; small ones (20, 48) suit a CPU."""

    def __init__(self, depth: int = 20, alpha: int = 48, num_classes: int = 10,
                 in_channels: int = 3):
        super().__init__()
        if (depth - 2) % 6:
            raise ConfigError("depth", f"must be 6n + 2 (20, 32, 56, 110, ...), got {depth}")
        n = (depth - 2) // 6
        step = alpha / (3 * n)
        width, blocks = 16.0, []
        self.conv = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        in_ch = 16
        for stage in range(3):
            for i in range(n):
                width += step
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(_PyramidBlock(in_ch, round(width), stride))
                in_ch = round(width)
        self.blocks = nn.Sequential(*blocks)
        self.bn_out = nn.BatchNorm2d(in_ch)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x):
        x = self.blocks(self.bn(self.conv(x)))
        x = F.relu(self.bn_out(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model(name: str, in_shape: tuple[int, ...] = (1, 28, 28), depth: int = 20,
                alpha: int = 48, model_args: dict | None = None, num_classes: int = 10,
                tokens: bool = False, vocab_size: int = 0) -> nn.Module:
    """The model `name` names, for inputs of `in_shape` (for tokens: (seq_len,)) and
    `num_classes` labels (a language model: ids 0..vocab_size-1)."""
    kind = model_kind(name)
    if name in GPT_MODELS:
        if not tokens:
            raise ConfigError("model", f"{name} is a language model: give it tokens (dataset "
                              "tokens or tokenfile, or synthetic with seq_len and vocab_size)")
        from benchlib.core import gpt

        return gpt.build(name, model_args, seq_len=in_shape[0], vocab_size=vocab_size)
    if tokens and kind in ("builtin", "timm"):
        raise ConfigError("model", f"{name!r} takes images; token data needs a language "
                          "model: hf:NAME or your own pkg.module:function")
    if kind == "entry":
        return _module("model", name, entrypoints.call(
            "model", name, entrypoints.load("model", name), dict(model_args or {})))
    if kind == "timm":
        return _timm(name, in_shape, num_classes, model_args or {})
    if kind == "hf":
        return _hf(name, tokens, vocab_size, in_shape, model_args or {})
    if model_args:
        raise ConfigError("model_args", f"{name} is built in and takes no model_args (its "
                          "settings are depth and alpha); model_args are for " + MODEL_FORMS)
    if name == "toynet":
        if tuple(in_shape) != (1, 28, 28):
            raise ConfigError("model", f"toynet takes 1x28x28 inputs, not {'x'.join(map(str, in_shape))}; "
                             "use simplecnn or pyramidnet")
        return ToyNet(num_classes)
    if name == "simplecnn":
        return SimpleCNN(num_classes, in_shape=in_shape)
    if name == "pyramidnet":
        return PyramidNet(depth, alpha, num_classes, in_channels=in_shape[0])
    if name in ("resnet18", "resnet50"):
        import torchvision

        return getattr(torchvision.models, name)(weights=None)  # 1000 classes, as on ImageNet
    raise ConfigError("model", f"{name!r} is not one of {', '.join(MODELS)}, nor {MODEL_FORMS}")


def _module(field: str, name: str, built: object) -> nn.Module:
    if not isinstance(built, nn.Module):
        raise ConfigError(field, f"{name!r} returned a {type(built).__name__}, not a "
                          "torch.nn.Module")
    return built


def _library(name: str):
    """The package a timm: or hf: model needs, or one line saying how to install it."""
    import importlib

    prefix = name.partition(":")[0]
    package = MODEL_LIBRARIES[prefix]
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise ConfigError("model", f"{name!r} needs {package}, which is not installed here: "
                          f"pip install 'benchlib[models]' (or {package})") from None
    if package == "transformers":  # its notes on configs built offline are not ours to print
        module.logging.set_verbosity_error()
    return module


def _timm(name: str, in_shape: tuple[int, ...], num_classes: int, args: dict) -> nn.Module:
    timm = _library(name)
    arch = name.partition(":")[2]
    if not timm.is_model(arch):
        raise ConfigError("model", f"timm {timm.__version__} has no model {arch!r} "
                          "(timm.list_models('*resnet*') lists them)")
    kwargs = {"pretrained": False, "num_classes": num_classes, "in_chans": in_shape[0], **args}
    return entrypoints.call("model_args", name, lambda **kw: timm.create_model(arch, **kw), kwargs)


def hf_config(name: str, args: dict):
    """A transformers config from `hf:NAME`: a model type the installed transformers knows
    (`hf:gpt2`, `hf:bert`), or a local config.json (or the folder holding it); never a
    download. `args` override its attributes (n_layer, hidden_size, ...)."""
    from pathlib import Path

    transformers = _library(name)
    ref = name.partition(":")[2]
    local = Path(ref).expanduser()
    try:
        if local.name == "config.json" or local.is_dir() or ref.endswith(".json"):
            if not local.exists():
                raise ConfigError("model", f"{name!r}: {local} does not exist")
            config = transformers.AutoConfig.from_pretrained(str(local), local_files_only=True)
            for key, value in args.items():
                setattr(config, key, value)
            return config
        return transformers.AutoConfig.for_model(ref, **args)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - transformers' own error, in one line
        why = str(e).splitlines()[0].split(". Should contain")[0]  # not its list of 900 types
        raise ConfigError("model", f"transformers {transformers.__version__} cannot build "
                          f"{ref!r} from a config offline: {why} (transformers.CONFIG_MAPPING "
                          "lists the model types it knows)") from None


def _hf(name: str, tokens: bool, vocab_size: int, in_shape: tuple[int, ...],
        args: dict) -> nn.Module:
    """A transformers causal language model, its weights initialised from the config,
    trained on its own `.loss` over token data."""
    transformers = _library(name)
    if not tokens:
        raise ConfigError("model", f"{name!r} is a language model: give it token data "
                          "(dataset synthetic with seq_len and vocab_size, tokenfile with seq_len, or your own)")
    config = hf_config(name, args)
    if vocab_size and "vocab_size" not in args:  # the data's ids are the vocabulary
        config.vocab_size = vocab_size
        for token in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if isinstance(getattr(config, token, None), int) and getattr(config, token) >= vocab_size:
                setattr(config, token, vocab_size - 1)
    if vocab_size > getattr(config, "vocab_size", vocab_size):
        raise ConfigError("vocab_size", f"{vocab_size} is more ids than {name}'s vocabulary of "
                          f"{config.vocab_size}; lower vocab_size or set model_args vocab_size")
    limit = next((getattr(config, k) for k in ("n_positions", "max_position_embeddings")
                  if getattr(config, k, None)), None)
    if limit is not None and in_shape[0] > limit:
        raise ConfigError("seq_len", f"{in_shape[0]} is longer than {name}'s {limit} positions; "
                          "lower seq_len or set model_args n_positions")
    try:
        return transformers.AutoModelForCausalLM.from_config(config)
    except Exception as e:  # noqa: BLE001 - transformers' own error, in one line
        raise ConfigError("model", f"transformers cannot build {name!r} as a causal language "
                          f"model: {str(e).splitlines()[0]}") from None


def describe_model(name: str, model: nn.Module, model_args: dict | None = None) -> dict:
    """What a record says of the model it trained: its class, its parameter count and its
    identity (entrypoints.model_identity: the hash `compare` tells "model changed" by, and
    what that hash covers)."""
    return {"model_class": f"{type(model).__module__}.{type(model).__qualname__}",
            "model_params": sum(p.numel() for p in model.parameters()),
            **entrypoints.model_identity(name, model, model_args)}


def training_flops(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                   objective=None) -> float:
    """FLOPs of one training step (forward and backward) per sample of the batch (x, y),
    counted by torch.utils.flop_counter: on a copy of the model on the meta device (shapes
    only, no arithmetic: a second for GPT-2 at 1,024 tokens), else, for a model that reads
    its values (a data-dependent branch), on the CPU as it is. Attention is counted through
    PyTorch's math kernels: the counter has no formula for the CPU's fused attention, and
    the math path does the same matmuls. `objective(forward, x, y)` gives the loss
    (benchlib.core.loops.Objective; cross-entropy when None)."""
    import copy

    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    loss = objective or (lambda forward, a, b: F.cross_entropy(forward(a), b))
    try:
        on_meta = copy.deepcopy(model).to("meta")
        counter = FlopCounterMode(display=False)
        with sdpa_kernel(SDPBackend.MATH), counter:
            loss(on_meta, x.to("meta"), y.to("meta")).backward()
    except Exception:  # noqa: BLE001 - the model needs real values: count on the CPU
        counter = FlopCounterMode(display=False)
        with sdpa_kernel(SDPBackend.MATH), counter:
            loss(model, x, y).backward()
        model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / len(x)
