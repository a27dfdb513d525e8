"""Speed of the tracker's box-refinement ascent: autograd through the box head vs the closed-form BoxScorer.

    python benchmarks/box_ascent.py [--threads 1 2] [--repeats 30] [--device cpu|cuda] [--setting nce_plus]
                                    [--cells 29 26 16 14] [--layouts] [--int8] [--compare-kernel]

Builds the box head of a DiMP train setting with random weights (``pytracking.tracker.dimp.random_network``,
SuperDiMP's widths for ``nce_plus``: 256 channels, Linear 6400 -> 256 and 2304 -> 256), modulates random
test features of the size the tracker's refinement window has (default 29 x 26 cells at stride 8 and 16 x 14 at
stride 16, what SuperDiMP's tracker used on the synthetic video of ``benchmarks/tracker_fps.py``) and runs the
refinement as the tracker does: S = 10 candidate boxes (a 48 x 71 px box and 9 jitters), 10 plain steps of
2.5e-3 in rel space, boxes clipped to bounds on two sides. Two paths (three with ``--int8``), alternated in
the same process:

- autograd: ``gradient_ascent`` through ``EnergyBoxHead.score_modulated`` (how the reference trackers do it);
- closed form: ``gradient_ascent(..., value_and_grad=...)`` with ``BoxScorer`` and the tracker's rel-space
  chain (``refine.rel_value_and_grad``, ``RelBoxes``; forward-only last step with ``BoxScorer.score``);
- with ``--int8``, also the closed form with ``BoxScorer(..., int8=True)``: the per-box Linear layers'
  products in int8 (what the tracker runs with ``int8_heads`` on a CPU), and where that takes the fused way
  (``ltr.ops.int8_matmul``), the plain way as its baseline;
- with ``--compare-kernel``, also the closed form (and with ``--int8`` its int8 variant) with the pooling and
  box gradient in PyTorch (``BoxScorer(..., kernel=False)``) instead of the C++ kernel of
  :mod:`ltr.ops.box_pool_kernel` that a float32 CPU scorer uses by default.

Printed per thread count: median wall ms of one ascent for each path, the ratio autograd / closed form (above
1.0: the closed form is faster) of the median wall times, of the best wall times (closest to an idle machine)
and of the median process CPU times, and the largest difference of the refined boxes between the paths
(pixels); ``--layouts`` also times the 6400 -> 256 products with the weight matrix stored either way (why
``FoldedBoxLayers`` keeps both). Run on a quiet machine (timings of a shared 2-core machine vary by +-20%); at 2 threads on a busy
machine the wall times mostly measure waiting for the other core.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from ltr.ebm.predict import gradient_ascent
from ltr.models.box_score_grad import BoxScorer, Int8BoxLayers, fold_box_layers, quantize_box_layers
from ltr.ops.boxes import rel_to_xywh
from ltr.ops.int8_matmul import fused_mm_available
from pytracking.tracker.dimp import random_network
from pytracking.tracker.dimp.refine import RelBoxes, candidate_boxes, clip_xywh, rel_value_and_grad


def make_problem(setting: str, cells: list[int], device: torch.device):
    """(head, modulated maps, start boxes (1, S, 4) xywh, bounds (4,) xyxy) on ``device``, random weights."""
    head = random_network(setting, device).net.box_head.eval()
    g = torch.Generator().manual_seed(0)
    h2, w2, h3, w3 = cells
    c2, c3 = head.box_fc2.linear.in_features // 25, head.box_fc3.linear.in_features // 9
    modulated = (
        torch.randn(1, c2, h2, w2, generator=g).relu().to(device),
        torch.randn(1, c3, h3, w3, generator=g).relu().to(device),
    )
    box = torch.tensor([90.0, 70.0, 48.0, 71.0])
    start = candidate_boxes(box, 9, 0.1, 0.5, g)[None].to(device)
    bounds = torch.tensor([-float("inf"), -float("inf"), 200.0, 224.0], device=device)
    return head, modulated, start, bounds


def make_ascents(
    head,
    modulated,
    start: torch.Tensor,
    bounds: torch.Tensor,
    int8: bool = False,
    compare_kernel: bool = False,
) -> dict[str, Callable[[], torch.Tensor]]:
    """The ascents (autograd, closed form, and with ``int8`` the closed form with int8 Linear products), each
    returning the refined boxes (1, S, 4) xywh."""
    kwargs = dict(step_length=2.5e-3, num_iters=10, decay=1.0, mode="plain")

    def boxes_of(rel: torch.Tensor) -> torch.Tensor:
        return clip_xywh(rel_to_xywh(rel, start), bounds)

    def autograd() -> torch.Tensor:
        result = gradient_ascent(
            lambda rel: head.score_modulated(modulated, boxes_of(rel)), torch.zeros_like(start), **kwargs
        )
        return boxes_of(result.y)

    chain = RelBoxes(start, bounds)  # the same boxes as boxes_of, in fewer operations (the tracker's)

    plain = None
    if int8 and fused_mm_available():  # the plain int8 way (torch._int_mm) as the fused way's baseline
        plain = quantize_box_layers(fold_box_layers(head), fused=False)

    def closed_form(
        int8: bool = False, layers: Int8BoxLayers | None = None, kernel: bool | None = None
    ) -> torch.Tensor:
        scorer = BoxScorer(head, modulated, int8=int8, kernel=kernel)  # once per frame in the tracker: timed
        if layers is not None:
            scorer.int8 = layers
        result = gradient_ascent(
            lambda rel: scorer.score(chain.boxes(rel)),
            torch.zeros_like(start),
            value_and_grad=rel_value_and_grad(scorer, start, bounds),
            **kwargs,
        )
        return chain.boxes(result.y)

    ascents = {"autograd": autograd, "closed form": closed_form}
    if int8:
        ascents["closed form int8"] = lambda: closed_form(int8=True)
    if plain is not None:
        ascents["closed form int8 plain"] = lambda: closed_form(int8=True, layers=plain)
    if compare_kernel:
        ascents["closed form, PyTorch pooling"] = lambda: closed_form(kernel=False)
        if int8:
            ascents["closed form int8, PyTorch pooling"] = lambda: closed_form(int8=True, kernel=False)
    return ascents


def time_ascents(ascents: dict[str, Callable[[], torch.Tensor]], repeats: int, device: torch.device):
    """Median wall ms, best wall ms and median process CPU ms per path, calls alternated; plus the refined
    boxes of each path."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times: dict[str, list[float]] = {name: [] for name in ascents}
    cpu: dict[str, list[float]] = {name: [] for name in ascents}
    results = {name: fn() for name, fn in ascents.items()}  # warm-up
    for _ in range(repeats):
        for name, fn in ascents.items():
            sync()
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            sync()
            times[name].append((time.perf_counter() - t0) * 1e3)
            cpu[name].append((time.process_time() - c0) * 1e3)
    stats = {name: (statistics.median(t), min(t), statistics.median(cpu[name])) for name, t in times.items()}
    return stats, results


