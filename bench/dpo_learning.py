"""Does DPO keep what SFT taught? A seeded benchmark with a control, on jac-tiny, on a CPU.

The start: gold SFT on the rung's tasks at the demo's settings (`DEMO_SFT`, 90 iterations per
task), so that the policy solves its tasks greedily but its samples at --temperature often do not.
From that one SFT adapter, DPO (`jacrl.train.dpo`: pairs of the policy's own samples graded by our
verifier, the parent as the frozen reference) runs for each training seed, identical but for the
terms the row names:

- `sft`: the control, the SFT start itself (no DPO);
- `dpo`: plain DPO (the sigmoid loss of Rafailov et al. 2023);
- `rpo`: DPO + --alpha * NLL(chosen) / its tokens (RPO, Pang et al. 2024);
- `dpop`: DPO-Positive, --lam * max(0, log ref(chosen) - log policy(chosen)) inside the sigmoid
  (Pal et al. 2024);
- `rpo_dpop`: both terms.

Every arm is evaluated on the same prompts with the same sampling seed (sample j of task i is
paired with itself across arms): greedy and --samples samples at --temperature on the train tasks,
greedy and --gen-samples samples at --temperature on --gen-limit held-out tasks (the demo's gen
sample of the holdout). Per arm against sft: greedy passes lost and gained over seeds x tasks;
the sampled pass@1 change with a 95 % t interval over the seed x task units (each unit: the
change of that task's pass@1 over its samples); the chosen and rejected answers' mean per-token
log-probability before and after (the artifact's `logp_before` / `logp_after`) with a 95 % t
interval over seeds; and their traces along training (`train_chosen_reward` / beta: log policy -
log ref of the iteration's chosen answer, mean over seeds). The goal (issue 51): a variant that
loses none of SFT's greedy passes over the seeds and gains sampled pass@1 on the train tasks with
an interval above 0.

The results go to --json (and the table between the `dpo_learning` markers of --doc, in the same
run); print to a .txt with tee.

    .venv/bin/python bench/dpo_learning.py [--rung 3] [--seeds 0,1,2] [--iters 16] [--lr 1e-5]
        [--arms dpo,rpo,dpop,rpo_dpop] [--json bench/results/dpo_learning.json]
        [--doc docs/dpo.md]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jacrl.blas import ensure_fast_blas  # noqa: E402

BEGIN, END = (
    "<!-- dpo_learning: begin (bench/dpo_learning.py writes this) -->",
    ("<!-- dpo_learning: end -->"),
)


def arms(alpha: float, lam: float) -> dict[str, dict]:
    """Each DPO arm's terms (set explicitly: the arms do not depend on DPOConfig's defaults)."""
    return {
        "dpo": {"rpo_alpha": 0.0, "dpop_lambda": 0.0},
        "rpo": {"rpo_alpha": alpha, "dpop_lambda": 0.0},
        "dpop": {"rpo_alpha": 0.0, "dpop_lambda": lam},
        "rpo_dpop": {"rpo_alpha": alpha, "dpop_lambda": lam},
    }


def t_interval(xs: list[float]) -> tuple[float, list[float]]:
    """Mean and 95 % Student-t interval (n - 1 degrees of freedom); a point for one value."""
    from scipy.stats import t

    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return round(m, 4), [round(m, 4), round(m, 4)]
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return round(m, 4), [round(m - half, 4), round(m + half, 4)]


def evaluate(adapter, train, gen, args) -> dict:
    """exact (bool) per task greedily, and per task a list over samples, on train and gen."""
    from jacrl.generate import generate
    from jacrl.models.registry import load
    from jacrl.ruler.reward import score_completions

    lm, tok = load("jac-tiny", str(adapter))
    out = {}
    for split, tasks, n in (("train", train, args.samples), ("gen", gen, args.gen_samples)):
        prompts = [t["prompt"] for t in tasks]
        greedy = generate(lm, tok, prompts, n=1, max_tokens=args.max_tokens)
        sampled = generate(
            lm,
            tok,
            prompts,
            n=n,
            temperature=args.temperature,
            seed=args.sample_seed,
            max_tokens=args.max_tokens,
        )
        texts = [r[0].text for r in greedy] + [s.text for r in sampled for s in r]
        answers = [t["answer"] for t in tasks] + [t["answer"] for t in tasks for _ in range(n)]
        exact = [s.exact for s in score_completions(texts, answers)]
        k = len(tasks)
        out[split] = {
            "greedy": exact[:k],
            "sampled": [exact[k + i * n : k + (i + 1) * n] for i in range(k)],
        }
    return out


def compare(arm: dict, sft: dict, split: str) -> dict:
    """An arm's runs (one evaluation per seed) against sft on one split: greedy lost / gained
    over seed x task, and the sampled pass@1 change with a t interval over seed x task units."""
    lost = gained = 0
    units, after = [], []
    base = sft[split]
    for ev in arm["evals"]:
        got = ev[split]
        for i, (b, a) in enumerate(zip(base["greedy"], got["greedy"], strict=True)):
            lost += b and not a
            gained += a and not b
            s_b, s_a = base["sampled"][i], got["sampled"][i]
            units.append(sum(s_a) / len(s_a) - sum(s_b) / len(s_b))
            after.append(sum(s_a) / len(s_a))
    change, ci = t_interval(units)
    greedy_after = [x for ev in arm["evals"] for x in ev[split]["greedy"]]
    return {
        "greedy_pass": f"{sum(greedy_after)}/{len(greedy_after)}",
        "greedy_lost": lost,
        "greedy_gained": gained,
        "sampled_pass": round(sum(after) / len(after), 4),
        "sampled_change": change,
        "sampled_change_ci": ci,
        "units": len(units),
    }


def trace(runs: list[dict], beta: float) -> dict:
    """Per iteration, the mean over seeds of log policy - log ref (whole answer, nats) of the
    iteration's chosen and rejected answers (the trainer's rewards / beta)."""
    per = [r["train"] for r in runs]
    n = min(len(p) for p in per)
    return {
        side: [
            round(sum(p[i][f"train_{side}_reward"] for p in per) / len(per) / beta, 3)
            for i in range(n)
        ]
        for side in ("chosen", "rejected")
    }


def run_arm(name, over, start, train, gen, tmp, args) -> dict:
    from jacrl.config import DPOConfig
    from jacrl.train import dpo

    runs = []
    for seed in args.seeds:
        cfg = DPOConfig(
            samples=args.pair_samples,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            iters=args.iters,
            learning_rate=args.lr,
            beta=args.beta,
            steps_per_report=1,
            seed=seed,
            **over,
        )
        t0 = time.time()
        art = dpo(
            "jac-tiny",
            train,
            None,
            cfg,
            tmp,
            parent=start,
            condition=f"bench_{name}",
            log=lambda m: None,
        )
        train_s = time.time() - t0
        ev = evaluate(art.path, train, gen, args)
        rows = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
        s = art.manifest["summary"]
        runs.append(
            {
                "seed": seed,
                "pairs": art.manifest["pairs"]["pairs"],
                "chosen_from_gold": art.manifest["pairs"]["chosen_from_gold"],
                "train_s": round(train_s, 1),
                "logp_before": s["logp_before"],
                "logp_after": s["logp_after"],
                "last_loss": s["last_loss"],
                "last_margin": s["last_margin"],
                "train": [r for r in rows if r["event"] == "train"],
                "eval": ev,
            }
        )
        print(
            f"  {name} seed {seed}: {runs[-1]['pairs']} pairs, train greedy "
            f"{sum(ev['train']['greedy'])}/{len(train)}, sampled "
            f"{sum(map(sum, ev['train']['sampled']))}/{len(train) * args.samples}; chosen "
            f"log-prob/token {s['logp_before']['chosen']} -> {s['logp_after']['chosen']}, "
            f"rejected {s['logp_before']['rejected']} -> {s['logp_after']['rejected']} "
            f"({train_s:.0f} s)",
            flush=True,
        )
    return {"arm": name, "overrides": over, "runs": runs}


def summarize(arm: dict, sft_eval: dict, beta: float) -> dict:
    runs = arm["runs"]
    arm_evals = {"evals": [r["eval"] for r in runs]}
    out = {
        "arm": arm["arm"],
        "overrides": arm["overrides"],
        "train": compare(arm_evals, sft_eval, "train"),
        "gen": compare(arm_evals, sft_eval, "gen"),
        "train_s_mean": round(sum(r["train_s"] for r in runs) / len(runs), 1),
    }
    for side in ("chosen", "rejected"):
        m, ci = t_interval([r["logp_after"][side] - r["logp_before"][side] for r in runs])
        out[f"{side}_logp_change"], out[f"{side}_logp_change_ci"] = m, ci
    out["trace"] = trace(runs, beta)
    t = out["train"]
    out["goal_met"] = t["greedy_lost"] == 0 and t["sampled_change_ci"][0] > 0
    return out


def sft_row(ev: dict, seeds: int) -> dict:
    return {
        split: {
            "greedy_pass": f"{sum(ev[split]['greedy']) * seeds}/{len(ev[split]['greedy']) * seeds}",
            "sampled_pass": round(
                sum(map(sum, ev[split]["sampled"])) / sum(map(len, ev[split]["sampled"])), 4
            ),
        }
        for split in ("train", "gen")
    }


def doc_block(res: dict) -> str:
    """The markdown docs/dpo.md carries between the markers: every number from `res`."""
    a = res["args"]
    ls, le = res["load_start"], res["load_end"]
    fmt = "{:+.3f} [{:+.3f}, {:+.3f}]".format
    lines = [
        BEGIN,
        "",
        f"The run behind `bench/results/dpo_learning.json` ({res['machine']}; load average "
        f"{ls[0]:.2f} / {ls[1]:.2f} / {ls[2]:.2f} at the start, {le[0]:.2f} / {le[1]:.2f} / "
        f"{le[2]:.2f} at the end; {res['wall_s'] / 60:.1f} min). jac-tiny, rung {a['rung']} "
        f"({', '.join(res['tasks'])}), SFT start {a['sft_iters']} iterations at the demo's "
        f"settings; DPO {a['iters']} iterations, learning rate {a['lr']:g}, beta {a['beta']:g}, "
        f"pairs from {a['pair_samples']} samples per task, training seeds "
        f"{', '.join(map(str, a['seeds']))}; RPO alpha {a['alpha']:g}, DPO-Positive lambda "
        f"{a['lam']:g}. Train tasks: greedy and {a['samples']} samples per task at T "
        f"{a['temperature']:g}; held-out: {len(res['gen_tasks'])} holdout tasks, greedy and "
        f"{a['gen_samples']} samples at T {a['temperature']:g}; every arm with sampling seed "
        f"{a['sample_seed']}. Greedy passes are counted over seeds x tasks; a change is the "
        f"arm's pass@1 minus sft's with a 95 % t interval over the seed x task units; log-prob "
        f"changes are per token (nats), after minus before, 95 % t interval over seeds.",
        "",
        "| arm | train greedy (lost / gained vs sft) | train sampled pass@1 | change vs sft "
        "[95 % CI] | held-out greedy | held-out sampled change [95 % CI] | chosen log-prob "
        "change | rejected log-prob change | goal |",
        "|---|---|---:|---|---|---|---|---|---|",
    ]
    s = res["sft"]
    lines.append(
        f"| `sft` (control) | {s['train']['greedy_pass']} | {s['train']['sampled_pass']:.3f} | "
        f"— | {s['gen']['greedy_pass']} | — | — | — | — |"
    )
    for r in res["arms"]:
        t, g = r["train"], r["gen"]
        lines.append(
            f"| `{r['arm']}` | {t['greedy_pass']} ({t['greedy_lost']} / {t['greedy_gained']}) | "
            f"{t['sampled_pass']:.3f} | {fmt(t['sampled_change'], *t['sampled_change_ci'])} | "
            f"{g['greedy_pass']} ({g['greedy_lost']} / {g['greedy_gained']}) | "
            f"{fmt(g['sampled_change'], *g['sampled_change_ci'])} | "
            f"{fmt(r['chosen_logp_change'], *r['chosen_logp_change_ci'])} | "
            f"{fmt(r['rejected_logp_change'], *r['rejected_logp_change_ci'])} | "
            f"{'met' if r['goal_met'] else 'not met'} |"
        )
    lines += [
        "",
        "Traces (log policy - log ref of the iteration's pair, whole answer, nats, "
        "mean over seeds; every other iteration):",
        "",
    ]
    for r in res["arms"]:
        tr = r["trace"]
        pick = range(0, len(tr["chosen"]), 2)
        lines.append(
            f"- `{r['arm']}` chosen: {', '.join(f'{tr["chosen"][i]:+.1f}' for i in pick)}; "
            f"rejected: {', '.join(f'{tr["rejected"][i]:+.1f}' for i in pick)}"
        )
    met = [r["arm"] for r in res["arms"] if r["goal_met"]]
    lines += [
        "",
        "Goal (0 greedy passes lost over the seeds and a sampled pass@1 gain on the train tasks "
        "with its interval above 0): "
        + (f"met by {', '.join(f'`{m}`' for m in met)}." if met else "met by no arm."),
        "",
        END,
    ]
    return "\n".join(lines)


def write_doc(path: Path, block: str) -> None:
    text = path.read_text()
    pat = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pat.search(text):
        raise SystemExit(f"{path}: no dpo_learning markers")
    path.write_text(pat.sub(lambda _: block, text))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--rung", default="3")
    ap.add_argument("--sft-iters", type=int, default=270, help="the demo's: 90 per rung-3 task")
    ap.add_argument("--seeds", default="0,1,2", help="DPO training seeds (pairs, batch order)")
    ap.add_argument("--iters", type=int, default=16, help="DPO iterations per run")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--alpha", type=float, default=1.0, help="RPO's NLL weight (Pang et al.)")
    ap.add_argument("--lam", type=float, default=50.0, help="DPO-Positive's lambda (Pal et al.)")
    ap.add_argument("--temperature", type=float, default=0.5, help="pair and eval sampling")
    ap.add_argument("--pair-samples", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=256, help="the demo's budget")
    ap.add_argument("--samples", type=int, default=16, help="eval samples per train task")
    ap.add_argument("--gen-limit", type=int, default=6, help="held-out tasks (the demo's gen)")
    ap.add_argument("--gen-samples", type=int, default=4)
    ap.add_argument("--sample-seed", type=int, default=7)
    ap.add_argument("--arms", default="dpo,rpo,dpop,rpo_dpop")
    ap.add_argument("--json", default=None)
    ap.add_argument("--doc", default=None, help="markdown page whose dpo_learning block to write")
    args = ap.parse_args(argv)
    args.seeds = [int(x) for x in args.seeds.split(",")]
    ensure_fast_blas()

    from jacrl.config import SFTConfig, configure
    from jacrl.ladder.demo import DEMO_SFT
    from jacrl.ladder.taskset import stratified
    from jacrl.tasks import splits
    from jacrl.train import sft

    t_all, load_start = time.time(), os.getloadavg()
    train = [{"prompt": t["prompt"], "answer": t["answer"]} for t in splits.rung(args.rung)]
    gen = stratified(splits.load_split("holdout"), args.gen_limit)
    ids = [json.loads(t["answer"])["id"] for t in train]
    gen_ids = [json.loads(t["answer"])["id"] for t in gen]
    print(
        f"tasks (rung {args.rung}): {', '.join(ids)}; held-out: {', '.join(gen_ids)}; load "
        f"at start {' '.join(f'{x:.2f}' for x in load_start)}",
        flush=True,
    )
    t0 = time.time()
    start = sft(
        "jac-tiny",
        train,
        None,
        configure(SFTConfig(), {**DEMO_SFT, "iters": args.sft_iters}),
        ROOT / "artifacts",
        condition="bench_sft",
        log=lambda m: None,
    )
    print(f"SFT start: {args.sft_iters} iterations ({time.time() - t0:.0f} s)", flush=True)
    sft_eval = evaluate(start.path, train, gen, args)
    sft_summary = sft_row(sft_eval, len(args.seeds))
    print(
        f"  sft: train greedy {sum(sft_eval['train']['greedy'])}/{len(train)}, sampled "
        f"pass@1 {sft_summary['train']['sampled_pass']:.3f}; held-out greedy "
        f"{sum(sft_eval['gen']['greedy'])}/{len(gen)}",
        flush=True,
    )
    table = arms(args.alpha, args.lam)
    results = []
    with tempfile.TemporaryDirectory(prefix="jacrl-bench-dpo-") as tmp:
        for name in args.arms.split(","):
            raw = run_arm(name, table[name], start, train, gen, Path(tmp), args)
            r = summarize(raw, sft_eval, args.beta)
            r["runs"] = [{k: v for k, v in x.items() if k != "train"} for x in raw["runs"]]
            results.append(r)
            t = r["train"]
            print(
                f"{name}: train greedy {t['greedy_pass']} (lost {t['greedy_lost']}, gained "
                f"{t['greedy_gained']}); sampled pass@1 {t['sampled_pass']:.3f}, change "
                f"{t['sampled_change']:+.3f} [{t['sampled_change_ci'][0]:+.3f}, "
                f"{t['sampled_change_ci'][1]:+.3f}]; held-out sampled change "
                f"{r['gen']['sampled_change']:+.3f}; chosen log-prob/token change "
                f"{r['chosen_logp_change']:+.3f} {r['chosen_logp_change_ci']}, rejected "
                f"{r['rejected_logp_change']:+.3f} {r['rejected_logp_change_ci']}; goal "
                f"{'met' if r['goal_met'] else 'not met'}",
                flush=True,
            )
    wall, load_end = time.time() - t_all, os.getloadavg()
    print(f"total {wall / 60:.1f} min; load at end {' '.join(f'{x:.2f}' for x in load_end)}")
    res = {
        "args": vars(args),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared",
        "tasks": ids,
        "gen_tasks": gen_ids,
        "sft": sft_summary,
        "sft_eval": sft_eval,
        "arms": results,
        "wall_s": round(wall, 1),
        "load_start": load_start,
        "load_end": load_end,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    if args.doc:
        write_doc(Path(args.doc), doc_block(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
