"""benchlib: measure PyTorch training performance the same way everywhere.

Notebooks in notebooks/ call this package; `python -m benchlib --help` is its CLI.
Importing benchlib is cheap on purpose (no torch, no pandas): a sweep starts one
kernel per row and every kernel imports it.
"""

__version__ = "0.1.0"

# Bumped whenever the way a number is taken changes (warm-up, sync, statistics),
# so that records measured differently are never compared silently.
METHOD_VERSION = "1"
