"""The workspace set-up command: the trackers.ini entry the toolkit reads, a new workspace, one-line errors."""

from __future__ import annotations

import configparser
import json
import shlex
import sys
from pathlib import Path

import pytest

from pytracking.vot.workspace import main
from tests.tracker.helpers import write_tiny_checkpoint

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return write_tiny_checkpoint(tmp_path / "tiny 100%.pth")  # a space and a '%' in the path


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()  # as the toolkit reads it (with '%' interpolation)
    parser.read(path)
    return parser


def test_new_workspace_and_entry(tmp_path: Path, checkpoint: Path, capsys: pytest.CaptureFixture) -> None:
    ws = tmp_path / "ws"
    code = main(
        [
            str(ws),
            "dimp",
            "nce_plus_tiny",
            "refine=false",
            "--net",
            str(checkpoint),
            "--stack",
            "vot2018/shortterm",
        ]
    )
    assert code == 0
    assert json.loads((ws / "config.yaml").read_text()) == {
        "registry": ["./trackers.ini"],
        "stack": "vot2018/shortterm",
    }
    assert (ws / "sequences").is_dir() and (ws / "results").is_dir()
    entry = _read_ini(ws / "trackers.ini")["ebmtrack_dimp_nce_plus_tiny"]
    assert entry["protocol"] == "traxpython"
    assert entry["python"] == sys.executable
    assert Path(entry["paths"]) == REPO
    assert "timeout" not in entry
    # the command the toolkit runs, `python -c "<command>"`, calls the server with exactly these arguments
    command = entry["command"]
    prefix, _, args = command.partition("main(")
    assert prefix == "from pytracking.vot.server import main; raise SystemExit("
    assert json.loads(args[: -len("))")]) == [
        "dimp",
        "nce_plus_tiny",
        "refine=false",
        "--net",
        str(checkpoint),
    ]
    assert "vot evaluate --workspace" in capsys.readouterr().out
    # the toolkit escapes double quotes, wraps the code in `python -c "..."` and splits it like a shell
    escaped = command.replace('"', '\\"')
    assert shlex.split(f'python -c "import sys; {escaped}"')[2] == f"import sys; {command}"


def test_entries_are_added_and_replaced_keeping_others(tmp_path: Path, checkpoint: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.yaml").write_text("stack: vot2022/shorttermbox\n")  # an existing workspace is kept
    (ws / "trackers.ini").write_text("[other]\nprotocol = trax\ncommand = ./other\n")
    mine = [str(ws), "dimp", "nce_plus_tiny", "--net", str(checkpoint), "--identifier", "mine"]
    assert main([*mine, "--timeout", "90"]) == 0
    assert main([*mine, "--device", "cpu"]) == 0
    ini = _read_ini(ws / "trackers.ini")
    assert ini.sections() == ["other", "mine"]
    assert ini["other"]["command"] == "./other"
    assert "timeout" not in ini["mine"] and '"--device", "cpu"' in ini["mine"]["command"]
    assert (ws / "config.yaml").read_text() == "stack: vot2022/shorttermbox\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dimp", "nce_plus_tiny", "--net", "{ckpt}"], "has no config.yaml: pass --stack"),
        (["dimp", "nce_plus_tiny", "--net", "nope.pth", "--stack", "s"], "nope.pth: no such checkpoint file"),
        (
            ["dimp", "nce_plus_tiny", "--net", "{ckpt}", "--stack", "s", "--identifier", "a b"],
            "--identifier 'a b'",
        ),
        (
            ["dimp", "nce_plus_tiny", "--net", "{ckpt}", "--stack", "s", "--timeout", "0"],
            "--timeout must be >= 1",
        ),
    ],
)
def test_errors_are_one_line(
    tmp_path: Path, checkpoint: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    args = [a.replace("{ckpt}", str(checkpoint)) for a in args]
    assert main([str(tmp_path / "ws"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "ws" / "trackers.ini").exists()
