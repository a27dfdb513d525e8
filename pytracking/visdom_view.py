"""Live view of a tracking run on a visdom server: the frame with the box and the refinement boxes, and the
classifier's score map (``--visdom``; default server http://127.0.0.1:8097, start one with
``python -m ltr.admin.visdom_server --port 8097``, see docs/visdom.md).

Panes (window ids): ``frame`` (RGB frame, output box green, refinement candidates blue) and ``score_map``
(colour-mapped scores of the last search crop) plus ``state`` (text: sequence, frame, localisation state).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from ltr.admin.extras import import_extra

FRAME_WIN, SCORE_WIN, STATE_WIN = "frame", "score_map", "state"


def draw_boxes(frame: np.ndarray, box_xywh: np.ndarray, extra_boxes: np.ndarray | None = None) -> np.ndarray:
    """A copy of ``frame`` (H, W, 3) RGB uint8 with the (4,) xywh box in green, (K, 4) xywh boxes in blue."""
    out = np.ascontiguousarray(frame[..., :3] if frame.ndim == 3 else np.repeat(frame[..., None], 3, -1))
    out = out.astype(np.uint8, copy=True)

    def rect(b: np.ndarray, colour: tuple[int, int, int], width: int) -> None:
        if not np.isfinite(b).all():
            return
        x, y, w, h = (float(v) for v in b)
        p1 = (round(x), round(y))
        p2 = (round(x + w), round(y + h))
        cv2.rectangle(out, p1, p2, colour, width)

    if extra_boxes is not None:
        for b in np.asarray(extra_boxes).reshape(-1, 4):
            rect(b, (0, 128, 255), 1)
    rect(np.asarray(box_xywh, dtype=np.float64), (0, 255, 0), 2)
    return out


def score_image(scores: np.ndarray, size: int = 192) -> np.ndarray:
    """(H', W') scores -> (size, size, 3) RGB uint8 (jet colour map, min..max)."""
    s = np.asarray(scores, dtype=np.float64)
    s = np.nan_to_num(s)
    lo, hi = float(s.min()), float(s.max())
    norm = np.zeros_like(s) if hi <= lo else (s - lo) / (hi - lo)
    img = cv2.resize((norm * 255).astype(np.uint8), (size, size), interpolation=cv2.INTER_NEAREST)
    return cv2.cvtColor(cv2.applyColorMap(img, cv2.COLORMAP_JET), cv2.COLOR_BGR2RGB)


class VisdomView:
    """Posts frames, score maps and state text to a visdom server (raises if the server cannot be reached)."""

    def __init__(self, server: str = "http://127.0.0.1", port: int = 8097, env: str = "tracking") -> None:
        visdom = import_extra("visdom", "visdom")  # MissingExtra names the pip command
        self.env = env
        hint = f"no visdom server at {server}:{port}; start one with `python -m ltr.admin.visdom_server --port {port}`"
        try:
            self.vis = visdom.Visdom(
                server=server, port=port, env=env, raise_exceptions=True, use_incoming_socket=False
            )  # no incoming events are used; the socket only printed errors on close
        except ConnectionError as err:
            raise ConnectionError(f"{hint} ({err})") from err
        if not self.vis.check_connection(timeout_seconds=5):
            raise ConnectionError(hint)

    def show(
        self,
        frame: np.ndarray,
        box_xywh: np.ndarray,
        *,
        sequence: str = "",
        frame_index: int = 0,
        debug_info: dict[str, Any] | None = None,
    ) -> None:
        """Post one frame (H, W, 3) RGB with its (4,) xywh box; ``debug_info`` is the tracker's (scores,
        state, refine_boxes tensors)."""
        info = debug_info or {}
        extra = info.get("refine_boxes")
        extra = None if extra is None else extra.detach().cpu().numpy()
        img = draw_boxes(frame, box_xywh, extra)
        self.vis.image(
            img.transpose(2, 0, 1), win=FRAME_WIN, env=self.env, opts={"title": f"{sequence} frame"}
        )
        scores = info.get("scores")
        if scores is not None:
            s = score_image(scores.detach().float().cpu().numpy())
            self.vis.image(s.transpose(2, 0, 1), win=SCORE_WIN, env=self.env, opts={"title": "score map"})
        state = info.get("state", "init")  # a localisation state name (pytracking.tracker.dimp.localize)
        self.vis.text(f"{sequence} frame {frame_index}: state {state}", win=STATE_WIN, env=self.env)
