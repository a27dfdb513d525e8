"""Run a tracker over the sequences of a dataset: resumable, optionally parallel, atomic result files.

- Results go to ``{results}/{tracker}/{param}[_{runid:03d}]/`` (:mod:`pytracking.evaluation.results`);
  sequences whose box file exists are skipped, so an interrupted run continues where it stopped.
- ``threads > 1`` runs sequences in that many worker processes (spawned; each loads the network once and uses
  ``max(1, cpu_count // threads)`` torch threads, and reuse freed memory when this process does:
  :mod:`ltr.admin.cpu_memory`).
- ``batch > 1`` (DiMP) tracks that many sequences in lockstep in this process, their network calls batched
  (:mod:`pytracking.evaluation.lockstep`): the same results up to float rounding, faster on a GPU.
- A sequence that fails is recorded and the run goes on; :class:`RunReport` lists the failures (the command
  line prints them and exits non-zero). The other sequences' results are kept. A data error (a
  :data:`DATA_ERRORS` exception: unreadable annotation or frame, no valid first box, a frame of another
  size) is kept as its one-line message, which names the file (and line); any other exception, a bug, with
  its traceback. With ``spec.debug`` the first failure is raised instead.
- Frame 0's box is the given initial box; times are the tracker's seconds per frame (frame loading excluded).
- Every frame must have the first frame's size (the tracker's boxes would jump between scales otherwise):
  a sequence whose frames change size is refused, naming the first such frame.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ltr.admin.cpu_memory import reuse_freed_memory, reusing_freed_memory
from ltr.admin.device import resolve_device
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.registry import BENCHMARKS
from pytracking.evaluation.host_threads import CUDA_HOST_THREADS, host_threads
from pytracking.evaluation.results import is_finished, result_folder, write_sequence_results
from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker
from pytracking.tracker.dimp.frames import (
    TrackerInputError,
    check_frame_size,
    input_frame_wh,
    validate_init_box,
)
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset by command-line name (:data:`~ltr.dataset.registry.BENCHMARKS`) and optional root
    (picklable, re-opened in each worker)."""

    name: str
    root: str | None = None

    def open(self) -> SequenceDataset:
        return BENCHMARKS[self.name].open(self.root)


#: exceptions that mean the data of one sequence is unusable (reported in one line, no traceback)
DATA_ERRORS = (DatasetError, TrackerInputError)


@dataclass(frozen=True)
class Failure:
    """One sequence that failed: ``message`` is one line for a data error (``traceback`` None), else the
    exception's last line with the full ``traceback`` text."""

    name: str
    message: str
    traceback: str | None = None

    @property
    def is_data_error(self) -> bool:
        return self.traceback is None


@dataclass
class RunReport:
    """done / skipped sequence names, the failures (in dataset order), the result folder."""

    folder: Path
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)


def read_frame(sequence: Sequence, index: int, size: tuple[int, int]) -> np.ndarray:
    """Frame ``index`` of ``sequence``; :class:`FrameSizeError` (naming the frame and its file) unless its
    (w, h) is ``size``, the first frame's."""
    frame = sequence.frame(index)
    source = str(sequence.frame_paths[index]) if sequence.frame_paths is not None else None
    check_frame_size(frame, size, index=index, source=source)
    return frame


def start_sequence(
    tracker: Any, sequence: Sequence
) -> tuple[np.ndarray, np.ndarray, tuple[int, int], np.ndarray]:
    """Initialise ``tracker`` on the first frame of ``sequence``: returns the boxes (N, 4) and seconds (N,)
    arrays with frame 0 filled in, the frame size (w, h) and the first frame.

    Raises :class:`DatasetError` when the first frame's box is not a valid box inside the frame.
    """
    n = len(sequence)
    frame = sequence.frame(0)
    size = input_frame_wh(frame)
    try:
        init = validate_init_box(sequence.init_box, size)
    except TrackerInputError as err:
        raise DatasetError(f"the first frame's annotated box is unusable: {err}") from None
    boxes = np.empty((n, 4), dtype=np.float64)
    times = np.empty(n, dtype=np.float64)
    start = time.perf_counter()
    tracker.initialize(frame, init)
    times[0] = time.perf_counter() - start
    boxes[0] = init
    return boxes, times, size, frame


