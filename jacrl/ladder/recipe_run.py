"""The compute-smart recipe on the ladder: `jacrl ladder run --recipe smart` (`run_recipe`) and
`jacrl ladder plan --recipe smart` (`recipe_plan_text`).

The stages and their decisions are `jacrl.recipe`'s (gate, SFT curve, elbow, GRPO at the elbow);
here each stage's cells become ordinary ladder cells (`plan` scoped to the cell, with the spec's
hyperparameter overrides) and an engine runs them.
The engine is a `jacrl.ladder.run.Engine` (configuration, cells) -> statuses, which runs the cells
without rows; the default is the local engine. After every stage the
decision record results/recipe/<plan-key>.json is rewritten from the rows; the recipe stops after
the gate when it did not pass.

Rows are the only state: a re-run recomputes every decision from the rows of the recipe's own
cells, skips the cells that have rows (the engine's skip) and runs the rest, so an interrupted
recipe resumes where it stopped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from jacrl.config import configure
from jacrl.ladder.plan import Cell, plan
from jacrl.ladder.run import Engine, local_engine
from jacrl.ladder.settings import LadderConfig, validate
from jacrl.ladder.status import cell_dir, cell_state, state_text
from jacrl.recipe import (
    DEMO_RECIPE,
    STEPS,
    CellSpec,
    RecipeConfig,
    build_record,
    elbows,
    plan_key,
    plan_text,
    planned_cells,
    rows_for,
    stage_cells,
    stop_reason,
    write_record,
)
from jacrl.results import is_done, read_rows, rows_by_key

RECIPE_ENV = "JACRL_RECIPE_"  # JACRL_RECIPE_GATE_THRESHOLD, JACRL_RECIPE_ELBOW


def recipe_config(demo: bool = False, env: Mapping[str, str] = os.environ, **over) -> RecipeConfig:
    """The recipe's knobs: the defaults (the demo's gate threshold, `DEMO_GATE_THRESHOLD`, when
    `demo`), then JACRL_RECIPE_<KNOB> in env, then `over` (None values ignored)."""
    rcfg = configure(DEMO_RECIPE if demo else RecipeConfig(), env=env, prefix=RECIPE_ENV)
    return configure(rcfg, {k: v for k, v in over.items() if v is not None})


@dataclass
class RecipeRun:
    """What `run_recipe` did: per stage run, its cells' statuses; the record; why it stopped."""

    key: str  # the plan key
    record: Path  # results/recipe/<key>.json
    stages: list[dict] = field(default_factory=list)  # {stage, name, statuses}
    stopped: str | None = None  # the gate's one-line reason when the recipe stopped after it

    @property
    def statuses(self) -> list[dict]:
        return [s for st in self.stages for s in st["statuses"]]


