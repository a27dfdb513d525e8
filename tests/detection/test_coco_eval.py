"""COCO round trip: our results JSON -> pycocotools -> AP 100 for perfect boxes, lower for shifted ones."""

import contextlib
import io
import json

import pytest
import torch

from ltr.detection.coco_eval import evaluate, markdown_table, to_results, write_report
from ltr.detection.data import CocoImages
from ltr.detection.synthetic import SyntheticDetectionConfig, ensure_synthetic


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory):
    cfg = SyntheticDetectionConfig(num_train=4, num_val=3, num_test=6, image_size=96, min_box=16, max_box=40)
    return ensure_synthetic(tmp_path_factory.mktemp("det"), cfg)


def _results(data: CocoImages, shift: float) -> list[dict]:
    out = []
    for image_id in data.image_ids:
        xywh = data.boxes(image_id)
        xyxy = torch.cat([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
        xyxy = xyxy + shift * torch.cat([xywh[:, 2:], xywh[:, 2:]], 1)  # move by a fraction of the size
        cats = data.categories(image_id).tolist()
        out += to_results(image_id, xyxy, torch.linspace(0.9, 0.5, len(cats)), cats)
    return out


def test_perfect_boxes_give_ap_100_and_shifted_less(tiny_set, tmp_path):
    data = CocoImages(tiny_set, "test")
    assert len(data.coco.anns) >= 6
    # the results survive a JSON round trip (what is written is what is evaluated)
    path = tmp_path / "res.json"
    path.write_text(json.dumps(_results(data, 0.0)))
    perfect = evaluate(data.coco, json.loads(path.read_text()))
    assert perfect == pytest.approx({"AP": 100.0, "AP50": 100.0, "AP75": 100.0})
    small = evaluate(data.coco, _results(data, 0.1))  # IoU = 0.9^2/(2-0.81) ~ 0.68
    assert small["AP50"] == pytest.approx(100.0)
    assert small["AP75"] == pytest.approx(0.0)
    assert 0.0 < small["AP"] < 100.0
    assert evaluate(data.coco, _results(data, 0.6)) == pytest.approx({"AP": 0.0, "AP50": 0.0, "AP75": 0.0})
    assert evaluate(data.coco, []) == {"AP": 0.0, "AP50": 0.0, "AP75": 0.0}


def test_pycocotools_reads_our_annotation_file(tiny_set):
    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(tiny_set / "annotations" / "instances_val2017.json"))
    assert len(coco.imgs) == 3
    for ann in coco.anns.values():
        x, y, w, h = ann["bbox"]
        assert 0 <= x and 0 <= y and x + w <= 96 and y + h <= 96 and w >= 4 and h >= 4


def test_report_files(tmp_path):
    rows = {"detector": {"AP": 10.0, "AP50": 20.0, "AP75": 5.0}}
    write_report(tmp_path, {"metrics": rows}, markdown_table(rows))
    assert json.loads((tmp_path / "results.json").read_text())["metrics"] == rows
    assert "| detector | 10.00 | 20.00 | 5.00 |" in (tmp_path / "results.md").read_text()
