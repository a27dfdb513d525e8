"""LaSOT, GOT-10k and TrackingNet readers against hand-built trees with the real quirks."""

import numpy as np
import pytest

from ltr.dataset.base import DatasetError
from ltr.dataset.got10k import Got10kDataset, read_meta_info
from ltr.dataset.lasot import LasotDataset, lasot_test_names
from ltr.dataset.trackingnet import TrackingNetDataset

from .fixtures import (
    frame_value,
    make_got10k_sequence,
    make_lasot_sequence,
    make_trackingnet_sequence,
    write_text,
)

NAN = np.nan


def _lasot_tree(root):
    # airplane-1 is a test video, airplane-2 a training one; lion-5 style negative box on row 3.
    make_lasot_sequence(
        root,
        "airplane-2",
        "10,20,30,40\n11,21,31,41\n1,1,-1,-1\n0,0,0,0\n14,24,34,44\n",
        5,
        occlusion=[0, 1, 0, 0, 0],
        out_of_view=[0, 0, 0, 1, 0],
        nlp="white airplane landing",
    )
    make_lasot_sequence(root, "airplane-1", "5,5,5,5\n6,6,6,6\n", 2)


def test_lasot_train_sequence_boxes_flags_language(tmp_path):
    _lasot_tree(tmp_path)
    with pytest.warns(UserWarning, match="69 of the 70 classes are missing"):
        ds = LasotDataset(tmp_path, "train")
    names = ds.sequence_names()
    # 20 expected videos of the present class minus the 4 test ones (1, 9, 13, 15).
    assert len(names) == 16 and names[0] == "airplane-2" and "airplane-1" not in names
    seq = ds.get_sequence("airplane-2")
    assert len(seq) == 5
    np.testing.assert_array_equal(seq.boxes[1], [11, 21, 31, 41])
    np.testing.assert_array_equal(seq.valid, [True, True, False, False, True])
    np.testing.assert_array_equal(seq.visible, [True, False, False, False, True])
    np.testing.assert_array_equal(seq.attributes["out_of_view"], [0, 0, 0, 1, 0])
    assert seq.attributes["language"] == "white airplane landing"
    assert seq.attributes["class"] == "airplane"
    assert abs(int(seq.frame(4)[0, 0, 1]) - frame_value(5)) <= 2
    with pytest.raises(DatasetError, match="airplane-3"):
        ds.get_sequence("airplane-3")  # expected by the protocol but not on disk


def test_lasot_test_and_all_splits(tmp_path):
    _lasot_tree(tmp_path)
    test = LasotDataset(tmp_path, "test")
    assert len(test) == 280 and len(set(lasot_test_names())) == 280
    assert test.sequence_names()[:4] == ["airplane-1", "airplane-9", "airplane-13", "airplane-15"]
    np.testing.assert_array_equal(test.get_sequence("airplane-1").boxes, [[5, 5, 5, 5], [6, 6, 6, 6]])
    assert LasotDataset(tmp_path, "all").sequence_names() == ["airplane-1", "airplane-2"]


def test_lasot_flag_length_and_split_file_errors(tmp_path, monkeypatch):
    _lasot_tree(tmp_path)
    write_text(tmp_path / "airplane" / "airplane-2" / "out_of_view.txt", "0,0,1")
    with pytest.warns(UserWarning):
        ds = LasotDataset(tmp_path, "train")
    with pytest.raises(DatasetError, match=r"out_of_view.txt: 3 flags but 5 frames"):
        ds.get_sequence("airplane-2")
    monkeypatch.delenv("LASOT_TRAIN_TRAIN_SPLIT", raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "none.json"))
    with pytest.raises(DatasetError, match="LASOT_TRAIN_TRAIN_SPLIT"):
        LasotDataset(tmp_path, "train_train")
    split = write_text(tmp_path / "my_split.txt", "airplane-2\n")
    assert LasotDataset(tmp_path, "train_train", split_file=split).sequence_names() == ["airplane-2"]


def _got_tree(root):
    make_got10k_sequence(
        root / "train",
        "GOT-10k_Train_000002",
        "1.5,2.5,10.25,20\n2,3,10,20\n3,4,10,20\n4,5,10,20\n",
        4,
        absence=[0, 0, 1, 0],
        cover=[8, 0, 0, 3],
        cut_by_image=[0, 1, 0, 0],
        meta={
            "url": "https://example.com/v?x=1",
            "begin": "00:00:01",
            "anno_fps": "10Hz",
            "object_class": "goose",
            "motion_class": "flying",
            "resolution": "(1280, 720)",
        },
    )
    make_got10k_sequence(
        root / "train", "GOT-10k_Train_000001", "1,1,5,5\n" * 2, 2, cover=[8, 8], absence=[0, 0]
    )
    make_got10k_sequence(root / "test", "GOT-10k_Test_000001", "7,8,9,10\n", 3)


