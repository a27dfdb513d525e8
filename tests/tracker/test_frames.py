"""The tracker's input rules (pytracking.tracker.dimp.frames): frame dtypes and values, initial boxes, one
frame size per sequence."""

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp.frames import (
    FrameSizeError,
    TrackerInputError,
    check_frame_dtype,
    check_frame_size,
    frame_pixels,
    frame_to_tensor,
    input_frame_wh,
    pinned_frame,
    prepare_frame,
    validate_frame,
    validate_init_box,
)
from tests.tracker.helpers import random_frame, tiny_tracker

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    "frame",
    [
        np.zeros((4, 5, 3), np.uint8),
        np.full((4, 5, 3), 200.0, np.float32),
        np.full((4, 5), 17.0, np.float64),
        torch.zeros(3, 4, 5, dtype=torch.uint8),
        torch.full((3, 4, 5), 99.0, dtype=torch.float16),
    ],
)
def test_uint8_and_float_frames_pass(frame):
    check_frame_dtype(frame)
    validate_frame(frame)
    assert prepare_frame(frame, CPU).shape[-1 if isinstance(frame, np.ndarray) else 0] == 3


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (
            np.zeros((4, 5, 3), np.uint16),
            r"dtype uint16 is not supported.*\(frame >> 8\)\.astype\(np\.uint8\)",
        ),
        (np.zeros((4, 5, 3), np.int64), r"dtype int64 is not supported.*frame\.astype\(np\.uint8\)"),
        (np.zeros((4, 5, 3), bool), r"dtype bool is not supported"),
        (torch.zeros(3, 4, 5, dtype=torch.int16), r"dtype torch\.int16 is not supported"),
        ([[0, 1], [2, 3]], r"numpy array or torch tensor, got list"),
    ],
)
def test_other_dtypes_are_refused_by_every_check(frame, message):
    for check in (check_frame_dtype, validate_frame, lambda f: prepare_frame(f, CPU)):
        with pytest.raises(TrackerInputError, match=message):
            check(frame)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((0.0, 0.5, 1.0), r"0\.\.1 values span 0\.\.1: a 0\.\.1-scaled image\? .*multiply by 255"),
        ((0.0, 12.0, 300.0), r"float frame values span 0\.\.300; .*pixel values 0\.\.255"),
        ((-1.0, 12.0, 30.0), r"float frame values span -1\.\.30"),
        ((0.0, np.nan, 30.0), r"NaN or infinite"),
        ((0.0, np.inf, 30.0), r"NaN or infinite"),
    ],
)
@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_float_frame_values_are_checked(values, message, kind):
    frame = np.resize(np.asarray(values, np.float32), (4, 5, 3))
    if kind == "tensor":
        frame = torch.from_numpy(frame).permute(2, 0, 1)
    message = message.replace(r"0\.\.1 values span", r"float frame values span")
    with pytest.raises(TrackerInputError, match=message):
        validate_frame(frame)
    check_frame_dtype(frame)  # the per-frame check reads no values


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (np.zeros((4, 5, 3, 1), np.uint8), r"\(H, W\) or \(H, W, C\) array"),
        (np.zeros((0, 5, 3), np.uint8), "empty side"),
        (np.zeros((4, 5, 6), np.uint8), "1, 2, 3 or 4 channels, got 6"),
        (torch.zeros(5, 4, 5, dtype=torch.uint8), "1, 2, 3 or 4 channels, got 5"),
        (torch.zeros(1, 3, 4, 5, dtype=torch.uint8), r"\(C, H, W\) or \(H, W\)"),
    ],
)
def test_layouts_are_checked(frame, message):
    with pytest.raises(TrackerInputError, match=message):
        validate_frame(frame)


def test_the_tracker_refuses_uint16_frames():
    tracker = tiny_tracker()
    frame16 = np.full((40, 50, 3), 30000, np.uint16)
    with pytest.raises(TrackerInputError, match="uint16"):
        tracker.initialize(frame16, [5.0, 5.0, 10.0, 10.0])
    tracker.initialize(random_frame(np.random.default_rng(0), 40, 50), [5.0, 5.0, 10.0, 10.0])
    with pytest.raises(TrackerInputError, match="uint16"):
        tracker.track(frame16)


