"""Answer shapes a model produces, all built from a driver's gold body: jacrl.variants, shared
with notebook 20 and the reward benchmark."""

from __future__ import annotations

from jacrl.variants import driver_shapes as variants  # noqa: F401
