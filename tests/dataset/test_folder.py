import math

import numpy as np
import pytest

from ltr.dataset.base import DatasetError, Sequence
from ltr.dataset.folder import FolderDataset, folder_dataset

from .fixtures import frame_value, make_folder_sequence, write_text


def test_folder_reads_boxes_masks_attributes_and_frames(tmp_path):
    boxes = [[1, 2, 3, 4], [2, 3, 4, 5], [float("nan")] * 4, [4, 5, -1, 7], [5, 6, 7, 8]]
    make_folder_sequence(tmp_path, "b_seq", boxes, absent=[0, 1, 0, 0, 0], attributes={"class": "cup"})
    make_folder_sequence(tmp_path, "a_seq", [[10, 10, 5, 5]] * 3)
    ds = FolderDataset(tmp_path)
    assert ds.sequence_names() == ["a_seq", "b_seq"]
    seq = ds.get_sequence("b_seq")
    assert len(seq) == 5
    np.testing.assert_array_equal(seq.boxes[0], [1, 2, 3, 4])
    assert np.isnan(seq.boxes[2]).all()
    np.testing.assert_array_equal(seq.valid, [True, True, False, False, True])
    np.testing.assert_array_equal(seq.visible, [True, False, False, False, True])
    assert seq.attributes["class"] == "cup"
    np.testing.assert_array_equal(seq.attributes["absent"], [False, True, False, False, False])
    frame = seq.frame(3)
    assert frame.shape == (12, 16, 3) and frame.dtype == np.uint8
    assert abs(int(frame[0, 0, 0]) - frame_value(4)) <= 2


def test_folder_single_sequence_root_and_init_only_gt(tmp_path):
    seq_dir = make_folder_sequence(tmp_path, "video", [[3, 4, 5, 6]], num_frames=4)
    ds = FolderDataset(seq_dir)
    assert ds.sequence_names() == ["video"]
    seq = ds.get_sequence("video")
    assert len(seq) == 4 and seq.boxes.shape == (4, 4)
    np.testing.assert_array_equal(seq.init_box, [3, 4, 5, 6])
    assert np.isnan(seq.boxes[1:]).all()
    np.testing.assert_array_equal(seq.valid, [True, False, False, False])


def test_folder_errors_name_file_and_line(tmp_path):
    seq_dir = make_folder_sequence(tmp_path, "s", [[1, 2, 3, 4]] * 3)
    write_text(seq_dir / "groundtruth_rect.txt", "1,2,3,4\n1,2,abc,4\n1,2,3,4\n")
    with pytest.raises(DatasetError, match=r"groundtruth_rect.txt:2: expected a number, got 'abc'"):
        FolderDataset(tmp_path).get_sequence("s")
    write_text(seq_dir / "groundtruth_rect.txt", "1,2,3,4\n1,2,3\n1,2,3,4\n")
    with pytest.raises(DatasetError, match=r"groundtruth_rect.txt:2: expected 4 numbers"):
        FolderDataset(tmp_path).get_sequence("s")
    write_text(seq_dir / "groundtruth_rect.txt", "1,2,3,4\n" * 3)
    (seq_dir / "img" / "0002.jpg").unlink()
    with pytest.raises(DatasetError, match=r"missing frame .*img/0002.jpg"):
        FolderDataset(tmp_path).get_sequence("s")


def test_folder_length_mismatch_is_recorded_not_fatal(tmp_path):
    make_folder_sequence(tmp_path, "s", [[1, 2, 3, 4]] * 3, num_frames=5)
    with pytest.warns(UserWarning, match="3 annotation rows but 5 frames"):
        seq = FolderDataset(tmp_path).get_sequence("s")
    assert len(seq) == 3 and seq.boxes.shape == (3, 4)
    assert "3 annotation rows but 5 frames" in seq.attributes["problems"][0]


def test_folder_factory_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("FOLDER_DIR", raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "none.json"))
    with pytest.raises(DatasetError, match="FOLDER_DIR"):
        folder_dataset()
    make_folder_sequence(tmp_path / "d", "s", [[1, 1, 2, 2]])
    monkeypatch.setenv("FOLDER_DIR", str(tmp_path / "d"))
    assert folder_dataset().sequence_names() == ["s"]
    assert not math.isnan(folder_dataset(root=tmp_path / "d").get_sequence("s").boxes[0, 0])


@pytest.mark.filterwarnings("ignore:.*1 annotation rows but 0 frames")
def test_iteration_skips_empty_sequences_with_a_warning(tmp_path):
    make_folder_sequence(tmp_path, "full", [[1, 1, 2, 2]] * 2)
    empty = tmp_path / "empty"
    (empty / "img").mkdir(parents=True)  # no frames: an empty sequence, whatever its annotation says
    write_text(empty / "groundtruth_rect.txt", "1,1,2,2\n")
    ds = FolderDataset(tmp_path)
    with pytest.warns(UserWarning, match="skipping empty sequence 'empty'"):
        names = [seq.name for seq in ds]
    assert names == ["full"]


@pytest.mark.parametrize("text", ["", "\n\n", "  \r\n"])
def test_empty_annotation_file_is_an_error_naming_it(tmp_path, text):
    seq_dir = make_folder_sequence(tmp_path, "s", [[1, 2, 3, 4]] * 3)
    write_text(seq_dir / "groundtruth_rect.txt", text)
    with pytest.raises(DatasetError, match=r"s/groundtruth_rect.txt: empty annotation file"):
        FolderDataset(tmp_path).get_sequence("s")


def test_unreadable_annotation_file_is_an_error_naming_it(tmp_path):
    seq_dir = make_folder_sequence(tmp_path, "s", [[1, 2, 3, 4]] * 3)
    (seq_dir / "groundtruth_rect.txt").unlink()
    (seq_dir / "groundtruth_rect.txt").mkdir()  # a folder where the file should be
    with pytest.raises(DatasetError, match=r"s/groundtruth_rect.txt: cannot read the annotation file"):
        FolderDataset(tmp_path).get_sequence("s")
    (seq_dir / "groundtruth_rect.txt").rmdir()
    (seq_dir / "groundtruth_rect.txt").write_bytes(b"\xff\xfe\x00\x01binary")
    with pytest.raises(DatasetError, match=r"s/groundtruth_rect.txt: not a UTF-8 text file"):
        FolderDataset(tmp_path).get_sequence("s")


def test_a_sequence_without_rows_has_no_init_box(tmp_path):
    seq = Sequence(name="bare", boxes=np.zeros((0, 4)), frame_loader=lambda i: np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(DatasetError, match="sequence 'bare' has no annotation rows"):
        _ = seq.init_box


def test_trailing_separators_and_leading_blanks_are_tolerated(tmp_path):
    seq_dir = make_folder_sequence(tmp_path, "s", [[1, 2, 3, 4]] * 2)
    write_text(seq_dir / "groundtruth_rect.txt", "  1,2,3,4,\n\t5 , 6 , 7 , 8\n", newline="\r\n")
    np.testing.assert_array_equal(
        FolderDataset(tmp_path).get_sequence("s").boxes, [[1, 2, 3, 4], [5, 6, 7, 8]]
    )
