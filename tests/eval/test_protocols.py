"""Every convention on tiny hand-made sequences; expected values are worked out by hand in comments."""

import numpy as np
import pytest

from eval.evaluation import evaluate_run
from eval.frame_errors import ResultError, SequenceInput
from eval.protocols import (
    DATASET_PROTOCOLS,
    PROTOCOLS,
    THRESHOLD_SETS,
    get_protocol,
    matlab_colon,
    protocol_for_dataset,
)
from ltr.dataset.registry import BENCHMARKS

BOX = [1.0, 1.0, 10.0, 10.0]
FAR = [101.0, 101.0, 10.0, 10.0]  # centre error 100*sqrt(2), IoU 0


def run(protocol, *seqs, **options):
    p = get_protocol(protocol)
    if options:
        p = p.with_options(**options)
    return evaluate_run(list(seqs), p).scores


def seq(pred, gt, name="s", visible=None, **kw):
    return SequenceInput(
        name, np.array(pred, float), np.array(gt, float), visible=visible, source=f"{name}.txt", **kw
    )


def test_every_dataset_maps_to_a_known_protocol():
    assert set(DATASET_PROTOCOLS.values()) <= set(PROTOCOLS)
    assert set(DATASET_PROTOCOLS) <= set(BENCHMARKS.names)  # keyed by the --dataset names
    for required in (
        "otb_matlab",
        "lasot_matlab",
        "pytracking",
        "got10k_toolkit",
        "got10k_val",
        "trackingnet",
        "pysot",
    ):
        assert required in PROTOCOLS
    assert protocol_for_dataset("otb").name == "otb_matlab"
    assert protocol_for_dataset("lasot").name == "lasot_matlab"
    with pytest.raises(KeyError, match="no default evaluation protocol"):
        protocol_for_dataset("imagenet")
    with pytest.raises(KeyError, match="unknown protocol option"):
        get_protocol("pytracking").with_options(no_such_option=1)
    with pytest.raises(KeyError, match=r"unknown evaluation protocol 'otb'; choose one of \['otb_matlab', "):
        get_protocol("otb")
    # every protocol's threshold set exists
    assert {p.thresholds for p in PROTOCOLS.values()} <= set(THRESHOLD_SETS)


def test_matlab_colon_is_symmetric():
    t = matlab_colon(0.0, 0.05, 1.0)
    assert len(t) == 21 and t[-1] == 1.0 and t[0] == 0.0
    # MATLAB computes the upper half from the end: element 12 is 1 - 8*0.05, not 12*0.05
    assert t[12] == 1.0 - 8 * 0.05
    assert t[3] == 3 * 0.05


def test_invalid_gt_frames_pytracking_vs_otb():
    gt = [BOX, BOX, [0, 0, 0, 0], BOX]
    pred = [FAR, BOX, BOX, FAR]  # frame 0 becomes GT; frame 3 misses by 141 px
    # IoU per frame: 1, 1, invalid(-1), 0 -> success 2/4 for t in 0..0.95 (20 thresholds), 0 at t=1
    auc = 100 * (20 * 0.5) / 21
    s = run("pytracking", seq(pred, gt))
    assert s["auc"] == pytest.approx(auc)
    assert s["precision"] == pytest.approx(50.0)  # invalid frame: error +inf -> failure
    assert s["norm_precision"] == pytest.approx(75.0)  # invalid frame: -1 -> success
    o = run("otb_matlab", seq(pred, gt))
    assert o["auc"] == pytest.approx(auc)
    assert o["precision"] == pytest.approx(75.0)  # OTB: invalid frame counts as a precision success


def test_denominator_valid_frames_only():
    gt = [BOX, BOX, [0, 0, 0, 0], BOX]
    pred = [BOX, BOX, BOX, FAR]
    # exclude invalid frames from the denominator: IoU 1, 1, 0 over 3 frames -> 2/3 for t < 1
    s = run("pytracking", seq(pred, gt), denominator="valid")
    assert s["op50"] == pytest.approx(100 * 2 / 3)


def test_zero_size_prediction_copies_previous_row():
    gt = [BOX] * 4
    # frame 1 shifted by 5 px: IoU 50/150 = 1/3; frame 2 zero width -> copy of frame 1 -> 1/3; frame 3 exact
    pred = [BOX, [6, 1, 10, 10], [3, 3, 0, 5], BOX]
    # thresholds 0..0.30 (7 values): 4/4; 0.35..0.95 (13 values): 2/4; 1.0: 0
    s = run("pytracking", seq(pred, gt))
    assert s["auc"] == pytest.approx(100 * (7 * 1.0 + 13 * 0.5) / 21)
    # got10k toolkit keeps the zero box: IoU 0 at frame 2 -> 3/4 up to 0.30, 2/4 up to 0.95
    g = run("got10k_toolkit", seq(pred, gt))
    assert g["auc"] == pytest.approx(100 * (7 * 0.75 + 13 * 0.5) / 21)


