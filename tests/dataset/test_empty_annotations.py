"""Every reader turns an empty annotation file into a DatasetError that names the file (not an IndexError
later in the tracker or the evaluation)."""

import warnings

import pytest

from ltr.dataset.base import DatasetError
from ltr.dataset.got10k import Got10kDataset
from ltr.dataset.lasot import LasotDataset
from ltr.dataset.nfs import NfsDataset
from ltr.dataset.otb import OTBDataset
from ltr.dataset.trackingnet import TrackingNetDataset
from ltr.dataset.uav import UAV123Dataset
from ltr.dataset.vot import VOTDataset

from .fixtures import (
    make_got10k_sequence,
    make_lasot_sequence,
    make_nfs_packed_sequence,
    make_nfs_raw_sequence,
    make_otb_sequence,
    make_trackingnet_sequence,
    make_uav_sequence,
    make_vot_sequence,
)


def otb(root):
    make_otb_sequence(root, "Deer", {"groundtruth_rect.txt": ""}, [1, 2, 3])
    return OTBDataset(root), "Deer", "Deer/groundtruth_rect.txt"


def lasot(root):
    make_lasot_sequence(root, "airplane-1", "", 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a partial LaSOT tree: the reader warns about the missing classes
        return LasotDataset(root, "all"), "airplane-1", "airplane/airplane-1/groundtruth.txt"


def got10k(root):
    make_got10k_sequence(root / "val", "GOT-10k_Val_000001", "", 3)
    return Got10kDataset(root, "val"), "GOT-10k_Val_000001", "val/GOT-10k_Val_000001/groundtruth.txt"


def trackingnet(root):
    make_trackingnet_sequence(root, "TRAIN_0", "vid", "", 3)
    return TrackingNetDataset(root, "train"), "vid", "TRAIN_0/anno/vid.txt"


def uav(root):
    make_uav_sequence(root, "bike1", "bike1", "", [1, 2, 3])
    return UAV123Dataset(root), "bike1", "anno/UAV123/bike1.txt"


def nfs_raw(root):
    make_nfs_raw_sequence(root, "Gymnastics", "\n", 3)
    return NfsDataset(root, "raw"), "Gymnastics", "Gymnastics/30/Gymnastics.txt"


def nfs_packed(root):
    make_nfs_packed_sequence(root, "Gymnastics", "", 3)
    return NfsDataset(root, "packed"), "Gymnastics", "anno/nfs_Gymnastics.txt"


def vot(root):
    make_vot_sequence(root, "ball", " \n", 3)
    return VOTDataset(root), "ball", "ball/groundtruth.txt"


@pytest.mark.parametrize("build", [otb, lasot, got10k, trackingnet, uav, nfs_raw, nfs_packed, vot])
def test_empty_annotation_file_is_a_dataset_error_naming_it(tmp_path, build):
    dataset, name, anno = build(tmp_path)
    with pytest.raises(DatasetError) as err:
        dataset.get_sequence(name)
    assert str(err.value).startswith(f"{tmp_path / anno}: empty annotation file")
