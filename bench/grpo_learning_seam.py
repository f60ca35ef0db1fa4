"""GRPO's own loop against the mlx-lm-lora trainer it replaced, on the learning benchmark.

`bench/grpo_learning.py --arms centered --seed S --json F` was run for seeds 0-3 twice on one host,
side by side: once from a checkout of the code before the change (5df1f94: mlx-lm-lora's trainer
with jacrl's module-global hooks) and once from the change (jacrl.train.grpo_loop). Both start
from the same SFT adapter (the same validation losses, calibration and sampled pass@1 before).
This reads those files (bench/results/grpo_learning_seam/{old,new}_seed<S>.json) and prints, per
seed and pooled over seeds, the sampled pass@1 gain with its 95 % paired interval and exact
McNemar p over task x sample pairs.

    .venv/bin/python bench/grpo_learning_seam.py [--dir bench/results/grpo_learning_seam]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jacrl.stats import mcnemar_exact  # noqa: E402


def paired(b: int, c: int, n: int) -> tuple[float, float, float]:
    """(gain, lo, hi): (c - b) / n with a 95 % Wald interval for paired proportions (b: pass ->
    fail, c: fail -> pass, n pairs)."""
    gain = (c - b) / n
    se = math.sqrt(max(0.0, (b + c) - (c - b) ** 2 / n)) / n
    return gain, gain - 1.96 * se, gain + 1.96 * se


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--dir", default=str(ROOT / "bench" / "results" / "grpo_learning_seam"))
    args = ap.parse_args()
    lines = [
        "| code | seed | before | after | lost / gained | gain [95 % CI] | p | KL at the end |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pooled = {}
    for code in ("old", "new"):
        tot = [0, 0, 0]
        for f in sorted(Path(args.dir).glob(f"{code}_seed*.json")):
            run = json.loads(f.read_text())
            arm = next(a for a in run["arms"] if a["arm"] == "centered")
            m = arm["mcnemar"]
            gain, lo, hi = paired(m["b"], m["c"], m["n"])
            tot = [tot[0] + m["b"], tot[1] + m["c"], tot[2] + m["n"]]
            lines.append(
                f"| {code} | {run['args']['seed']} | {arm['pass_before']:.3f} | "
                f"{arm['pass_after']:.3f} | {m['b']} / {m['c']} | {gain:+.3f} [{lo:+.3f}, "
                f"{hi:+.3f}] | {m['p']:.3g} | {arm['kl_last']:.3f} |"
            )
        pooled[code] = tot
    for code, (b, c, n) in pooled.items():
        gain, lo, hi = paired(b, c, n)
        p = mcnemar_exact([True] * b + [False] * c, [False] * b + [True] * c)["p"]
        lines.append(
            f"| **{code}, pooled** | all | | | {b} / {c} of {n} | **{gain:+.3f}** "
            f"[{lo:+.3f}, {hi:+.3f}] | {p:.3g} | |"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
