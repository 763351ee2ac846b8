"""The JAX side of notebook 40: the same ResNets as torchvision's, a step that trains, and
a worker that refuses bad input in one line (its timed run: test_study_sweeps, notebook 40's
row with compare_jax)."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import torch
import torchvision

from benchlib.core import jaxresnet

ROOT = Path(__file__).resolve().parents[1]
WORKER = [sys.executable, "-m", "benchlib.workers.jax_resnet"]


@pytest.mark.parametrize("arch, count", [("resnet18", 11_689_512), ("resnet50", 25_557_032)])
def test_parameters_are_torchvisions_name_for_name(arch, count):
    ours = jax.eval_shape(lambda k: jaxresnet.init(arch, k)[0], jax.random.key(0))
    theirs = getattr(torchvision.models, arch)(weights=None)
    assert {n: int(np.prod(s.shape)) for n, s in ours.items()} == \
           {n: p.numel() for n, p in theirs.named_parameters()}
    assert jaxresnet.arch_param_count(arch) == sum(p.numel() for p in theirs.parameters()) == count


def test_resnet50_forward_matches_torchvision_with_its_weights():
    """Same weights, same input, both in training mode: same logits and running stats.
    This is what pins the layout (v1.5 stride on the 3x3, padding, pooling) beyond counts."""
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).train()
    params = {}
    for name, p in model.named_parameters():
        a = p.detach().numpy().copy()
        params[name] = a.transpose(2, 3, 1, 0) if a.ndim == 4 else a.T if a.ndim == 2 else a
    # copies: the torch forward below updates its buffers in place, numpy() would alias them
    stats = {n: b.numpy().copy() for n, b in model.named_buffers() if "num_batches" not in n}
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        expected = model(x).numpy()
    logits, new_stats = jaxresnet.apply("resnet50", params, stats, x.numpy().transpose(0, 2, 3, 1))
    np.testing.assert_allclose(np.asarray(logits), expected, atol=2e-3, rtol=2e-3)
    for name, b in model.named_buffers():
        if "num_batches" not in name:
            np.testing.assert_allclose(np.asarray(new_stats[name]), b.numpy(), atol=2e-3, rtol=2e-3)


def test_training_step_lowers_the_loss_on_a_fixed_batch():
    losses = jaxresnet.train_losses("resnet18", batch=4, image_size=32, steps=10, lr=0.01)
    assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]


@pytest.mark.distributed
@pytest.mark.parametrize("args, message", [
    (["--batch-size", "0"], "batch_size: must be at least 1, got 0"),
    (["--model", "vgg16"], "model: 'vgg16' is not one of resnet18, resnet50"),
    (["--arch", "vgg16"], "model: 'vgg16' is not one of resnet18, resnet50"),  # the old name
    (["--image-size", "16"], "image_size: must be at least 32, got 16"),
])
def test_worker_bad_input_is_one_line_naming_the_parameter(tmp_path, args, message):
    result = tmp_path / "result.json"
    out = subprocess.run(WORKER + args + ["--result", str(result)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 2
    assert out.stderr == f"benchlib.workers.jax_resnet: {message}\n"
    assert not result.exists()


@pytest.mark.distributed
def test_worker_without_jax_says_how_to_install_it(tmp_path):
    (tmp_path / "jax.py").write_text("raise ImportError('No module named jax')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run(WORKER + ["--model", "resnet18"], capture_output=True, text=True,
                         timeout=60, env=env, check=False)
    assert out.returncode == 2
    assert out.stderr.strip().endswith("jax: not installed here; pip install jax jaxlib "
                                       "(or 'benchlib[jax]')")
    assert len(out.stderr.strip().splitlines()) == 1
