"""Our corpus policy: what the project's own `drivers/` keeps to, beyond the driver format.

The format (`jacrl.ruler.drivers`) accepts any driver the earlier harness accepted. On top of it,
our own corpus keeps:

* per driver: a first line `# Source: apps/<app>` (the app the unit comes from), an id prefix from
  our family list, the id equal to the file name, and an instruction without double quotes;
* as a whole: at least 6 families, at least 30 % OSP drivers (walkers, nodes, edges: the Jac idiom
  a general code model knows least), and no source above 15 % of the drivers (so a file-disjoint
  holdout can take whole sources without taking a family's bulk).

`policy_mode` decides what a build does with a violation: errors for the project's own drivers/
(the default there), warnings for any other folder (a foreign corpus keeps its own conventions).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from jacrl.project import ProjectNotFound, project
from jacrl.ruler.drivers import Driver

FAMILIES = ("osp", "lib", "syn", "arch", "text", "err")
MIN_FAMILIES = 6
MIN_OSP_SHARE = 0.30
MAX_SOURCE_SHARE = 0.15
POLICIES = ("auto", "error", "warn", "off")
FIRST_LINE = re.compile(r"^#\s*Source:\s*(\S+)\s*$")


def driver_problems(d: Driver) -> list[str]:
    """The policy lines one driver breaks, each `path:line: reason`."""
    out = []
    if not FIRST_LINE.match(d.text.split("\n", 1)[0]):
        out.append(f"{d.path}:1: first line must be '# Source: apps/<app>'")
    if d.family not in FAMILIES:
        out.append(f"{d.path}:{d.hole_line}: id {d.id!r}: family prefix must be one of {FAMILIES}")
    if Path(d.path).suffix == ".jac" and Path(d.path).stem != d.id:
        out.append(f"{d.path}:{d.hole_line}: id {d.id!r} does not match the file name")
    if '"' in d.instruction:
        out.append(f"{d.path}:{d.hole_line}: instruction must not contain double quotes")
    return out


def corpus_problems(drivers: list[Driver], where: str | Path) -> list[str]:
    """The corpus-wide policy lines a set of drivers breaks, each `where: reason`."""
    n = len(drivers)
    if not n:
        return []
    fams = Counter(d.family for d in drivers)
    out = []
    if len(fams) < MIN_FAMILIES:
        out.append(
            f"{where}: {len(fams)} families ({', '.join(sorted(fams))}); our corpus keeps "
            f"at least {MIN_FAMILIES}"
        )
    if fams["osp"] / n < MIN_OSP_SHARE:
        out.append(
            f"{where}: osp drivers are {fams['osp']}/{n} ({fams['osp'] / n:.0%}); our "
            f"corpus keeps at least {MIN_OSP_SHARE:.0%}"
        )
    for source, c in Counter(d.source for d in drivers).most_common():
        if c / n <= MAX_SOURCE_SHARE:
            break
        out.append(
            f"{where}: source {source!r} holds {c}/{n} drivers ({c / n:.0%}); our corpus "
            f"keeps every source at or below {MAX_SOURCE_SHARE:.0%}"
        )
    return out


def is_project_drivers(folder: str | Path) -> bool:
    """Whether `folder` is the current project's own drivers/."""
    try:
        return Path(folder).resolve() == project().drivers.resolve()
    except ProjectNotFound:
        return False


def policy_mode(policy: str, folder: str | Path) -> str:
    """error | warn | off for `policy` on `folder`: auto = error on the project's own drivers/,
    warn anywhere else."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose from {POLICIES}")
    if policy != "auto":
        return policy
    return "error" if is_project_drivers(folder) else "warn"
