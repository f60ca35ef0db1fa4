"""The project: the folder that holds a jacrl project's drivers, data, models, results and figures,
and every default path in it. No other module computes repo paths on its own.

Which project (first that applies):
1. an explicit root: `jacrl --root DIR`, `project(DIR)`, or `JACRL_ROOT`;
2. the nearest parent of the working directory holding the marker file `jacrl.toml` (so a
   JupyterLab kernel started in `notebooks/` finds the checkout above it);
3. the checkout this package was imported from (an editable install), when it has the marker.
Otherwise `ProjectNotFound`, whose message is one line.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

MARKER = "jacrl.toml"
ROOT_ENV = "JACRL_ROOT"
ROWS_FILE = "rl_ladder.jsonl"  # the ladder's rows, in the results folder
CELL_TIMES_FILE = "cell_times.jsonl"  # beside them: what each finished cell cost (ladder.run)


class ProjectNotFound(RuntimeError):
    """No jacrl project here; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Project:
    root: Path

    @property
    def drivers(self) -> Path:
        return self.root / "drivers"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def tasks(self) -> Path:
        return self.data / "tasks.jsonl"

    @property
    def learnable(self) -> Path:
        """The learnable family (`jacrl.tasks.learnable`): drivers/, data/ and manifest.jsonl."""
        return self.root / "learnable"

    @property
    def task_sets(self) -> tuple[Path, ...]:
        """Every data folder whose tasks a ladder row may be graded on: the project's own and the
        learnable family's (`jacrl ladder run --data learnable/data`)."""
        return (self.data, self.learnable / "data")

    @property
    def splits(self) -> Path:
        return self.data / "splits"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def registry(self) -> Path:
        return self.models / "registry.toml"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def rows(self) -> Path:
        """The ladder's own result rows."""
        return self.results / ROWS_FILE

    @property
    def scratch(self) -> Path:
        """Where a ladder cell run by hand files its rows unless told otherwise (gitignored)."""
        return self.results / "scratch"

    @property
    def eval_rows(self) -> Path:
        """Where ad hoc `jacrl eval` runs go by default (not tracked; never the ladder's rows)."""
        return self.results / "eval" / "eval.jsonl"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    def rel(self, path: str | os.PathLike) -> str:
        """`path` relative to the root when it is inside it (portable rows), else absolute."""
        p = Path(path).resolve()
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)


def _is_project(path: Path) -> bool:
    return (path / MARKER).is_file()


def find_root(root: str | os.PathLike | None = None, cwd: str | os.PathLike | None = None) -> Path:
    """The project root by the rules in the module docstring."""
    explicit = root if root is not None else os.environ.get(ROOT_ENV) or None
    if explicit is not None:
        path = Path(explicit).expanduser().resolve()
        if not _is_project(path):
            source = "JACRL_ROOT" if root is None else "--root"
            raise ProjectNotFound(f"{source} {path} is not a jacrl project (no {MARKER} there)")
        return path
    here = Path(cwd or os.getcwd()).resolve()
    for candidate in (here, *here.parents):
        if _is_project(candidate):
            return candidate
    checkout = Path(__file__).resolve().parent.parent
    if _is_project(checkout):
        return checkout
    raise ProjectNotFound(
        f"not inside a jacrl project: no {MARKER} in {here} or above; pass --root or set {ROOT_ENV}"
    )


def project(root: str | os.PathLike | None = None) -> Project:
    return Project(find_root(root))


def path_or(path: str | os.PathLike | None, default: str) -> Path:
    """A path the user gave, as given (relative to the working directory, as on any command line),
    else the project's default (`default` names a Project property, e.g. "data")."""
    return Path(path) if path not in (None, "") else getattr(project(), default)


def rows_path(results: str | os.PathLike | None = None) -> Path:
    """The ladder's rows file from what a user gives (`--results`, notebook parameter `results`):
    a results folder, the rows file itself, or nothing (the project's results/)."""
    path = path_or(results, "results")
    return path if path.is_file() or path.suffix == ".jsonl" else path / ROWS_FILE


def figures_for(results: str | os.PathLike | None, figures: str | os.PathLike | None) -> str:
    """Where the figures of `results`' rows go: `figures` when given, else a figures/ folder
    beside the rows (the project's rows: results/figures/, git-ignored). The tracked figures/
    are written only when named (`--figures figures`): no command changes tracked files unless
    its flags say so."""
    return str(figures) if figures else str(rows_path(results).parent / "figures")
