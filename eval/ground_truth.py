"""Ground truth from the dataset readers (``ltr.dataset``) as plain :class:`GroundTruth` records.

What is read from a :class:`ltr.dataset.base.Sequence`:

- ``boxes`` (N, 4) xywh with NaN for unknown rows;
- per-frame visibility from the raw absent flags (see :func:`target_visible`);
- ``attributes["cover"]``: GOT-10k cover labels (N,) int, when the reader provides them;
- ``attributes["resolution"]`` / ``["image_size"]`` / ``["image_wh"]`` (also inside ``attributes["meta"]``,
  where the GOT-10k reader keeps ``meta_info.ini``): (width, height); otherwise, only for
  protocols that clip to the image, the size of frame 0;
- per-sequence attribute flags from ``attributes["attribute_flags"]`` (or ``["flags"]``): a mapping
  name -> bool/0/1, or a list of the names that apply.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from eval.evaluation import GroundTruth
from ltr.dataset.base import Sequence

_SIZE_KEYS = ("resolution", "image_size", "image_wh")
_FLAG_KEYS = ("attribute_flags", "flags")


def attribute_flags(attributes: Mapping[str, Any]) -> dict[str, bool]:
    """Per-sequence attribute flags (name -> bool) from a sequence's ``attributes`` dict ({} if none)."""
    for key in _FLAG_KEYS:
        value = attributes.get(key)
        if value is None:
            continue
        if isinstance(value, Mapping):
            return {str(k): bool(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set):
            return {str(v): True for v in value}
        raise TypeError(
            f"attributes[{key!r}] must be a mapping or a list of names, got {type(value).__name__}"
        )
    return {}


def image_size(seq: Sequence) -> tuple[float, float]:
    """(width, height) of the sequence's images: from its attributes, else from frame 0."""
    meta = seq.attributes.get("meta")
    candidates = [seq.attributes, meta if isinstance(meta, Mapping) else {}]
    for source, key in ((src, key) for src in candidates for key in _SIZE_KEYS):
        value = source.get(key)
        if value is not None:
            w, h = (float(v) for v in value)
            return w, h
    frame = seq.frame(0)
    return float(frame.shape[1]), float(frame.shape[0])


def target_visible(seq: Sequence) -> np.ndarray:
    """(N,) bool: the target is not flagged absent, independent of whether the GT box is valid.

    ``Sequence.visible`` is ``visible & valid``, which would turn every invalid box into an absent frame; the
    toolkits keep the two apart (an invalid-but-present LaSOT frame is a precision success, an absent one a
    failure). So the raw flags are used when the reader exposes them: ``absent`` (folder), ``full_occlusion``
    | ``out_of_view`` (LaSOT), ``absence`` (GOT-10k); otherwise only valid frames that are not visible count
    as absent.
    """
    n = len(seq.boxes)
    attrs = seq.attributes
    flags = [attrs[k] for k in ("absent", "full_occlusion", "out_of_view", "absence") if k in attrs]
    if flags:
        absent = np.zeros(n, dtype=bool)
        for f in flags:
            absent |= np.asarray(f, dtype=bool).reshape(-1)[:n]
        return ~absent
    return ~(np.asarray(seq.valid, dtype=bool) & ~np.asarray(seq.visible, dtype=bool))


def from_sequence(seq: Sequence, *, need_image_size: bool = False) -> GroundTruth:
    """Convert one reader :class:`Sequence` (boxes (N, 4) xywh) to a :class:`GroundTruth`."""
    cover = seq.attributes.get("cover")
    return GroundTruth(
        name=seq.name,
        boxes=np.asarray(seq.boxes, dtype=np.float64),
        visible=target_visible(seq),
        cover=np.asarray(cover) if cover is not None else None,
        image_wh=image_size(seq) if need_image_size else None,
        flags=attribute_flags(seq.attributes),
    )


def load_ground_truth(
    dataset: str, root: str | os.PathLike | None = None, *, need_image_size: bool = False, **options: Any
) -> list[GroundTruth]:
    """All sequences of a registered dataset (``ltr.dataset.registry``) as :class:`GroundTruth`."""
    from ltr.dataset.registry import get_dataset

    ds = get_dataset(dataset, root=root, **options)
    return [
        from_sequence(ds.get_sequence(name), need_image_size=need_image_size) for name in ds.sequence_names()
    ]
