"""Does GRPO learn here? A seeded benchmark with a control, on jac-tiny, on a CPU.

The start: gold SFT on the rung's tasks (the demo's SFT settings, fewer iterations than the demo's
memorising 90 per task), so that the policy solves its tasks greedily but its *sampled* rollouts
often do not. The rollout temperature is GRPO's own calibration on that start
(`jacrl.train.grpo.calibrate_temperature`), fixed for every arm so they compare. Then, from the
same SFT adapter, GRPO runs identical but for what the row names:

- `centered`: the defaults (advantages r - group mean, groups spanning < 0.1 skipped);
- `std`: mlx-lm-lora's σ-normalised advantages, (r - mean) / (σ + 1e-4);
- `no_filter`: `centered` without the min-span group filter (`min_group_span` 0);
- `control`: `centered` with learning rate 0 (rollouts, rewards and KL are computed, nothing moves);
- `dynamic`: `centered` with dynamic sampling (DAPO: a step draws up to --max-draws batches of
  prompts and trains on groups spanning >= min_group_span only), for --dynamic-iters steps (fewer:
  each step trains on signal, where `centered` skips most groups and still pays their update).

Each arm's sampled pass@1 on its own training tasks is measured before and after, at the rollout
temperature with GRPO's top-p/top-k and the same sampling seed (so sample j of task i is paired
with itself: exact McNemar over task x sample), with Wilson intervals; plus the rollout reward of
the first vs the last window of steps (mean and a 95 % normal interval over rollouts), the final
KL and the share of groups skipped. The goal (issue 19): the defaults raise sampled pass@1 with
p < 0.05 while the control does not move.

The headline is learning per CPU-second (issue 41): per arm the pass@1 gain (after - before, with a
95 % paired Wald interval over the same task x sample pairs) and the wall and CPU seconds its
training cost (CPU of this process and every process under it: the reward's sandboxed jac runs
included), then whether `dynamic` reached at least `centered`'s gain in <= 0.7x its wall time.

    .venv/bin/python bench/grpo_learning.py [--rung 3] [--sft-iters 210] [--iters 24] [--lr 5e-6]
                                            [--samples 32] [--span S] [--json F]
                                            [--arms centered,std,no_filter,control,dynamic]
                                            [--dynamic-iters 8] [--max-draws 4] [--doc F]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jacrl.blas import ensure_fast_blas  # noqa: E402

ARMS = {
    "centered": {},
    "std": {"advantage": "std"},
    "no_filter": {"min_group_span": 0.0},
    "control": {"learning_rate": 0.0},
    "dynamic": {"dynamic_sampling": True},
}
GOAL_WALL = 0.7  # dynamic's wall time as a share of centered's, at >= its gain (issue 41)


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process, its reaped children, and every live process
    under it with the children they reaped (the executor's fork server and its jac runs)."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    tick = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            f = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        kids.setdefault(int(f[1]), []).append(int(stat.parent.name))  # ppid -> pid
        cpu[int(stat.parent.name)] = sum(int(x) for x in f[11:15]) / tick  # u+s+cu+cs
    todo = list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += kids.get(pid, [])
    return total


def paired_gain(before: list[bool], after: list[bool]) -> tuple[float, list[float]]:
    """after - before over paired outcomes, with a 95 % Wald interval from the discordant pairs."""
    n = len(before)
    b = sum(x and not y for x, y in zip(before, after, strict=True))  # pass -> fail
    c = sum(y and not x for x, y in zip(before, after, strict=True))  # fail -> pass
    d = (c - b) / n
    half = 1.96 * math.sqrt(max(0.0, b + c - (c - b) ** 2 / n)) / n
    return round(d, 4), [round(d - half, 4), round(d + half, 4)]


def sampled_outcomes(model, adapter, tasks, cfg, temperature: float, n: int, seed: int):
    """exact (bool) per (task, sample), in task-major order; and the mean reward."""
    from jacrl.generate import generate
    from jacrl.models.registry import load
    from jacrl.ruler.reward import score_completions

    lm, tok = load(model, str(adapter))
    samples = generate(
        lm,
        tok,
        [t["prompt"] for t in tasks],
        n=n,
        temperature=temperature,
        seed=seed,
        max_tokens=cfg.max_completion_length,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
    )
    scored = score_completions(
        [s.text for row in samples for s in row],
        [t["answer"] for t in tasks for _ in range(n)],
        formula=cfg.reward_formula,
    )
    return [s.exact for s in scored], sum(s.score for s in scored) / len(scored)


def window(steps: list[dict], rollouts: list[dict], first: bool, size: int) -> dict:
    """Mean rollout reward over the first (or last) `size` steps, with a 95 % normal interval.
    Every rollout drawn counts, discarded by dynamic sampling or not: the policy's own reward."""
    chosen = {s["step"] for s in (steps[:size] if first else steps[-size:])}
    r = [x["reward"] for x in rollouts if x["step"] in chosen]
    m = sum(r) / len(r)
    sd = math.sqrt(sum((x - m) ** 2 for x in r) / max(1, len(r) - 1))
    half = 1.96 * sd / math.sqrt(len(r))
    return {
        "mean": round(m, 4),
        "ci": [round(m - half, 4), round(m + half, 4)],
        "n": len(r),
        "exact": sum(x["tier"] == "exact" for x in rollouts if x["step"] in chosen),
    }


