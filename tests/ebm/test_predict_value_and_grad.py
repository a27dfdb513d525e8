"""gradient_ascent with a caller-supplied value_and_grad instead of autograd through score_fn."""

from __future__ import annotations

import pytest
import torch

from ltr.ebm import gradient_ascent

# f(y) = -sum_d a_d (y_d - c_d)^2 with powers of two for a: autograd's gradient and the closed form
# -2 a (y - c) are then the same floating-point numbers, so both ascents must agree bit for bit.
A = torch.tensor([1.0, 4.0, 0.5], dtype=torch.float64)
C = torch.tensor([0.3, -1.7, 2.9], dtype=torch.float64)


def _score(y: torch.Tensor) -> torch.Tensor:
    return -(A * (y - C) ** 2).sum(-1)


def _value_and_grad(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _score(y), -2.0 * A * (y - C)


def _start() -> torch.Tensor:
    return torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2


@pytest.mark.parametrize("mode", ["s1", "plain"])
def test_closed_form_gradient_gives_identical_ascent(mode):
    kwargs = dict(step_length=[0.3, 0.2, 0.9], num_iters=6, decay=0.5, mode=mode)
    expected = gradient_ascent(_score, _start(), **kwargs)
    got = gradient_ascent(_score, _start(), value_and_grad=_value_and_grad, **kwargs)
    assert torch.equal(got.y, expected.y)
    assert torch.equal(got.scores, expected.scores)
    assert torch.equal(got.accepted, expected.accepted)
    assert not torch.equal(expected.y, _start())  # the ascent moved


def test_value_and_grad_is_used_for_every_gradient_and_score_fn_for_the_last_step():
    calls = {"score": 0, "value_and_grad": 0}

    def score(y):
        calls["score"] += 1
        return _score(y)

    def value_and_grad(y):
        calls["value_and_grad"] += 1
        return _value_and_grad(y)

    gradient_ascent(score, _start(), step_length=0.1, num_iters=4, value_and_grad=value_and_grad)
    assert calls == {"score": 1, "value_and_grad": 4}  # the start and steps 1-3; step 4 forward only
    # a wrong gradient changes the result: the ascent really follows value_and_grad
    wrong = gradient_ascent(
        _score,
        _start(),
        step_length=0.1,
        num_iters=4,
        value_and_grad=lambda y: (_score(y), -_value_and_grad(y)[1]),
    )
    right = gradient_ascent(_score, _start(), step_length=0.1, num_iters=4)
    assert not torch.allclose(wrong.y, right.y)
