"""reuse_freed_memory: a freed large block's pages are reused by the next allocations instead of mapped and
page-faulted afresh. Each case runs in a process of its own (the setting is process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ltr.admin.cpu_memory import _glibc

REPO = Path(__file__).resolve().parents[2]

# allocate, fill and free a 256 MiB tensor twelve times; report the last four rounds' minor page faults (the
# first rounds may take new pages while the heap finds room for the block among the small ones around it)
CHILD = """
import json, resource, sys
import torch
from ltr.admin.cpu_memory import reuse_freed_memory, reusing_freed_memory
taken = reuse_freed_memory() if sys.argv[1] == "reuse" else False
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):
    torch.ones(64, 2**20).sum()
before = faults()
for _ in range(4):
    torch.ones(64, 2**20).sum()
print(json.dumps({"taken": taken, "on": reusing_freed_memory(), "faults": faults() - before}))
"""

PAGES = 256 * 2**20 // 4096


def run_child(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(_glibc() is None, reason="the setting exists on glibc only")
def test_freed_large_blocks_are_reused_without_page_faults_only_with_the_setting() -> None:
    system, reuse = run_child("system"), run_child("reuse")
    assert (system["taken"], system["on"]) == (False, False)
    assert (reuse["taken"], reuse["on"]) == (True, True)
    assert reuse["faults"] < 4 * PAGES // 50
    # without it glibc maps every block afresh: a fault per page (per 2 MiB where huge pages are always on)
    assert system["faults"] > 10 * reuse["faults"] + 4 * 64
