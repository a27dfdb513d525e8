"""The dataset runner end to end on a folder-layout tree: layout, atomic files, resume, parallel, failures, and
the checks made once before any work (checkpoint, device, dataset root, parameter set)."""

import numpy as np
import pytest
import torch

from eval.result_files import read_result_file
from ltr.dataset.base import DatasetError
from pytracking.evaluation.results import format_boxes, result_folder, write_sequence_results
from pytracking.run_tracker import main
from tests.dataset.fixtures import FRAME_H, FRAME_W, make_folder_sequence, write_jpeg, write_text
from tests.tracker.bad_checkpoints import BAD_CHECKPOINTS
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


def run(root, ckpt, results, *extra, overrides=()):
    argv = [
        "dimp",
        "nce_plus_tiny",
        *overrides,
        "--dataset",
        "folder",
        "--root",
        str(root),
        "--net",
        str(ckpt),
    ]
    return main([*argv, "--results", str(results), "--device", "cpu", "--no-progress", *extra])


def check_failure_and_resume(tree, capsys, threads):
    root, ckpt, results = tree
    assert run(root, ckpt, results, "--threads", str(threads), "--runid", "3") == 1
    err = capsys.readouterr().err.splitlines()
    frame = root / "broken" / "img" / "0003.jpg"
    assert err == [  # a data error: one line as it happens, the summary at the end, no traceback
        f"error: broken: cannot read frame image {frame} (missing or not an image)",
        "1 sequence(s) failed; data errors: broken (--debug shows the traceback of the first)",
    ]
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
    assert "unknown dimp parameter set 'default'; choose one of ['dimp50'," in capsys.readouterr().err


