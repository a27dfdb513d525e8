"""Network outputs and labels of the training-loss golden file, made the same way by its script and test.

Everything is a pure function of a seed (numpy's PCG64), float32, in the shapes SuperDiMP's actor sees for
3 test frames of 2 sequences: classifier scores of the initial filter and its 5 steepest-descent iterates on
the 23 x 23 score map, Gaussian labels (sigma 22/24 cells, some cells above and most below the 0.05 hinge
threshold), 128 box proposals per test frame as rel-space offsets drawn from the (0.05, 0.5) mixture, and
box-head scores that fall with the offset (plus noise), as a trained head's would.
"""

from __future__ import annotations

import numpy as np

NUM_ITERATES = 6
NUM_TEST = 3
BATCH = 2
LABEL_SIZE = 23
NUM_PROPOSALS = 128
#: the (centre, size) standard deviations of the proposal mixture
PROPOSAL_SIGMAS = ((0.05, 0.05), (0.5, 0.5))


def loss_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """``target_scores`` (6, 3, 2, 23, 23), ``test_label`` (3, 2, 23, 23), ``test_boxes`` (3, 2, 4) xywh crop
    pixels, ``proposal_offsets`` (3, 2, 128, 4) rel-space offsets from the test boxes, ``proposals`` (3, 2,
    128, 4) xywh and ``bb_scores`` (3, 2, 128); all float32."""
    rng = np.random.default_rng([seed, 0x10CC])
    size = rng.uniform(30.0, 90.0, size=(NUM_TEST, BATCH, 2))
    centre = rng.uniform(120.0, 230.0, size=(NUM_TEST, BATCH, 2))
    boxes = np.concatenate([centre - size / 2, size], axis=-1)
    # labels: the score map index j sits at crop pixel 16 j (DiMP's even filter)
    sigma = 22 / 24
    grid = np.arange(LABEL_SIZE, dtype=np.float64)
    gx = np.exp(-0.5 * ((grid - centre[..., :1] / 16) / sigma) ** 2)
    gy = np.exp(-0.5 * ((grid - centre[..., 1:] / 16) / sigma) ** 2)
    label = gy[..., :, None] * gx[..., None, :]
    # iterates: from a noisy start towards the label
    weight = np.linspace(0.2, 0.95, NUM_ITERATES)[:, None, None, None, None]
    noise = rng.standard_normal((NUM_ITERATES, NUM_TEST, BATCH, LABEL_SIZE, LABEL_SIZE))
    scores = weight * label + (1.0 - weight) * 0.3 * noise
    # proposals: component ids, then N(0, 1) draws scaled by the component's (centre, centre, size, size) stds
    sig = np.array([[c, c, s, s] for c, s in PROPOSAL_SIGMAS])
    comp = rng.integers(0, len(sig), size=(NUM_TEST, BATCH, NUM_PROPOSALS))
    offsets = rng.standard_normal((NUM_TEST, BATCH, NUM_PROPOSALS, 4)) * sig[comp]
    cx = centre[..., None, 0] + offsets[..., 0] * size[..., None, 0]
    cy = centre[..., None, 1] + offsets[..., 1] * size[..., None, 1]
    w = size[..., None, 0] * np.exp(offsets[..., 2])
    h = size[..., None, 1] * np.exp(offsets[..., 3])
    proposals = np.stack([cx - w / 2, cy - h / 2, w, h], axis=-1)
    distance = np.sqrt((offsets**2).sum(-1))
    bb_scores = 3.0 - 12.0 * distance + 0.5 * rng.standard_normal(distance.shape)
    out = {
        "target_scores": scores,
        "test_label": label,
        "test_boxes": boxes,
        "proposal_offsets": offsets,
        "proposals": proposals,
        "bb_scores": bb_scores,
    }
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}