def test_got10k_train_labels_and_meta(tmp_path):
    _got_tree(tmp_path)
    ds = Got10kDataset(tmp_path, "train")
    assert ds.sequence_names() == ["GOT-10k_Train_000001", "GOT-10k_Train_000002"]
    seq = ds.get_sequence("GOT-10k_Train_000002")
    np.testing.assert_array_equal(seq.boxes[0], [1.5, 2.5, 10.25, 20])
    np.testing.assert_array_equal(seq.valid, [True] * 4)
    # visible = !absence & cover > 0
    np.testing.assert_array_equal(seq.visible, [True, False, False, True])
    np.testing.assert_allclose(seq.attributes["visible_ratio"], [1, 0, 0, 3 / 8])
    np.testing.assert_array_equal(seq.attributes["cut_by_image"], [False, True, False, False])
    assert seq.attributes["class"] == "goose"
    assert seq.attributes["meta"]["resolution"] == (1280, 720)
    assert seq.attributes["meta"]["url"] == "https://example.com/v?x=1"
    assert (
        seq.attributes["meta"]["begin"] == "00:00:01" and seq.attributes["meta"]["motion_class"] == "flying"
    )


def test_got10k_test_boxes_first_frame_only(tmp_path):
    _got_tree(tmp_path)
    seq = Got10kDataset(tmp_path, "test").get_sequence("GOT-10k_Test_000001")
    assert seq.boxes.shape == (3, 4)
    np.testing.assert_array_equal(seq.boxes[0], [7, 8, 9, 10])
    assert np.isnan(seq.boxes[1:]).all()
    np.testing.assert_array_equal(seq.valid, [True, False, False])


def test_got10k_split_files_by_index_and_name(tmp_path, monkeypatch):
    _got_tree(tmp_path)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "none.json"))
    monkeypatch.delenv("GOT10K_VOTTRAIN_SPLIT", raising=False)
    with pytest.raises(DatasetError, match="GOT10K_VOTTRAIN_SPLIT"):
        Got10kDataset(tmp_path, "vottrain")
    monkeypatch.setenv("GOT10K_VOTTRAIN_SPLIT", str(write_text(tmp_path / "vt.txt", "1\n")))
    assert Got10kDataset(tmp_path, "vottrain").sequence_names() == ["GOT-10k_Train_000002"]
    votval = write_text(tmp_path / "vv.txt", "GOT-10k_Train_000001\n5\n")
    with pytest.raises(DatasetError, match=r"vv.txt:2: index 5 out of range"):
        Got10kDataset(tmp_path, "votval", split_file=votval)
    # root may be the train folder itself
    assert len(Got10kDataset(tmp_path / "train", "vottrain")) == 1


def test_got10k_meta_info_malformed_line(tmp_path):
    path = write_text(tmp_path / "meta_info.ini", "[METAINFO]\nobject_class: cat\nno separator here\n")
    with pytest.raises(DatasetError, match=r"meta_info.ini:3: expected 'key: value'"):
        read_meta_info(path)


def test_trackingnet_chunks_zero_based_frames_crlf(tmp_path):
    # 12 frames: numeric order 0,1,2,...,11 differs from lexicographic (0,1,10,11,2,...).
    rows = "".join(f" {0.5 + i:.2f},{-3.25:.2f},{20:.2f},{10.5:.2f}\n" for i in range(12))
    make_trackingnet_sequence(tmp_path, "TRAIN_0", "vidA", rows.replace("\n", "\r\n"), 12)
    make_trackingnet_sequence(tmp_path, "TRAIN_3", "vidB", "1,2,3,4\n" * 2, 2)
    make_trackingnet_sequence(tmp_path, "TEST", "vidT", "1.00,2.00,3.00,4.00\r\n", 4)
    ds = TrackingNetDataset(tmp_path, "train")
    assert ds.sequence_names() == ["vidA", "vidB"]
    assert TrackingNetDataset(tmp_path, "train", chunks=[3]).sequence_names() == ["vidB"]
    assert TrackingNetDataset(tmp_path, "TRAIN_0").sequence_names() == ["vidA"]
    seq = ds.get_sequence("vidA")
    assert [p.name for p in seq.frame_paths[:3]] == ["0.jpg", "1.jpg", "2.jpg"]
    assert seq.frame_paths[-1].name == "11.jpg"
    np.testing.assert_allclose(seq.boxes[10], [10.5, -3.25, 20, 10.5])
    assert abs(int(seq.frame(10)[0, 0, 0]) - frame_value(10)) <= 2
    test = TrackingNetDataset(tmp_path, "test").get_sequence("vidT")
    assert test.boxes.shape == (4, 4) and np.isnan(test.boxes[1:]).all()
    (tmp_path / "TRAIN_0" / "frames" / "vidA" / "0.jpg").unlink()
    with pytest.raises(DatasetError, match=r"missing frame .*vidA/0.jpg"):
        ds.get_sequence("vidA")
    write_text(tmp_path / "TRAIN_3" / "anno" / "AwVdVzh1Eh0_0.txt", "1,2,3,4\n")  # annotation, no video
    with pytest.warns(
        UserWarning, match="skipping 1 annotated videos without a frames folder.*AwVdVzh1Eh0_0"
    ):
        assert TrackingNetDataset(tmp_path, "train", chunks=["TRAIN_3"]).sequence_names() == ["vidB"]
    with pytest.raises(DatasetError, match="TRAIN_5"):
        TrackingNetDataset(tmp_path, "train", chunks=[5])