def run_arm(
    name: str,
    over: dict,
    start,
    tasks,
    cfg,
    out_root: Path,
    before: list[bool],
    temperature: float,
    args,
) -> dict:
    from jacrl.stats import mcnemar_exact, wilson
    from jacrl.train import grpo

    arm_cfg = dataclasses.replace(cfg, **over)
    if name == "dynamic":
        arm_cfg = dataclasses.replace(arm_cfg, iters=args.dynamic_iters, max_draws=args.max_draws)
    t0, c0 = time.time(), cpu_seconds()
    art = grpo(
        "jac-tiny",
        tasks,
        None,
        arm_cfg,
        out_root,
        parent=start,
        condition=f"bench_{name}",
        log=lambda m: None,
    )
    train_s, cpu_s = time.time() - t0, cpu_seconds() - c0
    after, after_reward = sampled_outcomes(
        "jac-tiny", art.path, tasks, arm_cfg, temperature, args.samples, args.sample_seed
    )
    rows = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["event"] == "step"]
    rollouts = [json.loads(x) for x in (art.path / "rollouts.jsonl").read_text().splitlines()]
    kl = [r["kl"] for r in rows if r["event"] == "train" and r.get("kl") is not None]
    size = max(1, len(steps) // 4)
    n = len(after)
    gain, gain_ci = paired_gain(before, after)
    return {
        "arm": name,
        "overrides": over,
        "iters": arm_cfg.iters,
        "train_s": round(train_s, 1),
        "cpu_s": round(cpu_s, 1),
        "gain": gain,
        "gain_ci": gain_ci,
        "gain_per_cpu_ks": round(1000 * gain / cpu_s, 4) if cpu_s > 0 else None,
        "draws_mean": art.manifest["summary"].get("draws_mean"),
        "pass_before": sum(before) / n,
        "pass_before_ci": wilson(sum(before), n),
        "pass_after": sum(after) / n,
        "pass_after_ci": wilson(sum(after), n),
        "mcnemar": mcnemar_exact(before, after),
        "after_reward": round(after_reward, 4),
        "reward_first": window(steps, rollouts, True, size),
        "reward_last": window(steps, rollouts, False, size),
        "kl_last": kl[-1] if kl else None,
        "groups_skipped": art.manifest["summary"]["groups_skipped_mean"],
        "seconds": art.manifest["summary"]["seconds"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--rung", default="3", help="the train-pool rung whose tasks GRPO trains on")
    ap.add_argument("--sft-iters", type=int, default=210, help="SFT iterations of the start")
    ap.add_argument("--iters", type=int, default=24, help="GRPO iterations per arm")
    ap.add_argument("--lr", type=float, default=5e-6, help="GRPO learning rate (not the control)")
    ap.add_argument("--group", type=int, default=4, help="rollouts per prompt")
    ap.add_argument(
        "--span",
        type=float,
        default=None,
        help="min_group_span of every arm (default: GRPOConfig's)",
    )
    ap.add_argument("--samples", type=int, default=32, help="samples per task before and after")
    ap.add_argument("--sample-seed", type=int, default=7, help="seed of those samples")
    ap.add_argument("--seed", type=int, default=0, help="GRPO seed (batch order, rollouts)")
    ap.add_argument(
        "--arms", default="centered,std,no_filter,control,dynamic", help="comma-separated arms"
    )
    ap.add_argument(
        "--dynamic-iters",
        type=int,
        default=8,
        help="GRPO iterations of the dynamic arm (each trains on groups with signal)",
    )
    ap.add_argument("--max-draws", type=int, default=4, help="the dynamic arm's draw cap per step")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument(
        "--doc",
        default=None,
        help="markdown page whose grpo_learning block (between its markers) to write",
    )
    args = ap.parse_args(argv)
    ensure_fast_blas()

    from jacrl.config import GRPOConfig, SFTConfig, configure
    from jacrl.ladder.demo import DEMO_GRPO, DEMO_SFT
    from jacrl.models.registry import load
    from jacrl.stats import wilson
    from jacrl.tasks import splits
    from jacrl.train import sft
    from jacrl.train.grpo import calibrate_temperature

    t_all = time.time()
    load_start = os.getloadavg()
    tasks = [{"prompt": t["prompt"], "answer": t["answer"]} for t in splits.rung(args.rung)]
    ids = [json.loads(t["answer"])["id"] for t in tasks]
    print(
        f"tasks (rung {args.rung}): {', '.join(ids)}; load at start "
        f"{' '.join(f'{x:.2f}' for x in load_start)}"
    )
    sft_cfg = configure(SFTConfig(), {**DEMO_SFT, "iters": args.sft_iters})
    t0 = time.time()
    start = sft(
        "jac-tiny",
        tasks,
        None,
        sft_cfg,
        ROOT / "artifacts",
        condition="bench_sft",
        log=lambda m: None,
    )
    print(
        f"SFT start: {args.sft_iters} iterations ({time.time() - t0:.0f} s; "
        f"{start.path.relative_to(ROOT)})"
    )
    cfg = configure(
        GRPOConfig(),
        {
            **DEMO_GRPO,
            "group_size": args.group,
            "iters": args.iters,
            "learning_rate": args.lr,
            "beta": 0.04,
            "seed": args.seed,
            "steps_per_report": 1,
            **({} if args.span is None else {"min_group_span": args.span}),
        },
    )
    policy, tok = load("jac-tiny", str(start.path))
    temperature, table = calibrate_temperature(policy, tok, tasks, cfg, log=lambda m: None)
    cfg = dataclasses.replace(cfg, temperature=temperature)
    print(
        "calibration (mean rollout reward): "
        + ", ".join(f"T={r['temperature']:g} {r['reward_mean']:.3f}" for r in table)
        + f" -> rollout temperature {temperature:g}"
    )
    before, before_reward = sampled_outcomes(
        "jac-tiny", start.path, tasks, cfg, temperature, args.samples, args.sample_seed
    )
    n = len(before)
    lo, hi = wilson(sum(before), n)
    print(
        f"before: sampled pass@1 {sum(before)}/{n} = {sum(before) / n:.3f} "
        f"[{lo:.3f}, {hi:.3f}] at T={temperature:g} (reward {before_reward:.3f})"
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="jacrl-bench-grpo-") as tmp:
        for name in args.arms.split(","):
            res = run_arm(name, ARMS[name], start, tasks, cfg, Path(tmp), before, temperature, args)
            results.append(res)
            print_arm(res, args.lr if name != "control" else 0.0)
    wall = time.time() - t_all
    load_end = os.getloadavg()
    verdict = headline(results)
    print(f"total {wall / 60:.1f} min; load at end {' '.join(f'{x:.2f}' for x in load_end)}")
    res = {
        "args": vars(args),
        "tasks": ids,
        "temperature": temperature,
        "calibration": table,
        "pass_before": sum(before) / n,
        "arms": results,
        "wall_s": round(wall, 1),
        "dynamic_vs_centered": verdict,
        "load_start": load_start,
        "load_end": load_end,
    }
    if args.doc:
        write_doc(Path(args.doc), doc_block(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


BEGIN = "<!-- grpo_learning: begin (bench/grpo_learning.py writes this) -->"
END = "<!-- grpo_learning: end -->"


def doc_block(res: dict) -> str:
    """The markdown a page carries between the markers: every number from `res`."""
    a, ls, le = res["args"], res["load_start"], res["load_end"]
    lines = [
        BEGIN,
        "",
        f"The run behind `{a['json']}` ({os.cpu_count()} cores, shared; "
        f"load average {ls[0]:.2f} / {ls[1]:.2f} / {ls[2]:.2f} at the start, {le[0]:.2f} / "
        f"{le[1]:.2f} / {le[2]:.2f} at the end; {res['wall_s'] / 60:.1f} min). Rung {a['rung']}, "
        f"SFT start {a['sft_iters']} iterations, sampled pass@1 before "
        f"{res['pass_before']:.3f} at the calibrated T = {res['temperature']:g}; every arm LR "
        f"{a['lr']:g}, groups of {a['group']}, batch 1; static arms {a['iters']} steps, "
        f"`dynamic` {a['dynamic_iters']} steps with `max_draws` {a['max_draws']}; "
        f"{a['samples']} samples per task before and after, paired:",
        "",
        "| arm | steps | draws / step | groups skipped | sampled pass@1 after [95 % CI] | gain "
        "[95 % paired CI] | McNemar lost / gained, p | train wall / CPU s | gain per 1000 CPU-s |",
        "|---|---:|---:|---:|---|---|---|---:|---:|",
    ]
    for r in res["arms"]:
        m, ci = r["mcnemar"], r["pass_after_ci"]
        lines.append(
            f"| `{r['arm']}` | {r['iters']} | {r['draws_mean']} | {r['groups_skipped']:.0%} | "
            f"{r['pass_after']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | {r['gain']:+.3f} "
            f"[{r['gain_ci'][0]:+.3f}, {r['gain_ci'][1]:+.3f}] | {m['b']} / {m['c']}, p = "
            f"{m['p']:.2g} | {r['train_s']:.0f} / {r['cpu_s']:.0f} | {r['gain_per_cpu_ks']} |"
        )
    v = res["dynamic_vs_centered"]
    if v:
        lines += [
            "",
            f"`dynamic` against `centered`: gain {v['gain_dynamic']:+.3f} against "
            f"{v['gain_centered']:+.3f}, in {v['wall_ratio']}x the wall time and "
            f"{v['cpu_ratio']}x the CPU time: the goal (at least the gain in <= {GOAL_WALL}x the "
            f"wall time) is **{'met' if v['goal_met'] else 'not met'}**.",
        ]
    return "\n".join([*lines, "", END])


def write_doc(path: Path, block: str) -> None:
    import re

    text = path.read_text()
    pat = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pat.search(text):
        raise SystemExit(f"{path}: no grpo_learning markers")
    path.write_text(pat.sub(lambda _: block, text))


def print_arm(r: dict, lr: float) -> None:
    m = r["mcnemar"]
    f, last = r["reward_first"], r["reward_last"]
    print(
        f"{r['arm']:>9} (lr {lr:g}): pass@1 {r['pass_before']:.3f} -> {r['pass_after']:.3f} "
        f"[{r['pass_after_ci'][0]:.3f}, {r['pass_after_ci'][1]:.3f}]  McNemar "
        f"{m['b']} pass->fail, {m['c']} fail->pass, p = {m['p']:.3g}; rollout reward "
        f"{f['mean']:.3f} [{f['ci'][0]:.3f}, {f['ci'][1]:.3f}] -> {last['mean']:.3f} "
        f"[{last['ci'][0]:.3f}, {last['ci'][1]:.3f}]; KL {r['kl_last']}; groups skipped "
        f"{r['groups_skipped']}; {r['iters']} iters",
        flush=True,
    )
    print(
        f"{'':>9}  gain {r['gain']:+.3f} [{r['gain_ci'][0]:+.3f}, {r['gain_ci'][1]:+.3f}] in "
        f"{r['train_s']:.0f} s wall, {r['cpu_s']:.0f} CPU-s: {r['gain_per_cpu_ks']} pass@1 per "
        f"1000 CPU-s" + (f"; {r['draws_mean']} draws/step" if r["arm"] == "dynamic" else ""),
        flush=True,
    )


def headline(results: list[dict]) -> dict | None:
    """Learning per CPU-second per arm, and whether dynamic reached centered's gain in <= 0.7x
    its wall time (None without both arms)."""
    print(
        "learning per CPU-second: "
        + ", ".join(f"{r['arm']} {r['gain_per_cpu_ks']}" for r in results)
        + " (pass@1 gain per 1000 CPU-s)"
    )
    arms = {r["arm"]: r for r in results}
    if not {"dynamic", "centered"} <= set(arms):
        return None
    d, c = arms["dynamic"], arms["centered"]
    v = {
        "gain_dynamic": d["gain"],
        "gain_centered": c["gain"],
        "wall_ratio": round(d["train_s"] / c["train_s"], 3),
        "cpu_ratio": round(d["cpu_s"] / c["cpu_s"], 3) if c["cpu_s"] else None,
    }
    v["goal_met"] = d["gain"] >= c["gain"] and v["wall_ratio"] <= GOAL_WALL
    print(
        f"dynamic vs centered: gain {d['gain']:+.3f} vs {c['gain']:+.3f}, wall x"
        f"{v['wall_ratio']}, CPU x{v['cpu_ratio']}: goal (>= gain in <= {GOAL_WALL}x wall) "
        f"{'met' if v['goal_met'] else 'NOT met'}"
    )
    return v


if __name__ == "__main__":
    sys.exit(main())
