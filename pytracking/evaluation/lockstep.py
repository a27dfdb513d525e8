"""Track many sequences of a dataset in lockstep on one device: B slots, one frame of each per step.

Each slot holds one sequence with its own tracker; every step loads the next frame of every busy slot and
advances all their trackers by :func:`pytracking.tracker.dimp.lockstep.track_frames` (network calls
batched). A slot whose sequence ends (or fails) is refilled with the next sequence at once, so sequences
of any lengths keep the batch full until the dataset runs out. Sequences start longest first: the batch then
stays full almost to the end (the shortest fill the last gaps), where in the dataset's order one long
sequence started late can end the run alone. Frames are read ahead by a thread pool while the device works
(for a GPU, also copied into pinned host memory there).

Outcomes are those of one sequence at a time (:func:`.runner.track_sequence`): the same boxes up to float
rounding, the same result files, the same one-line data errors. A frame's time is its step's seconds divided
by the number of sequences the step advanced (what the frame cost in a batch); the first frame's is its
tracker's initialisation, which runs per sequence.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ltr.dataset.base import Sequence, SequenceDataset
from pytracking.evaluation.results import write_sequence_results
from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker, tracker_params
from pytracking.tracker.dimp.frames import pinned_frame
from pytracking.tracker.dimp.lockstep import track_frames
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer

Outcome = tuple[str, Any]  # (sequence name, None or a runner.Failure)


@dataclass
class _Slot:
    """One sequence in flight: its tracker, boxes and times so far, and the read-ahead of its next frame."""

    sequence: Sequence
    tracker: Any
    size: tuple[int, int]
    boxes: np.ndarray
    times: np.ndarray
    next_index: int = 1
    pending: Future | None = None


def run_lockstep(
    spec: TrackerSpec,
    dataset: SequenceDataset,
    names: list[str],
    folder: Path,
    *,
    batch: int,
    groups: int = 1,
    record: Callable[[Outcome], None],
    failure: Callable[[str, BaseException, str | None], Outcome],
    frames_done: Callable[[int], None] | None = None,
    readers: int = 8,
    timer: StageTimer = NULL_TIMER,
) -> None:
    """Track the sequences ``names`` of ``dataset`` ``batch`` at a time and write each one's results to
    ``folder`` as it finishes; ``record`` gets every sequence's outcome, ``failure(name, error, traceback
    text or None for the current one)`` makes a failed one's (it re-raises with ``spec.debug``);
    ``frames_done(n)`` is told the frames of each step (for progress shown between sequence ends). ``readers``
    threads read frames ahead. ``timer`` gets the tracker's stages of every step (:func:`track_frames`) and the
    runner's own: ``start`` (new sequences' first frames and initialisations), ``read`` (waiting for frames
    read ahead) and ``write`` (result files). ``groups``: :func:`track_frames`' interleaved groups per step."""
    from pytracking.evaluation.runner import read_frame, start_sequence  # the one-at-a-time runner's rules

    def read(slot: _Slot, index: int) -> Any:
        frame = read_frame(slot.sequence, index, slot.size)
        return pinned_frame(frame, slot.tracker.device)  # on a GPU, staged for the copy (in the thread)

    opened: list[tuple[str, Sequence]] = []
    for name in names:  # sequences hold paths and boxes, frames are read later: cheap to open all first
        try:
            opened.append((name, dataset.get_sequence(name)))
        except Exception as err:  # noqa: BLE001 - data error or bug: the runner's rules decide
            record(failure(name, err, None))
    queue = iter(sorted(opened, key=lambda o: len(o[1]), reverse=True))  # longest first; ties: names' order
    slots: list[_Slot] = []
    pad_to = batch if tracker_params(spec).compile else None  # one input shape for torch.compile

    def fill(pool: ThreadPoolExecutor) -> None:
        with timer.stage("start"):
            _fill(pool)

    def _fill(pool: ThreadPoolExecutor) -> None:
        while len(slots) < batch:
            name, sequence = next(queue, (None, None))
            if name is None:
                return
            try:
                tracker = build_tracker(spec)
                boxes, times, size, _ = start_sequence(tracker, sequence)
            except Exception as err:  # noqa: BLE001 - data error or bug: the runner's rules decide
                record(failure(name, err, None))
                continue
            slot = _Slot(sequence, tracker, size, boxes, times)
            if len(sequence) == 1:
                finish(slot)
                continue
            slot.pending = pool.submit(read, slot, 1)
            slots.append(slot)

    def finish(slot: _Slot) -> None:
        try:
            with timer.stage("write"):
                write_sequence_results(folder, slot.sequence.name, slot.boxes, slot.times)
        except Exception as err:  # noqa: BLE001
            record(failure(slot.sequence.name, err, None))
            return
        record((slot.sequence.name, None))

    with ThreadPoolExecutor(max_workers=max(1, readers), thread_name_prefix="frames") as pool:
        fill(pool)
        while slots:
            ready: list[tuple[_Slot, Any]] = []
            for slot in list(slots):
                assert slot.pending is not None
                try:
                    with timer.stage("read"):
                        frame = slot.pending.result()
                except Exception as err:  # noqa: BLE001 - the frame's data error ends this sequence only
                    slots.remove(slot)
                    record(failure(slot.sequence.name, err, None))
                    continue
                ready.append((slot, frame))
            for slot, _ in ready:  # read the next frames while the device tracks these
                following = slot.next_index + 1
                if following < len(slot.sequence):
                    slot.pending = pool.submit(read, slot, following)
            if ready:
                start = time.perf_counter()
                try:
                    out = track_frames(
                        [s.tracker for s, _ in ready],
                        [f for _, f in ready],
                        timer=timer,
                        pad_to=pad_to,
                        groups=groups,
                    )
                except Exception as err:  # noqa: BLE001 - a bug in a batched step: every sequence in it fails
                    text = traceback.format_exc()
                    for slot, _ in ready:
                        slots.remove(slot)
                        record(failure(slot.sequence.name, err, text))
                    fill(pool)
                    continue
                seconds = (time.perf_counter() - start) / len(ready)
                if frames_done is not None:
                    frames_done(len(ready))
                for (slot, _), box in zip(ready, out, strict=True):
                    slot.boxes[slot.next_index] = box
                    slot.times[slot.next_index] = seconds
                    slot.next_index += 1
                    if slot.next_index == len(slot.sequence):
                        slots.remove(slot)
                        finish(slot)
            fill(pool)