def test_nan_and_negative_predictions():
    gt = [BOX] * 4
    pred = [BOX, [6, 1, 10, 10], [np.nan] * 4, BOX]
    with pytest.raises(ResultError, match=r"s\.txt:3: predicted box contains NaN"):
        run("pytracking", seq(pred, gt))
    # OTB MATLAB: the NaN row is replaced by the previous row (IoU 1/3), as for zero sizes above
    assert run("otb_matlab", seq(pred, gt))["auc"] == pytest.approx(100 * (7 + 13 * 0.5) / 21)
    neg = [BOX, BOX, BOX, [1, 1, -3, 10]]
    with pytest.raises(ResultError, match=r"s\.txt:4: predicted box has negative size"):
        run("pytracking", seq(neg, gt))
    # got10k toolkit scores a NaN row as it is: a failure (IoU NaN is never > t), 3 of 4 frames pass t=0
    assert run("got10k_toolkit", seq(pred, gt))["op50"] == pytest.approx(50.0)


def test_length_mismatches():
    gt = [BOX] * 4
    short = [BOX, BOX]
    # pytracking pads with zero boxes that are NOT replaced by the previous row: IoU 1, 1, 0, 0
    assert run("pytracking", seq(short, gt))["op50"] == pytest.approx(50.0)
    with pytest.raises(ResultError, match=r"s\.txt: has 2 lines but the ground truth of 's' has 4 frames"):
        run("lasot_matlab", seq(short, gt))
    # got10k toolkit truncates both to 2 frames: all perfect
    assert run("got10k_toolkit", seq(short, gt))["op50"] == pytest.approx(100.0)
    # longer results are truncated (monkey-17) by default, rejected by got10k_val
    long = [BOX] * 6
    assert run("pytracking", seq(long, gt))["op50"] == pytest.approx(100.0)
    with pytest.raises(ResultError, match=r"has 6 lines .*\(line 5 onwards is extra"):
        run("got10k_val", seq(long, gt, cover=np.ones(4), image_wh=(100, 100)))


def test_first_frame_is_ground_truth():
    gt = [BOX] * 2
    pred = [FAR, BOX]
    assert run("pytracking", seq(pred, gt))["op50"] == pytest.approx(100.0)
    assert run("pysot", seq(pred, gt))["op50"] == pytest.approx(50.0)  # pysot keeps the tracker's row


def test_uav_nan_gt_rows():
    nan = [np.nan] * 4
    gt = [BOX, nan, BOX, BOX]
    # frame 1 prediction has zero size but its GT row is NaN, so it is NOT replaced; it is an invalid frame
    pred = [BOX, [0, 0, 0, 0], BOX, FAR]
    s = run("pytracking_uav", seq(pred, gt))
    # IoU: 1, invalid(-1), 1, 0 -> 2/4; precision: 0, invalid(-1 = success), 0, 141 -> 3/4
    assert s["op50"] == pytest.approx(50.0)
    assert s["precision"] == pytest.approx(75.0)
    with pytest.raises(ResultError, match="ground truth of sequence 's' has NaN at frame 2"):
        run("pytracking", seq(pred, gt))


def test_lasot_absent_frames_count_as_failures():
    gt = [BOX, BOX, BOX, [0, 0, 0, 0]]
    pred = [BOX, BOX, BOX, BOX]
    visible = np.array([True, True, False, True])
    # frame 2 absent (perfect prediction, still a failure for IoU and precision); frame 3 invalid GT
    s = run("lasot_matlab", seq(pred, gt, visible=visible))
    assert s["op50"] == pytest.approx(50.0)  # IoU: 1, 1, absent, invalid
    assert s["precision"] == pytest.approx(75.0)  # absent fails, invalid GT succeeds (OTB rule)
    # pytracking without visibility sees frame 2 as a perfect frame
    assert run("pytracking", seq(pred, gt, visible=visible))["op50"] == pytest.approx(75.0)
    # pytracking_lasot: absent -> inf (fail); invalid GT -> inf (fail) for precision
    assert run("pytracking_lasot", seq(pred, gt, visible=visible))["precision"] == pytest.approx(50.0)


def test_otb_drops_all_zero_sequences():
    good = seq([BOX] * 4, [BOX] * 4, name="good")  # success 1 for t < 1, 0 at t = 1
    # first GT box invalid (w = 0), every other frame missed: the success curve is all zero
    bad = seq([BOX, FAR, FAR, FAR], [[1, 1, 0, 10], BOX, BOX, BOX], name="bad")
    assert run("otb_matlab", good, bad)["auc"] == pytest.approx(100 * 20 / 21)
    assert run("pytracking", good, bad)["auc"] == pytest.approx(100 * 10 / 21)
    # precision curve of 'bad' is not all zero (invalid frame succeeds): (1 + 1/4) / 2
    assert run("otb_matlab", good, bad)["precision"] == pytest.approx(62.5)


