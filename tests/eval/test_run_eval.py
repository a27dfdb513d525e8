"""End to end: eval/run_eval.py on a generated OTB-layout folder dataset; JSON schema, tables, plots."""

import json

import cv2
import matplotlib.image
import numpy as np
import pytest

from eval.eval_cli import main

BOX = [1, 1, 10, 10]
FAR = [101, 101, 10, 10]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_folder_dataset(root):
    frame = np.zeros((24, 32, 3), np.uint8)
    for name, n, absent, occl in (("seqA", 5, [0, 0, 0, 1, 0], True), ("seqB", 4, None, False)):
        d = root / name
        (d / "img").mkdir(parents=True)
        for i in range(n):
            cv2.imwrite(str(d / "img" / f"{i + 1:04d}.jpg"), frame)
        (d / "groundtruth_rect.txt").write_text("1,1,10,10\n" * n)
        if absent is not None:
            (d / "absent.label").write_text("".join(f"{a}\n" for a in absent))
        (d / "attributes.json").write_text(json.dumps({"attribute_flags": {"occlusion": occl}}))


def write_result(path, rows, delim="\t"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(delim.join(str(v) for v in r) + "\n" for r in rows))


@pytest.fixture
def setup(tmp_path):
    data, results = tmp_path / "data", tmp_path / "results"
    make_folder_dataset(data)
    for run in ("good_000", "good_001"):
        write_result(results / "dimp" / run / "seqA.txt", [BOX] * 5)
        write_result(results / "dimp" / run / "seqB.txt", [BOX] * 4, delim=",")
        (results / "dimp" / run / "seqA_time.txt").write_text("0.1\n" * 4 + "0.05\n")  # 1/t: 10 x4, 20
        (results / "dimp" / run / "seqB_time.txt").write_text("0.1\n0.1\n0.25\n0\n")  # 10, 10, 4; 0 ignored
    write_result(results / "dimp" / "bad" / "seqA.txt", [BOX] * 5)
    write_result(results / "dimp" / "bad" / "seqB.txt", [BOX] + [FAR] * 3, delim=" ")
    return tmp_path


def folder_argv(setup, trackers, out, *extra):
    """run_eval arguments for the folder dataset and result tree that ``setup`` generated."""
    root, results = str(setup / "data"), str(setup / "results")
    return [
        "--dataset",
        "folder",
        "--root",
        root,
        "--results",
        results,
        "--trackers",
        *trackers,
        "--out",
        str(out),
        *extra,
    ]


def test_run_eval_end_to_end(setup, capsys):
    out = setup / "out"
    argv = folder_argv(setup, ["dimp/good", "dimp/bad"], out, "--format", "csv")
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "protocol pytracking_visibility" in printed
    # CSV table printed: good AUC = (4/5 + 1)/2 * 20/21 (absent frame 3 of seqA fails)
    # FPS pooled over frames and runs: mean(10, 10, 10, 10, 20, 10, 10, 4) = 84 / 8 = 10.5; none for 'bad'
    assert "dimp/good,85.71,90.00,90.00,90.00,90.00,2,10.50" in printed
    assert "dimp/bad,50.00," in printed
    data = json.loads((out / "results.json").read_text())
    assert set(data) == {"dimp/good", "dimp/bad"}
    good, bad = data["dimp/good"], data["dimp/bad"]
    for entry in (good, bad):
        assert {"auc", "op50", "op75", "precision", "norm_precision", "sequences"} <= set(entry)
        assert set(entry["sequences"]) == {"seqA", "seqB"}
        for seq in entry["sequences"].values():
            assert set(seq) == {"auc", "precision", "norm_precision"}
    assert good["auc"] == pytest.approx(100 * 0.9 * 20 / 21)
    assert good["num_runs"] == 2 and bad["num_runs"] == 1
    assert good["fps"] == pytest.approx(10.5) and "fps" not in bad
    assert good["sequences"]["seqA"]["auc"] == pytest.approx(100 * 0.8 * 20 / 21)
    # bad: seqB only frame 0 right: AUC (0.8 + 0.25)/2 * 20/21, precision (0.8 + 0.25)/2
    assert bad["auc"] == pytest.approx(100 * 0.525 * 20 / 21)
    assert bad["precision"] == pytest.approx(52.5)
    # per-attribute breakdown: 'occlusion' holds seqA only
    assert good["attributes"]["occlusion"]["auc"] == pytest.approx(100 * 0.8 * 20 / 21)
    assert good["attributes"]["occlusion"]["num_sequences"] == 1
    assert good["curves"]["success"]["values"][0] == pytest.approx(90.0)
    for name in ("success", "precision", "norm_precision"):
        png = out / f"{name}_plot.png"
        assert png.read_bytes()[:8] == PNG_MAGIC
        assert matplotlib.image.imread(png).ndim == 3
        assert (out / f"{name}_plot.pdf").read_bytes()[:5] == b"%PDF-"
    md = (out / "summary.md").read_text()
    assert md.splitlines()[0].startswith("| Tracker") and "| dimp/bad " in md
    assert "\\begin{tabular}" in (out / "summary.tex").read_text()
    assert "seqB" in (out / "per_sequence_auc.csv").read_text()
    assert "occlusion" in (out / "per_attribute_auc.csv").read_text()


