"""The tiny ladder the ladder and engine tests (and bench/ladder_engines.py) run: `jacrl ladder
run`'s arguments for a jac-tiny plan with tiny evaluation settings (2 holdout tasks, n samples,
16 tokens), rows under <out>/results and artifacts under <out>/artifacts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tiny_ladder_args(
    out: Path,
    rungs: str = "1",
    conditions: str = "base",
    *,
    model: str = "jac-tiny",
    n: int = 2,
    gen_limit: int = 2,
    mem_limit: int = 0,
    iters: str = "",
    sets: Mapping[str, Mapping] | None = None,
    data: str | Path = ROOT / "data",
) -> list[str]:
    """The arguments after `ladder run` (k: 1,2 with samples, else 1; mem_limit 0: every rung
    task; iters "": the ladder's; `sets` {stage: {knob: value}} as --set flags)."""
    return [
        *("--models", str(model), "--rungs", rungs, "--conditions", conditions),
        *("--gen-limit", str(gen_limit), *(("--mem-limit", str(mem_limit)) if mem_limit else ())),
        *("-n", str(n), "-k", "1,2" if n >= 2 else "1", "--max-tokens", "16"),
        *(("--iters", iters) if iters else ()),
        *(
            f"--set={stage}.{k}={str(v).lower()}"
            for stage, knobs in (sets or {}).items()
            for k, v in knobs.items()
        ),
        *("--data-dir", str(data), "--results", str(out / "results")),
        *("--artifacts", str(out / "artifacts")),
    ]
