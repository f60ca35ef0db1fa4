"""Fast BLAS for MLX on a Linux CPU.

The mlx-cpu wheel links the reference BLAS (~5 GFLOP/s on a 1024^2 fp32 matmul); preloading
Debian's OpenBLAS (libopenblas0-pthread) overrides cblas_sgemm & co. (~150 GFLOP/s). The dynamic
loader reads LD_PRELOAD only at process start, so a process either re-execs itself with it
(`ensure_fast_blas`, what the `jacrl` CLI does) or is started with `fast_blas_env()` in its
environment (the `jacrl` Jupyter kernel, the ladder's notebook runs).
"""

from __future__ import annotations

import glob
import os
import sys

OPENBLAS_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r*.so",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblasp-r*.so",
)
REEXEC_GUARD = "JACRL_FAST_BLAS_REEXEC"  # set in the re-exec'd process: never loop
DISABLE = "JACRL_NO_FAST_BLAS"  # set to 1 to opt out


def cpus() -> int:
    """CPUs this process may run on (sched_getaffinity is Linux-only)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def find_openblas() -> str | None:
    """The newest installed OpenBLAS (pthread build) library, or None (also off Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    for pattern in OPENBLAS_GLOBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def preload_env() -> dict[str, str]:
    """{"LD_PRELOAD": OpenBLAS}, or {} when it is not installed / not Linux: what the `jacrl`
    kernelspec carries, so a kernel keeps the thread count of the environment that starts it (the
    ladder's, JupyterLab's; unset, OpenBLAS uses every CPU it may run on, as `cpus()` counts)."""
    lib = find_openblas()
    return {"LD_PRELOAD": lib} if lib else {}


def fast_blas_env() -> dict[str, str]:
    """Env vars that make MLX use OpenBLAS, or {} when it is not installed / not Linux."""
    env = preload_env()
    if env:  # keep a user's thread choice; otherwise use the CPUs we may run on
        env["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS") or str(cpus())
    return env


def ensure_fast_blas() -> None:
    """Re-exec this process with OpenBLAS preloaded; call first thing in a CLI process.

    No-op when LD_PRELOAD is already set, when no library is found, after one re-exec, or when
    JACRL_NO_FAST_BLAS=1.
    """
    if os.environ.get("LD_PRELOAD") or os.environ.get(REEXEC_GUARD):
        return
    if os.environ.get(DISABLE, "") not in ("", "0"):
        return
    extra = fast_blas_env()
    if not extra:
        return
    env = {**os.environ, **extra, REEXEC_GUARD: "1"}
    # orig_argv keeps `-m pkg.mod` (sys.argv would turn it into a script path).
    argv = [sys.executable, *sys.orig_argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


# -------------------------------------------------------------------------------------------
# which BLAS computed a result (a determinism record: see `jacrl.train.artifacts`)
# -------------------------------------------------------------------------------------------


def _mapped_libraries() -> list[str]:
    """Paths of the shared libraries mapped into this process (Linux; [] elsewhere)."""
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f if ".so" in line and "/" in line})
    except OSError:
        return []


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def blas_record() -> dict:
    """Which BLAS this process computes with, read from what is loaded (not from LD_PRELOAD):
    {"library": OpenBLAS's path or the first other libblas mapped ("" when none is loaded yet),
    "openblas_core": the kernel family OpenBLAS picked for this CPU, "threads", "cpu"}. Adapter
    bytes depend on the library and the kernel family, and on some families on the thread count
    (measured: `jacrl.train.artifacts.THREAD_INVARIANT`)."""
    libs = _mapped_libraries()
    # numpy's and scipy's own OpenBLAS builds (libscipy_openblas*, prefixed symbols) are not
    # what MLX calls; the mapped list is sorted by path, so they may come first
    openblas = [
        p
        for p in libs
        if "openblas" in os.path.basename(p).lower()
        and "scipy_openblas" not in os.path.basename(p).lower()
    ]
    other = [p for p in libs if os.path.basename(p).lower().startswith("libblas")]
    rec = {
        "library": (openblas or other or [""])[0],
        "openblas_core": "",
        "threads": 1,
        "cpu": _cpu_model(),
    }
    if openblas:
        import ctypes

        try:
            lib = ctypes.CDLL(openblas[0])  # already loaded: the same handle, nothing re-run
            lib.openblas_get_corename.restype = ctypes.c_char_p
            rec["openblas_core"] = lib.openblas_get_corename().decode()
            rec["threads"] = int(lib.openblas_get_num_threads())
        except (OSError, AttributeError):
            pass
    return rec
