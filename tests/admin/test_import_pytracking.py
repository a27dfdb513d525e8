"""The pytracking converter: conversions of files in pytracking's format, safe loading, every refusal.

The files are written here in pytracking's layout (``tests/golden/pytracking_format.py``); most use a
CPU-sized network with pytracking's key names (the ``tiny`` preset below: DiMP-50's structure checks, a
narrow network), so each conversion takes a fraction of a second. The published networks' own key names
and sizes are checked against pytracking's network in ``tests/models/test_pytracking_golden_network.py``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import sys
import zipfile
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from ltr.admin import import_pytracking
from ltr.admin.checkpoint import load_checkpoint
from ltr.admin.config import from_dict, to_dict
from ltr.admin.import_pytracking import (
    ALLOWED_GLOBALS,
    PRESETS,
    Constructor,
    PytrackingFormatError,
    check_constructor,
    convert,
    expected_state,
    main,
    net_config,
    read_pytracking_file,
    train_config,
)
from ltr.admin.registry import Registry
from ltr.models.target_classifier import SteepestDescentNewtonKL
from ltr.models.tracking import NetConfig
from ltr.train_settings.dimp import SETTINGS, DiMPTrainConfig
from pytracking.tracker.dimp.network import load_network
from pytracking.tracker.dimp.params import geometry_from_train_config
from tests.golden.pytracking_format import (
    DIMP50_KWDS,
    PRDIMP50_KWDS,
    SUPER_DIMP_KWDS,
    NetConstructor,
    Settings,
    net_constructor,
    save,
    write_pytracking_checkpoint,
)

#: SuperDiMP's checks and geometry on a narrow ResNet-50 (stem 4, layer3 64 channels) and box head.
TINY = dataclasses.replace(
    PRESETS["super_dimp"],
    name="tiny",
    net={
        **PRESETS["super_dimp"].net,
        "backbone_width": 4,
        "clf_feature_dim": 8,
        "box_ref_channels": (4, 8),
        "box_mod_channels": (8, 8),
        "box_linear_channels": (8, 8),
    },
)
#: pytracking's entries that the tracker never runs (the backbone's layer4 and ImageNet classifier).
DROPPED = {
    "feature_extractor.layer4.0.conv1.weight": (8, 64, 1, 1),
    "feature_extractor.layer4.0.bn1.running_var": (8,),
    "feature_extractor.fc.weight": (1000, 128),
    "feature_extractor.fc.bias": (1000,),
}


def _theirs(ours: str) -> str:
    for theirs, prefix in TINY.key_map:
        if ours.startswith(prefix):
            return theirs + ours[len(prefix) :]
    raise AssertionError(f"no pytracking name for {ours}")


def tiny_state(seed: int = 0) -> OrderedDict[str, torch.Tensor]:
    """A pytracking-named state dict of the tiny network (random values), layer4 / fc entries included."""
    gen = torch.Generator().manual_seed(seed)
    state: OrderedDict[str, torch.Tensor] = OrderedDict()
    for ours, want in expected_state(TINY).items():
        if want.is_floating_point():
            state[_theirs(ours)] = torch.randn(want.shape, generator=gen)
        else:
            state[_theirs(ours)] = torch.tensor(3)
    for key, shape in DROPPED.items():
        state[key] = torch.randn(shape, generator=gen)
    return state


def _write(tmp_path: Path, name: str = "model.pth.tar", state=None, **kwargs) -> Path:
    return write_pytracking_checkpoint(tmp_path / name, tiny_state() if state is None else state, **kwargs)


def _refused(path: Path, preset=TINY) -> str:
    with pytest.raises(PytrackingFormatError) as info:
        convert(path, path.parent / "out.pth.tar", preset)
    message = str(info.value)
    assert str(path) in message  # every refusal names the file
    assert not (path.parent / "out.pth.tar").exists()
    return message


# ----------------------------------------------------------------------------------------------------
# Conversions


@pytest.mark.parametrize(
    ("legacy", "package"),
    [
        (False, "ltr.admin"),
        (True, "ltr.admin"),
        (False, "dlframework.common.utils"),
        (True, "dlframework.common.utils"),
    ],
)
def test_converts_pytracking_files_of_both_pytorch_formats_and_module_paths(tmp_path, legacy, package):
    state = tiny_state()
    src = _write(tmp_path, state=state, legacy=legacy, package=package, kwds=SUPER_DIMP_KWDS)
    dst = convert(src, tmp_path / "out" / "tiny.pth.tar", TINY)
    ckpt = load_checkpoint(dst)
    expected = expected_state(TINY)
    assert list(ckpt["net"]) == list(expected)
    for ours, tensor in ckpt["net"].items():
        if ours.endswith("num_batches_tracked"):
            assert tensor.dtype == torch.int64 and int(tensor) == 3
        else:
            assert torch.equal(tensor, state[_theirs(ours)]), ours
    assert not any(k.startswith("backbone.layer4") for k in ckpt["net"])
    assert ckpt["setting"] == "pytracking/tiny" and ckpt["epoch"] == 50
    info = ckpt["imported_from"]
    assert info["fun_name"] == "dimpnet50" and info["kwds"]["frozen_backbone_layers"][-1] == "layer2"
    assert info["dropped_tensors"] == len(DROPPED)
    assert set(info["dropped_records"]) == {
        "actor_type",
        "net_type",
        "net_info",
        "optimizer",
        "stats",
        "settings",
    }
    # the config is a full train config, the network rebuilds from it and the tracker's loader reads the file
    config = from_dict(DiMPTrainConfig, ckpt["config"])
    assert dataclasses.asdict(config.net) == dataclasses.asdict(net_config(TINY))
    loaded = load_network(dst)
    assert loaded.geometry.crop_size == 352 and loaded.geometry.crop_mode == "inside_major"
    images = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        feats = loaded.net.extract_backbone_features(images)
    assert feats["layer3"].shape == (1, 64, 4, 4)
    # the stand-ins are bound to pytracking's names in the allow-list only: no such module was imported
    assert "ltr.admin.model_constructor" not in sys.modules
    assert not any(m.startswith("dlframework") for m in sys.modules)


def test_file_without_trainer_records_and_old_batchnorm_entries_converts(tmp_path):
    state = tiny_state()
    for key in [k for k in state if k.endswith("num_batches_tracked")]:
        del state[key]  # files of PyTorch < 0.4.1 have no BatchNorm counters
    state["bb_regressor.iou_predictor.weight"] = state["bb_regressor.iou_predictor.weight"].half()
    src = _write(tmp_path, "super_dimp.pth.tar", state=state, records=False, kwds=SUPER_DIMP_KWDS)
    ckpt = load_checkpoint(convert(src, tmp_path / "out.pth.tar", TINY))
    assert ckpt["epoch"] == 0 and ckpt["imported_from"]["dropped_records"] == []
    counters = [v for k, v in ckpt["net"].items() if k.endswith("num_batches_tracked")]
    assert counters and all(int(v) == 0 for v in counters)
    predictor = ckpt["net"]["box_head.predictor.weight"]
    assert predictor.dtype == torch.float32
    assert torch.equal(predictor, state["bb_regressor.iou_predictor.weight"].float())


@pytest.mark.parametrize("name", ["dimp50", "super_dimp"])
def test_published_presets_describe_pytrackings_networks_and_crop_geometry(name):
    preset = PRESETS[name]
    config = train_config(preset)
    # the stored config is a complete, round-tripping train config
    plain = to_dict(config)
    assert to_dict(from_dict(DiMPTrainConfig, plain)) == plain
    geometry = geometry_from_train_config(plain)
    if name == "dimp50":
        assert (geometry.crop_size, geometry.search_area_factor, geometry.crop_mode) == (
            288,
            5.0,
            "replicate",
        )
        assert math.isinf(geometry.max_scale_change)
        assert config.net.label_init_sigma == pytest.approx(0.9)
    else:
        assert (geometry.crop_size, geometry.search_area_factor, geometry.crop_mode) == (
            352,
            6.0,
            "inside_major",
        )
        assert geometry.max_scale_change == 1.5
        # SuperDiMP's network is the toolkit's DiMP-NCE+ network: a SuperDiMP file can start its training
        assert config.net == dataclasses.replace(SETTINGS["nce_plus"]().net, pretrained=False)
    assert config.data.feature_size * config.data.feature_stride == config.data.crop_size
    # ResNet-50 up to layer3 + classifier + box head: the 345 tensors of pytracking's network minus layer4/fc
    assert len(expected_state(preset)) == 345
    assert config.net.pretrained is False and isinstance(config.net, NetConfig)


def test_preset_is_taken_from_the_published_file_name(tmp_path):
    for name, kwds in (("dimp50.pth", DIMP50_KWDS), ("super_dimp.pth.tar", SUPER_DIMP_KWDS)):
        src = _write(tmp_path, name, kwds=kwds)
        with pytest.raises(PytrackingFormatError, match="has shape"):  # the tiny tensors are not DiMP-50's
            convert(src, tmp_path / "out.pth.tar")
    src = _write(tmp_path, "my_model.pth")
    with pytest.raises(PytrackingFormatError, match=r"pass --preset \(dimp50\|super_dimp"):
        convert(src, tmp_path / "out.pth.tar")


def test_cli_converts_and_reports_errors_in_one_line(tmp_path, capsys, monkeypatch):
    src = _write(tmp_path, kwds=SUPER_DIMP_KWDS)
    # offered by --preset like the published ones
    monkeypatch.setattr(import_pytracking, "PRESETS", Registry(PRESETS.kind, {**PRESETS, "tiny": TINY}))
    assert main([str(src), str(tmp_path / "ok.pth.tar"), "--preset", "tiny"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'ok.pth.tar'}"
    assert load_checkpoint(tmp_path / "ok.pth.tar")["setting"] == "pytracking/tiny"
    assert main([str(src), str(tmp_path / "bad.pth.tar"), "--preset", "super_dimp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert str(src) in err and "feature_extractor.conv1.weight" in err and "has shape" in err
    assert not (tmp_path / "bad.pth.tar").exists()
    assert main([str(tmp_path / "missing.pth"), str(tmp_path / "x.pth.tar"), "--preset", "dimp50"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no such file" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as info:  # argparse's own usage error
        main([str(src), str(tmp_path / "x.pth.tar"), "--preset", "unknown"])
    assert info.value.code == 2
    with pytest.raises(ValueError, match=r"unknown pytracking preset 'unknown'; choose one of \['dimp50', "):
        convert(src, tmp_path / "x.pth.tar", "unknown")


# ----------------------------------------------------------------------------------------------------
# Refusals: architecture


def test_refuses_another_architecture(tmp_path):
    message = _refused(_write(tmp_path, fun_name="klcedimpnet50"))
    assert "ltr.models.tracking.dimpnet.klcedimpnet50" in message and "another architecture" in message
    message = _refused(_write(tmp_path, fun_module="ltr.models.tracking.tompnet", fun_name="tompnet50"))
    assert "tompnet50" in message


def test_refuses_structural_arguments_that_differ(tmp_path):
    message = _refused(_write(tmp_path, kwds={**DIMP50_KWDS, "out_feature_dim": 256}))
    assert "out_feature_dim=256" in message and "out_feature_dim=512" in message
    kwds = {k: v for k, v in DIMP50_KWDS.items() if k != "num_dist_bins"}
    message = _refused(_write(tmp_path, kwds=kwds))
    assert "num_dist_bins=5 (pytracking's default)" in message
    message = _refused(_write(tmp_path, kwds={**DIMP50_KWDS, "score_act": "bentpar"}))
    assert "score_act='bentpar'" in message


def test_refuses_unknown_keyword_and_positional_arguments(tmp_path):
    message = _refused(_write(tmp_path, kwds={**DIMP50_KWDS, "num_layers": 3}))
    assert "'num_layers'" in message
    message = _refused(_write(tmp_path, args=(4,)))
    assert "positional" in message


def test_old_dlframework_function_module_is_accepted_and_other_modules_are_not(tmp_path):
    src = _write(tmp_path, fun_module="dlframework.ltr.models.tracking.dimpnet")
    assert load_checkpoint(convert(src, tmp_path / "ok.pth.tar", TINY))["imported_from"]["fun_module"] == (
        "dlframework.ltr.models.tracking.dimpnet"
    )
    message = _refused(_write(tmp_path, fun_module="mytracker.models"))
    assert "mytracker.models.dimpnet50" in message


# ----------------------------------------------------------------------------------------------------
# Refusals: tensors


def test_refuses_a_missing_tensor(tmp_path):
    state = tiny_state()
    del state["bb_regressor.iou_predictor.bias"]
    message = _refused(_write(tmp_path, state=state))
    assert "missing tensor 'bb_regressor.iou_predictor.bias'" in message


def test_refuses_a_mis_shaped_tensor(tmp_path):
    state = tiny_state()
    state["classifier.filter_optimizer.label_map_predictor.weight"] = torch.zeros(1, 50, 1, 1)
    message = _refused(_write(tmp_path, state=state))
    assert "'classifier.filter_optimizer.label_map_predictor.weight' has shape (1, 50, 1, 1)" in message
    assert "(1, 100, 1, 1)" in message


def test_refuses_an_unexpected_tensor_and_a_wrong_dtype(tmp_path):
    state = tiny_state()
    state["bb_regressor.extra_head.weight"] = torch.zeros(3)
    message = _refused(_write(tmp_path, state=state))
    assert "unexpected tensor 'bb_regressor.extra_head.weight'" in message
    state = tiny_state()
    state["bb_regressor.iou_predictor.bias"] = torch.zeros(1, dtype=torch.int32)
    message = _refused(_write(tmp_path, state=state))
    assert "'bb_regressor.iou_predictor.bias' has dtype torch.int32" in message


# ----------------------------------------------------------------------------------------------------
# Refusals: layout and foreign objects


def test_refuses_other_layouts(tmp_path):
    message = _refused(_write(tmp_path, extra={"model_ema": {"a": 1}}))
    assert "unexpected key 'model_ema'" in message
    bare = tmp_path / "bare.pth"
    torch.save(tiny_state(), bare)  # a bare state dict: no constructor to check
    assert "unexpected key" in _refused(bare)
    no_constructor = tmp_path / "noc.pth"
    torch.save({"net": tiny_state(), "epoch": 3}, no_constructor)
    assert "no 'constructor' entry" in _refused(no_constructor)
    wrong = tmp_path / "wrong.pth"
    save({"net": tiny_state(), "constructor": Settings()}, wrong)
    assert "'constructor' is a pytracking Settings object" in _refused(wrong)
    listed = tmp_path / "list.pth"
    torch.save([1, 2], listed)
    assert "top level is a list" in _refused(listed)
    not_state = tmp_path / "notstate.pth"
    save(
        {"net": {"a": 1}, "constructor": net_constructor("dimpnet50", "ltr.models.tracking.dimpnet", {})},
        not_state,
    )
    assert "'net' entry 'a' is a int" in _refused(not_state)


def test_refuses_a_constructor_with_other_attributes(tmp_path):
    path = tmp_path / "ctor.pth"
    ctor = NetConstructor()
    ctor.__dict__.update(fun_name="dimpnet50", fun_module="ltr.models.tracking.dimpnet", kwds={})
    save({"net": tiny_state(), "constructor": ctor}, path)
    assert "the NetConstructor holds ['fun_module', 'fun_name', 'kwds']" in _refused(path)


class Unrelated:
    """A harmless class that no pytracking checkpoint holds."""

    def __init__(self) -> None:
        self.x = 1


def test_refuses_files_holding_other_classes(tmp_path):
    message = _refused(_write(tmp_path, extra={"settings": Unrelated()}))
    assert f"{__name__}.Unrelated" in message and "refused" in message
    message = _refused(_write(tmp_path, kwds={**DIMP50_KWDS, "filter_size": Unrelated()}))
    assert "Unrelated" in message


class _WritesMarker:
    """Unpickling this would run ``exec`` (or ``os.system``) and create the marker file."""

    def __init__(self, marker: Path, how: str) -> None:
        self.marker, self.how = marker, how

    def __reduce__(self):
        if self.how == "exec":
            return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("how", ["exec", "system"])
@pytest.mark.parametrize("where", ["settings", "constructor", "net"])
def test_malicious_pickle_is_refused_and_never_runs(tmp_path, how, where):
    marker = tmp_path / "marker"
    evil = _WritesMarker(marker, how)
    path = tmp_path / "evil.pth.tar"
    if where == "settings":
        _write(tmp_path, "evil.pth.tar", extra={"settings": evil})
    elif where == "constructor":
        torch.save({"net": tiny_state(), "constructor": evil}, path)
    else:
        state = tiny_state()
        torch.save({"net": state, "constructor": None, "optimizer": {"state": {0: evil}}}, path)
    # the pickle really would run it: a plain unpickler creates the marker (proof the test file is armed)
    with zipfile.ZipFile(path) as archive:
        data_pkl = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        raw = archive.read(data_pkl)
    assert (b"exec" if how == "exec" else b"system") in raw
    message = _refused(path)
    assert "refused" in message and ("exec" in message or "system" in message)
    assert not marker.exists()


def test_the_allowed_names_cannot_be_used_to_call_anything(tmp_path):
    """A pickle that calls NetConstructor(...) (REDUCE) instead of restoring it is refused: the stand-in
    is data only and has no constructor."""
    path = tmp_path / "call.pth"

    class Calls:
        def __reduce__(self):
            return (NetConstructor, ("os", "system"))

    save({"net": tiny_state(), "constructor": Calls()}, path)
    message = _refused(path)
    assert "calls pytracking's NetConstructor(...)" in message
    for cls in ALLOWED_GLOBALS.values():
        with pytest.raises(TypeError):
            cls("x")


def test_refuses_files_that_are_no_pytorch_checkpoints(tmp_path):
    cases = {
        "empty.pth": b"",
        "text.pth": b"dimpnet50 weights\n",
        "random.pth": bytes(range(256)) * 4,
        "pickle.pth": pickle.dumps({"net": 1}, protocol=4)[:-1],  # truncated plain pickle
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        message = _refused(path)
        assert "not a PyTorch checkpoint file" in message or "refused" in message, (name, message)
    archive = tmp_path / "archive.pth"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("readme.txt", "not a checkpoint")
    assert "not a PyTorch checkpoint file" in _refused(archive)
    assert "no such file" in _refused(tmp_path / "missing.pth")


def test_reading_keeps_only_what_the_conversion_uses(tmp_path):
    src = _write(tmp_path, kwds=SUPER_DIMP_KWDS)
    loaded = read_pytracking_file(src)
    assert loaded.constructor.fun_name == "dimpnet50" and loaded.constructor.args == ()
    assert loaded.constructor.kwds == SUPER_DIMP_KWDS
    assert loaded.epoch == 50 and "settings" in loaded.dropped_records
    assert set(loaded.state) == set(tiny_state())


# ----------------------------------------------------------------------------------------------------
# PrDiMP-50 (klcedimpnet50: DiMP-50's network with PrDiMP's Newton/KL filter optimizer)

#: PrDiMP-50's checks, optimizer and geometry on the tiny widths.
TINY_PRDIMP = dataclasses.replace(
    PRESETS["prdimp50"],
    name="tiny_prdimp",
    net={
        **PRESETS["prdimp50"].net,
        **{
            k: v for k, v in TINY.net.items() if k == "clf_feature_dim" or k.endswith(("_width", "_channels"))
        },
    },
)
#: DiMP's optimizer tensors, which PrDiMP's optimizer does not have.
GN_OPTIMIZER_KEYS = (
    "classifier.filter_optimizer.label_map_predictor.weight",
    "classifier.filter_optimizer.target_mask_predictor.0.weight",
    "classifier.filter_optimizer.spatial_weight_predictor.weight",
)


def tiny_prdimp_state(seed: int = 0) -> OrderedDict[str, torch.Tensor]:
    state = tiny_state(seed)
    for key in GN_OPTIMIZER_KEYS:
        del state[key]
    return state


def test_prdimp50_preset_is_dimp50_with_the_newton_optimizer():
    preset = PRESETS["prdimp50"]
    config = train_config(preset)
    plain = to_dict(config)
    assert to_dict(from_dict(DiMPTrainConfig, plain)) == plain
    geometry = geometry_from_train_config(plain)
    # pytracking's prdimp50 parameter file tracks with SuperDiMP's crops
    assert (geometry.crop_size, geometry.search_area_factor, geometry.crop_mode) == (352, 6.0, "inside_major")
    assert geometry.max_scale_change == 1.5
    net = config.net
    assert net.filter_optimizer == "newton_kl"
    assert (net.optim_min_reg, net.kl_label_sigma, net.kl_alpha_eps, net.kl_normalize_label) == (
        0.05,
        pytest.approx(0.9),
        0.05,
        True,
    )
    assert net.kl_softmax_reg is None  # the tracker's softmax preprocessing is then the plain softmax
    # DiMP-50's tensors minus the three label / mask / weight predictors of DiMP's optimizer
    ours = expected_state(preset)
    assert len(ours) == len(expected_state(PRESETS["dimp50"])) - 3 == 342
    assert {k for k in ours if k.startswith("classifier.optimizer.")} == {
        "classifier.optimizer.log_step_length",
        "classifier.optimizer.filter_reg",
    }
    # the published setting's arguments pass the checks
    check_constructor(
        Constructor("klcedimpnet50", "ltr.models.tracking.dimpnet", (), PRDIMP50_KWDS), preset, "f"
    )


def test_converts_a_prdimp50_file_and_the_tracker_loads_its_newton_optimizer(tmp_path):
    state = tiny_prdimp_state()
    state["classifier.filter_optimizer.filter_reg"] = torch.tensor([0.07])
    src = _write(tmp_path, "prdimp50.pth.tar", state=state, fun_name="klcedimpnet50", kwds=PRDIMP50_KWDS)
    ckpt = load_checkpoint(convert(src, tmp_path / "out.pth.tar", TINY_PRDIMP))
    assert ckpt["imported_from"]["fun_name"] == "klcedimpnet50"
    assert torch.equal(ckpt["net"]["classifier.optimizer.filter_reg"], torch.tensor([0.07]))
    loaded = load_network(tmp_path / "out.pth.tar")
    opt = loaded.net.classifier.optimizer
    assert isinstance(opt, SteepestDescentNewtonKL)
    assert (opt.min_filter_reg, opt.alpha_eps, opt.normalize_label, opt.softmax_reg) == (
        0.05,
        0.05,
        True,
        None,
    )
    assert opt.label_sigma == pytest.approx(0.9) and opt.filter_reg.item() == pytest.approx(0.07)
    assert loaded.geometry.crop_size == 352


def test_prdimp50_refusals(tmp_path):
    dimp_state, prdimp_state = tiny_state(), tiny_prdimp_state()
    stub = {"feature_extractor.conv1.weight": torch.zeros(1)}  # the arguments are checked before the tensors
    # a DiMP-50 file under PrDiMP's preset, and a PrDiMP file under DiMP-50's
    message = _refused(_write(tmp_path, state=dimp_state, kwds=DIMP50_KWDS), TINY_PRDIMP)
    assert "dimpnet50" in message and "another architecture" in message
    src = _write(tmp_path, state=prdimp_state, fun_name="klcedimpnet50", kwds=PRDIMP50_KWDS)
    assert "klcedimpnet50" in _refused(src, TINY)
    # DiMP's optimizer tensors in a PrDiMP file
    src = _write(tmp_path, state=dimp_state, fun_name="klcedimpnet50", kwds=PRDIMP50_KWDS)
    assert "unexpected tensor 'classifier.filter_optimizer.label_map_predictor.weight'" in _refused(
        src, TINY_PRDIMP
    )
    # optimizer hyper-parameters that act while tracking must be PrDiMP-50's
    for key, value in (("softmax_reg", 1.0), ("gauss_sigma", 1.0), ("optim_min_reg", 1e-3)):
        kwds = {**PRDIMP50_KWDS, key: value}
        src = _write(tmp_path, state=stub, fun_name="klcedimpnet50", kwds=kwds, records=False)
        message = _refused(src, TINY_PRDIMP)
        assert f"{key}={value!r}" in message, message
    kwds = {k: v for k, v in PRDIMP50_KWDS.items() if k != "alpha_eps"}
    src = _write(tmp_path, state=stub, fun_name="klcedimpnet50", kwds=kwds, records=False)
    assert "alpha_eps=0.0 (pytracking's default)" in _refused(src, TINY_PRDIMP)


def test_a_missing_file_is_named_before_anything_else(tmp_path, capsys):
    assert main([str(tmp_path / "super_dimp.pth.tar"), str(tmp_path / "out.ckpt")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'super_dimp.pth.tar'}: no such file"
    assert main([str(tmp_path / "nameless"), str(tmp_path / "out.ckpt")]) == 2
    assert "no such file" in capsys.readouterr().err