def track_sequence(tracker: Any, sequence: Sequence, *, view: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Boxes (N, 4) xywh and per-frame seconds (N,) of ``tracker`` on ``sequence``.

    Raises :class:`DatasetError` when the first frame's box is not a valid box inside the frame and
    :class:`FrameSizeError` (naming the frame and its file) when a frame's size differs from the first's.
    """
    boxes, times, size, frame = start_sequence(tracker, sequence)
    if view is not None:
        view.show(frame, boxes[0], sequence=sequence.name, frame_index=0)
    for i in range(1, len(sequence)):
        frame = read_frame(sequence, i, size)
        start = time.perf_counter()
        boxes[i] = tracker.track(frame)
        times[i] = time.perf_counter() - start
        if view is not None:
            view.show(frame, boxes[i], sequence=sequence.name, frame_index=i, debug_info=tracker.debug_info)
    return boxes, times


def failure_of(name: str, err: BaseException, text: str | None = None) -> Failure:
    """The :class:`Failure` of sequence ``name`` that raised ``err``: one line for a data error, else with
    the traceback (``text``, or the exception being handled)."""
    if isinstance(err, DATA_ERRORS):
        return Failure(name, str(err).splitlines()[0] if str(err) else type(err).__name__)
    return Failure(name, f"{type(err).__name__}: {err}".splitlines()[0], text or traceback.format_exc())


# ------------------------------------------------------------------------------------------ per process state
_WORKER: dict[str, Any] = {}


def _setup(
    spec: TrackerSpec,
    dataset: DatasetSpec,
    folder: Path,
    torch_threads: int | None,
    reuse_memory: bool = False,
) -> None:
    if reuse_memory:  # a worker process reuses freed memory as its parent does
        reuse_freed_memory()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    _WORKER.clear()
    _WORKER.update(spec=spec, dataset=dataset.open(), folder=folder, view=None)
    if spec.visdom is not None:
        from pytracking.visdom_view import VisdomView

        _WORKER["view"] = VisdomView(spec.visdom.server, spec.visdom.port, spec.visdom.env)


def _run_one(name: str) -> tuple[str, Failure | None]:
    """Track one sequence in this process; (name, None) or (name, the failure)."""
    try:
        sequence = _WORKER["dataset"].get_sequence(name)
        tracker = build_tracker(_WORKER["spec"])
        boxes, times = track_sequence(tracker, sequence, view=_WORKER["view"])
        write_sequence_results(_WORKER["folder"], name, boxes, times)
        return name, None
    except Exception as err:  # recorded and reported at the end of the run (never dropped)
        if _WORKER["spec"].debug:
            raise
        return name, failure_of(name, err)


def _lockstep_failure(name: str, err: BaseException, text: str | None) -> tuple[str, Failure | None]:
    if _WORKER["spec"].debug:
        raise err
    return name, failure_of(name, err, text)


def run_dataset(
    spec: TrackerSpec,
    dataset: DatasetSpec,
    *,
    results_root: str | Path,
    runid: int | None = None,
    sequences: list[str] | None = None,
    threads: int = 1,
    batch: int = 1,
    groups: int = 1,
    progress: bool = True,
    on_failure: Callable[[Failure], None] | None = None,
    timer: StageTimer | None = None,
) -> RunReport:
    """Track every (or the named) sequence of ``dataset`` not finished yet; see the module docstring.

    ``on_failure`` is called with each failure as soon as it happens (e.g. to print its line while the run
    goes on); the report lists them all at the end. ``timer`` (``batch`` > 1 only) accumulates the seconds of
    the lockstep runner's stages (:func:`.lockstep.run_lockstep`). ``groups`` (``batch`` > 1 only) splits each
    lockstep step into that many interleaved groups of trackers (:func:`.lockstep.run_lockstep`).
    """
    from tqdm import tqdm

    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if batch > 1 and (threads > 1 or spec.visdom is not None or not spec.needs_network):
        raise ValueError("batch > 1 is for DiMP trackers in one process, without visdom")
    if timer is not None and batch == 1:
        raise ValueError("timer times the lockstep runner: it needs batch > 1")
    if groups < 1 or (groups > 1 and batch == 1):
        raise ValueError(
            f"groups interleave a lockstep step: it needs batch > 1 and groups >= 1, got {groups}"
        )
    folder = result_folder(results_root, spec.name, spec.results_name, runid)
    names = dataset.open().sequence_names()
    if sequences:
        unknown = [s for s in sequences if s not in names]
        if unknown:
            raise KeyError(f"dataset {dataset.name!r} has no sequence(s) {unknown}")
        names = [n for n in names if n in sequences]
    report = RunReport(folder)
    report.skipped = [n for n in names if is_finished(folder, n)]
    todo = [n for n in names if not is_finished(folder, n)]
    folder.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=len(todo), desc=f"{spec.name}/{spec.results_name}", unit="seq", disable=not progress)
    outcomes: list[tuple[str, Failure | None]] = []

    def record(outcome: tuple[str, Failure | None]) -> None:
        outcomes.append(outcome)
        bar.update(1)
        if outcome[1] is not None and on_failure is not None:
            on_failure(outcome[1])

    with host_threads(spec.device):
        _track(spec, dataset, folder, todo, threads, batch, record, bar, timer, groups=groups)
    bar.close()
    order = {n: i for i, n in enumerate(todo)}
    for name, failure in sorted(outcomes, key=lambda o: order[o[0]]):
        if failure is None:
            report.done.append(name)
        else:
            report.failed.append(failure)
    return report


def _track(
    spec: TrackerSpec,
    dataset: DatasetSpec,
    folder: Path,
    todo: list[str],
    threads: int,
    batch: int,
    record: Callable[[tuple[str, Failure | None]], None],
    bar: Any,
    timer: StageTimer | None,
    *,
    groups: int = 1,
) -> None:
    """Track the sequences ``todo`` as :func:`run_dataset` was asked (lockstep, one process or a pool)."""
    if batch > 1:
        from pytracking.evaluation.lockstep import run_lockstep

        _setup(spec, dataset, folder, None)
        tracked = [0, time.monotonic()]  # frames so far, last refresh

        def frames_done(n: int) -> None:  # all slots may take minutes to finish a sequence: show frames
            tracked[0] += n
            if time.monotonic() - tracked[1] > 0.5:
                tracked[1] = time.monotonic()
                bar.set_postfix_str(f"{tracked[0]} frames")

        run_lockstep(
            spec,
            _WORKER["dataset"],
            todo,
            folder,
            batch=batch,
            groups=groups,
            record=record,
            failure=_lockstep_failure,
            frames_done=frames_done,
            timer=timer or NULL_TIMER,
        )
    elif threads == 1 or len(todo) <= 1:
        _setup(spec, dataset, folder, None)
        for name in todo:
            record(_run_one(name))
    else:
        cuda = resolve_device(spec.device).type == "cuda"
        torch_threads = CUDA_HOST_THREADS if cuda else max(1, (os.cpu_count() or 1) // threads)
        with ProcessPoolExecutor(
            max_workers=min(threads, len(todo)),
            mp_context=get_context("spawn"),
            initializer=_setup,
            initargs=(spec, dataset, folder, torch_threads, reusing_freed_memory()),
        ) as pool:
            futures = [pool.submit(_run_one, name) for name in todo]
            for fut in as_completed(futures):
                record(fut.result())
