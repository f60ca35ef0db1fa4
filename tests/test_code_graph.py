"""A key's code is every jacrl module its code imports (`jacrl.code_graph`), found without a list:
the graph's rules on a small package whose closure is written out by hand; on the real package,
perturbing each module changes exactly the keys (cells' and artifacts') whose code imports it, a
new module counts once a cell's code imports it, the exemptions exist and key nothing, and every
import Python itself runs as the cells' code loads (a second implementation) is in the graph."""

from __future__ import annotations

import shutil

import pytest

from jacrl import code_graph, provenance
from jacrl.conditions import CONDITIONS
from jacrl.ladder.plan import cell_modules
from jacrl.stages import STAGES


def _write(pkg, files: dict[str, str]) -> None:
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)


def test_the_modules_a_file_imports_transitively(tmp_path):
    """Module-level and lazy imports, `from jacrl.x import submodule`, a relative import, a name
    re-exported by a package (its source counts, not the package's other modules), a package
    named whole (its __init__ and all it imports), a whole package (executor), an exempt module
    (not counted, not followed) and an import cycle; the expectation is written by hand."""
    pkg = tmp_path / "jacrl"
    _write(
        pkg,
        {
            "a.py": "import os\nfrom jacrl.b import f\nfrom jacrl import executor\n\n"
            "def lazy():\n    from jacrl import c\n",
            "b.py": "from jacrl.a import x\nfrom . import d\nimport jacrl.pkg2\n",
            "c.py": "from jacrl.pkg import thing\n",
            "d.py": "from jacrl.project import where\n",
            "project.py": "from jacrl.e import z\n",
            "e.py": "z = 1\n",
            "pkg/__init__.py": "from jacrl.pkg.one import thing\nfrom .two import other\n",
            "pkg/one.py": "thing = 1\n",
            "pkg/two.py": "other = 2\n",
            "pkg2/__init__.py": "from jacrl.pkg2.m import y\n",
            "pkg2/m.py": "y = 1\n",
            "executor/__init__.py": "",
            "executor/w.py": "",
        },
    )
    got = [p.relative_to(pkg).as_posix() for p in code_graph.imported_sources(["jacrl.a"], pkg)]
    assert got == [
        "a.py",
        "b.py",
        "c.py",
        "d.py",
        "executor/__init__.py",
        "executor/w.py",
        "pkg/one.py",
        "pkg2/__init__.py",
        "pkg2/m.py",
    ]
    (pkg / "e.py").unlink()  # only the exempt project.py imported it
    assert [p.name for p in code_graph.imported_sources(["jacrl.c"], pkg)] == ["c.py", "one.py"]
    (pkg / "pkg" / "one.py").unlink()
    with pytest.raises(ModuleNotFoundError, match=r"c\.py: imports jacrl\.pkg\.one, no such"):
        code_graph.imported_sources(["jacrl.c"], pkg)