def test_compile_flag_reaches_the_tracker_and_gives_the_eager_results(tree):
    from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker
    from pytracking.tracker.dimp.compiled import CompiledStage

    root, ckpt, results = tree
    tracker = build_tracker(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu", compile=True))
    assert tracker.params.compile and isinstance(tracker.stages.backbone, CompiledStage)
    assert run(root, ckpt, results, "--sequence", "alpha", "--runid", "1") == 0
    assert run(root, ckpt, results, "--sequence", "alpha", "--runid", "2", "--compile") == 0
    eager = read_result_file(results / "dimp" / "nce_plus_tiny_001" / "alpha.txt")
    compiled = read_result_file(results / "dimp" / "nce_plus_tiny_002" / "alpha.txt")
    np.testing.assert_allclose(compiled, eager, rtol=0, atol=1e-3)


def test_cuda_graph_flag_reaches_the_parameters_and_a_cpu_tracker_stays_eager(tree, capsys):
    from pytracking.evaluation.tracker_spec import TrackerSpec, _eager_refinement, build_tracker
    from pytracking.run_tracker import build_parser
    from pytracking.tracker.dimp import DiMPParams

    root, ckpt, results = tree
    args = ["dimp", "nce_plus_tiny", "--dataset", "folder", "--cuda-graph"]
    assert build_parser().parse_intermixed_args(args).cuda_graph
    assert not build_parser().parse_intermixed_args(args[:-1]).cuda_graph
    tracker = build_tracker(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu", cuda_graph=True))
    assert tracker.params.cuda_graph and tracker.stages._graphed is None  # graphs are for CUDA devices
    assert run(root, ckpt, results, "--sequence", "alpha", "--runid", "3", "--cuda-graph") == 0
    assert read_result_file(results / "dimp" / "nce_plus_tiny_003" / "alpha.txt").shape == (6, 4)
    err = capsys.readouterr().err
    assert "warning: cuda_graph (--cuda-graph) replays the refinement on a GPU; on cpu it runs eagerly" in err
    cuda = torch.device("cuda")
    assert _eager_refinement(DiMPParams(cuda_graph=True), cuda) is None
    assert "refine_mode=s1 runs eagerly" in _eager_refinement(
        DiMPParams(cuda_graph=True, refine_mode="s1"), cuda
    )
    assert _eager_refinement(DiMPParams(), torch.device("cpu")) is None


@pytest.mark.parametrize("case", sorted(BAD_CHECKPOINTS))
def test_bad_checkpoint_is_one_error_line_before_any_sequence(tree, capsys, case):
    root, _, results = tree
    path, fragment = BAD_CHECKPOINTS[case](results.parent)
    assert run(root, path, results, "--threads", "4") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not results.exists()  # no worker started, no folder made


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_one_error_line(tree, capsys):
    root, ckpt, results = tree
    argv = ["dimp", "nce_plus_tiny", "--dataset", "folder", "--root", str(root), "--net", str(ckpt)]
    assert main([*argv, "--results", str(results), "--device", "cuda", "--threads", "2"]) == 2
    assert capsys.readouterr().err == (
        "error: device=cuda was asked for but CUDA is not available (use --device cpu or auto)\n"
    )
    assert not results.exists()


def test_missing_dataset_root_is_checked_before_the_network(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    argv = ["dimp", "nce_plus_tiny", "--dataset", "folder", "--root", str(missing), "--no-progress"]
    assert main([*argv, "--net", str(write_tiny_checkpoint(tmp_path / "t.pth.tar"))]) == 2
    assert capsys.readouterr().err == f"error: --root points to {missing}, which is not a directory\n"


def test_data_errors_are_one_line_each_and_the_run_goes_on(tree, capsys):
    root, ckpt, results = tree
    empty = make_folder_sequence(root, "empty_gt", [[3.0, 2.0, 6.0, 5.0]] * 4)
    write_text(empty / "groundtruth_rect.txt", "")
    resized = make_folder_sequence(root, "resized", [[3.0, 2.0, 6.0, 5.0]] * 5)
    write_jpeg(resized / "img" / "0004.jpg", 4, width=20, height=14)
    outside = make_folder_sequence(root, "outside", [[30.0, 2.0, 6.0, 5.0]] * 3)
    assert run(root, ckpt, results) == 1
    captured = capsys.readouterr()
    assert "2 tracked, 0 already finished, 4 failed" in captured.out
    assert captured.err.splitlines() == [
        f"error: broken: cannot read frame image {root / 'broken' / 'img' / '0003.jpg'} (missing or not an image)",
        f"error: empty_gt: {empty / 'groundtruth_rect.txt'}: empty annotation file (expected one x,y,w,h row "
        "per frame, at least the first)",
        "error: outside: the first frame's annotated box is unusable: init box x, y, w, h = "
        f"[30.0, 2.0, 6.0, 5.0] lies entirely outside the {FRAME_W}x{FRAME_H} frame",
        f"error: resized: frame 3 ({resized / 'img' / '0004.jpg'}) is 20x14 pixels but the sequence started at "
        f"{FRAME_W}x{FRAME_H}; the tracker needs one frame size per sequence (initialise it again for a new size)",
        "4 sequence(s) failed; data errors: broken, empty_gt, outside, resized "
        "(--debug shows the traceback of the first)",
    ]
    folder = results / "dimp" / "nce_plus_tiny"
    assert sorted(p.name for p in folder.glob("*.txt")) == [
        "alpha.txt",
        "alpha_time.txt",
        "beta.txt",
        "beta_time.txt",
    ]
    assert outside.exists()
    with pytest.raises(DatasetError, match="cannot read frame image"):  # --debug: the first one, raised
        run(root, ckpt, results, "--debug")


def test_parameter_set_for_another_network_is_a_warning_line(tree, capsys):
    root, ckpt, results = tree
    argv = [
        "dimp",
        "nce_plus",
        "--dataset",
        "folder",
        "--root",
        str(root),
        "--net",
        str(ckpt),
        "--device",
        "cpu",
    ]
    assert main([*argv, "--results", str(results), "--sequence", "beta", "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("warning: parameter set 'nce_plus' is tuned for the resnet50")
    assert f"but {ckpt} holds a resnet18" in err[0]


def test_results_folder_that_cannot_be_made_is_one_error_line(tree, capsys):
    root, ckpt, results = tree
    results.parent.joinpath("a_file").write_text("not a folder\n")
    blocked = results.parent / "a_file" / "results"
    assert run(root, ckpt, blocked) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: cannot create the results folder {results.parent / 'a_file'}")
        and err.count("\n") == 1
    )
    assert run(root, ckpt, results, "--runid", "1000") == 2
    assert capsys.readouterr().err == "error: runid must be in 0..999, got 1000\n"


def test_key_value_overrides_change_the_tracker_and_need_a_results_name(tree, capsys):
    from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker

    root, ckpt, results = tree
    overrides = ("refine=false", "augmentation.dropout_num=0")
    tracker = build_tracker(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu", overrides=overrides))
    assert tracker.params.refine is False and tracker.params.augmentation.dropout_num == 0
    seq = ("--sequence", "alpha")
    assert run(root, ckpt, results, *seq, "--name", "tiny_norefine", overrides=["refine=false"]) == 0
    assert (results / "dimp" / "tiny_norefine" / "alpha.txt").is_file()
    assert not (results / "dimp" / "nce_plus_tiny").exists()
    capsys.readouterr()
    assert run(root, ckpt, results, *seq, overrides=["refine=false"]) == 2
    assert "need --name" in capsys.readouterr().err
    assert run(root, ckpt, results, *seq, "--name", "x", overrides=["refine_speed=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown config key 'refine_speed'")
    assert run(root, ckpt, results, *seq, "--name", "x", overrides=["refine_iters=many"]) == 2
    assert "refine_iters" in capsys.readouterr().err
    # after --sequence the override would be taken for a sequence name: said so
    assert run(root, ckpt, results, *seq, "refine=false", "--name", "x") == 2
    assert "put key=value overrides right after the parameter set" in capsys.readouterr().err


def test_batched_run_gives_the_one_at_a_time_results_failures_and_resume(tree, capsys):
    """--batch 2: sequences of 6, 5, 3 and 8 frames share two slots (refilled as they end), a broken frame
    ends its sequence only, and the result files match the one-at-a-time run's."""
    root, ckpt, results = tree
    make_folder_sequence(root, "gamma", [[4.0, 3.0, 7.0, 6.0]] * 3)
    make_folder_sequence(root, "delta", [[2.0, 4.0, 5.0, 5.0]] * 8)
    outside = make_folder_sequence(root, "outside", [[30.0, 2.0, 6.0, 5.0]] * 3)
    assert run(root, ckpt, results, "--runid", "1") == 1
    single_err = capsys.readouterr().err.splitlines()
    assert run(root, ckpt, results, "--runid", "2", "--batch", "2") == 1
    captured = capsys.readouterr()
    assert "4 tracked, 0 already finished, 2 failed" in captured.out
    assert sorted(captured.err.splitlines()) == sorted(single_err)  # the same lines (maybe in another order)
    assert "error: outside: the first frame's annotated box is unusable" in captured.err
    assert outside.exists()
    one = results / "dimp" / "nce_plus_tiny_001"
    two = results / "dimp" / "nce_plus_tiny_002"
    for name in ("alpha", "beta", "gamma", "delta"):
        a, b = read_result_file(one / f"{name}.txt"), read_result_file(two / f"{name}.txt")
        assert a.shape == b.shape == (len(np.loadtxt(root / name / "groundtruth_rect.txt", delimiter=",")), 4)
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-3)
        assert (np.loadtxt(two / f"{name}_time.txt") > 0).all()
    assert not (two / "broken.txt").exists()
    # resumed: finished sequences are skipped, the failed ones retried
    assert run(root, ckpt, results, "--runid", "2", "--batch", "3") == 1
    assert "0 tracked, 4 already finished, 2 failed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--batch", "0"), "error: --batch must be >= 1, got 0"),
        (
            ("--batch", "2", "--threads", "2"),
            "error: --batch B tracks in one process: use it without --threads",
        ),
        (("--batch", "2", "--visdom"), "error: --batch B tracks in one process: use it without --threads"),
    ],
)
def test_batch_argument_errors_are_one_line(tree, capsys, extra, message):
    root, ckpt, results = tree
    assert run(root, ckpt, results, *extra) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(message), err


def test_batch_is_refused_for_baselines_and_the_onnxruntime_backend(tree, capsys):
    root, ckpt, results = tree
    argv = ["--dataset", "folder", "--root", str(root), "--results", str(results), "--batch", "2"]
    assert main(["csrt", "default", *argv]) == 2
    assert (
        capsys.readouterr().err.strip() == "error: --batch is for dimp; 'csrt' tracks one sequence at a time"
    )
    assert run(root, ckpt, results, "--batch", "2", "--name", "ort", overrides=("backend=onnxruntime",)) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --batch: the onnxruntime backend tracks one sequence at a time"
    )


