"""Tiny models the compile tests train (a few thousand parameters, no bias and no
activation, so that inductor makes no C++ kernel of its own for them: a cold compile here
costs seconds, not the minute a gcc build per kernel takes on a busy 2-core host): one of
one piece, and one of blocks (what regional compiles) with a graph break put in on purpose."""

import torch
from torch import nn


class Small(nn.Module):
    """3x8x8 images to 10 classes, no blocks: 3,232 parameters."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(3 * 8 * 8, 16, bias=False)
        self.out = nn.Linear(16, 10, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.hidden(x.flatten(1)))


class Block(nn.Module):
    def __init__(self, n_in: int, n_out: int, graph_break: bool = False):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out, bias=False)
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        if self.graph_break:
            torch._dynamo.graph_break()  # BREAK HERE: the line the record must name
        return x


class Blocks(nn.Module):
    """The same images (of `side` pixels) through three blocks in a ModuleList (`blocks`),
    the second with a graph break when asked: 3,488 parameters at 8 pixels."""

    def __init__(self, graph_break: bool = False, side: int = 8):
        super().__init__()
        self.blocks = nn.ModuleList([Block(3 * side * side, 16), Block(16, 16, graph_break),
                                     Block(16, 10)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for block in self.blocks:
            x = block(x)
        return x


def small() -> nn.Module:
    return Small()


def blocks() -> nn.Module:
    return Blocks()


def blocks_with_break(side: int = 8) -> nn.Module:
    return Blocks(graph_break=True, side=side)
