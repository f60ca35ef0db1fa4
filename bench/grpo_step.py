"""What a GRPO step costs: generation, reward and update seconds per step, and peak memory, with
the arms side by side in one run.

Training arms (each in its own process, so its peak memory is its own; the same seed, tasks and
settings, differing only in what the name says), on jac-tiny and on `big`, a random Qwen2 of
>= 100M parameters with jac-tiny's tokenizer (built into a temp dir, never committed; weights
dominate its memory):

- `beta0`: beta = 0 (no KL reference), rollouts decoded batch x group together;
- `copy`: beta > 0 with the reference loaded a second time (how jacrl did it before);
- `shared`: beta > 0 with the reference a frozen view over the policy's arrays (jacrl's default);
- `nobatch` (jac-tiny only): beta = 0 with rollouts decoded one sequence at a time
  (`rollout_batch` 1);
- `ckpt` (jac-tiny only): beta = 0 with gradient checkpointing on (the GRPO default before), which
  also means each rollout's prompt runs again.

`big-q4` is `big` quantized by mlx-lm's own convert (4 bits, group 64), trained with the same arms
(--q4-arms, off by default, e.g. `shared`): LoRA on a quantized base, the memory it saves against
fp32 (docs/quantized-models.md).

Every arm but `ckpt` uses the shared-prompt loss. (An arm `theirs` ran mlx-lm-lora's own
loss inside its trainer; since GRPO's loop is jacrl's own it is gone: tests/test_grpo.py checks the
loss equals mlx-lm-lora's `grpo_loss`.)

Step 1 (MLX compiles its CPU kernels) is shown, not counted.

Reward arm: a GRPO-style batch (every harness task x a group of 4: gold, a wrong body, garbage, and
in two of the groups a body that loops forever) scored with the tasks' own time-outs (1 s CPU,
`jacrl.tasks.validate.task_timeout`) and with the earlier harness's fixed 20 s, fresh executors
each time.

    .venv/bin/python bench/grpo_step.py [--steps 5] [--big-steps 2] [--completion 48]
                                        [--arms ...] [--big-arms ...] [--q4-arms ...]
                                        [--no-reward] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docs_figures import recorded  # noqa: E402  (bench/, the script's own folder)

from jacrl.blas import fast_blas_env  # noqa: E402

TINY_ARMS = ("beta0", "ckpt", "copy", "shared", "nobatch")
BIG_ARMS = ("beta0", "copy", "shared")
BETA = 0.04
BIG = dict(
    hidden_size=1024,
    num_hidden_layers=9,
    num_attention_heads=16,
    num_key_value_heads=8,
    intermediate_size=2816,
)  # 4096 x 1024 embedding + 9 x 11.8M blocks = 110M params


# ----------------------------------------------------------------------------------------------
# one training arm (a child process)
# ----------------------------------------------------------------------------------------------


def run_arm(arm: str, model: Path, steps: int, completion: int) -> dict:
    """Train `steps` GRPO steps for `arm`; per-step seconds and peak memory."""
    import mlx.core as mx

    from jacrl.config import GRPOConfig
    from jacrl.prompts import SYSTEM_PROMPT
    from jacrl.tasks.record import prompt_answer, read_tasks
    from jacrl.train.grpo import train_grpo

    tasks = [t for t in read_tasks(ROOT / "data" / "tasks.jsonl") if "_harness_" in t["meta"]["id"]]
    records = [{**prompt_answer(t), "system": SYSTEM_PROMPT} for t in tasks]
    cfg = GRPOConfig(
        iters=steps,
        beta=BETA if arm in ("copy", "shared") else 0.0,
        group_size=4,
        batch_size=2,
        max_completion_length=completion,
        learning_rate=1e-5,
        lora_layers=-1,
        temperature=1.0,
        min_group_span=0.0,
        rollout_batch=1 if arm == "nobatch" else 0,
        steps_per_report=1,
        seed=0,
        grad_checkpoint=arm == "ckpt",
    )
    out = Path(tempfile.mkdtemp(prefix=f"grpo_step_{arm}_"))
    mx.reset_peak_memory()
    t0 = time.perf_counter()
    summary = train_grpo(
        model, records, [], cfg, out, reference="copy" if arm == "copy" else "shared"
    )
    wall = time.perf_counter() - t0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    step_rows = [r for r in rows if r["event"] == "step"]
    kl = [r.get("kl") for r in rows if r["event"] == "train"]
    shutil.rmtree(out, ignore_errors=True)
    return {
        "arm": arm,
        "model": str(model),
        "steps": [{k: r[k] for k in ("generation_s", "reward_s", "update_s")} for r in step_rows],
        "kl": kl,
        "wall_s": round(wall, 2),
        "peak_mlx_gb": round(mx.get_peak_memory() / 1e9, 4),
        "max_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 4),
        "reference_weights": summary["reference_weights"],
        "update_loss": summary["update_loss"],
        "trainable_params": summary["trainable_params"],
    }


# ----------------------------------------------------------------------------------------------
# the big random model, the reward arm
# ----------------------------------------------------------------------------------------------


def build_big(dest: Path) -> int:
    """A random Qwen2 with jac-tiny's tokenizer and BIG's shape in dest; its parameter count."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen2

    tiny = ROOT / "models" / "jac-tiny"
    for f in tiny.iterdir():
        if f.name.startswith(("tokenizer", "chat_template", "special_tokens")):
            shutil.copy(f, dest)
    cfg = json.loads((tiny / "config.json").read_text()) | BIG
    (dest / "config.json").write_text(json.dumps(cfg, indent=1))
    mx.random.seed(0)
    model = qwen2.Model(qwen2.ModelArgs.from_dict(cfg))
    weights = dict(tree_flatten(model.parameters()))
    mx.eval(weights)
    mx.save_safetensors(str(dest / "model.safetensors"), weights)
    return sum(v.size for v in weights.values())


