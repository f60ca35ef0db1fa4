"""Python -> Jac conversion tasks: the same functions as the hole-fill tasks, specified by working
Python instead of an instruction.

A *sidecar* `drivers/python/<id>.py` is our own Python rendering of the unit whose body is the
hole of `drivers/<id>.jac`. It has two parts:

* everything above `if __name__ == "__main__":` is the unit (plus the imports it needs; for a
  method, its class with fields and methods, and the classes that class derives from). This part,
  stripped, is the Python a conversion prompt shows;
* the `__main__` block is the driver's context outside the hole (the data types, helpers and the
  entry block's own calls on the same inputs), so that `python drivers/python/<id>.py` prints
  exactly the driver's stdout.

Every sidecar is checked behaviourally at build time: it runs as Python inside the sandboxed
executor (a Jac program whose `::py::` block compiles and executes the sidecar under its own file
name, so a traceback names the sidecar's lines) and must print the driver's expected stdout
byte for byte. A failure is one line `path:line: reason`, like a driver's.

A conversion record is `{prompt, answer}` where `answer` is the very answer string of the hole-fill
task of the same id, so the reward grades both formats identically; only the prompt differs (the
earlier harness's wording: the Python in a ```python fence, then the Jac template with the hole's
line replaced by a TODO line, no task instruction). Conversion tasks are written to
`data/conversion.jsonl` beside `tasks.jsonl`, in task order.

Only whole-body holes get a sidecar: for a partial body (statements of the unit before or after the
hole) the Python function would not be equivalent to the replaced lines.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from jacrl.executor import Executor, Verdict
from jacrl.ruler.drivers import HOLE_TOKEN
from jacrl.tasks.record import CONVERSION_FILE, meta, read_conversion

SIDECARS = "python"  # the sidecars' folder inside a drivers folder
FILE = CONVERSION_FILE
SENTENCE = (
    "Convert the following Python function to idiomatic Jac. Replace the `# TODO` line in "
    "the Jac file below with the Jac code equivalent to the Python. Return only the "
    "replacement code, in a ```jac code block."
)
TODO_LINE = "# TODO: write the equivalent Jac code for this unit's body"
HOLE_LINE = re.compile(r"^([ \t]*)" + re.escape(HOLE_TOKEN) + r"$", re.M)
ERROR_TAG = "SIDECAR-ERROR"  # the runner's one stderr line for an exception: tag, line, message
ERROR_LINE = re.compile(rf"^{ERROR_TAG} (\d+) (.*)$", re.M)

# The Jac program that runs a sidecar: Python embedded in Jac, executed under the sidecar's own
# file name and without the Jac module's compiler flags (as `python file.py` would run it); an
# exception is reported as one line with the innermost sidecar line, then re-raised so the job
# fails.
RUNNER = """::py::
import sys as _sys
import traceback as _traceback

_PATH = {path!r}
_SOURCE = {source!r}
try:
    exec(compile(_SOURCE, _PATH, "exec", dont_inherit=True), {{"__name__": "__main__"}})
except Exception as _e:
    _lines = [f.lineno for f in _traceback.extract_tb(_e.__traceback__) if f.filename == _PATH]
    _sys.stderr.write(f"{tag} {{_lines[-1] if _lines else 1}} {{type(_e).__name__}}: {{_e}}\\n")
    raise
::py::
"""


class SidecarError(ValueError):
    """A malformed sidecar; the message is one line `path:line: reason`."""


@dataclasses.dataclass(frozen=True)
class Sidecar:
    path: str
    id: str
    text: str
    main_line: int  # 1-based line of `if __name__ == "__main__":`

    @property
    def python(self) -> str:
        """The unit's Python, as a conversion prompt shows it (the part above the main block)."""
        return "\n".join(self.text.split("\n")[: self.main_line - 1]).strip()

    def program(self) -> str:
        """The Jac program that runs this sidecar in the executor."""
        return RUNNER.format(path=self.path, source=self.text, tag=ERROR_TAG)


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        and len(node.test.comparators) == 1
        and isinstance(node.test.ops[0], ast.Eq)
        and isinstance(node.test.comparators[0], ast.Constant)
        and node.test.comparators[0].value == "__main__"
    )


