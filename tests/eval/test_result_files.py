"""Result loading: delimiters, run folders, and messages that name the file and line."""

import numpy as np
import pytest

from eval.evaluation import GroundTruth, evaluate_tracker, make_inputs
from eval.frame_errors import ResultError
from eval.protocols import get_protocol
from eval.result_files import load_tracker_results, read_result_file, run_directories


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text",
    [
        "1,2,3,4\n5,6,7,8\n",
        "1\t2\t3\t4\n5\t6\t7\t8\n",
        "1 2  3 4\n5 6 7 8\n",
        "1, 2, 3, 4\r\n5, 6, 7, 8\r\n\n",
    ],
)
def test_delimiters_detected_per_file(tmp_path, text):
    boxes = read_result_file(write(tmp_path / "s.txt", text))
    np.testing.assert_array_equal(boxes, [[1, 2, 3, 4], [5, 6, 7, 8]])


def test_nan_values_are_kept(tmp_path):
    boxes = read_result_file(write(tmp_path / "s.txt", "1,2,3,4\nnan,nan,nan,nan\n"))
    assert np.isnan(boxes[1]).all()


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = write(tmp_path / "Basketball.txt", "1,2,3,4\n1,2,3,4\n1,2,3\n")
    with pytest.raises(ResultError, match=r"Basketball\.txt:3: expected 4 comma-separated numbers"):
        read_result_file(path)


def test_non_number_names_file_and_line(tmp_path):
    path = write(tmp_path / "Car.txt", "1\t2\t3\t4\n1\tabc\t3\t4\n")
    with pytest.raises(ResultError, match=r"Car\.txt:2: 'abc' is not a number"):
        read_result_file(path)


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(ResultError, match=r"empty\.txt: empty result file"):
        read_result_file(write(tmp_path / "empty.txt", "\n"))
    with pytest.raises(ResultError, match=r"result file not found: .*nope\.txt"):
        read_result_file(tmp_path / "nope.txt")


def test_run_folders_numbered_runs_win(tmp_path):
    for name in ("p", "p_000", "p_002", "p_001", "p_extra", "q_000"):
        (tmp_path / "t" / name).mkdir(parents=True)
    runs = run_directories(tmp_path, "t", "p")
    assert [r for r, _ in runs] == [0, 1, 2]
    assert [f.name for _, f in runs] == ["p_000", "p_001", "p_002"]
    assert [f.name for _, f in run_directories(tmp_path, "t", "p_extra")] == ["p_extra"]
    with pytest.raises(ResultError, match=r"no results for t/zz: .*found in .*\['p', 'p_000'"):
        run_directories(tmp_path, "t", "zz")


def test_missing_sequence_message_and_allow_missing(tmp_path):
    write(tmp_path / "t" / "p" / "a.txt", "1,1,10,10\n")
    with pytest.raises(ResultError, match=r"t/p: 1 of 2 result files missing: .*t/p/b\.txt"):
        load_tracker_results(tmp_path, "t/p", ["a", "b"])
    res = load_tracker_results(tmp_path, "t/p", ["a", "b"], allow_missing=True)
    assert list(res.runs[0]) == ["a"]
    assert list(res.missing.values()) == [["b"]]
    with pytest.raises(ValueError, match="tracker/param"):
        load_tracker_results(tmp_path, "t", ["a"])


def test_nan_row_from_file_reports_file_and_line(tmp_path):
    write(tmp_path / "t" / "p" / "a.txt", "1,1,10,10\n1,1,10,10\nNaN,NaN,NaN,NaN\n")
    res = load_tracker_results(tmp_path, "t/p", ["a"])
    gt = [GroundTruth("a", np.array([[1, 1, 10, 10]] * 3, float))]
    runs = [make_inputs(gt, b, p) for b, p in zip(res.runs, res.paths)]
    with pytest.raises(ResultError, match=r"t/p/a\.txt:3: predicted box contains NaN"):
        evaluate_tracker("t/p", runs, get_protocol("pytracking"))


def test_runs_are_averaged(tmp_path):
    box = "1,1,10,10\n"
    write(tmp_path / "t" / "p_000" / "a.txt", box * 4)  # perfect: OP50 = 100
    write(tmp_path / "t" / "p_001" / "a.txt", box + "101,101,10,10\n" * 3)  # only frame 0: OP50 = 25
    res = load_tracker_results(tmp_path, "t/p", ["a"])
    assert res.run_ids == [0, 1]
    gt = [GroundTruth("a", np.array([[1, 1, 10, 10]] * 4, float))]
    ev = evaluate_tracker(
        "t/p", [make_inputs(gt, b, p) for b, p in zip(res.runs, res.paths)], get_protocol("pytracking")
    )
    assert [r["op50"] for r in ev.run_scores] == pytest.approx([100.0, 25.0])
    assert ev.scores["op50"] == pytest.approx(62.5)
    # AUC: run 0 = 20/21, run 1 = 0.25 * 20/21 -> mean 0.625 * 20/21
    assert ev.scores["auc"] == pytest.approx(100 * 0.625 * 20 / 21)
    assert ev.sequences["a"]["auc"] == pytest.approx(100 * 0.625 * 20 / 21)
    np.testing.assert_allclose(ev.curves["success"][:20], 0.625)


def test_blank_line_inside_the_file_is_an_error(tmp_path):
    # a skipped blank line would shift every later frame by one
    path = write(tmp_path / "Dog.txt", "1,2,3,4\n\n5,6,7,8\n")
    with pytest.raises(ResultError, match=r"Dog\.txt:2: expected 4 comma-separated numbers"):
        read_result_file(path)
