"""The 1D regression network f(x, y) of the paper's illustrative study (appendix B), single and stacked.

Architecture (appendix B, same for both classes)::

    x branch: FC 1->10, ReLU, FC 10->10, ReLU                      (computed once per example)
    y branch: FC 1->10, tanh                                        (per candidate y)
    concat(x feat, y feat) (20) -> FC 20->10, tanh
    two residual blocks h <- tanh(FC 10->10 (h)) + h
    FC 10->1 (linear) = f(x, y)

:class:`Toy1DNet` is an ordinary ``nn.Module`` built from ``nn.Linear`` layers (PyTorch default init).
:class:`Toy1DEnsemble` holds R independent copies of it with every weight stacked along a leading run axis,
so that R models are trained with batched matrix products (``torch.baddbmm``); member r of an ensemble built
by :meth:`Toy1DEnsemble.from_models` computes exactly what the r-th single model computes.

:class:`Toy1DNet` evaluates the concat layer the straightforward way (x features expanded over the samples and
concatenated with the y features), as the reference does. :class:`Toy1DEnsemble` splits it into its x half
and its y half, ``W [hx; hy] + b = (W_x hx + b) + W_y hy``; the x half is a per-example quantity and is
computed once per example, like the x branch itself. Both compute the same function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

HIDDEN = 10

#: (name, fan_in, fan_out) of every fully connected layer, in order.
LAYERS: tuple[tuple[str, int, int], ...] = (
    ("fc1_x", 1, HIDDEN),
    ("fc2_x", HIDDEN, HIDDEN),
    ("fc1_y", 1, HIDDEN),
    ("fc1_xy", 2 * HIDDEN, HIDDEN),
    ("fc2_xy", HIDDEN, HIDDEN),
    ("fc3_xy", HIDDEN, HIDDEN),
    ("fc4_xy", HIDDEN, 1),
)


def _default_linear_init_(weight: Tensor, bias: Tensor, generator: torch.Generator | None) -> None:
    """PyTorch's ``nn.Linear`` init drawn from ``generator``: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both.

    ``nn.Linear.reset_parameters`` uses kaiming_uniform(a=sqrt(5)), whose bound gain*sqrt(3/fan_in) with
    gain = sqrt(2/(1+5)) is exactly 1/sqrt(fan_in); the bias bound is 1/sqrt(fan_in) as well.
    ``weight``: (out, in), ``bias``: (out,).
    """
    bound = 1.0 / math.sqrt(weight.shape[1])
    with torch.no_grad():
        weight.uniform_(-bound, bound, generator=generator)
        bias.uniform_(-bound, bound, generator=generator)


class Toy1DNet(nn.Module):
    """f(x, y) for one model.

    Args:
        generator: if given, the initial weights are drawn from it (same distribution as PyTorch's default
            ``nn.Linear`` init); otherwise ``nn.Linear``'s own init (global RNG) is kept.
    """

    def __init__(self, *, generator: torch.Generator | None = None) -> None:
        super().__init__()
        for name, fan_in, fan_out in LAYERS:
            setattr(self, name, nn.Linear(fan_in, fan_out))
        if generator is not None:
            for name, _, _ in LAYERS:
                layer: nn.Linear = getattr(self, name)
                _default_linear_init_(layer.weight, layer.bias, generator)

    def x_features(self, x: Tensor) -> Tensor:
        """The x branch, computed once per example: x (N, 1) -> (N, 10)."""
        return torch.relu(self.fc2_x(torch.relu(self.fc1_x(x))))

    def score_from_features(self, hx: Tensor, y: Tensor) -> Tensor:
        """f for S candidates per example: hx (N, 10) from :meth:`x_features`, y (N, S, 1) -> (N, S).

        The straightforward formulation (as in the reference): the x features are expanded over the S
        candidates and concatenated with the y features before the 20 -> 10 layer.
        """
        hy = torch.tanh(self.fc1_y(y))
        h = torch.cat([hx.unsqueeze(1).expand(-1, y.shape[1], -1), hy], dim=-1)
        h = torch.tanh(self.fc1_xy(h))
        h = torch.tanh(self.fc2_xy(h)) + h
        h = torch.tanh(self.fc3_xy(h)) + h
        return self.fc4_xy(h).squeeze(-1)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """f(x, y): x (N, 1), y (N, S, 1) -> (N, S)."""
        return self.score_from_features(self.x_features(x), y)


class Toy1DEnsemble(nn.Module):
    """R independent copies of :class:`Toy1DNet`, weights stacked along a leading run axis.

    Parameters are ``<layer>_w`` of shape (R, in, out) (the transpose of ``nn.Linear.weight``) and
    ``<layer>_b`` of shape (R, 1, out). Every operation is batched over the run axis, so the models never interact: the
    gradient of a sum of per-model losses w.r.t. member r's weights is the gradient of member r's own loss.

    Args:
        num_models: R.
        generators: R generators, one per member, each initialising its member exactly like
            ``Toy1DNet(generator=generators[r])``; None uses the global RNG (still PyTorch's default
            distribution).
    """

    def __init__(self, num_models: int, *, generators: Sequence[torch.Generator] | None = None) -> None:
        super().__init__()
        if num_models < 1:
            raise ValueError(f"num_models must be >= 1, got {num_models}")
        if generators is not None and len(generators) != num_models:
            raise ValueError(f"got {len(generators)} generators for {num_models} models")
        self.num_models = num_models
        for name, fan_in, fan_out in LAYERS:
            self.register_parameter(f"{name}_w", nn.Parameter(torch.empty(num_models, fan_in, fan_out)))
            self.register_parameter(f"{name}_b", nn.Parameter(torch.empty(num_models, 1, fan_out)))
        for r in range(num_models):
            gen = generators[r] if generators is not None else None
            for name, fan_in, fan_out in LAYERS:
                weight = torch.empty(fan_out, fan_in)
                bias = torch.empty(fan_out)
                _default_linear_init_(weight, bias, gen)
                with torch.no_grad():
                    getattr(self, f"{name}_w")[r].copy_(weight.t())
                    getattr(self, f"{name}_b")[r, 0].copy_(bias)

    @classmethod
    def from_models(cls, models: Sequence[Toy1DNet]) -> Toy1DEnsemble:
        """The ensemble whose member r has the weights of ``models[r]`` (copied)."""
        ens = cls(len(models))
        with torch.no_grad():
            for r, model in enumerate(models):
                for name, _, _ in LAYERS:
                    layer: nn.Linear = getattr(model, name)
                    getattr(ens, f"{name}_w")[r].copy_(layer.weight.t())
                    getattr(ens, f"{name}_b")[r, 0].copy_(layer.bias)
        return ens

    def member(self, r: int) -> Toy1DNet:
        """A standalone :class:`Toy1DNet` with member r's weights (copied)."""
        model = Toy1DNet()
        with torch.no_grad():
            for name, _, _ in LAYERS:
                layer: nn.Linear = getattr(model, name)
                layer.weight.copy_(getattr(self, f"{name}_w")[r].t())
                layer.bias.copy_(getattr(self, f"{name}_b")[r, 0])
        return model

    def _param(self, name: str, runs: slice | None) -> Tensor:
        p = getattr(self, name)
        return p if runs is None else p[runs]

    def _lin(self, name: str, h: Tensor, runs: slice | None) -> Tensor:
        return torch.baddbmm(self._param(f"{name}_b", runs), h, self._param(f"{name}_w", runs))

    def x_features(self, x: Tensor, *, runs: slice | None = None) -> Tensor:
        """Per-example features: x (R, N, 1) -> (R, N, 10), the x half of the concat layer plus its bias.

        ``runs`` restricts the computation to a slice of the members (then R is the slice's length).
        """
        hx = torch.relu(self._lin("fc2_x", torch.relu(self._lin("fc1_x", x, runs)), runs))
        return torch.baddbmm(self._param("fc1_xy_b", runs), hx, self._param("fc1_xy_w", runs)[:, :HIDDEN])

    def score_from_features(self, feat: Tensor, y: Tensor, *, runs: slice | None = None) -> Tensor:
        """f for S candidates per example: feat (R, N, 10), y (R, N, S, 1) -> (R, N, S).

        The candidates' activations are kept feature-major, (R, 10, N*S), so that every 10-wide layer is a
        wide matrix product ``W^T h``, which a CPU runs faster than the tall-skinny ``h W``.
        """
        r, n, s, _ = y.shape

        def lin(name: str, h: Tensor) -> Tensor:  # (R, in, N*S) -> (R, out, N*S)
            w, b = self._param(f"{name}_w", runs), self._param(f"{name}_b", runs)
            return torch.baddbmm(b.transpose(1, 2), w.transpose(1, 2), h)

        hy = torch.tanh(lin("fc1_y", y.reshape(r, 1, n * s)))
        w_y = self._param("fc1_xy_w", runs)[:, HIDDEN:]
        pre = torch.bmm(w_y.transpose(1, 2), hy).view(r, HIDDEN, n, s) + feat.transpose(1, 2).unsqueeze(3)
        h = torch.tanh(pre).view(r, HIDDEN, n * s)
        h = torch.tanh(lin("fc2_xy", h)) + h
        h = torch.tanh(lin("fc3_xy", h)) + h
        return lin("fc4_xy", h).view(r, n, s)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """f(x, y) of every member: x (R, N, 1), y (R, N, S, 1) -> (R, N, S)."""
        return self.score_from_features(self.x_features(x), y)
