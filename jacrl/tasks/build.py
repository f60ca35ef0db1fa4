"""Build a drivers folder into a data folder: every driver validated (`jacrl.tasks.record`), our
corpus policy checked (`jacrl.tasks.corpus`: errors on the project's own drivers/, warnings
elsewhere), the Python sidecars checked (`jacrl.tasks.conversion`), then tasks.jsonl + templates/ +
conversion.jsonl written together. Any failure means nothing is written unless `keep_going`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from tqdm.auto import tqdm

from jacrl.executor import Executor
from jacrl.project import path_or
from jacrl.tasks import conversion, corpus
from jacrl.tasks.validate import BuildReport, load_all, validate

CHUNK = 16  # drivers validated per batch: a progress step, while the fork server stays busy


def build_tasks(
    drivers_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    *,
    progress: bool = False,
    keep_going: bool = False,
    family_map: dict[str, str] | None = None,
    policy: str = "auto",
    fixed_timeout: bool = False,
) -> BuildReport:
    """Validate every driver and write tasks.jsonl and templates/ atomically.

    Defaults: the project's drivers/ and data/. A missing or empty drivers folder is an error.
    keep_going: write the drivers that pass even when others fail (without it, any failure means
    nothing is written). family_map: id prefix -> family (e.g. {"sg": "osp"}). policy: our corpus
    policy, `jacrl.tasks.corpus.policy_mode` (auto: errors on the project's drivers/, else
    warnings); a corpus-wide policy error blocks the write even with keep_going. progress: a bar on
    stderr. fixed_timeout: every task gets the earlier harness's 20 s instead of
    `validate.task_timeout`."""
    drivers_dir, out_dir = path_or(drivers_dir, "drivers"), path_or(out_dir, "data")
    if not drivers_dir.is_dir():
        raise FileNotFoundError(f"{drivers_dir}: no such drivers folder")
    if not any(drivers_dir.glob("*.jac")):
        raise ValueError(f"{drivers_dir}: no .jac drivers in it; nothing to build")
    mode = corpus.policy_mode(policy, drivers_dir)

    t0 = time.perf_counter()
    drivers, parse_failures = load_all(drivers_dir, family_map)
    report = BuildReport([], [], 0.0)
    per_driver = {d.path: corpus.driver_problems(d) for d in drivers} if mode != "off" else {}
    wide = corpus.corpus_problems(drivers, drivers_dir) if mode != "off" else []
    policy_lines = [ln for d in drivers for ln in per_driver.get(d.path, [])]
    if mode == "error":  # a driver that breaks the policy is not run at all
        drivers = [d for d in drivers if not per_driver[d.path]]
    else:
        report.warnings = policy_lines + wide
    bar = tqdm(total=len(drivers), desc="build-tasks", unit="driver", disable=not progress)
    with Executor(hash_seed=1) as a, Executor(hash_seed=2) as b, bar:
        for i in range(0, len(drivers), CHUNK):
            part = validate(drivers[i : i + CHUNK], (a, b), fixed_timeout=fixed_timeout)
            report.built += part.built
            report.failures += part.failures
            bar.update(len(drivers[i : i + CHUNK]))
        conv = conversion.build(drivers_dir, report.built, a)  # drivers/python/ sidecars
    found = (
        parse_failures + report.failures + conv.failures + (policy_lines if mode == "error" else [])
    )
    order = {str(p): i for i, p in enumerate(sorted(drivers_dir.glob("*.jac")))}
    found.sort(key=lambda ln: order.get(ln.split(":", 1)[0], len(order)))  # stable: file order
    report.failures = found + (wide if mode == "error" else [])
    report.seconds = time.perf_counter() - t0
    if (report.failures and not keep_going) or not report.built or (mode == "error" and wide):
        return report
    write_tasks(report.built, conv.records, out_dir)
    report.written = True
    return report


def write_tasks(records: list[dict], conversion_records: list[dict], out_dir: str | Path) -> None:
    """Stage tasks.jsonl + templates/ + conversion.jsonl beside the target, then swap them in
    (conversion.jsonl is written even when empty, so a stale one never outlives a rebuild)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".stage-", dir=out))
    try:
        (stage / "templates").mkdir()
        for name, rows in (("tasks.jsonl", records), (conversion.FILE, conversion_records)):
            with open(stage / name, "w") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in rows)
        for r in records:
            a = json.loads(r["answer"])
            (stage / "templates" / f"{a['id']}.jac").write_text(a["template"])
        old = out / "templates"
        if old.exists():
            os.replace(old, stage / "old-templates")  # removed with the stage below
        os.replace(stage / "templates", old)
        os.replace(stage / conversion.FILE, out / conversion.FILE)
        os.replace(stage / "tasks.jsonl", out / "tasks.jsonl")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
