"""OTB, UAV123, NfS, VOT and COCO readers against hand-built trees with the real quirks."""

import numpy as np
import pytest

from ltr.dataset.base import DatasetError
from ltr.dataset.coco import CocoDataset
from ltr.dataset.nfs import NfsDataset
from ltr.dataset.otb import OTB_SEQUENCES, OTBDataset
from ltr.dataset.uav import UAV123_RANGES, UAV123Dataset
from ltr.dataset.vot import VOTDataset

from .fixtures import (
    frame_value,
    make_coco_tree,
    make_nfs_packed_sequence,
    make_nfs_raw_sequence,
    make_otb_sequence,
    make_uav_sequence,
    make_vot_sequence,
    vatic_line,
    write_text,
)


def test_otb_table_has_100_targets_in_98_folders():
    assert len(OTB_SEQUENCES) == 100
    assert len({folder for folder, _ in OTB_SEQUENCES.values()}) == 98
    assert OTB_SEQUENCES["Human4_2"] == ("Human4", "groundtruth_rect.2.txt")
    assert OTB_SEQUENCES["KiteSurf"] == ("KiteSurf", "groundtruth_rect.txt")


def test_otb_delimiters_multi_target_and_five_digit_names(tmp_path):
    # Jogging .1 is tab separated with CRLF, .2 comma separated; Board has 5-digit frame names.
    make_otb_sequence(
        tmp_path,
        "Jogging",
        {
            "groundtruth_rect.1.txt": "111\t98\t25\t101\r\n112\t 99\t25\t101\r\n113\t100\t25\t101\r\n",
            "groundtruth_rect.2.txt": "180,79,37,114\n181,80,37,114\n182,81,37,114\n",
        },
        range(1, 4),
    )
    make_otb_sequence(
        tmp_path, "Board", {"groundtruth_rect.txt": "  154 243 324 241\n155 244 324 241\n"}, [1, 2], digits=5
    )
    ds = OTBDataset(tmp_path)
    j1, j2 = ds.get_sequence("Jogging_1"), ds.get_sequence("Jogging_2")
    np.testing.assert_array_equal(j1.boxes[1], [112, 99, 25, 101])
    np.testing.assert_array_equal(j2.boxes[2], [182, 81, 37, 114])
    assert j1.frame_paths == j2.frame_paths and j1.frame_paths[0].name == "0001.jpg"
    board = ds.get_sequence("Board")
    assert [p.name for p in board.frame_paths] == ["00001.jpg", "00002.jpg"]
    np.testing.assert_array_equal(board.boxes[0], [154, 243, 324, 241])
    assert abs(int(board.frame(1)[0, 0, 0]) - frame_value(2)) <= 2


def test_otb_frame_ranges_truncation_and_tiger1_init_omit(tmp_path):
    # David: GT rows cover images 300..770 (471 rows); images from 0001 exist but only the range is used.
    david_gt = "".join(f"{i},{i},10,10\n" for i in range(471))
    make_otb_sequence(tmp_path, "David", {"groundtruth_rect.txt": david_gt}, [299, 300, 301, 770])
    seq = OTBDataset(tmp_path).get_sequence("David")
    assert (
        len(seq) == 471 and seq.frame_paths[0].name == "0300.jpg" and seq.frame_paths[-1].name == "0770.jpg"
    )
    np.testing.assert_array_equal(seq.boxes[1], [1, 1, 10, 10])
    assert abs(int(seq.frame(0)[0, 0, 0]) - frame_value(300)) <= 2
    # BlurCar3 starts at image 3.
    make_otb_sequence(tmp_path, "BlurCar3", {"groundtruth_rect.txt": "1 2 3 4\n" * 357}, [3])
    assert OTBDataset(tmp_path).get_sequence("BlurCar3").frame_paths[0].name == "0003.jpg"
    # Tiger1: 354 rows; the protocol drops the first 5 frames and rows.
    tiger_gt = "".join(f"{i},0,5,5\n" for i in range(354))
    make_otb_sequence(tmp_path, "Tiger1", {"groundtruth_rect.txt": tiger_gt}, [6])
    omitted = OTBDataset(tmp_path).get_sequence("Tiger1")
    assert len(omitted) == 349 and omitted.frame_paths[0].name == "0006.jpg" and omitted.boxes[0, 0] == 5
    kept = OTBDataset(tmp_path, tiger1_init_omit=False).get_sequence("Tiger1")
    assert len(kept) == 354 and kept.frame_paths[0].name == "0001.jpg" and kept.boxes[0, 0] == 0
    # Football1: GT longer than the 1-74 range is cut, recorded as a problem.
    make_otb_sequence(tmp_path, "Football1", {"groundtruth_rect.txt": "1,1,4,4\n" * 80}, [1])
    football = OTBDataset(tmp_path).get_sequence("Football1")
    assert len(football) == 74 and "extra rows" in football.attributes["problems"][0]