class Book:
    """The recipe's cells so far (each spec's ladder cells, resolved once) and their rows."""

    def __init__(self, cfg: LadderConfig, rcfg: RecipeConfig, env: Mapping[str, str]):
        self.cfg, self.rcfg, self.env = cfg, rcfg, env
        self._cells: dict[tuple, list[Cell]] = {}

    def cells(self, specs: Sequence[CellSpec]) -> list[Cell]:
        """The ladder cells of the specs: `plan` scoped to each one (so every axis the plan has
        applies), its `sets` with the spec's overrides."""
        out = []
        for s in specs:
            memo = (s.name, repr(s.overrides))
            if memo not in self._cells:
                self._cells[memo] = plan(
                    replace(
                        self.cfg,
                        rungs=(s.rung,),
                        models=(s.model,),
                        conditions=(s.condition,),
                        **s.sets(self.cfg),
                    )
                )
            out += self._cells[memo]
        return out

    def keys(self) -> dict[str, str]:
        """{spec name (r<rung>/<label>/<condition>): cell key} of the cells resolved so far."""
        out = {}
        for (name, _), cells in self._cells.items():
            for c in cells:
                out.setdefault(name, c.key)
        return out

    def rows(self) -> list[Mapping]:
        """The rows of the recipe's cells resolved so far, from the results file."""
        path = self.cfg.results_file
        every = read_rows(path) if path.is_file() else []
        return rows_for(every, {c.key for cells in self._cells.values() for c in cells})

    def resolve_known(self) -> list[Mapping]:
        """Resolve every cell the rows let the recipe name (stages 0-1, then stage 3 at the
        elbows the rows give, gate or not); returns the rows of those cells."""
        self.cells(
            planned_cells(0, self.cfg, self.rcfg, env=self.env)
            + planned_cells(1, self.cfg, self.rcfg, env=self.env)
        )
        e = {m: x.rung for m, x in elbows(self.cfg, self.rows(), self.rcfg).items()}
        self.cells(planned_cells(3, self.cfg, self.rcfg, e, self.env))
        return self.rows()

    def state(self, spec: CellSpec) -> str:
        """done (rows of both kinds) | running now | interrupted | failed | to run."""
        cells = self._cells.get((spec.name, repr(spec.overrides)))
        if not cells:
            return "to run"
        present = rows_by_key(self.cfg.results_file)
        if all(is_done(present, c.key) for c in cells):
            return "done"
        states = [cell_state(cell_dir(self.cfg, c)) for c in cells if not is_done(present, c.key)]
        return state_text(states)

    def write(self) -> Path:
        rows = self.rows()
        return write_record(
            self.cfg.results_dir,
            build_record(self.cfg, rows, self.rcfg, self.keys(), self.env, self.state),
        )


def check(cfg: LadderConfig) -> LadderConfig:
    """The configuration validated for the recipe: one task format, since its decisions are per
    model and rung (run it once per format; each is its own plan key and record)."""
    cfg = validate(cfg)
    if len(cfg.formats) > 1:
        raise ValueError(
            f"the recipe decides on one task format; got {','.join(cfg.formats)}: "
            "run it once per format (--formats hole, then --formats conversion)"
        )
    return cfg


def run_recipe(
    cfg: LadderConfig,
    rcfg: RecipeConfig | None = None,
    engine: Engine | None = None,
    log: Callable[[str], None] = print,
    progress: bool = True,
    env: Mapping[str, str] = os.environ,
) -> RecipeRun:
    """Run the recipe's stages in order (the module docstring). rcfg None: `recipe_config()`;
    engine None: `local_engine`. Returns what ran; `stopped` is set when the gate did not pass."""
    cfg = check(cfg)
    rcfg = rcfg if rcfg is not None else recipe_config(env=env)
    engine = engine or local_engine(log, progress)
    book = Book(cfg, rcfg, env)
    book.resolve_known()  # so each stage's record states the later stages' cells too
    out = RecipeRun(plan_key(cfg, rcfg), Path())
    for st in STEPS:
        cells = book.cells(stage_cells(st.number, cfg, book.rows(), rcfg, env))
        if st.number != 2:
            log(f"recipe stage {st.number} {st.name}: {len(cells)} cells")
        statuses = engine(cfg, cells) if cells else []
        out.stages.append({"stage": st.number, "name": st.name, "statuses": statuses})
        out.record = book.write()
        rows = book.rows()
        if st.number == 2:
            for m, e in elbows(cfg, rows, rcfg).items():
                pick = f"E = r{e.rung} ({e.rule})" if e.rung else "no E"
                log(f"recipe stage 2 elbow: {m}: {pick}: {e.reason}")
        out.stopped = stop_reason(cfg, rows, rcfg)
        if out.stopped is not None:
            log(f"recipe: stopped after stage {st.number}: {out.stopped} (record: {out.record})")
            return out
    log(f"recipe: done; record: {out.record}")
    return out


def recipe_plan_text(
    cfg: LadderConfig, rcfg: RecipeConfig | None = None, env: Mapping[str, str] = os.environ
) -> str:
    """What each stage would run, each cell's state and which decision it waits on; runs and
    writes nothing."""
    cfg = check(cfg)
    rcfg = rcfg if rcfg is not None else recipe_config(env=env)
    book = Book(cfg, rcfg, env)
    rows = book.resolve_known()
    return plan_text(cfg, rows, rcfg, env, book.state, cfg.results_dir)
