"""The dataset check CLI and the registry table."""

import json

import cv2
import numpy as np
import pytest

from ltr.admin.paths import DATASET_VARS
from ltr.dataset.base import DatasetError, image_problem
from ltr.dataset.check import main, parse_options
from ltr.dataset.registry import BENCHMARKS, DATASETS, Benchmark, get_dataset

from .fixtures import FRAME_H, FRAME_W, make_folder_sequence, make_otb_sequence, write_jpeg, write_text


def test_check_reports_good_folder_dataset(tmp_path, capsys):
    make_folder_sequence(tmp_path / "d", "walk", [[1, 2, 3, 4], [2, 3, 4, 5], [0, 0, 0, 0]], absent=[0, 1, 0])
    out_json = tmp_path / "report.json"
    code = main(
        ["folder", "--root", str(tmp_path / "d"), "--json", str(out_json), "--no-progress", "--decode"]
    )
    assert code == 0
    report = json.loads(out_json.read_text())
    assert report["sequences"] == {"walk": {"frames": 3, "valid": 2, "visible": 1, "first_box": [1, 2, 3, 4]}}
    assert report["problems"] == []
    assert "walk: frames=3 valid=2 visible=1 first_box=[1, 2, 3, 4]" in capsys.readouterr().out


def test_check_reports_problems_and_fails(tmp_path, capsys):
    root = tmp_path / "d"
    make_folder_sequence(root, "ok", [[1, 1, 5, 5]] * 2)
    make_folder_sequence(root, "short_gt", [[1, 1, 5, 5]] * 3, num_frames=4)
    bad = make_folder_sequence(root, "bad_line", [[1, 1, 5, 5]] * 2)
    write_text(bad / "groundtruth_rect.txt", "1,1,5,5\n1,1,abc,5\n")
    gap = make_folder_sequence(root, "gap", [[1, 1, 5, 5]] * 3)
    (gap / "img" / "0002.jpg").unlink()
    nan_first = make_folder_sequence(root, "nan_first", [[1, 1, 5, 5]] * 2)
    write_text(nan_first / "groundtruth_rect.txt", "NaN,NaN,NaN,NaN\n1,1,5,5\n")
    out_json = tmp_path / "r.json"
    assert main(["folder", "--root", str(root), "--json", str(out_json), "--no-progress", "--quiet"]) == 1
    report = json.loads(out_json.read_text())
    assert set(report["sequences"]) == {"ok", "short_gt", "nan_first"}
    assert report["sequences"]["nan_first"]["first_box"] == [None] * 4
    problems = "\n".join(report["problems"])
    assert "groundtruth_rect.txt:2: expected a number, got 'abc'" in problems
    assert "gap/img/0002.jpg" in problems
    assert "3 annotation rows but 4 frames" in problems
    assert "nan_first: the first frame has no valid box" in problems
    assert len(report["problems"]) == 4
    assert "PROBLEM" in capsys.readouterr().out


def test_check_missing_pattern_frames_and_unset_root(tmp_path, monkeypatch, capsys):
    make_otb_sequence(tmp_path, "Deer", {"groundtruth_rect.txt": "1,2,3,4\n" * 4}, [1, 2])
    code = main(["otb", "--root", str(tmp_path), "--sequence", "Deer", "--no-progress", "--quiet"])
    assert code == 1
    assert (
        "missing frame " + str(tmp_path / "Deer" / "img" / "0003.jpg") + " and 1 more"
        in capsys.readouterr().out
    )
    monkeypatch.delenv("OTB_DIR", raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "none.json"))
    assert main(["otb", "--no-progress"]) == 2
    assert "OTB_DIR" in capsys.readouterr().err


def test_parse_options():
    assert parse_options(["layout=raw", "chunks=0,1", "tiger1_init_omit=false", "min_area=2.5"]) == {
        "layout": "raw",
        "chunks": [0, 1],
        "tiger1_init_omit": False,
        "min_area": 2.5,
    }


EXPECTED = {
    "lasot", "lasot_test", "got10k", "got10k_val", "got10k_test", "trackingnet", "trackingnet_test", "coco",
    "otb", "uav", "nfs", "vot", "folder", "synthetic",
}  # fmt: skip


def test_registry_names_and_factories_resolve():
    assert EXPECTED <= set(DATASETS)
    for name in DATASETS.names:
        assert callable(DATASETS[name]), name


def test_benchmark_names_point_into_the_dataset_table():
    assert all(BENCHMARKS[name].dataset in DATASETS for name in BENCHMARKS.names)
    assert BENCHMARKS["lasot"] == BENCHMARKS["lasot_test"] == Benchmark("lasot_test")
    assert BENCHMARKS["trackingnet"] == Benchmark("trackingnet", "test", ground_truth=False)
    assert not BENCHMARKS["got10k_test"].ground_truth and BENCHMARKS["got10k_val"].ground_truth
    with pytest.raises(
        KeyError, match=r"unknown benchmark dataset 'lasot_train'; choose one of \['otb', 'lasot'"
    ):
        BENCHMARKS["lasot_train"]


@pytest.mark.parametrize("name", sorted(EXPECTED - {"synthetic"}))
def test_unset_root_names_the_variable(name, tmp_path, monkeypatch):
    for var in DATASET_VARS.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "none.json"))
    with pytest.raises(DatasetError, match=r"set the environment variable [A-Z0-9_]+_DIR"):
        get_dataset(name)


