"""One-line errors of the ONNX export and backend, before any work: no export folder, an export of another
checkpoint or for other parameters, onnx / onnxruntime not installed (no export needed: manifests by hand)."""

import dataclasses
import json
import sys

import pytest

from pytracking.export_onnx import main as export_main
from pytracking.onnx.export import MODEL_NAMES
from pytracking.onnx.manifest import (
    VERSION,
    Manifest,
    ModelEntry,
    file_sha256,
    weights_sha256,
    write_manifest,
)
from pytracking.run_tracker import main as run_tracker
from pytracking.tracker.dimp import load_network
from tests.dataset.fixtures import make_folder_sequence
from tests.tracker.helpers import write_tiny_checkpoint


@pytest.fixture()
def tree(tmp_path):
    root = tmp_path / "data"
    make_folder_sequence(root, "alpha", [[3.0, 2.0, 6.0, 5.0]] * 3)
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    return root, ckpt, tmp_path


def fake_export(folder, ckpt, num_boxes=10):
    """A manifest of ``ckpt`` (its real checksums) with empty model files: enough for every check."""
    loaded = load_network(ckpt)
    folder.mkdir()
    for name in MODEL_NAMES:
        (folder / f"{name}.onnx").write_bytes(b"")
    models = {n: ModelEntry(f"{n}.onnx", "", {}, {}) for n in MODEL_NAMES}
    manifest = Manifest(
        tracker="dimp",
        param="nce_plus_tiny",
        checkpoint={"path": str(ckpt), "sha256": file_sha256(ckpt)},
        weights_sha256=weights_sha256(loaded.net),
        geometry=dataclasses.asdict(loaded.geometry),
        num_boxes=num_boxes,
        precision="float32",
        opset=18,
        versions={},
        box_window={"strides": [8, 16], "halos": [2, 2]},
        models=models,
    )
    write_manifest(folder, manifest)
    return folder


def track(tree, *overrides, net=None):
    root, ckpt, tmp = tree
    argv = [
        "dimp",
        "nce_plus_tiny",
        "backend=onnxruntime",
        *overrides,
        "--name",
        "ort",
        "--dataset",
        "folder",
    ]
    argv += [
        "--root",
        str(root),
        "--net",
        str(net or ckpt),
        "--results",
        str(tmp / "results"),
        "--device",
        "cpu",
    ]
    return run_tracker([*argv, "--no-progress"])


def error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_missing_export_folder_or_manifest(tree, capsys):
    tmp = tree[2]
    assert track(tree, f"onnx_dir={tmp / 'nowhere'}") == 2
    assert "nowhere: no such ONNX export folder" in error_line(capsys)
    (tmp / "empty").mkdir()
    assert track(tree, f"onnx_dir={tmp / 'empty'}") == 2
    assert "manifest.json: missing" in error_line(capsys)
    assert track(tree) == 2
    assert "needs onnx_dir=DIR" in error_line(capsys)
    assert not (tmp / "results" / "dimp" / "ort" / "alpha.txt").exists()


def test_export_of_another_checkpoint_or_other_parameters(tree, capsys):
    root, ckpt, tmp = tree
    other = write_tiny_checkpoint(tmp / "other.pth.tar", seed=1)
    folder = fake_export(tmp / "export", ckpt)
    assert track(tree, f"onnx_dir={folder}", net=other) == 2
    line = error_line(capsys)
    assert f"not from {other}" in line and "--net" in line
    assert track(tree, f"onnx_dir={folder}", "num_random_boxes=4") == 2
    assert "scores 10 boxes, the parameters ask for 5" in error_line(capsys)
    (folder / "filter_step.onnx").unlink()
    assert track(tree, f"onnx_dir={folder}") == 2
    assert "filter_step.onnx: missing" in error_line(capsys)


def test_an_export_of_an_older_manifest_version_asks_for_a_new_export(tree, capsys):
    folder = fake_export(tree[2] / "export", tree[1])
    manifest = folder / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"version": {VERSION}', f'"version": {VERSION - 1}'))
    assert track(tree, f"onnx_dir={folder}") == 2
    line = error_line(capsys)
    assert f"manifest of version {VERSION - 1}, this ebmtrack reads version {VERSION}" in line
    assert "export again: python -m pytracking.export_onnx dimp nce_plus_tiny" in line


def test_a_manifest_without_its_box_window_is_malformed(tree, capsys):
    folder = fake_export(tree[2] / "export", tree[1])
    manifest = folder / "manifest.json"
    data = json.loads(manifest.read_text())
    data["box_window"] = {"strides": [8, 12], "halos": [2, 2]}  # 8 does not divide 12
    manifest.write_text(json.dumps(data))
    assert track(tree, f"onnx_dir={folder}") == 2
    assert "malformed manifest" in error_line(capsys)
    del data["box_window"]
    manifest.write_text(json.dumps(data))
    assert track(tree, f"onnx_dir={folder}") == 2
    assert "malformed manifest" in error_line(capsys)


def test_compile_or_a_gpu_do_not_go_with_onnxruntime(tree, capsys):
    folder = fake_export(tree[2] / "export", tree[1])
    assert track(tree, f"onnx_dir={folder}", "compile=true") == 2
    assert "compile applies to backend=torch only" in error_line(capsys)


def test_missing_extra_is_one_line_naming_the_pip_command(tree, capsys, monkeypatch):
    folder = fake_export(tree[2] / "export", tree[1])
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    assert track(tree, f"onnx_dir={folder}") == 2
    assert "pip install 'ebmtrack[onnx]'" in error_line(capsys)
    monkeypatch.setitem(sys.modules, "onnx", None)
    assert export_main(["dimp", "nce_plus_tiny", "--net", str(tree[1]), "--out", str(tree[2] / "out")]) == 2
    assert "pip install 'ebmtrack[onnx]'" in error_line(capsys)
    assert not (tree[2] / "out").exists()


def test_export_command_errors_before_any_export(tree, capsys):
    tmp = tree[2]
    assert (
        export_main(["dimp", "nce_plus_tiny", "--net", str(tmp / "none.pth"), "--out", str(tmp / "o")]) == 2
    )
    assert "none.pth" in error_line(capsys)
    assert export_main(["dimp", "no_such_set", "--net", str(tree[1]), "--out", str(tmp / "o")]) == 2
    assert "no_such_set" in error_line(capsys)
    assert (
        export_main(["dimp", "nce_plus_tiny", "bogus=1", "--net", str(tree[1]), "--out", str(tmp / "o")]) == 2
    )
    assert "bogus" in error_line(capsys)
    assert not (tmp / "o").exists()


def test_backend_must_be_torch_or_onnxruntime():
    from pytracking.tracker.dimp import DiMPParams

    with pytest.raises(ValueError, match="backend must be 'torch' or 'onnxruntime'"):
        DiMPParams(train_setting="nce_plus_tiny", backend="tensorrt")
