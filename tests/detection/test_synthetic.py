"""The synthetic COCO-format set: seeded, tight boxes inside the image, noise only on train annotations."""

import json

import numpy as np

from ltr.detection.synthetic import CLASSES, SyntheticDetectionConfig, render_image, write_split


def _cfg(**kw):
    base = {"num_train": 3, "num_val": 2, "num_test": 2, "image_size": 64, "min_box": 12, "max_box": 30}
    base.update(kw)
    return SyntheticDetectionConfig(**base)


def test_same_seed_same_files(tmp_path):
    a = write_split(tmp_path / "a", "train", _cfg())
    b = write_split(tmp_path / "b", "train", _cfg())
    assert a.read_text() == b.read_text()
    img_a = (tmp_path / "a" / "images" / "train2017" / "000001.png").read_bytes()
    img_b = (tmp_path / "b" / "images" / "train2017" / "000001.png").read_bytes()
    assert img_a == img_b
    c = write_split(tmp_path / "c", "train", _cfg(seed=1))
    assert c.read_text() != a.read_text()


def test_boxes_are_tight_around_the_drawn_shapes():
    cfg = _cfg(image_size=96)
    rng = np.random.default_rng(3)
    image, objects = render_image(rng, cfg)
    assert image.shape == (96, 96, 3) and image.dtype == np.uint8
    assert 1 <= len(objects) <= cfg.max_objects
    for obj in objects:
        x, y, w, h = obj["bbox"]
        assert 0 <= x and 0 <= y and x + w <= 96 and y + h <= 96
        assert 0 <= obj["category"] < len(CLASSES)


def test_annotation_noise_only_on_train(tmp_path):
    clean, noisy = _cfg(), _cfg(annotation_noise=0.05)
    for split in ("train", "val"):
        a = json.loads(write_split(tmp_path / "clean", split, clean).read_text())["annotations"]
        b = json.loads(write_split(tmp_path / "noisy", split, noisy).read_text())["annotations"]
        same = [x["bbox"] == y["bbox"] for x, y in zip(a, b, strict=True)]
        assert all(same) == (split == "val")


def test_cli_writes_a_coco_layout_the_reader_and_the_writer_agree_on(tmp_path):
    from ltr.detection.data import CocoImages
    from ltr.detection.synthetic import main

    args = ["--num-train", "2", "--num-val", "1", "--num-test", "1", "--image-size", "64", "--seed", "4"]
    root = main([str(tmp_path / "coco"), *args])
    assert [len(CocoImages(root, s)) for s in ("train", "val", "test")] == [2, 1, 1]
    same = write_split(tmp_path / "ref", "val", SyntheticDetectionConfig(1, 1, 1, image_size=64, seed=4))
    assert (root / "annotations" / "instances_val2017.json").read_text() == same.read_text()
    assert CocoImages(root, "train").image(1).shape == (3, 64, 64)
