"""load_network turns every mismatch between a checkpoint file and the network it describes into one
CheckpointError line naming the file and the key."""

import pytest

from ltr.admin.checkpoint import CheckpointError
from pytracking.evaluation.tracker_spec import TrackerSpec, parameter_mismatch, prepare_spec
from pytracking.tracker.dimp.network import load_network, random_network
from tests.tracker.bad_checkpoints import BAD_CHECKPOINTS
from tests.tracker.helpers import CROP, write_tiny_checkpoint


@pytest.mark.parametrize("case", sorted(BAD_CHECKPOINTS))
def test_bad_checkpoints_are_one_line_errors_naming_the_file(tmp_path, case):
    path, fragment = BAD_CHECKPOINTS[case](tmp_path)
    with pytest.raises(CheckpointError) as err:
        load_network(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and fragment in message
    assert "\n" not in message


def test_mismatched_weights_are_counted_and_the_first_named(tmp_path):
    path, _ = BAD_CHECKPOINTS["weights_do_not_fit"](tmp_path)
    with pytest.raises(
        CheckpointError, match=r"tensor\(s\) of another shape, checkpoint != network \(first: "
    ):
        load_network(path)


def test_a_good_checkpoint_loads_with_its_setting_and_config(tmp_path):
    loaded = load_network(write_tiny_checkpoint(tmp_path / "tiny.pth.tar"))
    assert loaded.setting == "dimp/nce_plus_tiny" and loaded.geometry.crop_size == CROP
    assert loaded.net_config.backbone == "resnet18" and not loaded.net_config.pretrained


def test_parameter_set_for_another_kind_of_network_is_a_warning(tmp_path):
    tiny = random_network("nce_plus_tiny", crop_size=CROP)
    assert parameter_mismatch("nce_plus_tiny", tiny) is None
    warning = parameter_mismatch("nce_plus", tiny)
    assert warning == (
        "parameter set 'nce_plus' is tuned for the resnet50 (width 64, 512 classifier channels) network of "
        "dimp/nce_plus, but random holds a resnet18 (width 16, 32 classifier channels) network "
        "(dimp/nce_plus_tiny): its thresholds may not fit this network's scores (the box may never move); "
        "parameter sets tuned for it: nce_plus_tiny, nce_plus_tiny_long"
    )
    spec, warnings = prepare_spec(
        TrackerSpec("dimp", "nce_plus", str(write_tiny_checkpoint(tmp_path / "t")), "cpu")
    )
    assert spec.net == str(tmp_path / "t") and len(warnings) == 1 and "'nce_plus' is tuned for" in warnings[0]
