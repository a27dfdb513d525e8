"""Suite-wide test settings.

Torch runs with one intra-op thread by default (``TEST_TORCH_THREADS`` overrides): the tests use small
tensors, where a spinning OpenMP pool costs far more than it gains, and on a loaded 2-core machine two
threads per process made small ops 20x slower here.
"""

import os

import matplotlib
import torch

matplotlib.use("Agg")
torch.set_num_threads(int(os.environ.get("TEST_TORCH_THREADS", "1")))
