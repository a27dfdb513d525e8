"""Guided NMS on hand-made boxes: kept indices, their order and the cluster-max scores."""

import pytest
import torch

from ltr.detection.nms import guided_nms


def _boxes(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_ranks_by_localisation_and_takes_cluster_max_score():
    # 0 and 1 overlap (IoU 0.81), 2 is far away; box 1 is better localised, box 0 better classified
    boxes = _boxes([0, 0, 10, 10], [1, 1, 10, 10], [50, 50, 60, 60])
    scores = torch.tensor([0.9, 0.6, 0.3])
    loc = torch.tensor([1.0, 2.0, 0.5])
    labels = torch.tensor([1, 1, 1])
    res = guided_nms(boxes, scores, loc, labels, 0.5)
    assert res.keep.tolist() == [1, 2]
    assert res.scores.tolist() == pytest.approx([0.9, 0.3])
    assert res.cluster.tolist() == [0, 0, 1]


def test_plain_nms_when_ranked_by_score():
    boxes = _boxes([0, 0, 10, 10], [1, 1, 10, 10], [50, 50, 60, 60])
    scores = torch.tensor([0.9, 0.6, 0.3])
    res = guided_nms(boxes, scores, scores, torch.tensor([1, 1, 1]), 0.5)
    assert res.keep.tolist() == [0, 2]
    assert res.scores.tolist() == pytest.approx([0.9, 0.3])


def test_classes_do_not_suppress_each_other():
    boxes = _boxes([0, 0, 10, 10], [0, 0, 10, 10])
    scores = torch.tensor([0.9, 0.8])
    res = guided_nms(boxes, scores, torch.tensor([0.0, 1.0]), torch.tensor([1, 2]), 0.5)
    assert sorted(res.keep.tolist()) == [0, 1]
    assert res.keep.tolist() == [1, 0]  # by descending localisation
    assert res.scores.tolist() == pytest.approx([0.8, 0.9])


def test_suppressed_box_joins_first_kept_box_in_rank_order():
    # chain: A (best) overlaps B; B overlaps C but A does not overlap C -> A kept, B absorbed by A, C kept
    boxes = _boxes([0, 0, 10, 10], [2, 0, 12, 10], [5, 0, 15, 10])
    # IoU(A,B)=8/12=0.667, IoU(B,C)=7/13=0.54, IoU(A,C)=5/15=0.33
    scores = torch.tensor([0.2, 0.95, 0.5])
    loc = torch.tensor([3.0, 2.0, 1.0])
    res = guided_nms(boxes, scores, loc, torch.tensor([0, 0, 0]), 0.5)
    assert res.keep.tolist() == [0, 2]
    assert res.cluster.tolist() == [0, 0, 1]
    assert res.scores.tolist() == pytest.approx([0.95, 0.5])


def test_threshold_is_strict_and_empty_input():
    boxes = _boxes([0, 0, 10, 10], [0, 0, 10, 5])  # IoU exactly 0.5
    res = guided_nms(boxes, torch.tensor([0.9, 0.8]), torch.tensor([2.0, 1.0]), torch.tensor([1, 1]), 0.5)
    assert res.keep.tolist() == [0, 1]
    empty = guided_nms(
        torch.zeros(0, 4), torch.zeros(0), torch.zeros(0), torch.zeros(0, dtype=torch.long), 0.5
    )
    assert empty.keep.numel() == 0 and empty.scores.numel() == 0


def test_ties_in_localisation_keep_input_order():
    boxes = _boxes([0, 0, 10, 10], [0, 0, 10, 10])
    res = guided_nms(boxes, torch.tensor([0.1, 0.7]), torch.tensor([1.0, 1.0]), torch.tensor([3, 3]), 0.5)
    assert res.keep.tolist() == [0]
    assert res.scores.tolist() == pytest.approx([0.7])


def test_shape_errors_name_the_argument():
    with pytest.raises(ValueError, match="localisation"):
        guided_nms(torch.zeros(2, 4), torch.zeros(2), torch.zeros(3), torch.zeros(2, dtype=torch.long), 0.5)
