"""The ladder's papermill entry point (`python -m jacrl.papermill_main`) waits for a finished
cell's late outputs: papermill alone fails a cell whose last output messages come more than 4 s
after its reply, which on 2 loaded cores is a slow output, not a lost one (a SmolLM2 SFT cell
failed so after it had trained)."""

from __future__ import annotations

import subprocess
import sys

import nbformat

# The cell's outputs are held up 6 s on the kernel's output thread after the cell returns (its
# streams stop waiting for that thread after 0.1 s), so its reply comes first.
LATE = """import sys, time
for s in (sys.stdout, sys.stderr):
    s.flush_timeout = 0.1
get_ipython().kernel.iopub_thread.io_loop.add_callback(time.sleep, 6)"""


def test_a_cells_late_outputs_do_not_fail_it(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(LATE), nbformat.v4.new_code_cell("after = 1")]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    src = tmp_path / "late.ipynb"
    nbformat.write(nb, src)

    def run(module: str, out: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", module, str(src), str(tmp_path / out), "-k", "python3"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    plain = run("papermill", "plain.ipynb")  # the premise: papermill alone fails the cell
    assert plain.returncode != 0 and "Timeout waiting for IOPub output" in plain.stderr
    ours = run("jacrl.papermill_main", "ours.ipynb")
    assert ours.returncode == 0, ours.stderr[-2000:]
    done = nbformat.read(tmp_path / "ours.ipynb", as_version=4)
    assert done.cells[1].execution_count == 2  # the cell after it ran