def reward_arm() -> dict:
    """Seconds to score one GRPO-style batch with looping rollouts: task time-outs vs 20 s."""
    from jacrl.executor import Executor
    from jacrl.ruler.drivers import parse_driver
    from jacrl.ruler.reward import score_completions
    from jacrl.tasks.record import read_tasks
    from jacrl.tasks.validate import TIMEOUT

    tasks = [t for t in read_tasks(ROOT / "data" / "tasks.jsonl") if "_harness_" in t["meta"]["id"]]
    completions, answers = [], []
    for n, t in enumerate(tasks):
        gold = parse_driver(ROOT / "drivers" / f"{t['meta']['id']}.jac").gold
        group = [gold, "return None;", "@@@ not jac", "while True { }" if n < 2 else gold + "\n"]
        completions += [f"```jac\n{b}\n```" for b in group]
        answers += [t["answer"]] * len(group)
    out = {"rollouts": len(completions), "looping": 2}
    for name, fixed in (("task", None), ("fixed_20s", TIMEOUT)):
        batch = (
            answers
            if fixed is None
            else [json.dumps(json.loads(a) | {"timeout": fixed}) for a in answers]
        )
        with Executor() as ex:
            ex.run("with entry { print(1); }")  # the server is up: its start is not counted
            t0 = time.perf_counter()
            scored = score_completions(completions, batch, executor=ex)
            out[name] = {
                "seconds": round(time.perf_counter() - t0, 3),
                "timeout_s": sorted({json.loads(a)["timeout"] for a in batch}),
                "timed_out": sum(bool(s.verdict and s.verdict.timed_out) for s in scored),
                "exact": sum(s.score == 1.0 for s in scored),
            }
    return out


# ----------------------------------------------------------------------------------------------
# the report
# ----------------------------------------------------------------------------------------------


def _med(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows[1:]] or [r[key] for r in rows]  # step 1 compiles
    return statistics.median(vals)


def summarise(res: dict) -> dict:
    steps = res["steps"]
    s = {k: _med(steps, k) for k in ("generation_s", "reward_s", "update_s")}
    s["step_s"] = s["generation_s"] + s["reward_s"] + s["update_s"]
    s["first_step_s"] = sum(steps[0][k] for k in ("generation_s", "reward_s", "update_s"))
    return s


def _ratio(arms: dict, arm: str, key: str) -> float:
    """An arm's summary figure over the beta0 arm's."""
    return summarise(arms[arm])[key] / summarise(arms["beta0"])[key]


