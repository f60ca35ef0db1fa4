"""A training stage the code has never heard of, for tests/test_ladder_ray.py's new-stage test:
`resample` runs RFT on the adapter of a STaR stage (its parent: STaR, not SFT), in the condition
`star_resample`. Importing this changes nothing; `register` adds both to the stage table and the
conditions, the only places a stage is added."""

from __future__ import annotations

from collections.abc import Callable

from jacrl.conditions import CONDITIONS, Condition
from jacrl.config import RFTConfig
from jacrl.stages import STAGES, Stage

STAGE = Stage("resample", RFTConfig, "jacrl.train.rft:rft", parent="samples")
CONDITION = "star_resample"


def register(put: Callable = lambda d, k, v: d.__setitem__(k, v)) -> None:
    """Add the stage, then the condition (which checks its stages are in the table); `put`
    (dict, key, value): how (a test's monkeypatch.setitem undoes it afterwards)."""
    put(STAGES, STAGE.name, STAGE)
    put(CONDITIONS, CONDITION, Condition(CONDITION, ("star", "resample"), "RFT on STaR's adapter"))