def parse_sidecar(path: str | Path, text: str | None = None) -> Sidecar:
    """Parse (never run) a sidecar: valid Python that ends in its `__main__` block, with a unit
    above it."""
    path = str(path)
    text = Path(path).read_text() if text is None else text
    try:
        body = ast.parse(text, filename=path).body
    except SyntaxError as e:
        raise SidecarError(f"{path}:{e.lineno or 1}: Python syntax error: {e.msg}") from None
    guards = [n for n in body if _is_main_guard(n)]
    if not guards:
        raise SidecarError(
            f'{path}:1: no `if __name__ == "__main__":` block with the driver\'s calls'
        )
    guard = guards[0]
    if guard is not body[-1]:
        raise SidecarError(f"{path}:{body[-1].lineno}: code after the `__main__` block")
    if not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in body[:-1]):
        raise SidecarError(f"{path}:1: no function or class above the `__main__` block")
    return Sidecar(path=path, id=Path(path).stem, text=text, main_line=guard.lineno)


def load_sidecars(drivers_dir: str | Path) -> tuple[list[Sidecar], list[str]]:
    """Every `<drivers_dir>/python/*.py` in sorted order, and a failure line for each bad one."""
    sidecars, failures = [], []
    for p in sorted(Path(drivers_dir, SIDECARS).glob("*.py")):
        try:
            sidecars.append(parse_sidecar(p))
        except SidecarError as e:
            failures.append(str(e))
    return sidecars, failures


def mismatch(sidecar: Sidecar, v: Verdict, expected: str) -> str | None:
    """None when the run printed exactly `expected`; else the failure line `path:line: reason`."""
    if not v.ran:
        m = ERROR_LINE.search(v.stderr)
        line, why = (int(m.group(1)), m.group(2)) if m else (1, v.status)
        return f"{sidecar.path}:{line}: sidecar does not run clean ({v.status}): {why}"
    if v.stdout == expected:
        return None
    got, want = v.stdout.split("\n"), expected.split("\n")
    k = next(
        (i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w),
        min(len(got), len(want)),
    )
    g = got[k] if k < len(got) else "<end of output>"
    w = want[k] if k < len(want) else "<end of output>"
    return (
        f"{sidecar.path}:{sidecar.main_line}: stdout differs from the driver's at output line "
        f"{k + 1}: expected {w!r}, got {g!r}"
    )


def prompt_text(python: str, template: str) -> str:
    """The conversion prompt: the earlier harness's sentence, the Python, the Jac file with the
    TODO line where the hole is."""
    view = HOLE_LINE.sub(lambda m: m.group(1) + TODO_LINE, template, count=1)
    return f"{SENTENCE}\n\n```python\n{python.strip()}\n```\n\n```jac\n{view}\n```"


def record(task: dict, sidecar: Sidecar) -> dict:
    """The conversion task of a hole-fill task: a new prompt, the identical answer string."""
    return {
        "prompt": prompt_text(sidecar.python, meta(task)["template"]),
        "answer": task["answer"],
    }


@dataclasses.dataclass
class ConversionReport:
    records: list[dict]
    failures: list[str]  # one line each: path:line: reason


def build(drivers_dir: str | Path, built: list[dict], executor: Executor) -> ConversionReport:
    """Check every sidecar of `drivers_dir` against the built hole-fill tasks (`{prompt, answer}`
    records) and make the conversion records, in task order. A sidecar whose driver exists but did
    not build is skipped (the driver's own failure is reported); one without a driver fails."""
    sidecars, failures = load_sidecars(drivers_dir)
    by_id = {meta(t)["id"]: t for t in built}
    runnable = []
    for s in sidecars:
        if s.id in by_id:
            unit = meta(by_id[s.id])["unit"]
            if unit["before"].strip() or unit["after"].strip():
                failures.append(
                    f"{s.path}:1: the hole of {s.id} is part of a body; a sidecar "
                    "needs a whole-body hole"
                )
            else:
                runnable.append(s)
        elif not Path(drivers_dir, f"{s.id}.jac").is_file():
            failures.append(f"{s.path}:1: no driver {s.id}.jac beside the {SIDECARS}/ folder")
    verdicts = executor.run_many(
        [s.program() for s in runnable],  # each task's own time-out
        timeout=[meta(by_id[s.id])["timeout"] for s in runnable],
    )
    ok = set()
    for s, v in zip(runnable, verdicts, strict=True):
        why = mismatch(s, v, meta(by_id[s.id])["expected_output"])
        if why:
            failures.append(why)
        else:
            ok.add(s.id)
    sidecar_of = {s.id: s for s in runnable}
    records = [record(t, sidecar_of[i]) for t in built if (i := meta(t)["id"]) in ok]
    return ConversionReport(records, failures)


def tasks_for(ids: list[str], data_dir: str | Path | None = None) -> list[dict]:
    """The conversion tasks for `ids` (e.g. a hole-fill split's ids), in that order; ids without a
    sidecar are left out, so compare formats on the ids this returns."""
    by_id = {t["meta"]["id"]: t for t in read_conversion(data_dir)}
    return [by_id[i] for i in ids if i in by_id]
