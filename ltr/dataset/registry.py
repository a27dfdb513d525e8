"""Datasets found by name in one explicit table (no import side effects).

``get_dataset(name, root=None, split=None, **options) -> SequenceDataset``; ``datasets_from_specs`` builds
them from ``"name"`` / ``"name:split"`` strings (the configs' form). Names: lasot, got10k,
trackingnet, coco (training); otb, uav, nfs, lasot_test, trackingnet_test, got10k_test, got10k_val, vot,
folder, synthetic, real_footage (evaluation; the last is made from installed packages' photographs). Roots come from :mod:`ltr.admin.paths` unless given.

:data:`BENCHMARKS` is the one table of the names that ``--dataset`` takes on the command lines that run and
evaluate trackers (``pytracking/run_tracker.py``, ``eval/run_eval.py``): each names a dataset of
:data:`DATASETS` and its split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ltr.admin.registry import Registry
from ltr.dataset.base import SequenceDataset

#: dataset name -> factory taking (root=None, split=None, **options); modules are imported on lookup.
DATASETS: Registry[Callable[..., SequenceDataset]] = Registry(
    "dataset",
    {
        "lasot": "ltr.dataset.lasot:lasot_dataset",
        "lasot_test": "ltr.dataset.lasot:lasot_test_dataset",
        "got10k": "ltr.dataset.got10k:got10k_dataset",
        "got10k_val": "ltr.dataset.got10k:got10k_val_dataset",
        "got10k_test": "ltr.dataset.got10k:got10k_test_dataset",
        "trackingnet": "ltr.dataset.trackingnet:trackingnet_dataset",
        "trackingnet_test": "ltr.dataset.trackingnet:trackingnet_test_dataset",
        "coco": "ltr.dataset.coco:coco_dataset",
        "otb": "ltr.dataset.otb:otb_dataset",
        "uav": "ltr.dataset.uav:uav_dataset",
        "nfs": "ltr.dataset.nfs:nfs_dataset",
        "vot": "ltr.dataset.vot:vot_dataset",
        "folder": "ltr.dataset.folder:folder_dataset",
        "synthetic": "ltr.dataset.synthetic:synthetic_dataset",
        "real_footage": "ltr.dataset.real_footage:real_footage_dataset",
    },
)


def get_dataset(name: str, root: Any = None, split: str | None = None, **options: Any) -> SequenceDataset:
    """The dataset ``name`` of :data:`DATASETS` (:class:`~ltr.admin.registry.UnknownName` if there is none)."""
    return DATASETS[name](root=root, split=split, **options)


@dataclass(frozen=True)
class Benchmark:
    """What a ``--dataset`` name of the tracking and evaluation command lines means.

    dataset: a name in :data:`DATASETS`; split: its split (None: the factory's default); ground_truth: every
    frame's box is public, so results can be scored here (False: only the benchmark's server scores them).
    """

    dataset: str
    split: str | None = None
    ground_truth: bool = True

    def open(self, root: Any = None, split: str | None = None) -> SequenceDataset:
        """The dataset, from ``root`` (None: :mod:`ltr.admin.paths`), with ``split`` instead of its own."""
        return get_dataset(self.dataset, root=root, split=split or self.split)


#: command-line benchmark name -> :class:`Benchmark`; ``lasot`` is LaSOT's 280 test sequences.
BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark dataset",
    {
        "otb": Benchmark("otb"),
        "lasot": Benchmark("lasot_test"),
        "lasot_test": Benchmark("lasot_test"),
        "uav": Benchmark("uav"),
        "nfs": Benchmark("nfs"),
        "trackingnet": Benchmark("trackingnet", "test", ground_truth=False),
        "got10k_test": Benchmark("got10k_test", ground_truth=False),
        "got10k_val": Benchmark("got10k_val"),
        "vot": Benchmark("vot"),
        "synthetic": Benchmark("synthetic"),
        "real_footage": Benchmark("real_footage"),
        "folder": Benchmark("folder"),
    },
)


def parse_dataset_spec(spec: str) -> tuple[str, str | None]:
    """``"got10k:vottrain"`` -> ``("got10k", "vottrain")``; ``"coco"`` -> ``("coco", None)``."""
    name, _, split = spec.partition(":")
    if not name:
        raise ValueError(f"dataset spec {spec!r}: expected name or name:split")
    return name, split or None


def datasets_from_specs(
    specs: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    roots: Mapping[str, str] | None = None,
) -> list[SequenceDataset]:
    """The datasets named by ``specs`` (``name[:split]``).

    ``options``: factory keyword arguments keyed by dataset name (every split) and by the whole spec
    (``"synthetic:train"``: that split only, over the name's). ``roots``: explicit roots by dataset name;
    otherwise :mod:`ltr.admin.paths` finds them (an error names the environment variable to set).
    """
    options = options or {}
    out = []
    for spec in specs:
        name, split = parse_dataset_spec(spec)
        kwargs = {**options.get(name, {}), **options.get(spec, {})}  # spec == name: the same options twice
        out.append(get_dataset(name, root=(roots or {}).get(name), split=split, **kwargs))
    return out
