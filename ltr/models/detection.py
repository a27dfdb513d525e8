"""The detection energy head: three fully-connected layers on PrRoI-pooled detector features -> f(x, y).

As in the paper (section 4.2): image features h1(x) from a frozen FPN Faster R-CNN are pooled at the box y
with PrRoIPool (h2(x, y)); an added branch of three fully-connected layers maps h2 to the scalar f(x, y).
"""

from __future__ import annotations

from torch import Tensor, nn


class DetectionEnergyHead(nn.Module):
    """f = fc3(relu(fc2(relu(fc1(flatten(pooled)))))).

    Args:
        in_channels: C of the pooled features.
        pool_size: P, pooled bins per side.
        hidden: width of the two hidden layers.
    """

    def __init__(self, *, in_channels: int, pool_size: int = 7, hidden: int = 1024) -> None:
        super().__init__()
        self.pool_size = pool_size
        self.fc1 = nn.Linear(in_channels * pool_size * pool_size, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 1)
        self.act = nn.ReLU()

    def forward(self, pooled: Tensor) -> Tensor:
        """pooled: (R, C, P, P) -> (R,) scores f."""
        h = self.act(self.fc1(pooled.flatten(1)))
        h = self.act(self.fc2(h))
        return self.fc3(h).squeeze(-1)
