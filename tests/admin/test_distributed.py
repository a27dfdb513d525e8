"""Distributed helpers in a single process: defaults, seeds, launch-environment errors."""

from __future__ import annotations

import pytest
import torch

from ltr.admin import distributed
from ltr.admin.distributed import DistributedError, all_gather_tensors, init_distributed, sample_seed


def test_single_process_defaults(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    info = init_distributed("cpu")
    assert (info.rank, info.world_size, info.distributed, info.is_main) == (0, 1, False, True)
    assert distributed.rank() == 0 and distributed.world_size() == 1 and distributed.is_main_process()
    distributed.barrier()  # no-op without a process group
    t = {"a": torch.arange(3)}
    gathered = all_gather_tensors(t, torch.device("cpu"))
    assert len(gathered) == 1 and torch.equal(gathered[0]["a"], t["a"])


def test_sample_seed_is_base_plus_1000_rank_plus_worker():
    assert sample_seed(5, 0, 0) == 5
    assert sample_seed(5, 3, 2) == 2008
    seeds = {sample_seed(0, w, r) for r in range(4) for w in range(8)}
    assert len(seeds) == 32  # no collisions between ranks and workers
    with pytest.raises(ValueError, match=r"worker_id=1000 must be in \[0, 1000\)"):
        sample_seed(0, 1000, 0)


def test_incomplete_torchrun_environment_names_the_missing_variable(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(
        DistributedError, match=r"environment variable RANK is not set; launch with `torchrun"
    ):
        init_distributed("cpu")
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(DistributedError, match=r"RANK='zero' is not an integer"):
        init_distributed("cpu")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(DistributedError, match=r"MASTER_ADDR is not set"):
        init_distributed("cpu")