def test_otb_malformed_and_missing(tmp_path):
    make_otb_sequence(tmp_path, "Deer", {"groundtruth_rect.txt": "1,2,3,4\n1,2,3,4\n1,2,x,4\n"}, [1])
    with pytest.raises(DatasetError, match=r"Deer/groundtruth_rect.txt:3: expected a number, got 'x'"):
        OTBDataset(tmp_path).get_sequence("Deer")
    with pytest.raises(DatasetError, match=r"Dog/groundtruth_rect.txt"):
        OTBDataset(tmp_path).get_sequence("Dog")


def test_uav_sub_ranges_and_nan_rows(tmp_path):
    assert len(UAV123_RANGES) == 51
    assert UAV123_RANGES["uav1_3"] == ("uav1", 2473, 3469)
    assert UAV123_RANGES["car6_5"] == ("car6", 3925, 4861)
    rows = "".join(f"{i},{i},8,9\n" if i != 2 else "NaN,NaN,NaN,NaN\n" for i in range(1477 - 775 + 1))
    make_uav_sequence(tmp_path, "bird1_2", "bird1", rows, [775, 776, 777, 1477])
    make_uav_sequence(tmp_path, "bike1", "bike1", "1,2,3,4\n5,6,7,8\n", [1, 2])
    ds = UAV123Dataset(tmp_path)
    assert ds.sequence_names() == ["bike1", "bird1_2"]
    seq = ds.get_sequence("bird1_2")
    assert (
        len(seq) == 703
        and seq.frame_paths[0].name == "000775.jpg"
        and seq.frame_paths[-1].name == "001477.jpg"
    )
    np.testing.assert_array_equal(seq.valid[:4], [True, True, False, True])
    assert abs(int(seq.frame(1)[0, 0, 0]) - frame_value(776)) <= 2
    bike = ds.get_sequence("bike1")
    np.testing.assert_array_equal(bike.boxes, [[1, 2, 3, 4], [5, 6, 7, 8]])
    assert bike.frame_paths[1].parent.name == "bike1"


def test_uav_wrong_row_count_is_a_problem(tmp_path):
    make_uav_sequence(tmp_path, "truck4_2", "truck4", "1,1,2,2\n" * 10, [577])
    with pytest.warns(UserWarning, match="10 annotation rows but 685 frames"):
        seq = UAV123Dataset(tmp_path).get_sequence("truck4_2")
    assert len(seq) == 10 and seq.attributes["problems"]


def test_nfs_raw_240_to_30_mapping(tmp_path):
    # 4 images at 30 fps; 240-fps rows for frames 1..26 (1-based) -> 30-fps frames 0,1,2,3 are rows 1,9,17,25.
    lines = []
    for f in range(1, 27):
        x = 10 * f
        lines.append(vatic_line(0, (x, 5, x + 20, 45), f, lost=int(f == 17), occluded=int(f == 25)))
    make_nfs_raw_sequence(tmp_path, "Gymnastics", "".join(lines), 4)
    ds = NfsDataset(tmp_path)
    assert ds.layout == "raw" and ds.sequence_names() == ["Gymnastics"]
    seq = ds.get_sequence("Gymnastics")
    np.testing.assert_array_equal(
        seq.boxes, [[10, 5, 20, 40], [90, 5, 20, 40], [170, 5, 20, 40], [250, 5, 20, 40]]
    )
    np.testing.assert_array_equal(seq.visible, [True, True, False, True])
    np.testing.assert_array_equal(seq.attributes["occluded"], [False, False, False, True])
    assert seq.frame_paths[0].name == "00001.jpg"


def test_nfs_raw_missing_rows_are_invalid_and_bad_rows_named(tmp_path):
    lines = [vatic_line(0, (0, 0, 10, 10), f) for f in (1, 9, 25)]  # 30-fps frame 2 (240-fps 17) missing
    make_nfs_raw_sequence(tmp_path, "bee", "".join(lines), 4)
    seq = NfsDataset(tmp_path).get_sequence("bee")
    np.testing.assert_array_equal(seq.valid, [True, True, False, True])
    write_text(tmp_path / "bee" / "30" / "bee.txt", '0 1 2 3 4 1 0 0 0 "x"\n0 1 2 3\n')
    with pytest.raises(DatasetError, match=r"bee.txt:2: expected a VATIC row"):
        NfsDataset(tmp_path).get_sequence("bee")


def test_nfs_packed_layout(tmp_path):
    make_nfs_packed_sequence(tmp_path, "dog_1", "1\t2\t3\t4\n5\t6\t7\t8\n", 2)
    ds = NfsDataset(tmp_path)
    assert ds.layout == "packed" and ds.sequence_names() == ["dog_1"]
    np.testing.assert_array_equal(ds.get_sequence("dog_1").boxes, [[1, 2, 3, 4], [5, 6, 7, 8]])