def test_trackingnet_rounding_and_trapezoid():
    gt = [[10, 10, 10, 10]] * 3
    # frame 1 rounds to the GT exactly (IoU 1 -> passes t = 1.0 with >=); frame 2: x 14.5 rounds half to
    # even -> 14: shift 4 -> IoU 60/140 = 3/7
    pred = [[0, 0, 1, 1], [10.4, 10.4, 10.4, 9.6], [14.5, 10, 10, 10]]
    s = run("trackingnet", seq(pred, gt))
    # success curve: 1 for t <= 0.40 (9 values), 2/3 for t = 0.45 .. 1.0 (12 values)
    # trapz, dx = 0.05: 0.05 * (sum - (first + last) / 2)
    curve_sum = 9 * 1 + 12 * 2 / 3
    assert s["auc"] == pytest.approx(100 * 0.05 * (curve_sum - (1 + 2 / 3) / 2))
    # centre distances 0, 0, 4 px; thresholds 0, 2.5, 5, ...: 2/3, 2/3, then 1 (19 values)
    prec_sum = 2 * 2 / 3 + 19
    assert s["precision"] == pytest.approx(100 * 0.05 * (prec_sum - (2 / 3 + 1) / 2))
    # with strict IoU > t the t = 1.0 point drops to 0
    strict = run("trackingnet", seq(pred, gt), success_inclusive=False)
    assert strict["auc"] == pytest.approx(100 * 0.05 * (9 + 11 * 2 / 3 - (1 + 0) / 2))


def test_got10k_clipping_cover_and_frame_pooling():
    # image 100 x 100; frame 0 excluded; frame 2 has cover 0 (excluded) and a garbage prediction
    gt1 = [BOX, [90, 90, 20, 20], [50, 50, 10, 10], [10, 10, 10, 10]]
    pred1 = [FAR, [90, 90, 10, 10], [0, 0, 1, 1], [15, 10, 10, 10]]
    # frame 1: GT clipped to (90, 90, 10, 10) = prediction -> IoU 1 (0.25 unclipped); frame 3: 50/150
    s1 = seq(pred1, gt1, name="a", cover=np.array([8, 8, 0, 8]), image_wh=(100, 100))
    # second sequence: 4 scored frames, all missed
    gt2 = [BOX] * 5
    s2 = seq([BOX] + [FAR] * 4, gt2, name="b", cover=np.full(5, 8), image_wh=(100, 100))
    one = run("got10k_val", s1)
    assert one["ao"] == pytest.approx(100 * (1 + 1 / 3) / 2)
    assert one["sr50"] == pytest.approx(50.0)
    assert one["sr75"] == pytest.approx(50.0)
    both = run("got10k_val", s1, s2)
    # pooled over frames: (1 + 1/3 + 0 + 0 + 0 + 0) / 6, not the mean of per-sequence AOs
    assert both["ao"] == pytest.approx(100 * (4 / 3) / 6)
    assert both["ao"] != pytest.approx(100 * ((1 + 1 / 3) / 2 + 0) / 2)
    no_clip = run("got10k_val", s1, clip_to_image=False)
    assert no_clip["ao"] == pytest.approx(100 * (0.25 + 1 / 3) / 2)


def test_no_frames_left_is_an_error():
    gt = [[1, 1, 0, 0]] * 3
    with pytest.raises(ValueError, match="no frames left to evaluate"):
        run("pytracking", seq([BOX] * 3, gt), denominator="valid")


def test_partial_nan_rows_otb_vs_lasot():
    gt = [BOX] * 3
    pred = [BOX, [6, 1, 10, 10], [np.nan, 1, 10, 10]]  # frame 1: IoU 1/3
    # OTB's vector `if` only replaces all-NaN rows: frame 2 is scored as it is (a failure): IoU 1, 1/3, fail
    assert run("otb_matlab", seq(pred, gt))["op50"] == pytest.approx(100 / 3)
    assert run("otb_matlab", seq(pred, gt))["auc"] == pytest.approx(100 * (7 * 2 / 3 + 13 / 3) / 21)
    # LaSOT's toolkit replaces any row with a NaN: IoU 1, 1/3, 1/3
    assert run("lasot_matlab", seq(pred, gt))["auc"] == pytest.approx(100 * (7 + 13 / 3) / 21)


def test_got10k_per_sequence_ao_ignores_sentinels():
    gt = [BOX] * 4
    pred = [BOX, BOX, [np.nan] * 4, [6, 1, 10, 10]]  # frame 0 excluded; IoU 1, NaN (adds 0), 1/3
    item = seq(pred, gt, name="a", cover=np.full(4, 8), image_wh=(100, 100))
    result = evaluate_run([item], get_protocol("got10k_val"))
    assert result.sequences["a"]["ao"] == pytest.approx(100 * (1 + 0 + 1 / 3) / 3)
    assert result.scores["ao"] == pytest.approx(100 * (1 + 0 + 1 / 3) / 3)


def test_got10k_toolkit_nan_gt_rows_otb_vs_lasot_experiment():
    gt = [BOX, [np.nan] * 4, BOX, BOX]
    pred = [BOX, BOX, BOX, FAR]
    # OTB/UAV experiment: the NaN row is a counted failure: IoU 1, NaN, 1, 0 -> 2/4
    assert run("got10k_toolkit", seq(pred, gt))["op50"] == pytest.approx(50.0)
    # LaSOT experiment drops NaN GT rows: 2 of 3
    assert run("got10k_toolkit_lasot", seq(pred, gt))["op50"] == pytest.approx(100 * 2 / 3)