@pytest.fixture
def package(tmp_path):
    """A copy of the package's sources to perturb."""
    pkg = tmp_path / "jacrl"
    shutil.copytree(
        provenance.PACKAGE,
        pkg,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return pkg


def _roots() -> dict[str, tuple[str, ...]]:
    """What every key's code is computed from: each condition's cell and each stage's artifact."""
    return {
        **{f"cell {c}": cell_modules(c) for c in CONDITIONS},
        **{f"artifact {s}": (st.module,) for s, st in STAGES.items()},
    }


def test_perturbing_a_module_changes_exactly_the_keys_whose_code_imports_it(package):
    roots = _roots()
    before = {k: provenance.code_of(r, package) for k, r in roots.items()}
    closure = {
        k: {p.relative_to(package).as_posix() for p in code_graph.imported_sources(r, package)}
        for k, r in roots.items()
    }
    # the hole this closes: the budget formula evaluation runs (a name no list had), and the
    # trainer's shared code; each closure is more than its roots
    assert all("token_budget.py" in closure[f"cell {c}"] for c in CONDITIONS)
    assert all("train/artifacts.py" in closure[f"artifact {s}"] for s in STAGES)
    for path in sorted(p for p in package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        text = path.read_text()
        path.write_text(text + "\n_PERTURBED = 1\n")
        now = {r: provenance.code_of(r, package) for r in set(roots.values())}  # once each
        moved = {k for k, r in roots.items() if now[r] != before[k]}
        path.write_text(text)
        assert moved == {k for k in roots if name in closure[k]}, name
    # the module the cells run (outside the exemptions) are most of the package; the report,
    # the CLI and the engines that orchestrate cells are in no key
    keyed = set().union(*closure.values())
    assert not [n for n in keyed if n.startswith(("report/", "cli/", "ladder/run"))]


def test_a_new_module_a_cell_imports_is_in_its_key_with_no_list_edit(package):
    roots = cell_modules("base")
    (package / "brand_new.py").write_text("RATE = 1\n")
    assert provenance.code_of(roots, package) == provenance.code_of(roots, provenance.PACKAGE)
    evaluate = package / "evaluate.py"
    lazy = "\n\ndef _rate():\n    from jacrl import brand_new\n"  # a lazy import, unlisted
    evaluate.write_text(evaluate.read_text() + lazy)
    imported = provenance.code_of(roots, package)
    (package / "brand_new.py").write_text("RATE = 2\n")
    assert provenance.code_of(roots, package) != imported


def test_the_exemptions_name_modules_that_exist_and_key_nothing(package):
    roots = _roots()
    before = {k: provenance.code_of(r, package) for k, r in roots.items()}
    for name in code_graph.UNKEYED:
        path = code_graph.modules().get(name)
        assert path is not None, f"UNKEYED names {name}: no such module"
        files = sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
        for f in files:
            copy = package / f.relative_to(provenance.PACKAGE)
            copy.write_text(copy.read_text() + "\n_PERTURBED = 1\n")
    assert {k: provenance.code_of(r, package) for k, r in roots.items()} == before


def test_a_planned_cell_key_moves_with_the_code_its_cell_imports(package, data_dir, monkeypatch):
    from jacrl.ladder.plan import make_cell
    from jacrl.ladder.settings import LadderConfig

    cfg = LadderConfig(rungs=("1",), data_dir=data_dir)
    monkeypatch.setattr(provenance, "PACKAGE", package)

    def key() -> str:
        return make_cell(cfg, "1", condition="sft", log=lambda _: None).key

    before = key()
    figures = package / "report" / "figures.py"
    figures.write_text(figures.read_text() + "\n_PERTURBED = 1\n")
    assert key() == before  # the report reads rows, it makes none
    budget = package / "token_budget.py"
    budget.write_text(budget.read_text().replace("def ", "def _unused():\n    pass\n\n\ndef ", 1))
    assert key() != before


# Run in a fresh interpreter: every import statement the roots' modules execute as they load,
# recorded by Python's own import machinery (a second implementation of the graph's edges).
RECORD = """
import builtins, importlib, json, sys
real, edges = builtins.__import__, []
def record(name, globals=None, locals=None, fromlist=(), level=0):
    module = real(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__", "")
    if importer.startswith("jacrl."):
        base = globals["__package__"].rsplit(".", level - 1)[0] if level > 1 else (
            globals["__package__"] if level else "")
        full = ".".join(p for p in (base, name) if p)
        edges.append([importer, [t for t in [full, *(f"{full}.{f}" for f in fromlist or ())]
                                 if t in sys.modules]])
    return module
builtins.__import__ = record
for root in sys.argv[1:]:
    importlib.import_module(root)
print(json.dumps(edges))
"""


def test_the_graph_holds_every_import_python_runs_as_the_cells_code_loads():
    """Each module-level import that a keyed module executes (seen by `__import__`, not read
    from the source) names a keyed module, an exempt one, or a package (whose re-exports the
    graph follows to their source)."""
    import json
    import subprocess
    import sys

    roots = sorted({r for rs in _roots().values() for r in rs})
    out = subprocess.run(
        [sys.executable, "-c", RECORD, *roots], capture_output=True, text=True, check=True
    )
    files = code_graph.modules()
    keyed = {
        m for m, p in files.items() if p in set(code_graph.imported_sources(roots)) and "." in m
    }
    missing = set()
    for importer, targets in json.loads(out.stdout):
        if importer not in keyed or files[importer].name == "__init__.py":
            continue
        for t in targets:
            package = t in files and files[t].name == "__init__.py"
            exempt = any(t == u or t.startswith(u + ".") for u in code_graph.UNKEYED)
            if t in files and not package and not exempt and t not in keyed:
                missing.add(f"{importer} -> {t}")
    assert missing == set()
    assert len(keyed) > 30
