"""Reader Sequences -> GroundTruth: absent flags apart from invalid boxes, attribute flags, image size."""

import numpy as np
import pytest

from eval.evaluation import evaluate_run, make_inputs
from eval.ground_truth import attribute_flags, from_sequence, image_size
from eval.protocols import get_protocol
from ltr.dataset.base import Sequence

BOX = [1.0, 1.0, 10.0, 10.0]


def lasot_like():
    # frame 2: absent with a zero box; frame 3: present but an invalid box (like lion-5 row 553)
    boxes = np.array([BOX, BOX, [0, 0, 0, 0], [1, 1, -1, -1]])
    occ = np.array([0, 0, 1, 0], bool)
    oov = np.zeros(4, bool)
    return Sequence(
        "lion-5",
        boxes,
        frame_loader=lambda i: np.zeros((8, 8, 3), np.uint8),
        visible=~occ & ~oov,
        attributes={"full_occlusion": occ, "out_of_view": oov},
    )


def test_absent_and_invalid_frames_are_kept_apart():
    seq = lasot_like()
    assert seq.visible.tolist() == [True, True, False, False]  # the reader's mask merges the two cases
    gt = from_sequence(seq)
    assert gt.visible.tolist() == [True, True, False, True]
    scores = evaluate_run(
        make_inputs([gt], {"lion-5": np.array([BOX] * 4)}), get_protocol("lasot_matlab")
    ).scores
    # IoU: 1, 1, absent (fail), invalid (fail) -> 50 %; precision: absent fails, invalid succeeds -> 75 %
    assert scores["op50"] == pytest.approx(50.0)
    assert scores["precision"] == pytest.approx(75.0)


def test_without_raw_flags_only_valid_invisible_frames_are_absent():
    boxes = np.array([BOX, [0, 0, 0, 0], BOX])
    seq = Sequence("s", boxes, frame_loader=lambda i: None, visible=np.array([True, True, False]))
    assert from_sequence(seq).visible.tolist() == [True, True, False]


def test_attribute_flags_and_image_size():
    assert attribute_flags({"attribute_flags": {"occlusion": 1, "blur": 0}}) == {
        "occlusion": True,
        "blur": False,
    }
    assert attribute_flags({"flags": ["IV", "SV"]}) == {"IV": True, "SV": True}
    assert attribute_flags({"class": "cat"}) == {}
    with pytest.raises(TypeError, match="attribute_flags"):
        attribute_flags({"attribute_flags": 3})
    seq = Sequence("g", np.array([BOX]), frame_loader=lambda i: np.zeros((30, 40, 3), np.uint8))
    assert image_size(seq) == (40.0, 30.0)  # from frame 0
    seq.attributes["meta"] = {"resolution": (1280, 720)}
    assert image_size(seq) == (1280.0, 720.0)  # GOT-10k meta_info.ini