def report(results: dict, load: tuple, wall: float) -> str:
    out = [
        f"GRPO step cost: {os.cpu_count()} CPUs, load average {load[0]} at start, "
        f"{results['load_end']} at end; {wall:.0f} s wall"
    ]
    for model, arms in results["train"].items():
        out.append(
            f"\n== {model} ({results['params'][model] / 1e6:.1f}M params), "
            f"{results['steps'][model]} steps, batch 2 x group 4, medians over steps 2+"
        )
        out.append(
            f"{'arm':9} {'gen s':>7} {'reward s':>8} {'update s':>8} "
            f"{'step s':>7} {'step1 s':>7} {'peak MLX GB':>11} "
            f"{'max RSS GB':>10} {'last KL':>9}"
        )
        for arm, r in arms.items():
            s = summarise(r)
            kl = r["kl"][-1] if r["kl"] else None
            out.append(
                f"{arm:9} {s['generation_s']:7.2f} {s['reward_s']:8.2f} "
                f"{s['update_s']:8.2f} {s['step_s']:7.2f} "
                f"{s['first_step_s']:7.2f} {r['peak_mlx_gb']:11.3f} {r['max_rss_gb']:10.3f} "
                f"{kl if kl is None else f'{kl:.2e}':>9}"
            )
        base = arms.get("beta0")
        if base:
            for arm in ("copy", "shared"):
                if arm in arms:
                    out.append(
                        f"peak MLX memory {arm}/beta0: "
                        f"{arms[arm]['peak_mlx_gb'] / base['peak_mlx_gb']:.3f}x, max RSS "
                        f"{arms[arm]['max_rss_gb'] / base['max_rss_gb']:.3f}x"
                    )
            for arm in ("ckpt",):
                if arm in arms:
                    out.append(
                        f"update {arm}/beta0 (loss: {arms[arm]['update_loss']} vs "
                        f"{base['update_loss']}): {_ratio(arms, arm, 'update_s'):.2f}x"
                    )
            if "nobatch" in arms:
                out.append(
                    f"generation nobatch/beta0 (rollout batching off/on): "
                    f"{_ratio(arms, 'nobatch', 'generation_s'):.2f}x"
                )
        if "copy" in arms and "shared" in arms:
            out.append(f"KL per step, copy  : {[round(k, 8) for k in arms['copy']['kl']]}")
            out.append(f"KL per step, shared: {[round(k, 8) for k in arms['shared']['kl']]}")
            out.append(
                "  (the trajectories differ after step 1: loading the copy builds a model, "
                "which draws from MLX's global RNG, so its rollouts differ; the same KL on "
                "the same rollouts is tests/test_reference.py)"
            )
    fp32, q4 = results["train"].get("big", {}), results["train"].get("big-q4", {})
    for arm in set(fp32) & set(q4):
        out.append(
            f"\npeak MLX memory big-q4/big ({arm}, same step): "
            f"{q4[arm]['peak_mlx_gb']:.3f} / {fp32[arm]['peak_mlx_gb']:.3f} GB = "
            f"{q4[arm]['peak_mlx_gb'] / fp32[arm]['peak_mlx_gb']:.3f}x, max RSS "
            f"{q4[arm]['max_rss_gb'] / fp32[arm]['max_rss_gb']:.3f}x"
        )
    if "reward" in results:
        r = results["reward"]
        out.append(
            f"\n== reward: one GRPO-style batch, {r['rollouts']} rollouts, {r['looping']} looping"
        )
        for name in ("task", "fixed_20s"):
            x = r[name]
            out.append(
                f"{name:10}: {x['seconds']:7.2f} s (time-outs {x['timeout_s']} s, "
                f"{x['timed_out']} timed out, {x['exact']} exact)"
            )
        out.append(
            f"fixed 20 s / task time-outs: {r['fixed_20s']['seconds'] / r['task']['seconds']:.1f}x"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5, help="GRPO steps per jac-tiny arm")
    ap.add_argument("--big-steps", type=int, default=2, help="GRPO steps per big-model arm")
    ap.add_argument("--completion", type=int, default=48, help="rollout token budget")
    ap.add_argument("--arms", default=",".join(TINY_ARMS), help="jac-tiny arms")
    ap.add_argument("--big-arms", default=",".join(BIG_ARMS), help="big-model arms ('' skips)")
    ap.add_argument(
        "--q4-arms",
        default="",
        help="arms on the big model quantized to 4 bits, e.g. shared (off by "
        "default: on a CPU a 4-bit step takes ~10x an fp32 one)",
    )
    ap.add_argument("--no-reward", action="store_true", help="skip the reward arm")
    ap.add_argument("--json", type=Path, help="write the results here (and .txt beside)")
    ap.add_argument("--child", nargs=3, metavar=("ARM", "MODEL", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        arm, model, steps = args.child
        print("RESULT " + json.dumps(run_arm(arm, Path(model), int(steps), args.completion)))
        return
    load, t0 = os.getloadavg(), time.perf_counter()
    results: dict = {"train": {}, "params": {}, "steps": {}, "load_start": load}
    with (
        tempfile.TemporaryDirectory(prefix="grpo_big_") as big,
        tempfile.TemporaryDirectory(prefix="grpo_big_q4_") as q4_dir,
    ):
        plans = (
            [("jac-tiny", ROOT / "models" / "jac-tiny", args.arms, args.steps)] if args.arms else []
        )
        if args.big_arms or args.q4_arms:
            results["params"]["big"] = build_big(Path(big))
            plans.append(("big", Path(big), args.big_arms, args.big_steps))
        if args.q4_arms:
            from mlx_lm import convert

            q4 = Path(q4_dir) / "model"  # convert makes the folder
            convert(big, mlx_path=str(q4), quantize=True, q_bits=4, q_group_size=64)
            results["params"]["big-q4"] = results["params"]["big"]
            plans.append(("big-q4", q4, args.q4_arms, args.big_steps))
        results["params"]["jac-tiny"] = 4.2e6
        for name, path, arms, steps in plans:
            results["steps"][name] = steps
            results["train"][name] = {}
            for arm in filter(None, arms.split(",")):
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        arm,
                        str(path),
                        str(steps),
                        "--completion",
                        str(args.completion),
                    ],
                    env={**os.environ, **fast_blas_env()},
                    capture_output=True,
                    text=True,
                )
                line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                if proc.returncode or not line:
                    sys.exit(f"arm {name}/{arm} failed:\n{proc.stderr[-3000:]}")
                results["train"][name][arm] = json.loads(line[-1][7:])
                print(f"{name}/{arm}: {results['train'][name][arm]['wall_s']} s", flush=True)
    if not args.no_reward:
        results["reward"] = reward_arm()
    results["load_end"] = os.getloadavg()
    text = report(results, load, time.perf_counter() - t0)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
        args.json.with_suffix(".txt").write_text(text + "\n")
        recorded(args.json)  # the docs quote its figures


if __name__ == "__main__":
    main()
