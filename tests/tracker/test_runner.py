"""The dataset runner end to end on a folder-layout tree: layout, atomic files, resume, parallel, failures."""

import numpy as np
import pytest

from eval.result_files import read_result_file
from ltr.ops.int8_conv import int8_available
from pytracking.evaluation.results import format_boxes, result_folder, write_sequence_results
from pytracking.run_tracker import main
from tests.dataset.fixtures import make_folder_sequence
from tests.tracker.helpers import write_tiny_checkpoint


@pytest.fixture()
def tree(tmp_path):
    root = tmp_path / "data"
    boxes = [[3.0, 2.0, 6.0, 5.0]] * 6
    make_folder_sequence(root, "alpha", boxes)
    make_folder_sequence(root, "beta", [[1.5, 1.25, 4.0, 7.0]] * 5)
    broken = make_folder_sequence(root, "broken", boxes)
    (broken / "img" / "0003.jpg").write_bytes(b"not a jpeg")
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    return root, ckpt, tmp_path / "results"


def run(root, ckpt, results, *extra):
    argv = ["dimp", "nce_plus_tiny", "--dataset", "folder", "--root", str(root), "--net", str(ckpt)]
    return main([*argv, "--results", str(results), "--device", "cpu", "--no-progress", *extra])


def check_failure_and_resume(tree, capsys, threads):
    root, ckpt, results = tree
    assert run(root, ckpt, results, "--threads", str(threads), "--runid", "3") == 1
    err = capsys.readouterr().err
    assert "sequence broken failed" in err and "Traceback" in err and "0003.jpg" in err
    folder = results / "dimp" / "nce_plus_tiny_003"
    assert sorted(p.name for p in folder.iterdir()) == [
        "alpha.txt",
        "alpha_time.txt",
        "beta.txt",
        "beta_time.txt",
    ]
    alpha = read_result_file(folder / "alpha.txt")
    assert alpha.shape == (6, 4) and np.isfinite(alpha).all() and (alpha[:, 2:] > 0).all()
    assert alpha[0].tolist() == [3.0, 2.0, 6.0, 5.0]  # frame 0 = the initial box
    times = np.loadtxt(folder / "beta_time.txt")
    assert times.shape == (5,) and (times > 0).all()
    # rerun (one process): finished sequences are skipped and keep their files, the broken one is retried
    before = (folder / "alpha.txt").stat().st_mtime_ns
    assert run(root, ckpt, results, "--runid", "3") == 1
    out = capsys.readouterr().out
    assert "0 tracked, 2 already finished, 1 failed" in out
    assert (folder / "alpha.txt").stat().st_mtime_ns == before


def test_run_keeps_results_reports_failure_and_resumes(tree, capsys):
    check_failure_and_resume(tree, capsys, threads=1)


@pytest.mark.slow  # two spawned worker processes import torch: ~10 s of CPU
def test_parallel_run_keeps_results_reports_failure_and_resumes(tree, capsys):
    check_failure_and_resume(tree, capsys, threads=2)


def test_single_sequence_and_clean_exit(tree, capsys):
    root, ckpt, results = tree
    assert run(root, ckpt, results, "--sequence", "beta") == 0
    folder = results / "dimp" / "nce_plus_tiny"
    assert sorted(p.name for p in folder.iterdir()) == ["beta.txt", "beta_time.txt"]
    assert "1 tracked" in capsys.readouterr().out


def test_missing_network_names_the_training_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LTR_WORKSPACE", str(tmp_path / "ws"))
    code = main(["dimp", "nce_plus", "--dataset", "folder", "--root", str(tmp_path), "--no-progress"])
    assert code == 2
    assert "python ltr/run_training.py dimp nce_plus" in capsys.readouterr().err


def test_result_file_text_is_exact(tmp_path):
    boxes = np.array([[0.1, 1 / 3, 1e-7, 12345.678901234567], [1.0, 2.0, 3.0, 4.0]])
    path = write_sequence_results(tmp_path, "s", boxes, np.array([0.5, 0.25]))
    assert np.array_equal(read_result_file(path), boxes)  # round trip without precision loss
    assert format_boxes(boxes[1:]) == "1.0,2.0,3.0,4.0\n"
    assert (tmp_path / "s_time.txt").read_text() == "0.5\n0.25\n"
    assert not list(tmp_path.glob(".*"))  # no temp files left
    assert result_folder("r", "dimp", "nce_plus", 7).as_posix() == "r/dimp/nce_plus_007"
    with pytest.raises(ValueError, match="boxes but"):
        write_sequence_results(tmp_path, "t", boxes, np.array([1.0]))


def test_missing_dataset_and_unknown_sequence_are_clear_errors(tree, monkeypatch, capsys):
    root, ckpt, results = tree
    monkeypatch.delenv("OTB_DIR", raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(root / "none.json"))
    argv = ["dimp", "nce_plus_tiny", "--net", str(ckpt), "--results", str(results), "--no-progress"]
    assert main([*argv, "--dataset", "otb"]) == 2
    assert "OTB_DIR" in capsys.readouterr().err
    assert main([*argv, "--dataset", "folder", "--root", str(root), "--sequence", "gamma"]) == 2
    assert "gamma" in capsys.readouterr().err


def test_baseline_trackers_run_through_the_same_runner(tree, capsys):
    root, _, results = tree
    argv = ["static", "default", "--dataset", "folder", "--root", str(root), "--sequence", "alpha", "beta"]
    assert main([*argv, "--results", str(results), "--no-progress"]) == 0
    alpha = read_result_file(results / "static" / "default" / "alpha.txt")
    assert alpha.tolist() == [[3.0, 2.0, 6.0, 5.0]] * 6  # the static baseline repeats the initial box
    assert main(["dimp", "default", "--dataset", "folder", "--root", str(root), "--no-progress"]) == 2
    assert "no parameter set 'default'" in capsys.readouterr().err


def test_compile_flag_reaches_the_tracker_and_gives_the_eager_results(tree):
    from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker
    from pytracking.tracker.dimp.compiled import CompiledStage

    root, ckpt, results = tree
    tracker = build_tracker(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu", compile=True))
    assert tracker.params.compile and isinstance(tracker._backbone, CompiledStage)
    assert run(root, ckpt, results, "--sequence", "alpha", "--runid", "1") == 0
    assert run(root, ckpt, results, "--sequence", "alpha", "--runid", "2", "--compile") == 0
    eager = read_result_file(results / "dimp" / "nce_plus_tiny_001" / "alpha.txt")
    compiled = read_result_file(results / "dimp" / "nce_plus_tiny_002" / "alpha.txt")
    np.testing.assert_allclose(compiled, eager, rtol=0, atol=1e-3)


@pytest.mark.skipif(not int8_available(), reason="no oneDNN int8 convolution in this torch build")
def test_int8_flag_reaches_the_tracker(tree):
    from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker

    root, ckpt, results = tree
    tracker = build_tracker(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu", int8=True))
    assert tracker.params.int8_heads and tracker._int8 is not None
    assert run(root, ckpt, results, "--sequence", "alpha", "--runid", "1") == 0
    assert run(root, ckpt, results, "--sequence", "alpha", "--runid", "3", "--int8") == 0
    plain = read_result_file(results / "dimp" / "nce_plus_tiny_001" / "alpha.txt")
    int8 = read_result_file(results / "dimp" / "nce_plus_tiny_003" / "alpha.txt")
    assert int8.shape == plain.shape and np.isfinite(int8).all()
    assert not np.array_equal(int8, plain)  # the flag changed the arithmetic
