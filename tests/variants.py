"""Answer shapes a model produces, all built from a driver's gold body: jacrl.ruler.variants, shared
with notebook 20 and the reward benchmark."""

from __future__ import annotations

from jacrl.ruler.variants import driver_shapes as variants  # noqa: F401
