"""Writing the synthetic set in the LaSOT / OTB layouts, reading it back, and the default test set."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from ltr.dataset.base import DatasetError
from ltr.dataset.folder import FolderDataset
from ltr.dataset.lasot import LasotDataset
from ltr.dataset.synthetic import SPLITS, ensure_default_test_set, ensure_written, main, synthetic_dataset
from ltr.dataset.synthetic_io import write_dataset
from ltr.dataset.synthetic_render import build_assets, render_frame
from ltr.dataset.synthetic_scene import SyntheticConfig, sequence_names, simulate

#: Fast motion and every event switched on, so 20 frames hold out-of-view and occluded frames.
TINY = SyntheticConfig(
    width=96,
    height=72,
    num_frames=20,
    speed=(0.01, 0.02),
    out_of_view_prob=1.0,
    occlusion_prob=1.0,
    full_occlusion_prob=0.7,
)
N = TINY.num_frames
SEED = 19


def _read_rgb(path) -> np.ndarray:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert image is not None, path
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def _parse_rows(text: str) -> np.ndarray:
    return np.array([[float(v) for v in line.split(",")] for line in text.splitlines()])


@pytest.fixture(scope="module")
def lasot_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic_lasot")
    write_dataset(root, layout="lasot", num_sequences=3, seed=SEED, config=TINY, workers=0, progress=False)
    return root


@pytest.fixture(scope="module")
def otb_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic_otb")
    write_dataset(root, layout="otb", num_sequences=3, seed=SEED, config=TINY, workers=0, progress=False)
    return root


def test_lasot_layout_files_and_formats(lasot_root):
    names = sequence_names(SEED, 3)
    assert sorted(p.name for p in lasot_root.iterdir()) == sorted({cls for cls, _ in names})
    for index, (cls, name) in enumerate(names):
        folder = lasot_root / cls / name
        assert sorted(p.name for p in folder.iterdir()) == [
            "full_occlusion.txt",
            "groundtruth.txt",
            "img",
            "nlp.txt",
            "out_of_view.txt",
        ]
        assert sorted(p.name for p in (folder / "img").iterdir()) == [f"{i:08d}.jpg" for i in range(1, N + 1)]
        scene = simulate(TINY, SEED, index)
        boxes = _parse_rows((folder / "groundtruth.txt").read_text())
        assert boxes.shape == (N, 4)
        np.testing.assert_allclose(boxes, scene.boxes, atol=1e-9)
        for fname, flags in (
            ("full_occlusion.txt", scene.full_occlusion),
            ("out_of_view.txt", scene.out_of_view),
        ):
            lines = (folder / fname).read_text().splitlines()
            assert len(lines) == 1
            assert lines[0].split(",") == [str(int(f)) for f in flags]
        nlp = (folder / "nlp.txt").read_text().splitlines()
        assert len(nlp) == 1 and nlp[0] == scene.description and scene.target.shape.kind in nlp[0]
        # Frame i+1 on disk is rendered frame i (JPEG: close, not equal; JPEG drops the sensor noise).
        assets = build_assets(scene)
        rendered = [render_frame(scene, assets, t).astype(int) for t in (0, N - 1)]
        for t, own, other in ((0, rendered[0], rendered[1]), (N - 1, rendered[1], rendered[0])):
            disk = _read_rgb(folder / "img" / f"{t + 1:08d}.jpg").astype(int)
            assert disk.shape == (72, 96, 3)
            assert np.abs(disk - own).mean() < 8.0
            assert np.abs(disk - own).mean() < 0.6 * np.abs(disk - other).mean()


def test_otb_layout_files_and_formats(otb_root):
    names = sequence_names(SEED, 3)
    assert sorted(p.name for p in otb_root.iterdir()) == sorted(name for _, name in names)
    for index, (_, name) in enumerate(names):
        folder = otb_root / name
        assert sorted(p.name for p in folder.iterdir()) == [
            "absent.label",
            "attributes.json",
            "groundtruth_rect.txt",
            "img",
        ]
        assert sorted(p.name for p in (folder / "img").iterdir()) == [f"{i:04d}.jpg" for i in range(1, N + 1)]
        scene = simulate(TINY, SEED, index)
        np.testing.assert_allclose(_parse_rows((folder / "groundtruth_rect.txt").read_text()), scene.boxes)
        absent = (folder / "absent.label").read_text().splitlines()
        assert absent == [str(int(not v)) for v in scene.visible]
        attributes = json.loads((folder / "attributes.json").read_text())
        assert attributes["occlusion"] == scene.occlusion.astype(int).tolist()
        assert attributes["class"] == scene.class_name


def test_written_sets_hold_invisible_frames(lasot_root, otb_root):
    # The flag round trips below compare non-trivial columns: both kinds of invisible frames occur.
    scenes = [simulate(TINY, SEED, i) for i in range(3)]
    assert any(s.out_of_view.any() for s in scenes) and any(s.full_occlusion.any() for s in scenes)


def test_folder_reader_reads_back_the_otb_copy(otb_root):
    ds = FolderDataset(otb_root)
    assert sorted(ds.sequence_names()) == sorted(name for _, name in sequence_names(SEED, 3))
    memory = synthetic_dataset(seed=SEED, num_sequences=3, **TINY.to_dict())
    for name in memory.sequence_names():
        disk, mem = ds.get_sequence(name), memory.get_sequence(name)
        assert len(disk) == len(mem) == N
        np.testing.assert_allclose(disk.boxes, mem.boxes, atol=1e-9)
        np.testing.assert_array_equal(disk.visible, mem.visible)
        np.testing.assert_array_equal(disk.attributes["occlusion"], mem.attributes["occlusion"].astype(int))
        assert np.abs(disk.frame(3).astype(int) - mem.frame(3).astype(int)).mean() < 8.0
    # The registry factory with a root is the same reader.
    from_factory = synthetic_dataset(root=otb_root)
    assert isinstance(from_factory, FolderDataset)
    assert sorted(from_factory.sequence_names()) == sorted(ds.sequence_names())


def test_lasot_reader_reads_back_the_lasot_copy(lasot_root):
    ds = LasotDataset(lasot_root, split="all")
    memory = synthetic_dataset(seed=SEED, num_sequences=3, **TINY.to_dict())
    assert sorted(ds.sequence_names()) == sorted(memory.sequence_names())
    for name in memory.sequence_names():
        disk, mem = ds.get_sequence(name), memory.get_sequence(name)
        np.testing.assert_allclose(disk.boxes, mem.boxes, atol=1e-9)
        np.testing.assert_array_equal(disk.visible, mem.visible)
        np.testing.assert_array_equal(disk.attributes["out_of_view"], mem.attributes["out_of_view"])
        np.testing.assert_array_equal(disk.attributes["full_occlusion"], mem.attributes["full_occlusion"])
        assert disk.attributes["class"] == mem.attributes["class"]
        assert disk.attributes["language"] == mem.attributes["language"]
        assert _read_rgb(disk.frame_paths[0]).shape == (72, 96, 3)
    # The registry factory with a root recognises the LaSOT layout.
    assert isinstance(synthetic_dataset(root=lasot_root), LasotDataset)


def test_synthetic_dir_names_a_written_test_copy(otb_root, tmp_path, monkeypatch):
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "no-paths.json"))
    monkeypatch.setenv("SYNTHETIC_DIR", str(otb_root))
    assert isinstance(synthetic_dataset(), FolderDataset)
    assert not isinstance(synthetic_dataset(split="train"), FolderDataset)  # only the test split is on disk
    monkeypatch.delenv("SYNTHETIC_DIR")
    assert not isinstance(synthetic_dataset(), FolderDataset)


def test_ensure_written_is_idempotent_and_refuses_foreign_folders(tmp_path):
    folder = tmp_path / "ws" / "synthetic_otb"
    kwargs = dict(layout="otb", seed=SEED, num_sequences=2, config=TINY, workers=0, progress=False)
    assert ensure_written(folder, **kwargs) == folder
    marker = folder / ".synthetic_complete.json"
    first = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    assert marker in first and len(first) == 2 * (N + 3) + 1
    ensure_written(folder, **kwargs)
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()} == first  # nothing rewritten
    # An interrupted write (no marker) is completed; a stale marker (other parameters) is rewritten afresh.
    marker.unlink()
    ensure_written(folder, **kwargs)
    assert marker.is_file()
    ensure_written(folder, **{**kwargs, "num_sequences": 1})
    assert len([p for p in folder.iterdir() if p.is_dir()]) == 1
    assert json.loads(marker.read_text())["num_sequences"] == 1
    foreign = tmp_path / "other"
    (foreign / "holiday_photos").mkdir(parents=True)
    with pytest.raises(DatasetError, match="unexpected entries"):
        ensure_written(foreign, **kwargs)


def test_command_line_writes_a_set(tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["--out", str(out), "--sequences", "2", "--frames", "4", "--seed", "3", "--layout", "otb"]
    assert main([*args, "--width", "64", "--height", "48", "--workers", "1", "--no-progress"]) == 0
    assert "wrote 2 sequences / 8 frames" in capsys.readouterr().out
    ds = FolderDataset(out)
    assert len(ds) == 2
    seq = ds.get_sequence(ds.sequence_names()[0])
    assert len(seq) == 4 and _read_rgb(seq.frame_paths[0]).shape == (48, 64, 3)
    with pytest.raises(SystemExit):
        main(["--out", str(out), "--layout", "coco"])
    capsys.readouterr()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(blocker / "set"), "--layout", "otb", "--no-progress"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == f"error: cannot create --out {blocker / 'set'}: Not a directory\n"


def test_process_pool_writes_identical_files(tmp_path, otb_root):
    # Worker processes (spawned: fresh interpreters) produce byte-identical files to the in-process writer.
    config = dict(layout="otb", seed=SEED, config=TINY, progress=False)
    write_dataset(tmp_path / "pool", num_sequences=2, workers=2, **config)
    for _, name in sequence_names(SEED, 2):
        files = sorted(p.relative_to(otb_root / name) for p in (otb_root / name).rglob("*") if p.is_file())
        assert len(files) == N + 3
        for rel in files:
            assert (tmp_path / "pool" / name / rel).read_bytes() == (otb_root / name / rel).read_bytes(), rel


@pytest.mark.slow
def test_default_test_set_on_disk_matches_memory(tmp_path):
    folder = ensure_default_test_set(tmp_path, progress=False)
    assert folder == tmp_path / "datasets" / "synthetic_otb"
    disk, memory = FolderDataset(folder), synthetic_dataset()
    assert len(disk) == len(memory) == SPLITS["test"][1]
    for name in memory.sequence_names()[:5]:
        np.testing.assert_allclose(disk.get_sequence(name).boxes, memory.get_sequence(name).boxes)
        np.testing.assert_array_equal(disk.get_sequence(name).visible, memory.get_sequence(name).visible)
    assert ensure_default_test_set(tmp_path, progress=False) == folder
