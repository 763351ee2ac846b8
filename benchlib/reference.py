"""Published figures the analysis compares against, with where they come from."""

# Seed 000 (../shared/seeds/000_*.txt, conclusion): GTX 1050, 5 epochs, seconds.
SEED000_TRAVERSE_FASHION_S = {"raw": 32.976, "preload": 2.076, "tensorclass": 3.645,
                              "tensorclass_memmap": 4.233, "np_memmap": 4.408}
SEED000_RAW_OVER_PRELOAD = SEED000_TRAVERSE_FASHION_S["raw"] / SEED000_TRAVERSE_FASHION_S["preload"]

# Seed 002 (../shared/seeds/002_*.txt): PyramidNet on CIFAR-10, Tesla P100 16 GB,
# batch 64 per script, 2 GPUs for DP and DDP.
SEED002_P100 = [
    {"strategy": "single", "devices": 1, "batch_s": 0.255, "epoch_s": 200.0, "gpu_util_pct": 98},
    {"strategy": "dp", "devices": 2, "batch_s": 0.170, "epoch_s": 138.0, "gpu_util_pct": 80},
    {"strategy": "ddp", "devices": 2, "batch_s": 0.274, "epoch_s": 111.0, "gpu_util_pct": 98.5},
]