def test_lockstep_starts_the_longest_sequences_first(tree, tmp_path):
    """Sequences of 2, 3 and 9 frames in two slots: the 9-frame one starts at once and the short ones share
    the other slot, 8 steps in all (in the dataset's order the 9-frame one would start last: 9 steps)."""
    from pytracking.evaluation.lockstep import run_lockstep
    from pytracking.evaluation.runner import DatasetSpec
    from pytracking.evaluation.tracker_spec import TrackerSpec, prepare_spec

    _, ckpt, _ = tree
    root = tmp_path / "lengths"
    for name, n in (("a", 2), ("b", 3), ("c", 9)):
        make_folder_sequence(root, name, [[3.0, 2.0, 6.0, 5.0]] * n)
    spec, _ = prepare_spec(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu"))
    outcomes, steps = [], []
    run_lockstep(
        spec,
        DatasetSpec("folder", str(root)).open(),
        ["a", "b", "c"],
        tmp_path / "out",
        batch=2,
        record=outcomes.append,
        failure=lambda name, err, text: (name, err),
        frames_done=steps.append,
    )
    assert steps == [2, 2, 2, 1, 1, 1, 1, 1]
    assert outcomes == [("b", None), ("a", None), ("c", None)]
    for name, n in (("a", 2), ("b", 3), ("c", 9)):
        assert read_result_file(tmp_path / "out" / f"{name}.txt").shape == (n, 4)


def test_lockstep_timer_counts_the_runner_and_tracker_stages(tree, tmp_path):
    """A timer given to run_dataset sees every lockstep step's tracker stages once, each sequence's start and
    result file once, and a wait for every frame read ahead; batch 1 refuses it (no lockstep runner)."""
    from pytracking.evaluation.runner import DatasetSpec, run_dataset
    from pytracking.evaluation.tracker_spec import TrackerSpec, prepare_spec
    from pytracking.tracker.dimp.timing import StageTimer

    _, ckpt, _ = tree
    root = tmp_path / "lengths"
    for name, n in (("a", 2), ("b", 3), ("c", 9)):
        make_folder_sequence(root, name, [[3.0, 2.0, 6.0, 5.0]] * n)
    spec, _ = prepare_spec(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu"))
    timer = StageTimer()
    report = run_dataset(
        spec,
        DatasetSpec("folder", str(root)),
        results_root=tmp_path / "r",
        batch=2,
        progress=False,
        timer=timer,
    )
    assert sorted(report.done) == ["a", "b", "c"]
    steps = 8  # as in test_lockstep_starts_the_longest_sequences_first
    for stage in ("crop", "backbone", "classifier", "localisation", "refinement", "selection", "update"):
        assert timer.counts[stage] == steps, stage
    assert timer.counts["write"] == 3
    assert timer.counts["read"] == (2 - 1) + (3 - 1) + (9 - 1)  # every frame after each first
    assert timer.counts["start"] >= 2 and all(v > 0 for v in timer.totals.values())
    with pytest.raises(ValueError, match="batch > 1"):
        run_dataset(
            spec, DatasetSpec("folder", str(root)), results_root=tmp_path / "r1", progress=False, timer=timer
        )


def test_lockstep_groups_give_each_sequence_the_boxes_of_one_group(tree, tmp_path):
    """run_dataset(batch=3, groups=2): every step split into two interleaved groups (sizes 2 and 1, then
    fewer as sequences end) tracks each sequence as one group does, within 1e-3 px; groups need batch > 1."""
    from pytracking.evaluation.runner import DatasetSpec, run_dataset
    from pytracking.evaluation.tracker_spec import TrackerSpec, prepare_spec
    from pytracking.tracker.dimp.timing import StageTimer

    _, ckpt, _ = tree
    root = tmp_path / "lengths"
    for name, n, box in (
        ("a", 4, [3.0, 2.0, 6.0, 5.0]),
        ("b", 7, [5.0, 4.0, 7.0, 6.0]),
        ("c", 9, [2.0, 3.0, 5.0, 6.0]),
    ):
        make_folder_sequence(root, name, [box] * n)
    spec, _ = prepare_spec(TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu"))
    folders = {}
    for groups in (1, 2):
        timer = StageTimer()
        report = run_dataset(
            spec,
            DatasetSpec("folder", str(root)),
            results_root=tmp_path / f"g{groups}",
            batch=3,
            groups=groups,
            progress=False,
            timer=timer,
        )
        assert sorted(report.done) == ["a", "b", "c"] and not report.failed
        folders[groups] = report.folder
        # 8 steps: 3 of three trackers, 3 of two, 2 of one; two groups crop twice in the first 6
        assert timer.counts["crop"] == (8 if groups == 1 else 3 * 2 + 3 * 2 + 2)
    for name, n in (("a", 4), ("b", 7), ("c", 9)):
        one, two = (read_result_file(folders[g] / f"{name}.txt") for g in (1, 2))
        assert one.shape == two.shape == (n, 4)
        np.testing.assert_allclose(two, one, rtol=0, atol=1e-3)
    for batch, groups in ((1, 2), (3, 0)):
        with pytest.raises(ValueError, match="groups interleave a lockstep step"):
            run_dataset(
                spec,
                DatasetSpec("folder", str(root)),
                results_root=tmp_path / "bad",
                batch=batch,
                groups=groups,
                progress=False,
            )


def test_cuda_trackers_run_with_one_host_thread_and_cpu_trackers_keep_theirs():
    """host_threads: a CUDA device's block sees CUDA_HOST_THREADS intra-op threads and the setting comes back
    (also after an error); a CPU device's block keeps the process's threads."""
    from pytracking.evaluation.runner import CUDA_HOST_THREADS, host_threads

    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with host_threads(torch.device("cuda", 0)):  # a resolved device: no GPU needed
            assert torch.get_num_threads() == CUDA_HOST_THREADS == 1
        assert torch.get_num_threads() == 3
        with pytest.raises(RuntimeError), host_threads(torch.device("cuda")):
            raise RuntimeError("a failed run")
        assert torch.get_num_threads() == 3
        with host_threads("cpu"):
            assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("parent", [False, True])
def test_worker_processes_reuse_freed_memory_when_their_parent_does(tree, parent):
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from ltr.admin.cpu_memory import _glibc, reusing_freed_memory
    from pytracking.evaluation.runner import DatasetSpec, _setup
    from pytracking.evaluation.tracker_spec import TrackerSpec

    if parent and _glibc() is None:
        pytest.skip("the setting exists on glibc only")
    root, ckpt, results = tree
    spec = TrackerSpec("dimp", "nce_plus_tiny", str(ckpt), "cpu")
    setup = (spec, DatasetSpec("folder", str(root)), results, 1, parent)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_setup, initargs=setup) as pool:
        assert pool.submit(reusing_freed_memory).result(timeout=120) is parent
