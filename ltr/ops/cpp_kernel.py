"""Plain C++ kernels for the CPU, built on first use and called through ctypes.

Some hot loops (the tracker's box pooling and quantisation) run faster as a few
hundred lines of C++ than as dozens of small PyTorch operations. The kernels include no PyTorch header, so
they compile in about a second: :func:`compile_library` builds a source once with the system's ``c++``
($CXX) into a per-user cache ($LTR_KERNEL_CACHE or ~/.cache/ebmtrack, keyed by the source, the flags and
the CPU) and loads it; the callers pass the tensors' data pointers. Every caller keeps a PyTorch path for
machines without a compiler (:func:`loads` says whether a build succeeds).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["compile_library", "loads"]

# Not -ffast-math: with it GCC links crtfastmath.o into the shared object, and loading the library then sets
# flush-to-zero / denormals-are-zero for the whole process (torch and numpy included; hypothesis caught it:
# the smallest subnormal became 0). The flags below allow the same vectorised reductions without touching the
# floating-point environment.
_FLAGS = [
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fno-signed-zeros",
    "-fassociative-math",
    "-freciprocal-math",
    "-fopenmp-simd",
    "-fPIC",
    "-shared",
    "-std=c++17",
]


def _cpu_key() -> str:
    """The CPU's feature flags: -march=native code must not be loaded on a different CPU sharing the cache."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor()


def _cache_dir() -> Path:
    root = os.environ.get("LTR_KERNEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "ebmtrack"


@functools.cache
def compile_library(stem: str, source: str) -> ctypes.CDLL:
    """Compile ``source`` (once per source/flags/machine, cached on disk as ``<stem>_<hash>.so``) and load it.

    Raises RuntimeError with the compiler's message if no compiler is found or the build fails.
    """
    key = hashlib.sha256((source + " ".join(_FLAGS) + platform.machine() + _cpu_key()).encode()).hexdigest()[
        :16
    ]
    lib_path = _cache_dir() / f"{stem}_{key}.so"
    if not lib_path.is_file():
        compiler = shutil.which(os.environ.get("CXX", "c++"))
        if compiler is None:
            raise RuntimeError(f"no C++ compiler found (set CXX) to build the kernel {stem}")
        lib_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=lib_path.parent) as tmp:
            src = Path(tmp) / f"{stem}.cpp"
            src.write_text(source)
            out = Path(tmp) / lib_path.name
            proc = subprocess.run(
                [compiler, *_FLAGS, str(src), "-o", str(out)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise RuntimeError(f"building the kernel {stem} failed ({compiler}):\n{proc.stderr[-2000:]}")
            os.replace(out, lib_path)
    return ctypes.CDLL(str(lib_path))


def loads(library: Callable[[], ctypes.CDLL]) -> bool:
    """Whether ``library()`` (a kernel module's cached build-and-load function) succeeds here."""
    try:
        library()
    except (RuntimeError, OSError):
        return False
    return True