def test_paths_file_supplies_root(tmp_path, monkeypatch):
    make_folder_sequence(tmp_path / "videos", "s", [[1, 1, 2, 2]])
    cfg = write_text(tmp_path / "paths.json", json.dumps({"FOLDER_DIR": str(tmp_path / "videos")}))
    monkeypatch.delenv("FOLDER_DIR", raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(cfg))
    seq = get_dataset("folder").get_sequence("s")
    np.testing.assert_array_equal(seq.boxes, [[1, 1, 2, 2]])


def test_factories_pass_splits_and_options(tmp_path):
    from .fixtures import (
        make_got10k_sequence,
        make_lasot_sequence,
        make_nfs_packed_sequence,
        make_trackingnet_sequence,
        make_uav_sequence,
        make_vot_sequence,
    )

    make_lasot_sequence(tmp_path / "lasot", "zebra-10", "1,1,2,2\n", 1)
    assert (
        get_dataset("lasot_test", root=tmp_path / "lasot").get_sequence("zebra-10").attributes["class"]
        == "zebra"
    )
    assert get_dataset("lasot", root=tmp_path / "lasot", split="all").sequence_names() == ["zebra-10"]
    make_got10k_sequence(tmp_path / "got" / "val", "GOT-10k_Val_000001", "1,1,2,2\n", 1, cover=[8])
    make_got10k_sequence(tmp_path / "got" / "test", "GOT-10k_Test_000001", "1,1,2,2\n", 2)
    assert get_dataset("got10k_val", root=tmp_path / "got").sequence_names() == ["GOT-10k_Val_000001"]
    assert get_dataset("got10k", root=tmp_path / "got", split="test").name == "got10k_test"
    assert len(get_dataset("got10k_test", root=tmp_path / "got").get_sequence("GOT-10k_Test_000001")) == 2
    make_trackingnet_sequence(tmp_path / "tn", "TEST", "v", "1,1,2,2\n", 2)
    assert get_dataset("trackingnet_test", root=tmp_path / "tn").sequence_names() == ["v"]
    make_uav_sequence(tmp_path / "uav", "x", "bike2", "1,1,2,2\n", [1])
    (tmp_path / "uav" / "anno" / "UAV20L").mkdir()
    write_text(tmp_path / "uav" / "anno" / "UAV20L" / "bike2.txt", "3,3,2,2\n")
    uav20l = get_dataset("uav", root=tmp_path / "uav", split="UAV20L")
    np.testing.assert_array_equal(uav20l.get_sequence("bike2").boxes, [[3, 3, 2, 2]])
    make_nfs_packed_sequence(tmp_path / "nfs", "cup", "1\t1\t2\t2\n", 1)
    assert get_dataset("nfs", root=tmp_path / "nfs", layout="packed").layout == "packed"
    make_vot_sequence(tmp_path / "vot", "ball", "1,1,2,2\n", 1)
    assert get_dataset("vot", root=tmp_path / "vot").sequence_names() == ["ball"]
    with pytest.raises(KeyError, match="unknown dataset 'nope'"):
        get_dataset("nope")


def test_decode_reads_every_frame_and_reports_bad_images_and_size_changes(tmp_path, capsys):
    root = tmp_path / "d"
    make_folder_sequence(root, "ok", [[1, 1, 5, 5]] * 3)
    trunc = make_folder_sequence(root, "trunc", [[1, 1, 5, 5]] * 3)
    noise = np.random.default_rng(0).integers(0, 256, (FRAME_H, FRAME_W, 3), dtype=np.uint8)
    data = cv2.imencode(".jpg", noise)[1].tobytes()
    (trunc / "img" / "0002.jpg").write_bytes(data[:-40])  # cut in the scan data: OpenCV would decode it
    junk = make_folder_sequence(root, "junk", [[1, 1, 5, 5]] * 3)
    (junk / "img" / "0003.jpg").write_bytes(b"not a jpeg")
    resized = make_folder_sequence(root, "resized", [[1, 1, 5, 5]] * 4)
    for n in (3, 4):
        write_jpeg(resized / "img" / f"{n:04d}.jpg", n, width=20, height=10)
    argv = ["folder", "--root", str(root), "--quiet"]
    assert main([*argv, "--no-progress"]) == 0  # without --decode the frame files only need to exist
    capsys.readouterr()
    out_json = tmp_path / "r.json"
    assert main([*argv, "--decode", "--json", str(out_json)]) == 1
    captured = capsys.readouterr()
    assert "decoding folder" in captured.err and "13/13" in captured.err  # one progress bar over all frames
    problems = json.loads(out_json.read_text())["problems"]
    img = root / "{}" / "img" / "{:04d}.jpg"
    assert problems == [
        f"junk: {str(img).format('junk', 3)}: not a readable image (empty, truncated or not an image format)",
        f"resized: 2 frame(s) differ in size from the first frame {str(img).format('resized', 1)} (16x12), "
        f"the first of them {str(img).format('resized', 3)} (20x10); the tracker refuses such a sequence",
        f"trunc: {str(img).format('trunc', 2)}: truncated JPEG (no end-of-image marker after the last scan)",
    ]
    assert f"PROBLEM {problems[2]}" in captured.out


def test_image_problem_sees_truncated_jpegs_only(tmp_path):
    path = write_jpeg(tmp_path / "a.jpg", 3, width=40, height=30)
    data = path.read_bytes()
    assert image_problem(data, ".jpg") is None
    assert image_problem(data + b"\x00" * 16, ".JPG") is None  # padding after the end marker is fine
    assert image_problem(data[:-2], ".jpg") == "truncated JPEG (no end-of-image marker after the last scan)"
    assert image_problem(b"\x89PNG", ".png") is None  # other formats fail to decode instead
