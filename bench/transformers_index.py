"""CPU seconds a fresh process spends to load jac-tiny's tokenizer the way every kernel, cell and
CLI call does (`mlx_lm.utils.load_tokenizer`), with transformers' own scan of its model files vs.
with the table kept on disk by `jacrl.models.hf_index`. Side by side, alternating, in fresh
processes each.

usage: python bench/transformers_index.py [--reps 7]  (writes bench/results/transformers_index.json)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOAD = (
    "import resource{hook}\n"
    "from mlx_lm.utils import load_tokenizer\n"
    "from jacrl.models.registry import resolve\n"
    "load_tokenizer(resolve('jac-tiny'))\n"
    "r = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(r.ru_utime + r.ru_stime)\n"
)
# jacrl.models.registry imports jacrl (and so the hook) after mlx_lm in the scan variant: the
# scan ran
VARIANTS = {"scan": LOAD.format(hook="\nimport mlx_lm"), "kept": LOAD.format(hook="\nimport jacrl")}


def cpu_seconds(code: str, cache: str) -> float:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        cpu_seconds(VARIANTS["kept"], cache)  # the first process keeps the table
        got: dict[str, list[float]] = {k: [] for k in VARIANTS}
        for _ in range(args.reps):
            for name, code in VARIANTS.items():
                got[name].append(cpu_seconds(code, cache))
    med = {k: statistics.median(v) for k, v in got.items()}
    text = json.dumps(
        {
            "load_average": os.getloadavg()[0],
            "reps": args.reps,
            "median_cpu_s": med,
            "runs": got,
            "saved_s": round(med["scan"] - med["kept"], 3),
            "ratio": round(med["scan"] / med["kept"], 2),
        },
        indent=1,
    )
    (ROOT / "bench" / "results" / "transformers_index.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
