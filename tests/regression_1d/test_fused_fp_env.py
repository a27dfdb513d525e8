"""Loading the fused 1D kernels must leave the process's floating-point environment alone."""

import subprocess
import sys

import pytest

from ltr.regression_1d import fused

CHECK = """
import numpy as np, torch
from ltr.regression_1d import fused, fused_dsm, fused_is, fused_sm
fused._library(); fused_dsm._library(); fused_sm._library(); fused_is._library()
tiny = np.float64(5e-324)          # the smallest float64 subnormal
assert tiny > 0 and tiny * 2 > 0, "subnormals flushed to zero after loading the kernels"
assert torch.tensor(1e-310, dtype=torch.float64).item() > 0
print("ok")
"""


@pytest.mark.skipif(not fused.available(), reason="no C++ compiler to build the fused kernel")
def test_loading_the_kernel_keeps_subnormals():
    # in a fresh process, so that no earlier import has already changed the environment
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
