"""DiMP-NCE+ with the CPU-sized network of train setting dimp/nce_plus_tiny (its crops come from its
config); SuperDiMP's runtime values except four localisation values, the box refinement's length and a
damped size and aspect update, matched to that network and chosen on the synthetic val split
(``docs/results/2026-11-22-nce-plus-tiny-params.md``; at the training's search area of 3
target sizes, ``docs/results/2026-11-26-real-footage.md``):

- target-not-found threshold 0.05: the tiny network's peaks are about 0.1-0.25, not about 1;
- a motion prior on the scores (``score_window=1``): look-alike distractors next to the target often outscore
  it with this network;
- a second peak is a hard negative from 0.2 (not 0.5) times the first, and is taken as the target only within
  0.5 (not 0.8) times half the score map of the previous position;
- box refinement stops after 5 steps of SuperDiMP's length (not 10): longer ascents let this network's
  boxes drift in size;
- the size moves a quarter of the way (geometrically) to each refined box's (``scale_learning_rate=0.25``;
  the reference takes the refined size whole): the network's size estimates are noisy from frame to frame;
- the aspect ratio moves a twentieth of the way (``aspect_learning_rate=0.05``): its estimates are noisier
  still, and a box that drifted in aspect stays wrong for many frames.
"""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(
        train_setting="nce_plus_tiny",
        target_not_found_threshold=0.05,
        score_window=1.0,
        hard_negative_threshold=0.2,
        displacement_scale=0.5,
        refine_iters=5,
        scale_learning_rate=0.25,
        aspect_learning_rate=0.05,
    )