def time_layouts(head, rows: int, repeats: int) -> None:
    """The Linear 25 C2 -> O2 products with S rows, forward and backward, with the weight stored either way."""
    folded = fold_box_layers(head)
    weight, weight_t = folded.weights[0], folded.weights_t[0]  # (O, I), (I, O) contiguous
    x = torch.randn(rows, weight.shape[1], device=weight.device)
    g = torch.randn(rows, weight.shape[0], device=weight.device)
    cases = {
        "forward x @ weight_t (stored (I, O))": lambda: torch.mm(x, weight_t),
        "forward x @ weight.t() (stored (O, I))": lambda: torch.mm(x, weight.t()),
        "backward g @ weight (stored (O, I))": lambda: torch.mm(g, weight),
        "backward g @ weight_t.t() (stored (I, O))": lambda: torch.mm(g, weight_t.t()),
    }
    for name, fn in cases.items():
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        print(f"  {name:44s} median {statistics.median(times):7.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--setting", default="nce_plus")
    parser.add_argument(
        "--layouts", action="store_true", help="also time the Linear products' weight layouts"
    )
    parser.add_argument(
        "--int8",
        action="store_true",
        help="also time the closed form with the per-box Linear products in int8 (CPU)",
    )
    parser.add_argument(
        "--compare-kernel",
        action="store_true",
        help="also time the closed form with the pooling in PyTorch instead of the C++ kernel (CPU)",
    )
    parser.add_argument(
        "--cells", type=int, nargs=4, default=[29, 26, 16, 14], metavar=("H2", "W2", "H3", "W3")
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    head, modulated, start, bounds = make_problem(args.setting, args.cells, device)
    ascents = make_ascents(head, modulated, start, bounds, int8=args.int8, compare_kernel=args.compare_kernel)
    print(
        f"box ascent: setting {args.setting}, S={start.shape[1]} boxes, 10 steps, maps "
        f"{tuple(modulated[0].shape[1:])} and {tuple(modulated[1].shape[1:])}, device {device}"
    )
    with torch.no_grad():  # as in the tracker
        for threads in args.threads:
            torch.set_num_threads(threads)
            stats, results = time_ascents(ascents, args.repeats, device)
            (auto_med, auto_best, auto_cpu), (ours_med, ours_best, ours_cpu) = (
                stats["autograd"],
                stats["closed form"],
            )
            diff = (results["autograd"] - results["closed form"]).abs().max().item()
            print(
                f"threads {threads}: autograd {auto_med:7.2f} ms (best {auto_best:6.2f}), closed form "
                f"{ours_med:7.2f} ms (best {ours_best:6.2f}); ratio autograd / closed form: median "
                f"{auto_med / ours_med:4.2f}, best {auto_best / ours_best:4.2f}, process CPU "
                f"{auto_cpu / ours_cpu:4.2f}; max box difference {diff:.2e} px"
            )
            if args.int8:
                int8_med, int8_best, int8_cpu = stats["closed form int8"]
                boxes = results["closed form int8"]
                diff = (boxes - results["closed form"]).abs().max().item()
                print(
                    f"  int8 Linear products: {int8_med:7.2f} ms (best {int8_best:6.2f}); ratio closed form"
                    f" / int8: median {ours_med / int8_med:4.2f}, best {ours_best / int8_best:4.2f}, process"
                    " CPU "
                    f"{ours_cpu / int8_cpu:4.2f}; max box difference to the float32 closed form {diff:.2e} px"
                )
            if "closed form int8 plain" in stats:
                plain_med, plain_best, plain_cpu = stats["closed form int8 plain"]
                print(
                    "  int8, the plain way (torch._int_mm, per-row quantisation by tensor ops): "
                    f"{plain_med:7.2f} ms (best {plain_best:6.2f}); ratio plain / fused: median "
                    f"{plain_med / int8_med:4.2f}, best {plain_best / int8_best:4.2f}, process CPU "
                    f"{plain_cpu / int8_cpu:4.2f}"
                )
            for variant in ("", " int8"):
                name = f"closed form{variant}, PyTorch pooling"
                if name not in stats:
                    continue
                kernel_med, kernel_best, kernel_cpu = stats[f"closed form{variant}"]
                torch_med, torch_best, torch_cpu = stats[name]
                diff = (results[name] - results[f"closed form{variant}"]).abs().max().item()
                print(
                    f"  closed form{variant} with the pooling in PyTorch: {torch_med:7.2f} ms (best "
                    f"{torch_best:6.2f}); ratio PyTorch / C++ kernel: median {torch_med / kernel_med:4.2f}, "
                    f"best {torch_best / kernel_best:4.2f}, process CPU {torch_cpu / kernel_cpu:4.2f}; max box "
                    f"difference {diff:.2e} px"
                )
            if args.layouts:
                time_layouts(head, start.shape[1], 10 * args.repeats)


if __name__ == "__main__":
    main()
