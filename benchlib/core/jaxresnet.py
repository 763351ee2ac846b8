"""ResNet-18 and ResNet-50 v1.5 in plain JAX, laid out exactly as torchvision's, so that
notebook 40 can time a second framework on the same model with the same rules.

The parameters are a flat dict keyed by torchvision's own names (`layer1.0.conv1.weight`,
`layer2.0.downsample.1.bias`, `fc.weight`), so the test can hold them against
torchvision's `named_parameters()` one by one. Layouts are JAX's: activations NHWC,
convolution kernels HWIO, `fc.weight` (in, out). Initialisation follows torchvision:
He (kaiming normal, fan_out) for convolutions, BatchNorm 1 and 0, the fully connected
layer uniform in +-1/sqrt(fan_in).

The training step is what benchlib.core.loops.Stepper does for PyTorch: cross-entropy, SGD
with momentum (PyTorch's form: buf = m*buf + grad; p -= lr*buf; no weight decay, no
dampening), BatchNorm in training mode (batch statistics; running statistics updated
with momentum 0.1, the running variance unbiased, as in PyTorch). bf16 is mixed
precision like torch.autocast: parameters and the update in fp32, convolutions and
matmuls in bf16, BatchNorm statistics and the loss in fp32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from benchlib.errors import ConfigError

# arch -> (block, blocks per stage); Bottleneck expands its output channels 4x
ARCHS = {"resnet18": ("basic", (2, 2, 2, 2)), "resnet50": ("bottleneck", (3, 4, 6, 3))}
WIDTHS = (64, 128, 256, 512)
PRECISIONS = {"fp32": jnp.float32, "bf16": jnp.bfloat16}
BN_EPS, BN_MOMENTUM = 1e-5, 0.1

Params = dict[str, jax.Array]
State = tuple[Params, Params, Params]  # (params, batch_stats, momentum buffers)


def check_arch(arch: str) -> tuple[str, tuple[int, ...]]:
    if arch not in ARCHS:
        raise ConfigError("arch", f"{arch!r} is not one of {', '.join(ARCHS)}")
    return ARCHS[arch]


def _blocks(arch: str):
    """(prefix, in_channels, width, stride, has_downsample) of every residual block."""
    kind, depths = check_arch(arch)
    expansion = 4 if kind == "bottleneck" else 1
    channels = 64
    for stage, (width, depth) in enumerate(zip(WIDTHS, depths)):
        for i in range(depth):
            stride = 2 if stage > 0 and i == 0 else 1
            out = width * expansion
            yield f"layer{stage + 1}.{i}", channels, width, stride, stride != 1 or channels != out
            channels = out


def _convs(arch: str):
    """(name, kernel, in, out, stride, padding) of every convolution, each followed by
    the BatchNorm named in the same place (conv1 -> bn1, downsample.0 -> downsample.1)."""
    kind, _ = check_arch(arch)
    yield "conv1", "bn1", 7, 3, 64, 2, 3
    for prefix, cin, width, stride, down in _blocks(arch):
        if kind == "basic":
            yield f"{prefix}.conv1", f"{prefix}.bn1", 3, cin, width, stride, 1
            yield f"{prefix}.conv2", f"{prefix}.bn2", 3, width, width, 1, 1
            out = width
        else:  # v1.5: the stride sits on the 3x3 convolution, not on the first 1x1
            yield f"{prefix}.conv1", f"{prefix}.bn1", 1, cin, width, 1, 0
            yield f"{prefix}.conv2", f"{prefix}.bn2", 3, width, width, stride, 1
            yield f"{prefix}.conv3", f"{prefix}.bn3", 1, width, width * 4, 1, 0
            out = width * 4
        if down:
            yield f"{prefix}.downsample.0", f"{prefix}.downsample.1", 1, cin, out, stride, 0


def init(arch: str, key: jax.Array, num_classes: int = 1000) -> tuple[Params, Params]:
    """(params, batch_stats), initialised as torchvision initialises its ResNets. The
    convolutions' weights are slices of one normal draw, each scaled by its own He std:
    XLA compiles a random kernel per shape drawn, some 1 s of CPU each (15 s for ResNet-18's
    twenty shapes one by one, 3 s for this one draw)."""
    params, stats = {}, {}
    convs = list(_convs(arch))
    k_conv, k_fc_weight, k_fc_bias = jax.random.split(key, 3)
    shapes = [(size, size, cin, cout) for _, _, size, cin, cout, _, _ in convs]
    draw = jax.random.normal(k_conv, (sum(math.prod(s) for s in shapes),), jnp.float32)
    offset = 0
    for shape, (conv, bn, size, _, cout, _, _) in zip(shapes, convs):
        std = math.sqrt(2.0 / (cout * size * size))  # kaiming_normal_, fan_out, relu
        n = math.prod(shape)
        params[f"{conv}.weight"] = std * draw[offset:offset + n].reshape(shape)
        offset += n
        params[f"{bn}.weight"] = jnp.ones((cout,), jnp.float32)
        params[f"{bn}.bias"] = jnp.zeros((cout,), jnp.float32)
        stats[f"{bn}.running_mean"] = jnp.zeros((cout,), jnp.float32)
        stats[f"{bn}.running_var"] = jnp.ones((cout,), jnp.float32)
    features = WIDTHS[-1] * (4 if ARCHS[arch][0] == "bottleneck" else 1)
    bound = 1.0 / math.sqrt(features)  # nn.Linear's default
    params["fc.weight"] = jax.random.uniform(k_fc_weight, (features, num_classes), jnp.float32,
                                             -bound, bound)
    params["fc.bias"] = jax.random.uniform(k_fc_bias, (num_classes,), jnp.float32, -bound, bound)
    return params, stats


def param_count(params: Params) -> int:
    return sum(int(p.size) for p in params.values())


def arch_param_count(arch: str, num_classes: int = 1000) -> int:
    """Parameters of the architecture, counted from shapes alone (nothing allocated)."""
    shapes = jax.eval_shape(lambda k: init(arch, k, num_classes)[0], jax.random.key(0))
    return sum(math.prod(s.shape) for s in shapes.values())


def _conv(x: jax.Array, w: jax.Array, stride: int, pad: int) -> jax.Array:
    return lax.conv_general_dilated(x, w.astype(x.dtype), (stride, stride), [(pad, pad), (pad, pad)],
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _batch_norm(x: jax.Array, params: Params, stats: Params, new_stats: Params, name: str,
                train: bool) -> jax.Array:
    if train:
        xf = x.astype(jnp.float32)
        mean = xf.mean(axis=(0, 1, 2))
        var = jnp.maximum((xf * xf).mean(axis=(0, 1, 2)) - mean * mean, 0.0)  # biased
        n = x.shape[0] * x.shape[1] * x.shape[2]
        m = BN_MOMENTUM
        new_stats[f"{name}.running_mean"] = (1 - m) * stats[f"{name}.running_mean"] + m * mean
        new_stats[f"{name}.running_var"] = ((1 - m) * stats[f"{name}.running_var"]
                                            + m * var * n / max(n - 1, 1))  # unbiased, as PyTorch
    else:
        mean, var = stats[f"{name}.running_mean"], stats[f"{name}.running_var"]
    scale = params[f"{name}.weight"] * lax.rsqrt(var + BN_EPS)
    shift = params[f"{name}.bias"] - mean * scale
    return x * scale.astype(x.dtype) + shift.astype(x.dtype)


def apply(arch: str, params: Params, stats: Params, x: jax.Array, train: bool = True,
          dtype: Any = jnp.float32) -> tuple[jax.Array, Params]:
    """(logits in fp32, updated batch_stats) for NHWC images `x`; in `dtype` (fp32 or bf16)."""
    kind, _ = check_arch(arch)
    new_stats: Params = {}

    def conv_bn(h, conv, bn, stride, pad):
        return _batch_norm(_conv(h, params[f"{conv}.weight"], stride, pad), params, stats,
                           new_stats, bn, train)

    h = jax.nn.relu(conv_bn(x.astype(dtype), "conv1", "bn1", 2, 3))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                          [(0, 0), (1, 1), (1, 1), (0, 0)])
    for prefix, _, _, stride, down in _blocks(arch):
        identity = h
        if kind == "basic":
            out = jax.nn.relu(conv_bn(h, f"{prefix}.conv1", f"{prefix}.bn1", stride, 1))
            out = conv_bn(out, f"{prefix}.conv2", f"{prefix}.bn2", 1, 1)
        else:
            out = jax.nn.relu(conv_bn(h, f"{prefix}.conv1", f"{prefix}.bn1", 1, 0))
            out = jax.nn.relu(conv_bn(out, f"{prefix}.conv2", f"{prefix}.bn2", stride, 1))
            out = conv_bn(out, f"{prefix}.conv3", f"{prefix}.bn3", 1, 0)
        if down:
            identity = conv_bn(h, f"{prefix}.downsample.0", f"{prefix}.downsample.1", stride, 0)
        h = jax.nn.relu(out + identity)
    pooled = h.astype(jnp.float32).mean(axis=(1, 2)).astype(dtype)
    logits = pooled @ params["fc.weight"].astype(dtype) + params["fc.bias"].astype(dtype)
    return logits.astype(jnp.float32), (new_stats if train else stats)


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean over the batch, as nn.CrossEntropyLoss."""
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()


