"""Our code run around one third-party module's own code as it is imported (`around_import`): how
jacrl trims the imports every process pays for (`hf_index`, `train.tracking`), without editing
the installed packages.

Owns: one meta-path finder per module name, first on sys.meta_path. Raises nothing of its own: a
module it cannot find is left to the ordinary import (and its ImportError)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType

Around = Callable[[Callable[[ModuleType], None], ModuleType], None]


class _AroundImport(importlib.abc.MetaPathFinder):
    """Finds `name` as the ordinary path finder does, then executes it through `around(run,
    module)`, which must call `run(module)` (the module's own code) once."""

    def __init__(self, name: str, around: Around):
        self.name, self.around = name, around

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        spec.loader.exec_module = lambda module: self.around(run, module)
        return spec


def around_import(name: str, around: Around) -> None:
    """Run `around` whenever `name` is imported from now on (once per name and process)."""
    if not any(isinstance(f, _AroundImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AroundImport(name, around))
