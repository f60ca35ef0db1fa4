"""fp32 matmul throughput of MLX on CPU with its bundled reference BLAS vs. Debian's OpenBLAS.

usage: python bench/blas.py [--n 1024] [--reps 20]

LD_PRELOAD only takes effect at process start, so each variant runs in a fresh child process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jacrl.blas import fast_blas_env  # noqa: E402


def measure(n: int, reps: int) -> float:
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    a = mx.random.normal((n, n), key=mx.random.key(0))
    b = mx.random.normal((n, n), key=mx.random.key(1))
    mx.eval(a @ b)  # warm-up: thread pools, page faults
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        mx.eval(a @ b)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9  # best-of-reps: least disturbed by other jobs


def child(extra_env: dict[str, str], n: int, reps: int) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "OPENBLAS_NUM_THREADS")}
    env.update(extra_env)
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--n", str(n), "--reps", str(reps)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["gflops"]


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps({"gflops": measure(args.n, args.reps)}))
        return

    ref = child({}, args.n, max(3, args.reps // 5))  # reference BLAS is ~0.4 s per matmul
    print(f"reference BLAS : {ref:8.1f} GFLOP/s  ({args.n}x{args.n} fp32 matmul)")
    fast = fast_blas_env()
    if not fast:
        print("OpenBLAS       : not found (apt-get install libopenblas0-pthread)")
        return
    for threads in sorted({"1", fast["OPENBLAS_NUM_THREADS"]}, key=int):
        gf = child({**fast, "OPENBLAS_NUM_THREADS": threads}, args.n, args.reps)
        print(
            f"OpenBLAS {threads:>2}thr : {gf:8.1f} GFLOP/s  ratio {gf / ref:5.1f}x  "
            f"({fast['LD_PRELOAD']})"
        )


if __name__ == "__main__":
    main()