def init_state(arch: str, key: jax.Array, num_classes: int = 1000) -> State:
    # one XLA program for all of it: eagerly, each slice of the draw is a compile of its own
    params, stats = jax.jit(init, static_argnums=(0, 2))(arch, key, num_classes)
    return params, stats, jax.tree.map(jnp.zeros_like, params)


def make_train_step(arch: str, lr: float, momentum: float = 0.9,
                    precision: str = "fp32") -> Callable[[State, jax.Array, jax.Array],
                                                         tuple[State, jax.Array]]:
    """One jit-compiled step: (state, images NHWC, labels) -> (new state, loss). The state
    (params, batch_stats, momentum buffers) is donated: updated in place, not copied."""
    check_arch(arch)
    if precision not in PRECISIONS:
        raise ConfigError("precision", f"{precision!r} is not one of {', '.join(PRECISIONS)}")
    dtype = PRECISIONS[precision]

    def loss_fn(params, stats, x, y):
        logits, new_stats = apply(arch, params, stats, x, train=True, dtype=dtype)
        return cross_entropy(logits, y), new_stats

    def step(state: State, x: jax.Array, y: jax.Array) -> tuple[State, jax.Array]:
        params, stats, buf = state
        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, stats, x, y)
        buf = jax.tree.map(lambda b, g: momentum * b + g, buf, grads)
        params = jax.tree.map(lambda p, b: p - lr * b, params, buf)
        return (params, new_stats, buf), loss

    return jax.jit(step, donate_argnums=0)


def synthetic_batch(key: jax.Array, batch: int, image_size: int,
                    num_classes: int = 10) -> tuple[jax.Array, jax.Array]:
    """One batch made on the default device, as trainer.SyntheticBatches makes PyTorch's:
    images uniform in [0, 1) (NHWC here), labels in 0..9."""
    kx, ky = jax.random.split(key)
    x = jax.random.uniform(kx, (batch, image_size, image_size, 3), jnp.float32)
    y = jax.random.randint(ky, (batch,), 0, num_classes)
    return x, y


def train_losses(arch: str = "resnet18", batch: int = 4, image_size: int = 32, steps: int = 10,
                 lr: float = 0.01, precision: str = "fp32", seed: int = 0) -> list[float]:
    """The loss of each of `steps` steps on one fixed batch: falls if the step trains."""
    key_model, key_data = jax.random.split(jax.random.key(seed))
    state = init_state(arch, key_model)
    x, y = synthetic_batch(key_data, batch, image_size)
    step = make_train_step(arch, lr, precision=precision)
    losses = []
    for _ in range(steps):
        state, loss = step(state, x, y)
        losses.append(float(loss))
    return losses
