"""DiMP target classifier: feature head, filter initializer, filter optimizers (DiMP's steepest-descent
Gauss-Newton, PrDiMP's KL steepest descent with Newton step length)."""

from ltr.models.target_classifier.features import ClassifierFeatureHead, InstanceL2Norm
from ltr.models.target_classifier.filter_ops import (
    apply_filter,
    apply_filter_transpose,
    score_cell_to_pixel,
    score_map_size,
)
from ltr.models.target_classifier.initializer import FilterInitializer, boxes_to_rois
from ltr.models.target_classifier.linear_filter import ClassifierOutput, LinearFilterClassifier
from ltr.models.target_classifier.newton_kl import SteepestDescentNewtonKL, softmax_reg
from ltr.models.target_classifier.optimizer import OptimizerResult, SteepestDescentGN, distance_bins

__all__ = [
    "ClassifierFeatureHead",
    "ClassifierOutput",
    "FilterInitializer",
    "InstanceL2Norm",
    "LinearFilterClassifier",
    "OptimizerResult",
    "SteepestDescentGN",
    "SteepestDescentNewtonKL",
    "apply_filter",
    "apply_filter_transpose",
    "boxes_to_rois",
    "distance_bins",
    "score_cell_to_pixel",
    "score_map_size",
    "softmax_reg",
]
