"""The training sampler draws what pytracking's SuperDiMP sampler draws, on datasets in their real layouts.

Both samplers run on the fixture trees of :mod:`tests.golden.sampler_fixture` (LaSOT, GOT-10k, TrackingNet,
COCO 2014): pytracking's ``DiMPSampler`` as its SuperDiMP ``run`` builds it, with pytracking's dataset
readers (``tests/golden/super_dimp_setting.npz``, from ``scripts/pytracking_golden.py super_dimp_setting``),
and ours as the ``dimp kld_is`` setting builds it (its dataset specs and options, our readers), a few
thousand draws each.

Exact checks: both readers see the same sequences with the same per-frame visibility; on both sides every
draw obeys the causal rule (train frame 0 is the base frame, the other train frames lie in
[base - gap, base), the test frames in (base, base + gap), the base in [S_tr - 1, n - S_te), every frame
visible, gap = 200 + 5k) and exactly the usable sequences are drawn. Statistical checks (two-sample tests of
our draws against pytracking's, fixed seeds, each must give p > ``P_MIN``): which dataset, which sequence,
the base frame's position, the train and test offsets from the base, the final gap, repeated frames and the
order of the frames.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ltr.data.sampler import TrackingSampler
from ltr.dataset.registry import datasets_from_specs
from ltr.train_settings.dimp import SETTINGS
from tests.golden.sampler_fixture import build_fixture

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "super_dimp_setting.npz"
#: smallest p-value a two-sample test of our draws against pytracking's may give (fixed seeds: the tests are
#: deterministic; a real difference in a rule gives p-values far below this with 4000 draws a side)
P_MIN = 1e-3
SEED = 0
#: our draws (pytracking's golden holds 4000); fewer keep the test fast, the two-sample tests allow it
OUR_DRAWS = 3000


@pytest.fixture(scope="module")
def golden() -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(GOLDEN) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(str(arrays.pop("setting_json"))), arrays


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Our datasets (train and val specs of ``dimp kld_is``) on the fixture and :data:`OUR_DRAWS` draws."""
    roots = build_fixture(tmp_path_factory.mktemp("sampler_fixture"))
    config = SETTINGS["kld_is"]()
    options = copy.deepcopy(config.dataset_options)
    options["got10k:vottrain"] = {"split_file": str(roots.got10k_vottrain)}
    options["got10k:votval"] = {"split_file": str(roots.got10k_votval)}
    paths = {
        "lasot": roots.lasot,
        "got10k": roots.got10k,
        "trackingnet": roots.trackingnet,
        "coco": roots.coco,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LaSOT: the fixture holds one of the 70 classes
        train = datasets_from_specs(config.data.datasets, options, paths)
        val = datasets_from_specs(config.data.val_datasets, options, paths)
    sampler = TrackingSampler.from_config(config.data, train, training=True, rank=0, world_size=1)
    rows: dict[str, list] = {"dataset": [], "sequence": [], "train": [], "test": [], "gap": []}
    names = [d.name for d in train]
    rng = np.random.default_rng(SEED)  # one stream: the rules, not the per-sample seeding, are compared here
    for _ in range(OUR_DRAWS):
        seq, sel = sampler.select(rng)
        rows["dataset"].append(names.index(sel.dataset))
        rows["sequence"].append(sel.sequence)
        rows["train"].append(sel.train_ids)
        rows["test"].append(sel.test_ids)
        rows["gap"].append(sel.gap if getattr(train[rows["dataset"][-1]], "is_video", True) else -1)
    draws = {
        "draw_dataset": np.array(rows["dataset"]),
        "draw_sequence": np.array(rows["sequence"]),
        "draw_train": np.array(rows["train"]),
        "draw_test": np.array(rows["test"]),
        "draw_gap": np.array(rows["gap"]),
    }
    return {"train": train, "val": val, "sampler": sampler, "config": config, "draws": draws}


def contingency_p(a: list, b: list) -> float:
    """p-value of the chi-square test that two samples of categories come from one distribution."""
    keys = sorted(set(a) | set(b), key=str)
    ca, cb = Counter(a), Counter(b)
    table = np.array([[ca[k] for k in keys], [cb[k] for k in keys]])
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table)[1])


