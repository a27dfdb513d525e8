"""The vectorised code against literal per-frame loops that follow the toolkits' scripts line by line."""

import math

import numpy as np
import pytest

from eval.evaluation import evaluate_run
from eval.frame_errors import SequenceInput
from eval.protocols import get_protocol, matlab_colon


def random_sequences(seed, n_seq=6, n=60):
    rng = np.random.default_rng(seed)
    out = []
    for s in range(n_seq):
        gt = np.column_stack([rng.uniform(1, 50, (n, 2)), rng.uniform(5, 30, (n, 2))]).round(1)
        gt[rng.random(n) < 0.08] = 0.0  # invalid GT rows
        gt[0] = [5, 5, 20, 20]
        pred = gt + rng.normal(0, 4, gt.shape)
        pred[:, 2:] = np.abs(pred[:, 2:])
        pred[rng.random(n) < 0.1, 2] = 0.0  # zero-size rows -> previous row
        visible = rng.random(n) > 0.1
        visible[0] = True
        out.append(SequenceInput(f"s{s}", pred, gt, visible=visible))
    # one sequence with an invalid first frame and all predictions off: an all-zero success curve
    gt = np.tile([10.0, 10.0, 10.0, 10.0], (n, 1))
    gt[0] = [10, 10, 0, 10]
    out.append(SequenceInput("zero", gt + [200, 200, 0, 0], gt, visible=np.ones(n, bool)))
    return out


def one_based_errors(box, gt):
    """IoU, centre error and size-normalised centre error of one xywh box against one valid GT box, in the
    toolkits' shared 1-based pixel convention (a w-pixel box covers x .. x + w - 1, centre x + (w - 1) / 2)."""
    (x, y, w, h), (gx, gy, gw, gh) = box, gt
    iw = max(0.0, min(x + w - 1, gx + gw - 1) - max(x, gx) + 1)
    ih = max(0.0, min(y + h - 1, gy + gh - 1) - max(y, gy) + 1)
    inter = iw * ih
    c = (x + (w - 1) / 2, y + (h - 1) / 2)
    g = (gx + (gw - 1) / 2, gy + (gh - 1) / 2)
    iou = inter / (w * h + gw * gh - inter)
    return iou, math.hypot(c[0] - g[0], c[1] - g[1]), math.hypot(c[0] / gw - g[0] / gw, c[1] / gh - g[1] / gh)


def lasot_matlab_loop(item):
    """calc_seq_err_robust.m + eval_tracker.m, frame by frame."""
    res = [list(r) for r in item.pred]
    anno = [list(r) for r in item.gt]
    for i in range(1, len(anno)):
        r = res[i]
        if (any(math.isnan(v) for v in r) or r[2] <= 0 or r[3] <= 0) and not any(
            math.isnan(v) for v in anno[i]
        ):
            res[i] = list(res[i - 1])
    res[0] = list(anno[0])
    ious, errs, nerrs = [], [], []
    for i in range(len(anno)):
        if not item.visible[i]:
            continue  # removed; the denominator stays len(anno)
        if all(v > 0 for v in anno[i]):
            iou, err, nerr = one_based_errors(res[i], anno[i])
            ious.append(iou)
            errs.append(err)
            nerrs.append(nerr)
        else:
            ious.append(-1.0)
            errs.append(-1.0)
            nerrs.append(-1.0)
    n = len(anno)
    succ = [sum(v > t for v in ious) / n for t in matlab_colon(0, 0.05, 1)]
    prec = [sum(v <= t for v in errs) / n for t in range(51)]
    norm = [sum(v <= t / 100 for v in nerrs) / n for t in range(51)]
    return succ, prec, norm


def mean_nonzero(curves):
    kept = [c for c in curves if sum(c) > np.finfo(float).eps]
    return np.mean(kept, axis=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lasot_matlab_matches_loop(seed):
    items = random_sequences(seed)
    curves = [lasot_matlab_loop(it) for it in items]
    succ = mean_nonzero([c[0] for c in curves])
    prec = mean_nonzero([c[1] for c in curves])
    norm = mean_nonzero([c[2] for c in curves])
    got = evaluate_run(items, get_protocol("lasot_matlab"))
    assert got.scores["auc"] == pytest.approx(100 * np.mean(succ), abs=1e-9)
    assert got.scores["precision"] == pytest.approx(100 * prec[20], abs=1e-9)
    assert got.scores["norm_precision"] == pytest.approx(100 * norm[20], abs=1e-9)
    np.testing.assert_allclose(got.curves["success"], succ, atol=1e-12)


def pytracking_loop(item):
    """pytracking calc_seq_err_robust + extract_results (dataset 'lasot': visibility; shorter = error)."""
    pred = [list(r) for r in item.pred]
    anno = [list(r) for r in item.gt]
    for i in range(1, len(pred)):
        if (pred[i][2] == 0 or pred[i][3] == 0) and not any(math.isnan(v) for v in anno[i]):
            pred[i] = list(pred[i - 1])
    pred[0] = list(anno[0])
    ious, errs, nerrs = [], [], []
    for i in range(len(anno)):
        gw, gh = anno[i][2], anno[i][3]
        if gw > 0 and gh > 0 and item.visible[i]:
            iou, err, nerr = one_based_errors(pred[i], anno[i])
            ious.append(iou)
            errs.append(err)
            nerrs.append(nerr)
        else:
            ious.append(-1.0)
            errs.append(math.inf)
            nerrs.append(math.inf if not item.visible[i] else -1.0)
    n = len(anno)
    succ = [sum(v > t for v in ious) / n for t in np.arange(21) * 0.05]
    prec = [sum(v <= t for v in errs) / n for t in range(51)]
    norm = [sum(v <= t / 100 for v in nerrs) / n for t in range(51)]
    return succ, prec, norm


@pytest.mark.parametrize("seed", [3, 4])
def test_pytracking_lasot_matches_loop(seed):
    items = random_sequences(seed)
    curves = [pytracking_loop(it) for it in items]
    got = evaluate_run(items, get_protocol("pytracking_lasot"))
    assert got.scores["auc"] == pytest.approx(100 * np.mean([c[0] for c in curves]), abs=1e-9)
    assert got.scores["precision"] == pytest.approx(100 * np.mean([c[1][20] for c in curves]), abs=1e-9)
    assert got.scores["norm_precision"] == pytest.approx(100 * np.mean([c[2][20] for c in curves]), abs=1e-9)
