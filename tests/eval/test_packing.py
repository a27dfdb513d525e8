"""Submission zips: member names, separators and values."""

import zipfile

import pytest

from eval.frame_errors import ResultError
from eval.pack_results import main as pack_main
from eval.packing import pack_got10k, pack_trackingnet


def make_runs(root, names, runs, times=True):
    for r in range(runs):
        folder = root / "dimp" / f"nce_plus_{r:03d}"
        folder.mkdir(parents=True)
        for name in names:
            (folder / f"{name}.txt").write_text(f"1\t2\t3\t{4 + r}\n5.25\t6\t7\t8\n")
            if times:
                (folder / f"{name}_time.txt").write_text(f"0.{r + 1}\n0.5\n")


def test_got10k_zip_layout(tmp_path):
    names = ["GOT-10k_Test_000001", "GOT-10k_Test_000002"]
    make_runs(tmp_path, names, runs=3)
    report = pack_got10k(tmp_path, "dimp", "nce_plus", tmp_path / "sub.zip")
    with zipfile.ZipFile(tmp_path / "sub.zip") as zf:
        members = sorted(zf.namelist())
        assert members == sorted(
            [f"{n}/{n}_{r:03d}.txt" for n in names for r in (1, 2, 3)] + [f"{n}/{n}_time.txt" for n in names]
        )
        first = zf.read("GOT-10k_Test_000001/GOT-10k_Test_000001_002.txt").decode()
        assert first == "1.000,2.000,3.000,5.000\n5.250,6.000,7.000,8.000\n"  # run _001 on disk has h = 5
        times = zf.read("GOT-10k_Test_000002/GOT-10k_Test_000002_time.txt").decode().splitlines()
        assert [list(map(float, t.split(","))) for t in times] == [[0.1, 0.2, 0.3], [0.5, 0.5, 0.5]]
    assert report.runs == 3 and report.sequences == 2


def test_got10k_without_times_warns(tmp_path):
    make_runs(tmp_path, ["a"], runs=1, times=False)
    report = pack_got10k(tmp_path, "dimp", "nce_plus", tmp_path / "sub.zip")
    assert any("a_time.txt" in w for w in report.warnings)
    with zipfile.ZipFile(tmp_path / "sub.zip") as zf:
        assert zf.namelist() == ["a/a_001.txt"]


def test_trackingnet_zip_at_root(tmp_path):
    make_runs(tmp_path, ["vidA_0", "vidB_1"], runs=2)
    assert (
        pack_main(
            [
                "trackingnet",
                "--tracker",
                "dimp",
                "--param",
                "nce_plus",
                "--results",
                str(tmp_path),
                "--out",
                str(tmp_path / "tn.zip"),
                "--run",
                "1",
            ]
        )
        == 0
    )
    with zipfile.ZipFile(tmp_path / "tn.zip") as zf:
        assert sorted(zf.namelist()) == ["vidA_0.txt", "vidB_1.txt"]
        assert zf.read("vidA_0.txt").decode() == "1.00,2.00,3.00,5.00\n5.25,6.00,7.00,8.00\n"


def test_non_finite_rows_are_rejected(tmp_path):
    folder = tmp_path / "dimp" / "p"
    folder.mkdir(parents=True)
    (folder / "x.txt").write_text("1,2,3,4\nnan,1,2,3\n")
    with pytest.raises(ResultError, match=r"x\.txt:2: non-finite box"):
        pack_trackingnet(tmp_path, "dimp", "p", tmp_path / "o.zip")
    assert not (tmp_path / "o.zip").exists()


def test_unwritable_zip_is_one_error_line(tmp_path, capsys):
    make_runs(tmp_path, ["a"], runs=1)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    argv = ["got10k", "--tracker", "dimp", "--param", "nce_plus", "--results", str(tmp_path)]
    with pytest.raises(SystemExit) as exc:
        pack_main([*argv, "--out", str(blocker / "sub.zip")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {blocker}") and err.count("\n") == 1