def ks_p(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.ks_2samp(a, b).pvalue)


def usable(visible: list[int], num_frames: int = 6) -> bool:
    return sum(visible) > 2 * num_frames and len(visible) >= 20


def video_mask(draws: dict[str, np.ndarray]) -> np.ndarray:
    return draws["draw_gap"] >= 0


def quantities(draws: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """Per-draw values whose distributions are compared (video draws in ``mask``)."""
    train, test = draws["draw_train"][mask], draws["draw_test"][mask]
    base = train[:, 0]
    return {
        "base": base,
        "test_offset": (test - base[:, None]).ravel(),
        "train_offset": (base[:, None] - train[:, 1:]).ravel(),
        "gap": draws["draw_gap"][mask],
    }


def test_the_golden_was_drawn_by_the_setting_sampler(golden):
    doc, arrays = golden
    assert doc["sampler"]["train"]["class"] == "DiMPSampler"
    assert doc["sampler"]["train"]["datasets"] == ["lasot", "got10k", "trackingnet", "coco"]
    assert arrays["draw_gap"].shape[0] == doc["draws"]["count"] >= 2000


def test_readers_see_the_same_sequences_and_visibility(golden, ours):
    doc, _ = golden
    reference = doc["visibility"]
    for dataset in ours["train"] + ours["val"]:
        expected = reference[dataset.name]
        for name in dataset.sequence_names():
            assert name in expected, f"{dataset.name}: we list {name}, pytracking does not"
            visible = dataset.get_sequence(name).visible.astype(int).tolist()
            assert visible == expected[name], f"{dataset.name}/{name}: visibility differs"
    ours_names = {d.name: set() for d in ours["train"] + ours["val"]}
    for d in ours["train"] + ours["val"]:
        ours_names[d.name] |= set(d.sequence_names())
    assert {k: set(v) for k, v in reference.items()} == ours_names


def test_dataset_choice(golden, ours):
    _, ref = golden
    draws = ours["draws"]
    p = contingency_p(ref["draw_dataset"].tolist(), draws["draw_dataset"].tolist())
    assert p > P_MIN, f"dataset frequencies differ (p = {p:.2g})"
    weights = np.asarray(ours["sampler"].probs)
    for counts in (
        np.bincount(ref["draw_dataset"], minlength=4),
        np.bincount(draws["draw_dataset"], minlength=4),
    ):
        assert stats.chisquare(counts, weights * counts.sum()).pvalue > P_MIN


def test_sequence_choice_and_exactly_the_usable_sequences(golden, ours):
    doc, ref = golden
    draws = ours["draws"]
    for index, dataset in enumerate(ours["train"]):
        ref_seqs = ref["draw_sequence"][ref["draw_dataset"] == index].tolist()
        our_seqs = draws["draw_sequence"][draws["draw_dataset"] == index].tolist()
        visibility = doc["visibility"][dataset.name]
        listed = set(dataset.sequence_names())
        is_video = getattr(dataset, "is_video", True)
        expected = {n for n in listed if not is_video or usable(visibility[n])}
        assert set(ref_seqs) == expected, f"{dataset.name}: pytracking drew {set(ref_seqs) ^ expected}"
        assert set(our_seqs) == expected, f"{dataset.name}: we drew {set(our_seqs) ^ expected}"
        p = contingency_p(ref_seqs, our_seqs)
        assert p > P_MIN, f"{dataset.name}: sequence frequencies differ (p = {p:.2g})"


@pytest.mark.parametrize("side", ["pytracking", "ours"])
def test_every_draw_obeys_the_causal_rule(golden, ours, side):
    doc, ref = golden
    draws = ref if side == "pytracking" else ours["draws"]
    names = [d.name for d in ours["train"]]
    image_frame = 1 if side == "pytracking" else 0  # pytracking passes [1] * n, which its COCO reader ignores
    for i in range(len(draws["draw_gap"])):
        dataset = names[draws["draw_dataset"][i]]
        train, test, gap = draws["draw_train"][i], draws["draw_test"][i], int(draws["draw_gap"][i])
        if gap < 0:
            assert dataset == "coco" and set(train) == set(test) == {image_frame}
            continue
        visible = np.array(doc["visibility"][dataset][draws["draw_sequence"][i]], dtype=bool)
        base = train[0]
        assert 2 <= base < len(visible) - 3
        assert all(base - gap <= t < base for t in train[1:]), (side, i, train, gap)
        assert all(base < t < base + gap for t in test), (side, i, test, gap)
        assert visible[train].all() and visible[test].all(), (side, i)
        assert gap >= 200 and (gap - 200) % 5 == 0


def test_frame_distributions(golden, ours):
    _, ref = golden
    draws = ours["draws"]
    ref_q, our_q = quantities(ref, video_mask(ref)), quantities(draws, video_mask(draws))
    for key in ("base", "test_offset", "train_offset"):
        p = ks_p(ref_q[key], our_q[key])
        assert p > P_MIN, f"{key}: distributions differ (KS p = {p:.2g})"
    p = contingency_p(ref_q["gap"].tolist(), our_q["gap"].tolist())
    assert p > P_MIN, f"final gaps differ (p = {p:.2g})"


@pytest.mark.parametrize(
    ("sequence", "what"),
    [
        ("airplane-3", "the gap grows over a 247-frame invisible stretch"),
        ("airplane-6", "500 visible frames: offsets limited by the 200-frame gap"),
        ("GOT-10k_Train_000002", "220 visible frames"),
        ("airplane-2", "occluded, out-of-view and zero-size frames"),
    ],
)
def test_frame_distributions_per_sequence(golden, ours, sequence, what):
    _, ref = golden
    draws = ours["draws"]
    ref_q = quantities(ref, ref["draw_sequence"] == sequence)
    our_q = quantities(draws, draws["draw_sequence"] == sequence)
    assert len(ref_q["base"]) >= 40 and len(our_q["base"]) >= 40
    for key in ("base", "test_offset", "train_offset"):
        p = ks_p(ref_q[key], our_q[key])
        assert p > P_MIN, f"{sequence} ({what}) {key}: KS p = {p:.2g}"
    p = contingency_p(ref_q["gap"].tolist(), our_q["gap"].tolist())
    assert p > P_MIN, f"{sequence} ({what}): final gaps differ (p = {p:.2g})"
    if sequence == "airplane-3":
        assert (ref_q["gap"] > 200).mean() > 0.1 and (our_q["gap"] > 200).mean() > 0.1
    if sequence == "airplane-6":
        assert 150 <= ref_q["test_offset"].max() < 200 and 150 <= our_q["test_offset"].max() < 200


def test_repeats_and_order_of_frames(golden, ours):
    """Frames are drawn with replacement and in no particular order, on both sides alike."""
    _, ref = golden
    draws = ours["draws"]

    def features(d: dict[str, np.ndarray]) -> dict[str, list]:
        m = video_mask(d)
        train, test = d["draw_train"][m], d["draw_test"][m]
        return {
            "test_repeats": [len(set(t)) for t in test.tolist()],
            "train_repeats": [len(set(t)) for t in train[:, 1:].tolist()],
            "test_sorted": (np.diff(test, axis=1) >= 0).all(axis=1).tolist(),
            "train_sorted": (train[:, 1] <= train[:, 2]).tolist(),
        }

    ref_f, our_f = features(ref), features(draws)
    for key in ref_f:
        p = contingency_p(ref_f[key], our_f[key])
        assert p > P_MIN, f"{key}: p = {p:.2g}"
