"""A TraX server: the VOT toolkit (``vot evaluate``) drives any tracker of this toolkit over the TraX protocol.

``python -m pytracking.vot dimp nce_plus [key=value ...] [--net CKPT] [--device auto|cpu|cuda]
[--polygon preserve_area|union]`` (console script ``pytracking-vot``); ``python -m pytracking.vot.workspace``
writes the ``trackers.ini`` entry that runs it.

One process serves one TraX connection. Each ``initialize`` request starts a fresh tracker (the network is
loaded once per process) on the request's region: a rectangle as given, a polygon (VOT2016-2019 short-term
annotations) by :func:`pytracking.vot.regions.polygon_to_box`. Each ``frame`` request is answered with the
tracked rectangle (xywh image pixels) and, for DiMP, the localisation's maximum score as the ``confidence``
property. Images come as file paths on the ``color`` channel. ``quit`` ends the process with status 0.

Arguments (tracker, parameter set, overrides, checkpoint file) are checked before the handshake: an error
is one ``error:`` line on stderr and exit status 2. The network is loaded when the first ``initialize``
arrives, so that the toolkit's reply timeout (30 s by default) covers the import and the loading separately. A failure while tracking (an unreadable frame, a bad region, a bug) is one ``error:`` line (with
the traceback for a bug) on stderr, which the toolkit keeps in its log, and a TraX ``quit`` whose reason is
that line; the process then exits with status 1, so ``vot evaluate --persist`` records the failure for that
sequence and goes on with the next.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytracking.vot.regions import POLYGON_RULES, PolygonRule, RegionError, region_to_box

#: exit status when a request could not be served (argument errors exit with 2, like argparse)
FAILED = 1


@dataclass(frozen=True)
class ServerOptions:
    """What to serve: tracker and parameter set, ``key=value`` overrides, checkpoint, device, polygon rule."""

    tracker: str
    param: str
    overrides: tuple[str, ...] = ()
    net: str | None = None
    device: str = "auto"
    polygon: PolygonRule = "preserve_area"

    def spec(self) -> Any:
        """The :class:`~pytracking.evaluation.tracker_spec.TrackerSpec` (names and overrides checked)."""
        from pytracking.evaluation.tracker_spec import TrackerSpec

        return TrackerSpec(self.tracker, self.param, self.net, self.device, overrides=self.overrides)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytracking.vot", description=__doc__.split("\n")[0])
    p.add_argument("tracker", help="tracker name, e.g. dimp")
    p.add_argument("param", help="parameter set, e.g. nce_plus")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="changes of parameter-set fields")
    p.add_argument(
        "--net", default=None, help="checkpoint path (default: latest of the param's train setting)"
    )
    p.add_argument("--device", default="auto", help="auto (GPU if available), cpu, cuda or cuda:K")
    p.add_argument(
        "--polygon",
        default="preserve_area",
        choices=POLYGON_RULES,
        help="how a polygon region becomes the tracker's box (default: pytracking's preserve_area)",
    )
    return p


def check_options(options: ServerOptions) -> None:
    """The checks before the handshake: names, overrides and the checkpoint file (ValueError naming it)."""
    if options.net is not None and not Path(options.net).is_file():
        raise ValueError(f"{options.net}: no such checkpoint file (--net)")
    bad = [o for o in options.overrides if "=" not in o]
    if bad:
        raise ValueError(f"expected key=value overrides, got {bad}")
    options.spec()


def make_tracker_factory(options: ServerOptions) -> Callable[[], Any]:
    """A function returning a fresh tracker for ``options`` (checkpoint loaded and checked on the first call)."""
    from pytracking.evaluation.tracker_spec import build_tracker, prepare_spec

    spec = options.spec()
    prepared: list[Any] = []

    def factory() -> Any:
        if not prepared:
            ready, warnings = prepare_spec(spec)
            for warning in warnings:
                print(f"warning: {warning}", file=sys.stderr, flush=True)
            prepared.append(ready)
        return build_tracker(prepared[0])

    return factory


def region_values(region: Any) -> list[float]:
    """The numbers of a TraX region: rectangle ``x, y, w, h`` or polygon ``x1, y1, x2, y2, ...``."""
    from trax import Region

    if region.type == Region.RECTANGLE:
        return [float(v) for v in region.bounds()]
    if region.type == Region.POLYGON:
        return [float(c) for i in range(region.size()) for c in region.get(i)]
    raise RegionError(f"a {region.type} region is not supported (rectangle or polygon)")


def _confidence(tracker: Any) -> dict[str, str]:
    score = getattr(tracker, "debug_info", {}).get("max_score")
    return {} if score is None else {"confidence": f"{float(score):.6g}"}


def serve(options: ServerOptions, make_tracker: Callable[[], Any] | None = None) -> int:
    """Answer TraX requests on this process's connection until ``quit``; returns the exit status."""
    from trax import Image, ImageChannel, Region, TraxStatus
    from trax.region import Rectangle
    from trax.server import Server

    from ltr.dataset.base import read_image_checked

    make_tracker = make_tracker or make_tracker_factory(options)
    server = Server([Region.RECTANGLE, Region.POLYGON], [Image.PATH], [ImageChannel.COLOR])
    tracker = None
    try:
        while True:
            request = server.wait()
            if request.type == TraxStatus.QUIT:
                break
            frame = read_image_checked(request.image[ImageChannel.COLOR].path())
            if request.type == TraxStatus.INITIALIZE:
                region = request.objects[0][0]
                box = region_to_box(region_values(region), options.polygon)
                tracker = make_tracker()
                tracker.initialize(frame, box)
                server.status([(region, {})])
            else:
                if tracker is None:
                    raise RuntimeError("a frame request came before initialize")
                x, y, w, h = (float(v) for v in tracker.track(frame))
                server.status([(Rectangle.create(x, y, w, h), _confidence(tracker))])
    except Exception as err:
        message = _one_line(err)
        print(f"error: {message}", file=sys.stderr, flush=True)
        if not _is_data_error(err):
            traceback.print_exc(file=sys.stderr)
        try:
            server.quit(reason=message)
        except Exception:  # the client is gone; its side of the log has the rest
            pass
        return FAILED
    server.quit()
    return 0


def _is_data_error(err: Exception) -> bool:
    from pytracking.evaluation.runner import DATA_ERRORS

    return isinstance(err, (*DATA_ERRORS, RegionError))


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if _is_data_error(err) else f"{type(err).__name__}: {text}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_intermixed_args(argv)
    options = ServerOptions(
        args.tracker, args.param, tuple(args.overrides), args.net, args.device, args.polygon
    )
    try:
        import trax  # noqa: F401
    except ImportError:
        print("error: the TraX server needs the vot extra: pip install 'ebmtrack[vot]'", file=sys.stderr)
        return 2
    from ltr.admin.cpu_memory import reuse_freed_memory
    from ltr.admin.device import resolve_device
    from pytracking.evaluation.host_threads import host_threads

    try:
        check_options(options)
        device = resolve_device(options.device)
    except ValueError as err:  # DeviceError too
        print(f"error: {err}", file=sys.stderr)
        return 2
    reuse_freed_memory()  # the first frame's batch of crops on the CPU: see ltr.admin.cpu_memory
    with host_threads(device):
        return serve(options)


if __name__ == "__main__":
    sys.exit(main())
