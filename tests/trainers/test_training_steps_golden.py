"""Three SuperDiMP (KLD-IS) training steps here and in pytracking, from the same weights on the same batch.

``tests/golden/training_steps.npz`` (``python scripts/pytracking_golden.py training_steps --pytracking PATH``)
holds what three steps of pytracking's SuperDiMP training did to its ``dimpnet50`` with seeded weights
(:mod:`tests.golden.seeded`) on a batch of two samples of its own processing: every step's loss and stats and
the change of every state entry. Here the same weights, written in pytracking's file format and converted by
:mod:`ltr.admin.import_pytracking`, train as ``ltr/train_settings/dimp/train.py`` assembles the KLD-IS setting
(network in train mode with conv1 / layer1 / layer2 frozen, :class:`PartlyFrozenActor`, Adam over
:func:`ltr.models.tracking.lr_groups`) on the same batch: this toolkit's processing makes the images (from the
same frames and draws, equal to pytracking's bit for bit), the recorded batch gives the boxes, labels,
proposals and densities (this toolkit's agree with them to float32 rounding: ``test_processing_golden.py``).

Tolerances. The two sides sum in other orders (convolutions, the filter optimizer's correlations, BatchNorm
statistics) and Adam turns every gradient into a step of about its learning rate, so rounding decides the
step of the weights whose gradient is nearly zero; and with two sequences the box head's reference branch
normalises two values per channel (BatchNorm over the batch at 1 x 1), which amplifies such differences.
So: losses agree to ``LOSS_RTOL`` (the box loss, weighted 0.01 in the total, to ``BOX_ATOL``); the change of
every weight tensor agrees in sum of absolute values and of squares to ``DELTA_AGGREGATE_RTOL``, and of the
recorded elements at most ``OUTLIER_FRACTION`` differ by more than ``DELTA_ATOL`` times their group's
learning rate; BatchNorm running statistics agree to ``RUNNING_ATOL`` of their largest change. Biases right
before a BatchNorm are only checked to have moved less than three learning rates: BatchNorm removes them,
their gradient is zero but for rounding, and Adam makes that rounding a full step on both sides.

A ResNet-50 on 12 crops of 352 pixels, three times forward and backward: about a minute on one CPU core.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from ltr.admin.checkpoint import load_checkpoint
from ltr.admin.import_pytracking import DIMPNET_KEY_MAP, PRESETS, convert, net_config
from ltr.data.loader import collate_frames
from ltr.data.processing import DiMPProcessing, FrameSet
from ltr.ebm import build_method
from ltr.models.tracking import build_dimpnet, lr_groups
from ltr.ops.boxes import xywh_to_rel
from ltr.train_settings.dimp.base import base_config
from ltr.train_settings.dimp.initial import PartlyFrozenActor
from ltr.trainers.optim import build_adam
from tests.data.test_processing_golden import NUM_TRAIN, _draws
from tests.golden.pytracking_format import write_pytracking_checkpoint
from tests.golden.seeded import seeded_tensor
from tests.golden.training_frames import window_frames

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "training_steps.npz"
PROCESSING = Path(__file__).resolve().parents[1] / "golden" / "training_processing.npz"
#: entries the converter drops (layer4 and fc: unused); zeros in the file written here
DROPPED = ("feature_extractor.layer4.", "feature_extractor.fc.")
LOSS_RTOL = 1e-5
BOX_ATOL = 2e-3
DELTA_AGGREGATE_RTOL = 5e-3
DELTA_ATOL = 0.1
OUTLIER_FRACTION = 0.02
RUNNING_ATOL = 1e-2

pytestmark = pytest.mark.slow


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _our_key(theirs: str) -> str | None:
    for prefix, ours in DIMPNET_KEY_MAP:
        if theirs.startswith(prefix):
            return ours + theirs[len(prefix) :]
    return None


@pytest.fixture(scope="module")
def golden():
    arrays = _load(GOLDEN)
    return arrays, json.loads(str(arrays.pop("meta")))


def _batch(arrays, meta, config) -> dict[str, torch.Tensor]:
    """Our images of the recorded samples with the recorded boxes, labels, proposals and densities."""
    processing = _load(PROCESSING)
    proc = DiMPProcessing(config.data)
    samples = []
    for i in meta["batch_samples"]:
        images = window_frames(processing["windows"][i])
        boxes = processing["boxes"][i].astype(np.float64)
        frames = FrameSet(images[:NUM_TRAIN], boxes[:NUM_TRAIN], images[NUM_TRAIN:], boxes[NUM_TRAIN:])
        generator = torch.Generator().manual_seed(int(processing["proposal_seed"][i]))
        samples.append(proc.apply(frames, _draws(processing, i), generator))
    ours = collate_frames(samples)
    for key in ("train_images", "test_images"):
        sums = ours[key].double().sum(dim=(2, 3, 4)).numpy()
        np.testing.assert_allclose(sums, arrays[f"batch__{key}_sums"], rtol=1e-12, err_msg=key)
    recorded = {
        k[len("batch__") :]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith("batch__")
    }
    test_boxes = recorded["test_anno"]
    return {
        "train_images": ours["train_images"],
        "test_images": ours["test_images"],
        "train_boxes": recorded["train_anno"],
        "test_boxes": test_boxes,
        "test_label": recorded["test_label"],
        "proposals": recorded["test_proposals"],
        "proposals_rel": xywh_to_rel(recorded["test_proposals"], test_boxes[:, :, None]),
        "proposal_log_q": recorded["proposal_density"].log(),
        "proposal_log_p": recorded["gt_density"].log(),  # -inf where pytracking's density underflowed
    }


@pytest.fixture(scope="module")
def trained(golden, tmp_path_factory):
    """Our network after the steps: (initial state, final state, losses, stats per step)."""
    arrays, meta = golden
    state = {}
    for key, shape in meta["state_keys"]:
        state[key] = (
            torch.zeros(()).expand(shape) if key.startswith(DROPPED) else seeded_tensor(0, key, shape)
        )
    tmp = tmp_path_factory.mktemp("steps")
    src = write_pytracking_checkpoint(tmp / "super_dimp.pth.tar", state, meta["constructor_kwds"])
    dst = convert(src, tmp / "converted.pth.tar", "super_dimp")
    config = base_config("kld_is")
    net = build_dimpnet(net_config(PRESETS["super_dimp"]))
    net.load_state_dict(load_checkpoint(dst)["net"])
    before = {k: v.clone() for k, v in net.state_dict().items()}

    batch = _batch(arrays, meta, config)

    method = build_method(config.data.box_method, **config.data.box_method_kwargs)
    actor = PartlyFrozenActor(net, method, config.box_weight, frozen=())
    optimizer = build_adam(net, lr_groups())
    actor.train(True)
    losses, stats = [], []
    for _ in range(meta["num_steps"]):
        loss, step_stats = actor(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        stats.append({k: v.item() for k, v in step_stats.items()})
    return before, net.state_dict(), losses, stats


def test_losses_and_stats_match(golden, trained):
    arrays, _ = golden
    _, _, losses, stats = trained
    np.testing.assert_allclose(losses, arrays["losses"], rtol=LOSS_RTOL)
    box = [s["loss/box"] for s in stats]
    np.testing.assert_allclose(box, arrays["stats__Loss.bb_ce"], rtol=0, atol=BOX_ATOL)
    assert box[0] == pytest.approx(float(arrays["stats__Loss.bb_ce"][0]), rel=LOSS_RTOL)  # same weights
    clf = [s["loss/clf"] for s in stats]
    names = ("Loss.target_clf", "Loss.test_init_clf", "Loss.test_iter_clf")
    np.testing.assert_allclose(clf, sum(arrays[f"stats__{n}"] for n in names), rtol=LOSS_RTOL)
    final = [s["clf/final"] for s in stats]
    np.testing.assert_allclose(final, arrays["stats__ClfTrain.test_loss"], rtol=LOSS_RTOL)


def _before_batchnorm(key: str, keys: set[str]) -> bool:
    """A bias of a convolution / linear layer that a BatchNorm follows (pytracking's names)."""
    if key.endswith(".0.bias"):
        return key[: -len("0.bias")] + "1.running_mean" in keys
    return key.endswith(".linear.bias") and key[: -len("linear.bias")] + "bn.running_mean" in keys


def test_weight_changes_match(golden, trained):
    arrays, meta = golden
    before, after, _, _ = trained
    keys = [k for k, _ in meta["state_keys"]]
    lrs = dict(meta["lr_groups"])
    offsets = arrays["delta_sub_offsets"]
    outliers = total = 0
    for k, key in enumerate(keys):
        ours = _our_key(key)
        ref_stats = arrays["delta_stats"][k]
        if ours is None:
            assert key.startswith(DROPPED) and not ref_stats.any(), key
            continue
        delta = (after[ours] - before[ours]).double()
        if not ref_stats.any():
            assert not delta.any(), f"{ours} changed here but not in pytracking ({key})"
            continue
        ref_sub = arrays["delta_sub"][offsets[k] : offsets[k + 1]].astype(np.float64)
        sub = delta.reshape(-1)[:: meta["stride"]].numpy()
        if key.endswith("num_batches_tracked"):
            np.testing.assert_array_equal(sub, ref_sub, err_msg=key)
            continue
        if ".running_" in key:
            atol = RUNNING_ATOL * np.abs(ref_sub).max()
            np.testing.assert_allclose(sub, ref_sub, rtol=0, atol=atol, err_msg=key)
            continue
        lr = next(lr for path, lr in lrs.items() if key.startswith(path + "."))
        if _before_batchnorm(key, set(keys)):
            assert delta.abs().max() < 3 * lr, key
            continue
        ours_stats = [delta.abs().sum().item(), (delta**2).sum().item()]
        np.testing.assert_allclose(ours_stats, ref_stats[1:], rtol=DELTA_AGGREGATE_RTOL, err_msg=key)
        outliers += int((np.abs(sub - ref_sub) > DELTA_ATOL * lr).sum())
        total += sub.size
    assert total > 5000 and outliers <= OUTLIER_FRACTION * total, (
        f"{outliers} of {total} weight changes differ"
    )
