"""The demo's committed reference stays comparable: its rows were made by the code a fresh clone
runs, so `make demo` files every cell under the reference's key ("same key") and compares like
with like. When code a demo cell's key holds changes, this fails until `make demo-reference`
remakes the reference (rows, cell times and the README's figures, one run)."""

from __future__ import annotations

from jacrl.ladder import plan, real_demo_config, reference_for
from jacrl.ladder.demo import REAL_DEMO_MODEL, reference_problem
from jacrl.results import read_rows


def test_the_reference_rows_are_the_current_codes():
    ref = reference_for(REAL_DEMO_MODEL)
    assert ref.is_file(), f"{ref} missing: make demo-reference"
    problem = reference_problem(read_rows(ref), real_demo_config())
    assert problem == "", f"the demo reference {ref}: {problem}; make demo-reference"


def test_the_check_names_rows_of_other_code_and_missing_cells():
    """The check can fail: rows under a key the demo does not plan, a planned cell without its
    rows, a cell with one row."""
    cfg = real_demo_config()
    cells = plan(cfg)
    good = [{"cell_key": c.key, "kind": k} for c in cells for k in ("gen", "mem")]
    assert reference_problem(good, cfg) == ""
    other = [{"cell_key": "r1-smollm2-135m-base-000000000000", "kind": "gen"}, *good[2:]]
    said = reference_problem(other, cfg)
    assert "000000000000" in said and cells[0].name in said
    assert cells[-1].key in reference_problem(good[:-1], cfg)  # its mem row missing