def test_run_eval_missing_results(setup, capsys):
    (setup / "results" / "dimp" / "bad" / "seqB.txt").unlink()
    argv = folder_argv(setup, ["dimp/good", "dimp/bad"], setup / "out", "--no-plots")
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "bad/seqB.txt" in capsys.readouterr().err
    assert main([*argv, "--allow-missing", "--json", str(setup / "r.json")]) == 0
    err = capsys.readouterr().err
    assert "no result for 1 sequence(s): seqB" in err and "evaluating on 1 of 2 sequences" in err
    data = json.loads((setup / "r.json").read_text())
    assert set(data["dimp/good"]["sequences"]) == {"seqA"}
    assert data["dimp/good"]["skipped_sequences"] == ["seqB"]


def test_run_eval_protocol_override(setup, capsys):
    argv = folder_argv(setup, ["dimp/good"], setup / "o", "--no-plots", "--protocol", "pytracking")
    assert main(argv) == 0
    # without visibility the absent frame of seqA is a perfect frame: AUC = 20/21
    data = json.loads((setup / "o" / "results.json").read_text())
    assert data["dimp/good"]["auc"] == pytest.approx(100 * 20 / 21)
    assert data["dimp/good"]["protocol"] == "pytracking"


def test_synthetic_dataset_perfect_tracker_scores_its_visible_fraction():
    from eval.evaluation import evaluate_run, make_inputs
    from eval.ground_truth import load_ground_truth
    from eval.protocols import protocol_for_dataset

    gt = load_ground_truth("synthetic", split="val", num_sequences=2, num_frames=30)
    assert len(gt) == 2
    preds = {g.name: g.boxes.copy() for g in gt}
    scores = evaluate_run(make_inputs(gt, preds), protocol_for_dataset("synthetic")).scores
    # a perfect tracker passes every threshold below 1 on exactly the valid, visible frames
    usable = [np.mean(g.visible & (g.boxes[:, 2] > 0) & (g.boxes[:, 3] > 0)) for g in gt]
    assert scores["op50"] == pytest.approx(100 * np.mean(usable))
    assert scores["auc"] == pytest.approx(100 * np.mean(usable) * 20 / 21)


def test_run_eval_got10k_val_reads_cover_and_resolution(tmp_path, capsys):
    name = "GOT-10k_Val_000001"
    seq_dir = tmp_path / "got10k" / "val" / name
    seq_dir.mkdir(parents=True)
    (tmp_path / "got10k" / "val" / "list.txt").write_text(name + "\n")
    for i in range(4):
        cv2.imwrite(str(seq_dir / f"{i + 1:08d}.jpg"), np.zeros((16, 16, 3), np.uint8))
    (seq_dir / "groundtruth.txt").write_text("1,1,10,10\n90,90,20,20\n50,50,10,10\n10,10,10,10\n")
    (seq_dir / "cover.label").write_text("8\n8\n0\n8\n")
    (seq_dir / "absence.label").write_text("0\n0\n1\n0\n")
    (seq_dir / "meta_info.ini").write_text("[METAINFO]\nobject_class: cat\nresolution: (100, 100)\n")
    # frame 0 excluded; frame 1: GT clipped to the 100 x 100 image equals the prediction (IoU 1);
    # frame 2: cover 0, excluded; frame 3: shifted by 5 px, IoU 50/150
    write_result(
        tmp_path / "results" / "dimp" / "p_000" / f"{name}.txt",
        [[0, 0, 1, 1], [90, 90, 10, 10], [0, 0, 1, 1], [15, 10, 10, 10]],
        delim=",",
    )
    argv = [
        "--dataset",
        "got10k_val",
        "--root",
        str(tmp_path / "got10k"),
        "--results",
        str(tmp_path / "results"),
        "--trackers",
        "dimp/p",
        "--out",
        str(tmp_path / "out"),
        "--no-plots",
    ]
    assert main(argv) == 0
    assert "protocol got10k_val" in capsys.readouterr().out
    entry = json.loads((tmp_path / "out" / "results.json").read_text())["dimp/p"]
    assert entry["ao"] == pytest.approx(100 * (1 + 1 / 3) / 2)
    assert entry["sr50"] == pytest.approx(50.0)
    assert len(entry["curves"]["success"]["values"]) == 101


