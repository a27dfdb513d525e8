"""The study runner: results.json layout, table with the paper's numbers, figures, cell reuse."""

import json

import pytest

from ltr.cli import study as study_cli
from ltr.regression_1d.report import best_k_mean, table_markdown

TINY = ["num_train=64", "num_samples=32", "eval_grid=64"]


def test_best5_and_table_layout():
    assert best_k_mean([5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 0.5]) == (0.5 + 1 + 2 + 3 + 4) / 5
    results = {
        "nce_plus": {
            "1": {"dkl": [0.1] * 5, "dkl_best5": 0.1, "sec_per_epoch": 0.2},
            "2": {"dkl": [0.3] * 5, "dkl_best5": 0.3, "sec_per_epoch": 0.4},
        },
        "ml_is": {"1": {"dkl": [0.5] * 5, "dkl_best5": 0.5, "sec_per_epoch": 0.2}},
    }
    table = table_markdown(results)
    lines = table.splitlines()
    assert lines[0] == "| | ML-IS | NCE+ |"  # the paper's column order
    assert "| D_KL ours (avg of datasets) | – | 0.200 |" in lines
    assert "| D_KL paper | 0.062 | 0.066 |" in lines


def test_study_cli_writes_results_table_figures_and_reuses_cells(tmp_path, capsys):
    out = tmp_path / "study"
    argv = [
        "regression_1d",
        *TINY,
        "--methods",
        "nce,ml_is",
        "--runs",
        "2",
        "--epochs",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]
    study_cli.main(argv)
    results = json.loads((out / "results.json").read_text())
    assert set(results) == {"nce", "ml_is"}
    for cell in results.values():
        assert set(cell) == {"1", "2"}
        for d in cell.values():
            assert len(d["dkl"]) == 2 and d["dkl_best5"] == sum(d["dkl"]) / 2 and d["sec_per_epoch"] > 0
    table = (out / "table.md").read_text()
    assert "| D_KL paper | 0.062 | 0.068 |" in table
    assert "| | ML-IS | NCE |" in capsys.readouterr().out
    for name in (
        "true_p_d1",
        "true_p_d2",
        "data_d1",
        "data_d2",
        "p_nce_d1_runs00-01",
        "p_ml_is_d2_runs00-01",
    ):
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
    cell_file = out / "cells" / "nce_d1_runs00-01.json"
    stamp = cell_file.stat().st_mtime_ns
    study_cli.main(argv)  # every cell exists with the same config: nothing is retrained
    assert cell_file.stat().st_mtime_ns == stamp
    assert json.loads((out / "results.json").read_text()) == results


def test_sweep_writes_json_and_png(tmp_path):
    out = tmp_path / "study"
    study_cli.main(
        [
            "regression_1d",
            *TINY,
            "--methods",
            "nce",
            "--datasets",
            "2",
            "--runs",
            "1",
            "--epochs",
            "1",
            "--sweep-m",
            "1,4",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    sweep = json.loads((out / "sweep_m" / "sweep_m.json").read_text())
    assert set(sweep["dkl_vs_m"]["nce"]) == {"1", "4"}
    assert (out / "sweep_m" / "sweep_m.png").stat().st_size > 1000


def test_study_cli_names_studies_and_settings_from_their_tables(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:  # argparse lists the studies of STUDIES
        study_cli.main(["tracking"])
    assert info.value.code == 2
    assert "invalid choice: 'tracking' (choose from 'regression_1d', 'detection')" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:  # an unknown setting: the registry's one-line error, nothing run
        study_cli.main(["regression_1d", "--methods", "nce,mle", "--out", str(tmp_path / "study")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown regression_1d train setting 'mle'; choose one of ['ml_is', ")
    assert err.count("\n") == 1 and not (tmp_path / "study").exists()
    with pytest.raises(SystemExit) as info:  # the rest of the line goes to the study's own parser
        study_cli.main(["detection", "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: run_study.py detection ")
