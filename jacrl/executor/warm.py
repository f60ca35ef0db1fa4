"""Warming the zygote (a sibling of `server.py`, loaded by path like `child.py`; stdlib + jaclang
only): import all of jaclang's compiler, run a representative program once, then reset every piece
of state it touched, so that jobs inherit compiled machinery but no program state."""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile


def import_compiler() -> None:
    """Import every module of jaclang's compiler and runtime now. jaclang loads some lazily (e.g.
    `jac0core.diagnostic_utils` for inherited archetypes); loaded here once, the first job of
    each kind is as fast as the rest and no job depends on a cache it cannot write."""
    import importlib

    import jaclang  # installs the import hook
    from jaclang.cli.commands import execution  # noqa: F401
    from jaclang.jac0core.helpers import dump_traceback  # noqa: F401

    root = os.path.dirname(jaclang.__file__)
    for sub in ("jac0core", "compiler", "runtimelib"):
        for dirpath, dirnames, files in os.walk(os.path.join(root, sub)):
            dirnames[:] = sorted(
                d for d in dirnames if d not in ("impl", "tests") and not d.endswith(".impl")
            )
            for f in sorted(files):
                if not f.endswith(".jac") or f.count(".") > 1:  # skip .impl/.na/.cl/.test annexes
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f[:-4]), os.path.dirname(root))
                try:
                    importlib.import_module(rel.replace(os.sep, "."))
                except Exception:  # noqa: BLE001  (an optional backend, e.g. native, may be absent)
                    pass


WARM_PROGRAM = """
enum Mood { CALM, BUSY }
obj Note { has text: str; has tags: list[str] = []; }
node City { has name: str; has size: int = 0; }
edge Road { has km: int = 1; }
walker Tour {
    has seen: list[str] = [];
    has total: int = 0;
    can start with Root entry { visit [-->]; }
    can step with City entry {
        self.seen.append(here.name);
        for e in [edge here ->:Road:->] { self.total += e.km; }
        visit [->:Road:->];
    }
    can done with Root exit { report sorted(self.seen); }
}
def describe(n: Note) -> str {
    match len(n.tags) {
        case 0: return f"{n.text}: {{}}";
        case _: return n.text + "," + ",".join(n.tags);
    }
}
with entry {
    a = City(name="a", size=3);
    b = City(name="b");
    root ++> a;
    a +>:Road(km=4):+> b;
    r = root spawn Tour();
    try { _ = int("x"); } except ValueError { print("caught"); }
    print(r.total, len(r.reports), describe(Note(text="n")), Mood.BUSY.name);
}
"""


# ---- warming --------------------------------------------------------------------------------


def warm(scratch: str, child) -> None:
    """Run a representative program here, then reset every piece of state it touched, so
    children inherit compiled machinery but no program state."""
    from jaclang.jac0core.runtime import JacRuntime as Jac

    saved = _save_state()
    work = tempfile.mkdtemp(prefix="warm_", dir=scratch)
    try:
        os.chdir(work)
        Jac.set_base_path(work)
        path = os.path.join(work, "snippet.jac")
        with open(path, "w") as fh:
            fh.write(WARM_PROGRAM)
        sys.modules["__main__"] = child.fresh_main()
        sys.stdout = sys.stderr = io.StringIO()
        if child.run_like_cli(path, lambda _: None) != 0:
            raise RuntimeError(f"warm-up program failed: {sys.stdout.getvalue()[-500:]}")
    finally:
        _restore_state(saved)
        shutil.rmtree(work, ignore_errors=True)


def _save_state() -> dict:
    from jaclang.jac0core.runtime import JacRuntime as Jac

    return dict(
        main=sys.modules.get("__main__"),
        argv=list(sys.argv),
        cwd=os.getcwd(),
        path=list(sys.path),
        stdout=sys.stdout,
        stderr=sys.stderr,
        base=Jac.get_base_path_dir(),
        target=Jac.get_full_target_path(),
        ctx=Jac.exec_ctx,
        loaded=dict(Jac.loaded_modules),
    )


def _restore_state(saved: dict) -> None:
    from jaclang.jac0core.program import JacProgram
    from jaclang.jac0core.runtime import JacRuntime as Jac

    sys.stdout, sys.stderr = saved["stdout"], saved["stderr"]
    os.chdir(saved["cwd"])
    sys.modules["__main__"] = saved["main"]
    sys.argv[:] = saved["argv"]
    sys.path[:] = saved["path"]
    sys.modules.pop("snippet", None)
    Jac.set_base_path(saved["base"])
    Jac.set_full_target_path(saved["target"])
    Jac.exec_ctx = saved["ctx"]
    Jac.program = JacProgram()
    Jac.loaded_modules.clear()
    Jac.loaded_modules.update(saved["loaded"])


if __name__ == "__main__":  # how jac_cache builds jaclang's cache, outside any sandbox
    import_compiler()
