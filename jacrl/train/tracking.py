"""Experiment tracking (`report_to`: "wandb", "swanlab" — mlx-lm's reporting services — or both,
comma-separated): a keyword of every stage, never a hyperparameter, so it changes no key. A run
is opened only when a build trains (a reused artifact opens none), named after the artifact's
directory (`<condition>-<key16>`), with the stage's hyperparameters and the artifact key as its
config; it gets every record metrics.jsonl gets (`TrackedLog`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from jacrl.import_hooks import around_import
from jacrl.train.artifacts import artifact_key
from jacrl.train.mlx_compat import MetricsLog

TRACKERS = ("wandb", "swanlab")  # what mlx-lm reports to (mlx_lm.tuner.callbacks)
REPORT_TO_ENV = "JACRL_REPORT_TO"  # report_to's default when a stage is not given one
DEFAULT_PROJECT = "jacrl"  # the project's default after WANDB_PROJECT
_NOT_LOGGED = ("event", "stage", "time", "iteration", "step")
MLX_CALLBACKS = "mlx_lm.tuner.callbacks"  # imported by every mlx-lm / mlx-lm-lora trainer


def _trackers_hidden(run, module) -> None:
    """Runs mlx_lm.tuner.callbacks with the trackers this process has not imported yet hidden. It
    imports wandb and swanlab, when installed, only for mlx-lm's own callbacks, which jacrl does
    not use (`_open_run` opens its runs): wandb alone costs 0.8 s of CPU in every process that
    trains. mlx-lm's WandBCallback then reports wandb missing; jacrl's tracking is unaffected."""
    hidden = [n for n in TRACKERS if n not in sys.modules]
    sys.modules.update(dict.fromkeys(hidden))  # None: `import wandb` raises ImportError
    try:
        run(module)
    finally:
        for n in hidden:
            if n in sys.modules and sys.modules[n] is None:
                del sys.modules[n]


around_import(MLX_CALLBACKS, _trackers_hidden)


def report_services(report_to: str | None = None) -> tuple[str, ...]:
    """The services `report_to` names: "wandb", "swanlab", "wandb,swanlab", "" for none; None
    means JACRL_REPORT_TO (unset: none). An unknown name is a ValueError and a service whose
    package is missing a one-line ImportError naming the install, both before any training."""
    raw = os.environ.get(REPORT_TO_ENV, "") if report_to is None else report_to
    names = tuple(dict.fromkeys(n.strip().lower() for n in raw.split(",") if n.strip()))
    for name in names:
        if name not in TRACKERS:
            raise ValueError(f"unknown report_to {name!r}; choose from {', '.join(TRACKERS)}")
        try:
            importlib.import_module(name)
        except ImportError:
            raise ImportError(
                f"report_to={name!r} needs the {name} package, which is not "
                f"installed: pip install {name}"
            ) from None
    return names


@dataclass(frozen=True)
class Tracking:
    """Where one build's metrics go besides metrics.jsonl (see `tracking`)."""

    services: tuple[str, ...]
    project: str
    name: str  # the artifact's directory name, <condition>-<key16>
    stage: str
    config: dict  # the stage's hyperparameters + artifact_key and condition


def tracking(
    report_to: str | None, project: str | None, condition: str, parts: dict, cfg
) -> Tracking | None:
    """The tracking of the build of the artifact keyed by `parts` (`key_parts`), None without a
    service. project None: WANDB_PROJECT, else "jacrl"."""
    services = report_services(report_to)
    if not services:
        return None
    key = artifact_key(parts)
    return Tracking(
        services,
        project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
        f"{condition}-{key[:16]}",
        parts["stage"],
        {**dataclasses.asdict(cfg), "artifact_key": key, "condition": condition},
    )


class TrackedLog(MetricsLog):
    """`MetricsLog` that also sends each record's numbers to the open runs: train and val records
    at the trainer's iteration under their metrics.jsonl names (train_loss, learning_rate,
    tokens_per_second, val_loss, GRPO's reward_mean, kl, ...), GRPO step records at their step
    as step/<name> (step/generation_s, step/reward_mean, ...)."""

    def __init__(
        self,
        path: Path,
        stage: str,
        sinks: Sequence[Callable[[dict, int], None]],
    ):
        super().__init__(path, stage)
        self.sinks, self.at = list(sinks), 0

    def _send(self, rec: dict, step, prefix: str = "") -> None:
        self.at = max(self.at, int(step or 0))  # a tracker's steps never go back
        data = {
            prefix + k: v
            for k, v in rec.items()
            if k not in _NOT_LOGGED and isinstance(v, int | float)
        }
        for sink in self.sinks:
            sink(data, self.at)

    def on_train_loss_report(self, info: dict) -> None:
        super().on_train_loss_report(info)
        self._send(self.train[-1], self.train[-1].get("iteration"))

    def on_val_loss_report(self, info: dict) -> None:
        super().on_val_loss_report(info)
        self._send(self.val[-1], self.val[-1].get("iteration"))

    def step(self, info: dict) -> None:
        super().step(info)
        self._send(self.steps[-1], self.steps[-1].get("step"), "step/")


def _open_run(
    service: str, t: Tracking
) -> tuple[Callable[[dict, int], None], Callable[[bool], None]]:
    """(log(data, step), finish(ok)) of a new run of `service`. W&B: a run of its own
    (reinit="create_new": a run the caller has open is left alone), in WANDB_DIR (default
    ./wandb), online or offline as WANDB_MODE says (W&B reads its environment once a process)."""
    if service == "wandb":
        import wandb

        run = wandb.init(
            project=t.project, name=t.name, job_type=t.stage, config=t.config, reinit="create_new"
        )
        return (
            lambda data, step: run.log(data, step=step),
            lambda ok: run.finish(exit_code=0 if ok else 1),
        )
    import swanlab  # the calls mlx-lm's SwanLabCallback makes

    swanlab.init(project=t.project, experiment_name=t.name, config=t.config)
    return (lambda data, step: swanlab.log(data, step=step), lambda ok: swanlab.finish())


@contextlib.contextmanager
def metrics_log(
    path: Path,
    stage: str,
    track: Tracking | None = None,
) -> Iterator[MetricsLog]:
    """The training's metrics callback: metrics.jsonl, and with `track` its runs too (opened
    here, finished on leaving, marked failed when training raised)."""
    if track is None:
        yield MetricsLog(path, stage)
        return
    with contextlib.ExitStack() as stack:
        ok = [False]
        sinks = []
        for service in track.services:
            log, finish = _open_run(service, track)
            stack.callback(lambda finish=finish: finish(ok[0]))
            sinks.append(log)
        yield TrackedLog(path, stage, sinks)
        ok[0] = True