def test_vot_polygons_rects_codes_and_tags(tmp_path):
    gt = "10,20,30,20,30,40,10,40\n1.5,2.5,3,4\n0\nnan,nan,nan,nan\n12,22,34,20,36,44,10,42\n"
    make_vot_sequence(tmp_path, "ants1", gt, 5, tags={"occlusion": [0, 1, 0, 0, 1]})
    make_vot_sequence(tmp_path, "bag", "1,1,2,2\n", 1, legacy=True)
    ds = VOTDataset(tmp_path)
    assert ds.sequence_names() == ["ants1", "bag"]
    seq = ds.get_sequence("ants1")
    np.testing.assert_allclose(seq.boxes[0], [10, 20, 20, 20])
    np.testing.assert_allclose(seq.boxes[1], [1.5, 2.5, 3, 4])
    np.testing.assert_allclose(seq.boxes[4], [10, 20, 26, 24])
    np.testing.assert_array_equal(seq.valid, [True, True, False, False, True])
    np.testing.assert_array_equal(seq.attributes["codes"], [-1, -1, 0, -1, -1])
    np.testing.assert_array_equal(seq.attributes["tags"]["occlusion"], [False, True, False, False, True])
    assert seq.frame_paths[2].relative_to(tmp_path).as_posix() == "ants1/color/00000003.jpg"
    assert abs(int(seq.frame(2)[0, 0, 0]) - frame_value(3)) <= 2
    assert ds.get_sequence("bag").frame_paths[0].relative_to(tmp_path).as_posix() == "bag/00000001.jpg"


def test_vot_mask_rows_and_bad_rows(tmp_path):
    # 4x3 patch at (100, 50): runs 5 zeros, 2 ones (row 1, cols 1-2), 3 zeros, 1 one (row 2, col 2).
    make_vot_sequence(tmp_path, "m", "m100,50,4,3,5,2,3,1\n1,2,3\n", 2)
    with pytest.raises(DatasetError, match=r"groundtruth.txt:2: expected 1 \(code\), 4"):
        VOTDataset(tmp_path).get_sequence("m")
    write_text(tmp_path / "m" / "groundtruth.txt", "m100,50,4,3,5,2,3,1\n")
    np.testing.assert_allclose(VOTDataset(tmp_path).get_sequence("m").boxes[0], [101, 51, 2, 2])


def test_coco_instances_as_one_frame_sequences(tmp_path):
    images = [{"id": 7, "file_name": "000000000007.jpg", "width": 20, "height": 10}]
    anns = [
        {
            "id": 3,
            "image_id": 7,
            "category_id": 1,
            "bbox": [1.5, 2, 5, 4],
            "area": 20.0,
            "iscrowd": 0,
            "segmentation": [[1.5, 2, 6.5, 2, 6.5, 6, 1.5, 6]],
        },
        {
            "id": 4,
            "image_id": 7,
            "category_id": 1,
            "bbox": [0, 0, 2, 2],
            "area": 4.0,
            "iscrowd": 0,
            "segmentation": [[0, 0, 2, 0, 2, 2, 0, 2]],
        },
        {
            "id": 5,
            "image_id": 7,
            "category_id": 2,
            "bbox": [0, 0, 9, 9],
            "area": 81.0,
            "iscrowd": 1,
            "segmentation": {"counts": [0, 200], "size": [10, 20]},
        },
    ]
    cats = [
        {"id": 1, "name": "cat", "supercategory": "animal"},
        {"id": 2, "name": "person", "supercategory": "p"},
    ]
    make_coco_tree(tmp_path, "train", images, anns, cats)
    ds = CocoDataset(tmp_path, "train")
    assert ds.is_video is False
    assert ds.sequence_names() == ["3", "4"]
    assert CocoDataset(tmp_path, "train", min_area=10).sequence_names() == ["3"]
    seq = ds.get_sequence("3")
    assert len(seq) == 1
    np.testing.assert_array_equal(seq.boxes, [[1.5, 2, 5, 4]])
    assert seq.attributes["class"] == "cat" and seq.attributes["supercategory"] == "animal"
    assert seq.frame(0).shape == (10, 20, 3)
    assert ds.mask("4").shape == (10, 20) and ds.mask("4").sum() > 0
    with pytest.raises(DatasetError, match="instances_val2017.json"):
        CocoDataset(tmp_path, "val")


def test_otb_image_count_mismatch_is_a_problem(tmp_path):
    make_otb_sequence(tmp_path, "Dog", {"groundtruth_rect.txt": "1,2,3,4\n1,2,3,4\n"}, [1, 2, 3])
    seq = OTBDataset(tmp_path).get_sequence("Dog")
    assert len(seq) == 2
    assert "2 rows but 3 images" in seq.attributes["problems"][0]