def test_short_result_files_are_counted_per_tracker(setup, capsys):
    good = setup / "results" / "dimp" / "good_001" / "seqB.txt"
    write_result(good, [BOX] * 2)  # 2 of 4 rows
    argv = folder_argv(setup, ["dimp/good", "dimp/bad"], setup / "o", "--no-plots")
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"note: dimp/good: 1 of 4 result files were shorter than their sequence and were padded with zero boxes "
        f"(failures) under protocol pytracking_visibility: {good} (2 of 4 rows)"
    ]
    assert main([*argv, "--protocol", "trackingnet"]) == 0
    padded_nan = (
        "1 of 4 result files were shorter than their sequence and were padded with NaN rows (failures)"
    )
    assert f"{padded_nan} under protocol trackingnet" in capsys.readouterr().err
    assert main([*argv, "--protocol", "got10k_toolkit"]) == 0
    assert (
        "were scored on their own rows only (the ground truth cut to them) under protocol got10k_toolkit"
        in (capsys.readouterr().err)
    )


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_empty_ground_truth_file_is_one_error_line_naming_it(setup, capsys, text):
    gt = setup / "data" / "seqB" / "groundtruth_rect.txt"
    gt.write_text(text)
    with pytest.raises(SystemExit) as exc:
        main(folder_argv(setup, ["dimp/good"], setup / "o", "--no-plots"))
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"error: {gt}: empty annotation file (expected one x,y,w,h row per frame, at least the first)\n"
    )


def test_empty_ground_truth_given_directly_is_a_result_error():
    from eval.evaluation import GroundTruth, evaluate_run, make_inputs
    from eval.frame_errors import ResultError
    from eval.protocols import get_protocol

    gt = [GroundTruth("s", np.zeros((0, 4)))]
    with pytest.raises(ResultError, match="the ground truth of sequence 's' has no rows"):
        evaluate_run(make_inputs(gt, {"s": np.ones((3, 4))}), get_protocol("pytracking"))


def test_unwritable_output_is_one_error_line(setup, capsys):
    blocker = setup / "a_file"
    blocker.write_text("not a folder\n")
    with pytest.raises(SystemExit) as exc:
        main(folder_argv(setup, ["dimp/good"], blocker / "out", "--no-plots"))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {blocker}") and err.count("\n") == 1


def test_trackingnet_is_the_test_set_as_for_run_tracker_and_needs_a_split_with_ground_truth(tmp_path, capsys):
    from tests.dataset.fixtures import make_trackingnet_sequence

    make_trackingnet_sequence(tmp_path / "tn", "TRAIN_0", "v", "1,1,10,10\n" * 3, 3)
    write_result(tmp_path / "results" / "dimp" / "p" / "v.txt", [BOX] * 3, delim=",")
    argv = [
        "--dataset",
        "trackingnet",
        "--root",
        str(tmp_path / "tn"),
        "--results",
        str(tmp_path / "results"),
    ]
    argv += ["--trackers", "dimp/p", "--out", str(tmp_path / "o"), "--no-plots"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith(
        "error: --dataset trackingnet: the ground truth of its sequences is not public"
    )
    assert main([*argv, "--split", "TRAIN_0"]) == 0
    assert capsys.readouterr().out.startswith("trackingnet: 1 sequences, protocol trackingnet")
