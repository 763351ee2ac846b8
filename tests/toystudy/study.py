"""The toy study's run: it counts, launches nothing."""

from toystudy.config import ToyConfig


def run(cfg: ToyConfig, run_id: str = "interactive") -> dict:
    return {"toys_fitted": cfg.toys * (2 if cfg.box == "large" else 1)}