def test_init_box_rules():
    box = validate_init_box([1, 2, 3, 4])
    assert box.dtype == np.float64 and box.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert validate_init_box(np.array([-5, -5, 10, 10]), frame_wh=(20, 10)).tolist() == [-5, -5, 10, 10]
    cases = [
        ([1, 2, 0, 4], r"w > 0 and h > 0; got x, y, w, h = \[1\.0, 2\.0, 0\.0, 4\.0\]"),
        ([1, 2, 3, -4], r"w > 0 and h > 0"),
        ([1, 2, float("nan"), 4], "4 finite numbers"),
        ([1, 2, 3], "4 finite numbers"),
        ("a,b,c,d", "4 numbers"),
    ]
    for bad, message in cases:
        with pytest.raises(TrackerInputError, match=message):
            validate_init_box(bad)
    with pytest.raises(TrackerInputError, match=r"entirely outside the 20x10 frame"):
        validate_init_box([20, 0, 5, 5], frame_wh=(20, 10))
    with pytest.raises(TrackerInputError, match=r"entirely outside"):
        validate_init_box([-5, 0, 5, 5], frame_wh=(20, 10))


def test_frame_size_check_names_the_frame():
    assert input_frame_wh(np.zeros((4, 5), np.uint8)) == (5, 4)
    assert input_frame_wh(torch.zeros(3, 4, 5)) == (5, 4)
    check_frame_size(np.zeros((4, 5, 3), np.uint8), (5, 4), index=3)
    with pytest.raises(FrameSizeError) as err:
        check_frame_size(np.zeros((8, 10, 3), np.uint8), (5, 4), index=3, source="img/0004.jpg")
    assert str(err.value).startswith("frame 3 (img/0004.jpg) is 10x8 pixels but the sequence started at 5x4")
    assert isinstance(err.value, TrackerInputError)


@pytest.mark.parametrize("channels", [None, 3, 4])
def test_a_frame_staged_for_a_cpu_tracker_is_the_frame(channels):
    frame = random_frame(np.random.default_rng(0), 12, 16, channels)
    assert pinned_frame(frame, torch.device("cpu")) is frame


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("channels", [None, 3, 4])
def test_a_frame_staged_in_pinned_memory_gives_the_tensor_of_the_frame(channels):
    """What the lockstep runner's readers hand a GPU tracker: the same device tensor, bit for bit."""
    frame = random_frame(np.random.default_rng(0), 12, 16, channels)
    cuda = torch.device("cuda")
    staged = pinned_frame(frame, cuda)
    assert isinstance(staged, torch.Tensor) and staged.is_pinned() and tuple(staged.shape) == (3, 12, 16)
    assert input_frame_wh(staged) == input_frame_wh(frame)
    torch.testing.assert_close(frame_to_tensor(staged, cuda), frame_to_tensor(frame, cuda), rtol=0, atol=0)
    pixels = frame_pixels(staged, cuda)  # what the tracker crops: uint8 on the device
    assert pixels.dtype == torch.uint8 and torch.equal(pixels, frame_pixels(frame, cuda))


@pytest.mark.parametrize("dtype", [np.uint8, np.float64, np.float16])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_frame_pixels_keep_uint8_and_make_floats_float32(dtype, channels):
    """frame_pixels: the (3, H, W) pixels, uint8 kept (the crop converts what it cuts) and floats as
    float32; as float32 they are frame_to_tensor's, for numpy frames and tensors alike."""
    rng = np.random.default_rng(channels)
    frame = rng.integers(0, 256, (5, 7, channels)).astype(dtype)
    cpu = torch.device("cpu")
    for given in (frame, torch.from_numpy(frame).permute(2, 0, 1)):
        pixels = frame_pixels(given, cpu)
        assert pixels.shape == (3, 5, 7)
        assert pixels.dtype == (torch.uint8 if dtype == np.uint8 else torch.float32)
        assert torch.equal(pixels.float(), frame_to_tensor(given, cpu))
        assert torch.equal(pixels.float()[0], torch.from_numpy(frame[:, :, 0].astype(np.float32)))
